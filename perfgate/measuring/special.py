"""Special functions and distributions the judge needs, written out (pure; no I/O): the regularized incomplete beta
function, behind Student's t and the binomial tails of Clopper-Pearson bounds (perfgate.measuring.goodput); Student's
t quantiles (the judge's intervals, perfgate.measuring.judge) and chi-square's (where pairs reject a prior).
The error spending's normal-theory boundaries take scipy's (perfgate.measuring.spending)."""

from __future__ import annotations

import functools
import math
import statistics

__all__ = ["betainc", "t_quantile", "t_two_sided", "chi2_quantile"]


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``: its continued fraction (modified Lentz), on the
    side where it converges fast (Numerical Recipes, 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom: ``P(T > |t|) = I_x(df/2, 1/2) / 2`` with
    ``x = df / (df + t^2)`` (the regularized incomplete beta, :func:`betainc`)."""
    p = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))  # P(T > |t|)
    return 1.0 - p if t >= 0 else p


def t_two_sided(confidence: float, df: float) -> float:
    """The quantile of a two-sided ``confidence`` interval of Student's t (``t_quantile(0.5 + confidence / 2,
    df)``). A confidence within double precision of 1 (an early look of a long sequential plan spends ~1e-20 of its
    budget: ``0.5 + confidence / 2`` rounds to 1.0) takes the largest quantile below 1, an interval at the cap
    (:data:`perfgate.measuring.notation.LOG_CAP`), not an error."""
    return t_quantile(min(0.5 + confidence / 2, math.nextafter(1.0, 0.0)), df)


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``df = inf``: the normal); cached, as the
    sequential rule asks for the same few quantiles at every look."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    z = statistics.NormalDist().inv_cdf(p)
    if math.isinf(df) or df > 1e6:
        return z
    lo, hi = -1e3, 1e3
    for _ in range(200):  # bisection on the CDF: monotone, and 200 halvings reach double precision
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def chi2_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of chi-square with ``df`` degrees of freedom (Wilson-Hilferty; within 1 % from df 1)."""
    z = statistics.NormalDist().inv_cdf(p)
    k = float(df)
    return k * max(0.0, 1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3
