"""The statistics a goodput level is decided on (perfgate.measuring.goodput): the order-statistic sizing rule,
the distribution-free percentile bounds, the Clopper-Pearson attainment bounds, a level's decision and the
floor's verdict on the interval. Pure: no clock, no socket."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.measuring.bounds import binom_cdf, clopper_pearson, percentile_bounds
from perfgate.measuring.goodput import (
    Bound,
    LoadLevel,
    Search,
    Slo,
    attainment_min_requests,
    decide,
    level_min_requests,
    min_requests,
)
from perfgate.measuring.goodputrecord import floor_verdict

P99 = Slo(bounds=(Bound(metric="ttft_ms", percentile=99, limit_ms=500.0),), attainment=0.99)


def test_the_documented_minimums():
    assert min_requests(99) == 299 and min_requests(90) == 29 and min_requests(50) == 5 and min_requests(100) is None
    assert min_requests(99, 0.99) == 459  # MLPerf's server scenario: 459 queries before a p99 at 99 % can pass
    assert attainment_min_requests(0.99) == 299 and attainment_min_requests(1.0) is None
    assert level_min_requests(P99) == 299


@given(q=st.floats(min_value=1.0, max_value=99.95), conf=st.floats(min_value=0.5, max_value=0.999))
def test_min_requests_is_the_smallest_n_whose_largest_value_bounds_the_percentile(q, conf):
    n = min_requests(q, conf)
    p = q / 100
    assert n is not None and 1 - p ** n >= conf and (n == 1 or 1 - p ** (n - 1) < conf)


@settings(deadline=None, max_examples=60)
@given(q=st.sampled_from([50.0, 90.0, 95.0, 99.0]), n=st.integers(min_value=1, max_value=700))
def test_an_upper_bound_exists_from_min_requests_on(q, n):
    lo, up = percentile_bounds([float(i) for i in range(n)], q)
    assert (up is not None) == (n >= min_requests(q))
    if up is not None and lo is not None:
        assert lo <= up


@settings(deadline=None, max_examples=60)
@given(n=st.integers(min_value=1, max_value=700), slo=st.sampled_from([
    P99, Slo(bounds=(Bound(metric="ttft_ms", percentile=90, limit_ms=500.0),), attainment=0.9),
    Slo(bounds=(Bound(metric="ttft_ms", percentile=99, limit_ms=500.0),
                Bound(metric="tpot_ms", percentile=50, limit_ms=20.0)), attainment=0.95)]))
def test_a_level_whose_requests_are_all_good_passes_once_n_is_large_enough(n, slo):
    judged = {b.key: [b.limit_ms / 2] * n for b in slo.bounds}
    meets, why = decide(n, n, judged, slo)
    assert meets is (True if n >= level_min_requests(slo) else None), why
    # and one whose requests all miss fails from 2 requests on (a single bad request is 5 % likely or more from a
    # server at an attainment of 0.95 or less), never passes
    bad = {b.key: [b.limit_ms * 2] * n for b in slo.bounds}
    verdict = decide(0, n, bad, slo)[0]
    assert verdict is not True and (n < 2 or verdict is False)


@settings(deadline=None, max_examples=25)
@given(n=st.integers(min_value=1, max_value=300), p=st.floats(min_value=0.01, max_value=0.999),
       conf=st.sampled_from([0.9, 0.95, 0.99]))
def test_clopper_pearson_covers_the_true_share_at_least_at_its_confidence_exactly(n, p, conf):
    """Summed over every outcome k of Binomial(n, p): the probability that each one-sided bound holds."""
    cdf = binom_cdf(n, p)
    pmf = [cdf[0]] + [cdf[k] - cdf[k - 1] for k in range(1, n + 1)]
    bounds = [clopper_pearson(k, n, conf) for k in range(n + 1)]
    assert sum(w for w, (lo, _) in zip(pmf, bounds) if lo <= p) >= conf - 1e-9
    assert sum(w for w, (_, hi) in zip(pmf, bounds) if hi >= p) >= conf - 1e-9


def test_the_bounds_cover_in_simulation():
    """Seeded draws: levels of 300 requests from a server whose true share of good requests is 0.99 and whose
    TTFT is exponential (true p99 = ln(100) x the mean): each one-sided bound holds in at least 95 % of draws
    (minus three standard errors of the simulation)."""
    rng = random.Random(30)
    n, draws, p, mean = 300, 2000, 0.99, 100.0
    true_p99 = math.log(100) * mean
    cp_lo = cp_hi = up_ok = lo_ok = 0
    for _ in range(draws):
        good = sum(rng.random() < p for _ in range(n))
        lo, hi = clopper_pearson(good, n, 0.95)
        cp_lo += lo <= p
        cp_hi += hi >= p
        low, up = percentile_bounds([rng.expovariate(1 / mean) for _ in range(n)], 99, 0.95)
        up_ok += up is not None and up >= true_p99
        lo_ok += low is None or low <= true_p99
    slack = 3 * math.sqrt(0.95 * 0.05 / draws)
    for hits in (cp_lo, cp_hi, up_ok, lo_ok):
        assert hits / draws >= 0.95 - slack


def _search(low: float | None, high: float | None, unresolved: tuple[float, ...] = ()) -> Search:
    def lv(rate: float, meets: bool | None) -> LoadLevel:
        return LoadLevel(rate=rate, trials=(), meets=meets, limiting="", why="", attainment=1.0, goodput_rps=rate,
                         send_lag_ms_p99=None, achieved_rps=rate)
    best = lv(low, True) if low is not None else None
    failed = lv(high, False) if high is not None else None
    return Search(levels=tuple(x for x in (best, failed) if x), best=best, failed=failed,
                  unresolved=tuple(lv(r, None) for r in unresolved))


@given(low=st.one_of(st.none(), st.floats(min_value=0.1, max_value=100)),
       width=st.one_of(st.none(), st.floats(min_value=0.01, max_value=100)),
       floor=st.floats(min_value=0.1, max_value=100), tol=st.sampled_from([0.0, 0.03, 0.1]))
def test_the_floor_passes_on_the_low_end_fails_on_the_high_end_and_is_unresolved_between(low, width, floor, tol):
    high = (low or 0.0) + width if width is not None else None
    s = _search(low, high)
    v = floor_verdict(s, floor, tol, where="p.toml, [floors.baseline] goodput_rps", update_hint="pytest -U",
                      what="goodput")
    bound = floor * (1 - tol)
    if (low or 0.0) >= bound:
        assert v.outcome == "pass"
    elif high is not None and high < bound:
        assert v.outcome == "fail" and v.category == "slower-than-baseline" and "p.toml" in v.message
    else:
        assert v.outcome == "inconclusive" and v.category == "unresolved" and "straddles" in v.message


def test_the_floor_verdict_says_what_would_decide_it():
    where, hint = "p.toml, [floors.baseline] goodput_rps", "pytest -U"
    v = floor_verdict(_search(3.0, 4.0, (3.5,)), 3.6, 0.0, where=where, update_hint=hint, what="goodput")
    assert v.category == "unresolved" and "max_requests" in v.message
    v = floor_verdict(_search(3.0, None), 3.6, 0.0, where=where, update_hint=hint, what="goodput")
    assert "rate_max" in v.message
    assert floor_verdict(_search(3.0, 4.0), None, 0.0, where=where, update_hint=hint, what="goodput").outcome == "skip"
    # no level passed, and the SLOs broke below the floor: a failure, not a straddle
    assert floor_verdict(_search(None, 1.0), 3.0, 0.0, where=where, update_hint=hint, what="goodput").outcome == "fail"
