"""The speculation crossover: pure functions from a speculative mode's and the baseline's measurements at
several loads to the load at which speculation stops beating the baseline, with a bootstrap CI.

Output tok/s (completion tokens of a batch over its wall time) is compared at each level; the crossover is
the *last* load where the ratio speculative / baseline falls through 1, interpolated in log(load) between
the two levels around it. ``never``: speculation beats the baseline at no level; ``always``: it still beats
it at the highest level. The CI comes from resampling each level's trials (both modes) and recomputing.
The cost model's prediction (:func:`predicted`) uses decode step times instead: where the speculative
cycle reaches the break-even cycle of :func:`perfgate.measuring.costmodel.breakeven_cycle_ms` at the baseline's rate.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from perfgate.measuring.costmodel import breakeven_cycle_ms
from perfgate.measuring.metrics import percentile

#: what a crossover record can find within its range
RESULTS = ("at", "never", "always")


@dataclass(frozen=True, kw_only=True)
class Point:
    """One load level of both modes (medians over trials)."""

    load: int
    base_tok_s: float
    spec_tok_s: float
    ratio: float
    ratio_ci_low: float | None = None
    ratio_ci_high: float | None = None
    base_itl_ms: float | None = None
    spec_itl_ms: float | None = None
    base_ttft_ms: float | None = None
    spec_ttft_ms: float | None = None
    base_decode_tok_s: float | None = None  # per request (the step time is 1000 / this, in ms)
    spec_decode_tok_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class Crossover:
    """Where speculation stops paying: ``result`` in :data:`RESULTS`, ``load`` when ``at``."""

    points: tuple[Point, ...]
    result: str
    load: float | None
    ci_low: float | None  # in loads, as ``value``: 0 stands for "never", the highest level for "always"
    ci_high: float | None
    wins: tuple[int, ...]  # the levels where speculation beat the baseline

    @property
    def value(self) -> float:
        """The number a floor judges: the load, 0 for ``never``, the highest level for ``always``."""
        if self.result == "at" and self.load is not None:
            return self.load
        return 0.0 if self.result == "never" else float(self.points[-1].load)


def crossing(loads: Sequence[int], ratios: Sequence[float]) -> tuple[str, float | None]:
    """(result, load): the last fall of ``ratios`` through 1, interpolated in log(load)."""
    wins = [r > 1 for r in ratios]
    if not any(wins):
        return "never", None
    if wins[-1]:
        return "always", None
    i = max(j for j in range(len(wins) - 1) if wins[j] and not wins[j + 1])
    r0, r1 = ratios[i], ratios[i + 1]
    x0, x1 = math.log(loads[i]), math.log(loads[i + 1])
    f = (r0 - 1) / (r0 - r1) if r0 != r1 else 0.5
    return "at", math.exp(x0 + (x1 - x0) * f)


def crossover(loads: Sequence[int], base: Sequence[Sequence[float]], spec: Sequence[Sequence[float]], *,
              points: Sequence[Point] | None = None, confidence: float = 0.95, resamples: int = 1000,
              seed: int = 0) -> Crossover:
    """The crossover from each level's per-trial output tok/s of the baseline (``base``) and the speculative
    mode (``spec``); ``points`` carries the levels' other numbers when the caller has them."""
    if not loads or len(base) != len(loads) or len(spec) != len(loads) or any(not b or not s for b, s in
                                                                                zip(base, spec)):
        raise ValueError("a crossover needs trials of both modes at every level")
    ratios = [statistics.median(s) / statistics.median(b) for b, s in zip(base, spec)]
    result, load = crossing(loads, ratios)
    rng = random.Random(seed)
    hi_s = float(loads[-1])
    draws = []
    for _ in range(resamples):
        rs = [statistics.median(rng.choices(s, k=len(s))) / statistics.median(rng.choices(b, k=len(b)))
              for b, s in zip(base, spec)]
        res, x = crossing(loads, rs)
        draws.append(x if res == "at" and x is not None else (0.0 if res == "never" else hi_s))
    draws.sort()
    a = (1 - confidence) / 2 * 100
    pts = tuple(points) if points is not None else tuple(
        Point(load=c, base_tok_s=statistics.median(b), spec_tok_s=statistics.median(s), ratio=r)
        for c, b, s, r in zip(loads, base, spec, ratios))
    return Crossover(points=pts, result=result, load=load, ci_low=percentile(draws, a),
                     ci_high=percentile(draws, 100 - a), wins=tuple(c for c, r in zip(loads, ratios) if r > 1))


def predicted(points: Sequence[Point], accept_len: float | None, *, base_cap: int | None = None,
              spec_cap: int | None = None) -> tuple[str, float | None]:
    """The cost model's crossover from decode step times: at each level the speculative cycle
    (``accept_len`` / its per-request decode rate) against the break-even cycle at the baseline's rate;
    speculation pays while its cycle is the shorter. ``base_cap`` / ``spec_cap``: the most requests each server
    runs at once (SGLang's ``max_running_requests``; the rest wait): at ``c`` streams ``min(c, cap)`` decode.
    ``("unknown", None)`` without the numbers."""
    loads, ratios = [], []
    for p in points:
        if not accept_len or not p.base_decode_tok_s or not p.spec_decode_tok_s:
            return "unknown", None
        nb = min(p.load, base_cap) if base_cap else p.load
        ns = min(p.load, spec_cap) if spec_cap else p.load
        cycle = 1000.0 * accept_len / p.spec_decode_tok_s
        # the break-even cycle of one running request when ns of them must match nb of the baseline's
        ratios.append(breakeven_cycle_ms(p.base_decode_tok_s * nb / ns, accept_len) / cycle)
        loads.append(p.load)
    return crossing(loads, ratios) if loads else ("unknown", None)
