"""How often does each one-sided bound on a goodput level's attainment hold? Exact coverage, summed over every
outcome of Binomial(n, p), of the Clopper-Pearson bounds perfgate decides levels with and of Wilson's score
bounds, which it does not use (docs/load.md, "Deciding a level").

    python benchmarks/binomial_coverage.py                      # n 30..1000, p 0.9..0.995, confidence 0.95
    python benchmarks/binomial_coverage.py --n 300 --p 0.99 --confidence 0.99

A bound "covers" when it lies on the right side of the true share: the lower bound at or below it (a pass at the
required share is wrong otherwise), the upper at or above it (a fail is wrong otherwise). Clopper-Pearson's
coverage is at least the confidence everywhere; Wilson's upper bound falls short near 1. Pure arithmetic: no
server, a second or two.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from statistics import NormalDist

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.measuring.bounds import binom_cdf, clopper_pearson  # noqa: E402


def wilson(good: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson's score bounds, each one-sided at ``confidence`` (for comparison only)."""
    z = NormalDist().inv_cdf(confidence)
    ph, z2n = good / n, z * z / n
    half = z * math.sqrt(ph * (1 - ph) / n + z2n / (4 * n))
    return max(0.0, (ph + z2n / 2 - half) / (1 + z2n)), min(1.0, (ph + z2n / 2 + half) / (1 + z2n))


def coverage(bounds: list[tuple[float, float]], n: int, p: float) -> tuple[float, float]:
    cdf = binom_cdf(n, p)
    pmf = [cdf[0]] + [cdf[k] - cdf[k - 1] for k in range(1, n + 1)]
    return (sum(w for w, (lo, _) in zip(pmf, bounds) if lo <= p), sum(w for w, (_, hi) in zip(pmf, bounds) if hi >= p))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="30,100,300,1000")
    ap.add_argument("--p", default="0.9,0.97,0.99,0.995")
    ap.add_argument("--confidence", type=float, default=0.95)
    a = ap.parse_args(argv)
    c = a.confidence
    print(f"one-sided coverage at confidence {c:g} (lower bound / upper bound)")
    print(f"{'n':>6} {'p':>6}  {'Clopper-Pearson':>17}  {'Wilson':>17}")
    for n in (int(x) for x in a.n.split(",")):
        for p in (float(x) for x in a.p.split(",")):
            cp = coverage([clopper_pearson(k, n, c) for k in range(n + 1)], n, p)
            wi = coverage([wilson(k, n, c) for k in range(n + 1)], n, p)
            print(f"{n:>6} {p:>6g}  {cp[0]:>8.4f} {cp[1]:>8.4f}  {wi[0]:>8.4f} {wi[1]:>8.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
