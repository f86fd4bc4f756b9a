"""Modes of a latency sample, pure: whether it has more than one, where each lies and how much of it each holds.

A real H200 serves batch-1 TTFT at two levels inside one server start (~28 ms and ~45 ms, each 2-4 % wide, for
host-side reasons: issue 40), so a median or a mean of such a sample is an accident of the mixture's proportion.
:func:`find_modes` names the modes instead of averaging them (as Mozilla PerfCompare does with KDE modes), and
:func:`start_estimate` is the per-start TTFT statistic that holds when there are two (docs/measurement.md "TTFT
probes and modes", chosen by ``benchmarks/ttft_modes.py``).

The rule (:func:`find_modes`), on the logarithms of the sample (latency modes are relative: 2-4 % wide at any
level):

1. fewer than :data:`MIN_SAMPLES` values: not judged (one mode, the median; ``judged`` False);
2. a Gaussian kernel density (``scipy.stats.gaussian_kde``) with Silverman's rule-of-thumb bandwidth
   ``h = 0.9 min(sd, IQR / 1.349) n^(-1/5)`` (at least :data:`MIN_BANDWIDTH`), on a grid of :data:`GRID` points;
3. every local maximum of the density starts a candidate mode, split from its neighbour at the density's minimum
   between them (the antimode); the values between two antimodes are the mode's;
4. two neighbouring candidates stay apart only if every one of these holds, else the pair with the smallest
   separation is merged and the rest are judged again:

   - each holds at least :data:`MIN_WEIGHT` of the sample and at least :data:`MIN_MODE_N` values;
   - the density at the antimode is at most :data:`MAX_DIP` of the lower of the two peaks;
   - their locations (medians) differ by at least :data:`MIN_SEPARATION` (relative) and by at least
     :data:`MIN_SEPARATION_SD` of their pooled robust spread (1.4826 MAD of the logarithms, each at least
     :data:`MIN_SPREAD`): a normal sample split at its median gives about 2.2, two levels 60 % apart with 3 %
     spread give about 15.

Each mode's location is the median of its values, its weight their share. The false rate on unimodal samples
(normal and lognormal, n 20-400) and the detection of two levels are measured in tests/test_modes.py and
printed by ``benchmarks/ttft_modes.py --false-rate``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["GRID", "MAX_DIP", "MIN_BANDWIDTH", "MIN_MODE_N", "MIN_SAMPLES", "MIN_SEPARATION", "MIN_SEPARATION_SD",
           "MIN_SPREAD", "MIN_WEIGHT", "Mode", "Modes", "find_modes", "start_estimate", "thin"]

#: fewer values than this and the sample's modes are not judged (one mode, the median)
MIN_SAMPLES = 20
#: a mode holds at least this share of the sample ...
MIN_WEIGHT = 0.10
#: ... and at least this many values
MIN_MODE_N = 3
#: the density at an antimode is at most this share of the lower neighbouring peak
MAX_DIP = 0.5
#: two modes' locations differ by at least this much (relative): a 2 % step is noise's business, not a mode's
MIN_SEPARATION = 0.05
#: ... and by at least this many of their pooled robust sd (of the logarithms)
MIN_SEPARATION_SD = 4.0
#: a mode's robust sd is at least this (relative): timings quantized to a clock's tick have MAD 0
MIN_SPREAD = 0.002
#: the kernel's bandwidth is at least this (on the logarithms: 0.5 %)
MIN_BANDWIDTH = 0.005
#: points of the grid the density is evaluated on
GRID = 512
#: the most values the density is estimated from (a longer sample is thinned evenly: :func:`thin`)
MAX_VALUES = 4000


@dataclass(frozen=True, kw_only=True)
class Mode:
    """One mode of a sample: the median of its values, their share of the sample and their number."""

    location: float
    weight: float
    n: int


@dataclass(frozen=True, kw_only=True)
class Modes:
    """The modes of a sample, in ascending location; ``judged`` False when it was too short to judge
    (:data:`MIN_SAMPLES`), then one mode, its median."""

    modes: tuple[Mode, ...]
    n: int
    judged: bool = True
    bandwidth: float = 0.0  # of the kernel, on the logarithms

    @property
    def multimodal(self) -> bool:
        return self.judged and len(self.modes) > 1

    @property
    def lower(self) -> Mode:
        return self.modes[0]

    def text(self, unit: str = "ms") -> str:
        """``28.2 ms 55% | 45.7 ms 45%``: each mode's location (4 significant digits) and weight."""
        u = f" {unit}" if unit else ""
        return " | ".join(f"{m.location:.4g}{u} {m.weight:.0%}" for m in self.modes)


def thin(values: Sequence[float], most: int = MAX_VALUES) -> list[float]:
    """At most ``most`` of ``values``, taken evenly through them in their order (a start's ITLs, in time order:
    the thinned sample still spans the start)."""
    if len(values) <= most:
        return list(values)
    step = len(values) / most
    return [values[int(i * step)] for i in range(most)]


def _mad_sd(ys: Sequence[float]) -> float:
    from scipy.stats import median_abs_deviation

    return max(MIN_SPREAD, float(median_abs_deviation(ys, scale="normal")))


def find_modes(samples: Iterable[float]) -> Modes:
    """The modes of ``samples`` (positive values; others are dropped) by the rule of the module docstring."""
    import numpy as np
    from scipy.stats import gaussian_kde

    xs = [float(x) for x in samples if x is not None and math.isfinite(x) and x > 0]
    n = len(xs)
    if n == 0:
        return Modes(modes=(), n=0, judged=False)
    if n < MIN_SAMPLES:
        return Modes(modes=(Mode(location=statistics.median(xs), weight=1.0, n=n),), n=n, judged=False)
    y = np.log(np.asarray(thin(xs), dtype=float))
    sd = float(np.std(y, ddof=1))
    q75, q25 = np.percentile(y, [75, 25])
    spread = min(sd, float(q75 - q25) / 1.349) or sd
    h = max(MIN_BANDWIDTH, 0.9 * spread * len(y) ** -0.2)
    one = Modes(modes=(Mode(location=statistics.median(xs), weight=1.0, n=n),), n=n, bandwidth=h)
    if sd <= 0 or (float(y.max()) - float(y.min())) < math.log1p(MIN_SEPARATION):
        return one
    grid = np.linspace(float(y.min()) - 3 * h, float(y.max()) + 3 * h, GRID)
    f = gaussian_kde(y, bw_method=h / sd)(grid)
    peaks = [i for i in range(1, GRID - 1) if f[i] > f[i - 1] and f[i] >= f[i + 1]]
    if len(peaks) < 2:
        return one
    cuts = [grid[a + int(np.argmin(f[a:b + 1]))] for a, b in zip(peaks, peaks[1:])]
    ys = np.sort(np.log(np.asarray(xs, dtype=float)))  # every value is assigned, not only the thinned ones
    edges = [-math.inf, *cuts, math.inf]
    # the candidate modes as (values, peak density); a merge joins neighbours' values, keeps the higher peak
    groups: list[tuple[list[float], float]] = []
    for lo, hi in zip(edges, edges[1:]):
        part = ys[(ys > lo) & (ys <= hi)]
        mask = (grid > lo) & (grid <= hi)
        groups.append(([float(v) for v in part], float(f[mask].max()) if mask.any() else 0.0))
    dips = [float(f[int(np.argmin(np.abs(grid - c)))]) for c in cuts]
    least = max(MIN_MODE_N, math.ceil(MIN_WEIGHT * n))
    while len(groups) > 1:
        worst, worst_sep = -1, math.inf
        for i in range(len(groups) - 1):
            (a, pa), (b, pb) = groups[i], groups[i + 1]
            if not a or not b:
                sep, ok = 0.0, False
            else:
                la, lb = statistics.median(a), statistics.median(b)
                pooled = math.sqrt((_mad_sd(a) ** 2 + _mad_sd(b) ** 2) / 2)
                sep = (lb - la) / pooled
                ok = (len(a) >= least and len(b) >= least and dips[i] <= MAX_DIP * min(pa, pb)
                      and lb - la >= math.log1p(MIN_SEPARATION) and sep >= MIN_SEPARATION_SD)
            if not ok and sep < worst_sep:
                worst, worst_sep = i, sep
        if worst < 0:
            break
        (a, pa), (b, pb) = groups[worst], groups[worst + 1]
        groups[worst:worst + 2] = [(a + b, max(pa, pb))]
        del dips[worst]
    modes = tuple(Mode(location=math.exp(statistics.median(g)), weight=len(g) / n, n=len(g)) for g, _ in groups if g)
    if len(modes) == 1:
        return one
    return Modes(modes=modes, n=n, bandwidth=h)


def start_estimate(samples: Iterable[float], modes: Modes | None = None) -> float | None:
    """One server start's latency from its probes: the lower mode's location where the probes are multi-modal,
    else their median (None for no value). A host that flips between two levels inside a start then gives the
    faster level's latency whatever share of the start it spent there (the median, or a mean, follows that share:
    benchmarks/ttft_modes.py measures the difference); a delay added to every request moves it in full."""
    xs = [float(x) for x in samples if x is not None and math.isfinite(x) and x > 0]
    if not xs:
        return None
    m = modes if modes is not None else find_modes(xs)
    return m.lower.location if m.multimodal else statistics.median(xs)
