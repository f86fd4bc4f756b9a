"""Confidence bounds a load level is decided on (pure): Clopper-Pearson bounds on a share of good requests, and
distribution-free (order-statistic) bounds on a percentile. Exact, through the binomial and Beta distributions
(perfgate.measuring.special, scipy's). perfgate.measuring.goodput decides each level with them;
benchmarks/binomial_coverage.py checks their coverage."""

from __future__ import annotations

from collections.abc import Sequence

from perfgate.measuring.special import beta_quantile, binom_cdfs

__all__ = ["clopper_pearson", "percentile_bounds", "binom_cdf"]


def clopper_pearson(good: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson (exact binomial) bounds of a proportion ``good / n``, each one-sided at
    ``confidence``: the lower is the ``p`` with ``P(Binomial(n, p) >= good) = 1 - confidence``, the upper the
    ``p`` with ``P(Binomial(n, p) <= good) = 1 - confidence`` (the Beta quantiles ``Beta(good, n - good + 1)`` at
    ``1 - confidence`` and ``Beta(good + 1, n - good)`` at ``confidence``). Each covers the true share with
    probability at least ``confidence`` at every ``p`` and ``n`` (Wilson's score bounds do not near 1: its upper
    bound covered 0.99 in 91.7 % of draws of 300, docs/load.md). ``(0, 1)`` for no requests."""
    if n <= 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    if good >= n:
        lo = alpha ** (1.0 / n)
    elif good <= 0:
        lo = 0.0
    else:
        lo = beta_quantile(alpha, good, n - good + 1)
    if good <= 0:
        hi = 1.0 - alpha ** (1.0 / n)
    elif good >= n:
        hi = 1.0
    else:
        hi = beta_quantile(confidence, good + 1, n - good)
    return lo, hi


def binom_cdf(n: int, p: float) -> list[float]:
    """``P(Binomial(n, p) <= k)`` for k = 0..n."""
    if p <= 0.0:
        return [1.0] * (n + 1)
    if p >= 1.0:
        return [0.0] * n + [1.0]
    return [min(1.0, c) for c in binom_cdfs(n, p)]


def percentile_bounds(xs: Sequence[float], q: float, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Distribution-free one-sided confidence bounds, each at ``confidence``, of the ``q``-th percentile of the
    population ``xs`` was drawn from: order statistics of the sorted sample. The upper bound is ``x_(r)``, the
    smallest rank with ``P(Binomial(n, q) <= r - 1) >= confidence``; the lower ``x_(s)``, the largest with
    ``P(Binomial(n, q) >= s) >= confidence``. ``None`` where n is too small for the bound to exist (an upper
    bound of a p99 needs n >= :func:`min_requests`). For q = 100 the sample's largest value is the lower bound
    (the population's largest is at least that) and there is no upper one."""
    s = sorted(xs)
    n = len(s)
    if not n:
        return None, None
    p = q / 100.0
    if p >= 1.0:
        return s[-1], None
    cdf = binom_cdf(n, p)
    upper = next((s[r - 1] for r in range(1, n + 1) if cdf[r - 1] >= confidence), None)
    # P(Bin >= s) = 1 - P(Bin <= s - 1) >= confidence, the largest such s
    lower = next((s[k - 1] for k in range(n, 0, -1) if 1.0 - cdf[k - 1] >= confidence), None)
    return lower, upper
