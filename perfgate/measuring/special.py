"""The distributions the judge needs, from scipy.stats (pure; no I/O): Student's t quantiles (the judge's intervals,
perfgate.measuring.judge), chi-square's (where pairs reject a prior) and the binomial's (the Clopper-Pearson and
order-statistic bounds of perfgate.measuring.bounds). One home, so that every caller asks the same questions the
same way: a confidence within double precision of 1 and an infinite df are answered here, not at each caller.
scipy is imported at the first call (the plugin's import stays light); the quantiles are cached, as the sequential
rule asks for the same few at every look."""

from __future__ import annotations

import functools
import math

__all__ = ["t_quantile", "t_two_sided", "chi2_quantile", "beta_quantile", "binom_cdfs"]


def t_two_sided(confidence: float, df: float) -> float:
    """The quantile of a two-sided ``confidence`` interval of Student's t (``t_quantile(0.5 + confidence / 2,
    df)``). A confidence within double precision of 1 (an early look of a long sequential plan spends ~1e-20 of its
    budget: ``0.5 + confidence / 2`` rounds to 1.0) takes the largest quantile below 1, an interval at the cap
    (:data:`perfgate.measuring.notation.LOG_CAP`), not an error."""
    return t_quantile(min(0.5 + confidence / 2, math.nextafter(1.0, 0.0)), df)


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``df = inf``: the normal's)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if df <= 0:
        raise ValueError(f"Student's t needs df > 0, got {df}")
    from scipy.stats import norm, t

    return float(norm.ppf(p) if math.isinf(df) else t.ppf(p, df))


@functools.lru_cache(maxsize=1024)
def chi2_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of chi-square with ``df`` degrees of freedom."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    from scipy.stats import chi2

    return float(chi2.ppf(p, df))


def beta_quantile(p: float, a: float, b: float) -> float:
    """The ``p`` quantile of the Beta(a, b) distribution (a Clopper-Pearson bound is one)."""
    from scipy.stats import beta

    return float(beta.ppf(p, a, b))


def binom_cdfs(n: int, p: float) -> list[float]:
    """``P(Binomial(n, p) <= k)`` for k = 0..n."""
    from scipy.stats import binom

    return [float(c) for c in binom.cdf(range(n + 1), n, p)]
