"""The speculation crossover: pure functions from a speculative mode's and the baseline's measurements at
several loads to the load at which speculation stops beating the baseline, with a bootstrap CI.

Output tok/s (completion tokens of a batch over its wall time) is compared at each level; the crossover is
the *last* load where the ratio speculative / baseline falls through 1, interpolated in log(load) between
the two levels around it. ``never``: speculation beats the baseline at no level; ``always``: it still beats
it at the highest level. The CI comes from resampling each level's trials (both modes) and recomputing.
The cost model's prediction (:func:`predicted`) uses decode step times instead: where the speculative
cycle reaches the break-even cycle of :func:`perfgate.measuring.costmodel.breakeven_cycle_ms` at the baseline's rate.

The crossover record in one call (:func:`crossover_record`): both modes' measurements at each load and the limit
in (:class:`perfgate.measuring.floorcheck.LimitAt`, ``[floors.<mode>] crossover`` at its own tolerance); the
verdict with every property and the floor to write out, as the floor record concludes
(:func:`perfgate.measuring.floorcheck.floor_record`); perfgate.plugin.loadcheck records it, nothing is judged there.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfgate.categories import Outcome
from perfgate.measuring.costmodel import breakeven_cycle_ms
from perfgate.measuring.floorcheck import Concluded, floor_from
from perfgate.measuring.metrics import Measurement, bootstrap_ratio_ci, percentile
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.record import DIRECTION, METRIC
from perfgate.record import rounded as _r

if TYPE_CHECKING:
    from perfgate.measuring.floorcheck import LimitAt

__all__ = ["RESULTS", "Point", "Crossover", "crossing", "crossover", "predicted", "Levels", "CROSSOVER",
           "CROSSOVER_RESULT", "CROSSOVER_PREDICTED", "CROSSOVER_PREDICTED_RESULT", "CROSSOVER_WINS",
           "CROSSOVER_LEVELS", "CROSSOVER_BASELINE", "point_of", "crossover_of", "max_running", "baseline_levels",
           "crossover_properties", "crossover_text", "crossover_record"]

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


# -- the crossover record, in one call ------------------------------------------------------------------------

# crossover records (kind "crossover")
CROSSOVER = "crossover"  # the load (streams) where speculation stops beating the baseline (+ _ci_low/_ci_high)
CROSSOVER_RESULT = "crossover_result"  # at | never | always
CROSSOVER_PREDICTED = "crossover_predicted"  # the cost model's, from decode step times
CROSSOVER_PREDICTED_RESULT = "crossover_predicted_result"
CROSSOVER_WINS = "crossover_wins"  # the levels where speculation beat the baseline, comma-separated
CROSSOVER_LEVELS = "crossover_levels"  # JSON: per level, both modes' output tok/s, ratio and CI, TTFT, ITL
CROSSOVER_BASELINE = "crossover_baseline"  # the mode compared against


@dataclass(frozen=True, kw_only=True)
class Levels:
    """One mode's closed-loop measurements at each of ``loads`` streams (the crossover record's); a speculative
    mode's carry the baseline mode's at the same loads (``base``), which its crossover is judged against."""

    mode: str
    loads: tuple[int, ...]
    measurements: tuple[Measurement, ...]
    base: Levels | None = None


def point_of(c: int, b: Measurement, s: Measurement) -> Point:
    """The crossover's point at ``c`` streams: the baseline's (``b``) and the speculative mode's (``s``) medians,
    and the ratio of their output tok/s with its bootstrap CI where both have noise known."""
    def med(m: Measurement, name: str) -> float | None:
        st = m.stat(name)
        return st.median if st is not None else None

    bt, sp = med(b, "output_tok_s") or 0.0, med(s, "output_tok_s") or 0.0
    lo = hi = None
    bs, ss = b.output_tok_s, s.output_tok_s
    if bs is not None and ss is not None and bs.noise_known and ss.noise_known:
        lo, hi = bootstrap_ratio_ci(ss.samples, bs.samples)
    return Point(load=c, base_tok_s=bt, spec_tok_s=sp, ratio=sp / bt if bt else 0.0, ratio_ci_low=lo,
                 ratio_ci_high=hi, base_itl_ms=med(b, "itl_ms"), spec_itl_ms=med(s, "itl_ms"),
                 base_ttft_ms=med(b, "ttft_ms"), spec_ttft_ms=med(s, "ttft_ms"), base_decode_tok_s=med(b, "tok_s"),
                 spec_decode_tok_s=med(s, "tok_s"))


def crossover_of(loads: tuple[int, ...], base: tuple[Measurement, ...], spec: tuple[Measurement, ...]
                 ) -> tuple[Crossover, tuple[str, float | None]]:
    """The measured crossover of ``spec`` against ``base`` (one measurement per load of ``loads``) and the cost
    model's prediction."""
    pts = [point_of(c, b, s) for c, b, s in zip(loads, base, spec)]
    samples = [(b.output_tok_s.samples if b.output_tok_s else (), s.output_tok_s.samples if s.output_tok_s else ())
               for b, s in zip(base, spec)]
    x = crossover(loads, [b for b, _ in samples], [s for _, s in samples], points=pts)
    acc = [m.accept_len for m in spec if m.accept_len]
    return x, predicted(pts, statistics.median(acc) if acc else None, base_cap=max_running(base),
                        spec_cap=max_running(spec))


def max_running(ms: tuple[Measurement, ...]) -> int | None:
    """SGLang's ``max_running_requests`` from the server log's start-up line (the simulator prints it too)."""
    for m in ms:
        if not m.log_path:
            continue
        try:
            with open(m.log_path, errors="replace") as f:
                found = re.findall(r"\bmax_running_requests=(\d+)", f.read(1 << 22))
        except OSError:
            continue
        if found:
            return int(found[-1])
    return None


def baseline_levels(loads: tuple[int, ...], ms: tuple[Measurement, ...]) -> str:
    """The baseline's crossover record: its output tok/s, ITL and TTFT at each load (``crossover_levels``, JSON)."""
    return json.dumps([{"load": c, "output_tok_s": _r(m.output_tok_s.median if m.output_tok_s else None),
             "itl_ms": _r(m.itl_ms.median if m.itl_ms else None),
             "ttft_ms": _r(m.ttft_ms.median if m.ttft_ms else None)} for c, m in zip(loads, ms)], separators=(",", ":"))


def crossover_properties(x: Crossover, prediction: tuple[str, float | None], *, base_mode: str
                         ) -> dict[str, object]:
    """A speculative mode's crossover record, in the order it is recorded (``crossover_levels``: JSON, per level
    both modes' output tok/s, the ratio and its CI, ITL and TTFT)."""
    presult, pload = prediction
    out: dict[str, object] = {CROSSOVER_BASELINE: base_mode, CROSSOVER_RESULT: x.result, CROSSOVER: x.value}
    if x.ci_low is not None and x.ci_high is not None:
        out[f"{CROSSOVER}_ci_low"] = x.ci_low
        out[f"{CROSSOVER}_ci_high"] = x.ci_high
    out[CROSSOVER_WINS] = ",".join(map(str, x.wins))
    out[CROSSOVER_PREDICTED_RESULT] = presult
    if pload is not None:
        out[CROSSOVER_PREDICTED] = pload
    out[CROSSOVER_LEVELS] = json.dumps([
        {"load": p.load, "base_tok_s": _r(p.base_tok_s), "spec_tok_s": _r(p.spec_tok_s), "ratio": _r(p.ratio, 4),
         "ratio_ci": [_r(p.ratio_ci_low, 4), _r(p.ratio_ci_high, 4)], "base_itl_ms": _r(p.base_itl_ms),
         "spec_itl_ms": _r(p.spec_itl_ms), "base_ttft_ms": _r(p.base_ttft_ms), "spec_ttft_ms": _r(p.spec_ttft_ms)}
        for p in x.points], separators=(",", ":"))
    return out


def crossover_text(x: Crossover, prediction: tuple[str, float | None], *, mode: str, base_mode: str,
                   loads: tuple[int, ...]) -> str:
    """What a crossover record says: where ``mode`` stops beating ``base_mode``, the cost model's prediction, and
    the loads where it wins."""
    presult, pload = prediction
    pred = f"{pload:.3g} streams" if pload is not None else presult
    if x.result == "at":
        what = (f"{mode} stops beating {base_mode} at {x.load:.3g} streams (CI {x.ci_low:.3g}-{x.ci_high:.3g}; "
                f"the cost model predicts {pred})")
    elif x.result == "never":
        what = (f"{mode} beats {base_mode} at no load from {loads[0]} to {loads[-1]} streams "
                f"(the cost model predicts {pred})")
    else:
        what = (f"{mode} still beats {base_mode} at {loads[-1]} streams, the highest load measured "
                f"(the cost model predicts {pred})")
    if x.wins and x.result != "never":
        what += f"; it wins at {', '.join(map(str, x.wins))} streams"
    return what


def crossover_record(levels: Levels, *, at: LimitAt, update_hint: str) -> Concluded:
    """The baseline's crossover record (``levels.base`` None: its levels, recorded, a pass), or a speculative mode's
    against the baseline's levels it carries: where it stops beating the baseline, judged on ``[floors.<mode>]
    crossover`` at that limit's own tolerance (higher is better; a floor above the highest load measured is undecided
    when it still wins there). A floor written from it is the CI's low end: the crossover's own interval is several
    per cent wide, so its median as the floor would fail half the runs of an unchanged stack."""
    b = levels.base or levels
    loads, base, mode, base_mode = b.loads, b.measurements, levels.mode, b.mode
    spec = levels.measurements if levels.base is not None else None
    if spec is None:
        return Concluded(verdict=Verdict(
            outcome=Outcome.PASS, properties={CROSSOVER_LEVELS: baseline_levels(loads, base)},
            message=f"the baseline's output tok/s at {len(loads)} loads ({', '.join(map(str, loads))} streams), "
                    f"recorded"))
    x, pred = crossover_of(loads, base, spec)
    props = {METRIC: CROSSOVER, DIRECTION: "higher", **crossover_properties(x, pred, base_mode=base_mode),
             **at.properties}
    what = crossover_text(x, pred, mode=mode, base_mode=base_mode, loads=loads)
    v = judge_limit(CROSSOVER, x.value, at.limit, at.tolerance, noise=None, max_cv=None, where=at.where,
                    what=what, highest=float(loads[-1]) if x.result == "always" else None,
                    update_hint=update_hint).led_by(props)
    new = x.ci_low if x.ci_low is not None else x.value
    return Concluded(verdict=v, floor=floor_from(CROSSOVER, v, new, why=f"no {CROSSOVER} above zero to make a floor of"
                                                 if x.value <= 0 else ""))
