"""Goodput metrics and the bounded search, on scripted outputs (no clock, no socket)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.client import RequestOutput
from perfgate.measuring.goodput import Bound, LoadLevel, Slo, judge_level, load_trial, misses, request_values, search

SLO = Slo(bounds=(Bound(metric="ttft_ms", percentile=99, limit_ms=500.0),
                  Bound(metric="itl_ms", percentile=99, limit_ms=50.0)), attainment=0.9)


def out(ttft=0.1, itl=(0.02,) * 9, ok=True, intended=0.0, sent=0.0):
    if not ok:
        return RequestOutput(success=False, error="boom", intended_s=intended, sent_s=sent)
    lat = ttft + sum(itl)
    return RequestOutput(success=True, ttft_s=ttft, latency_s=lat, last_token_s=lat, itl_s=tuple(itl),
                         completion_tokens=len(itl) + 1, first_chunk_tokens=1, intended_s=intended, sent_s=sent)


def test_request_values_and_misses():
    o = out(ttft=0.2, itl=(0.01, 0.03, 0.08))
    v = request_values(o)
    assert v["ttft_ms"] == [200.0] and v["e2e_ms"] == [pytest.approx(320.0)]
    assert v["tpot_ms"] == [pytest.approx(40.0)] and v["itl_ms"] == pytest.approx([10, 30, 80])
    assert misses(o, SLO) == ("itl_ms_p99",)  # its own p99 gap, 78 ms > 50
    assert misses(out(ttft=0.6), SLO) == ("ttft_ms_p99",)
    assert misses(out(ok=False), SLO) == ("errors",)
    assert misses(out(), SLO) == ()


def test_a_trial_counts_good_requests_attainment_goodput_rate_and_lag():
    outs = [out(intended=i * 0.5, sent=i * 0.5 + 0.002) for i in range(8)] + [out(ttft=0.9, intended=4.0, sent=4.0),
                                                                          out(ok=False, intended=4.5, sent=4.501)]
    t = load_trial(outs, 5.0, SLO, offered_rps=2.0)
    assert (t.requests, t.good, t.failures) == (10, 8, 1)
    assert t.attainment == 0.8 and t.goodput_rps == pytest.approx(0.8 * 9 / (4.501 - 0.002))  # per second sent
    assert t.achieved_rps == pytest.approx(9 / (4.501 - 0.002))
    assert t.send_lag_ms_p99 == pytest.approx(2.0, abs=1e-6)
    assert t.missed == {"ttft_ms_p99": 1, "errors": 1}
    assert t.values["ttft_ms_p99"] > 500  # the slow one is the p99 of 9 successes


def level_of(trial_outs, slo=SLO, rate=2.0):
    return judge_level(rate, [load_trial(o, 5.0, slo, rate) for o in trial_outs], slo)


def test_a_level_meets_misses_or_is_inconclusive():
    good = [out(intended=i * 0.5, sent=i * 0.5) for i in range(10)]
    assert level_of([good] * 3).meets is True
    slow = [out(ttft=0.7, intended=i * 0.5, sent=i * 0.5) for i in range(10)]
    lv = level_of([slow] * 3)
    assert lv.meets is False and lv.limiting == "ttft_ms_p99" and "ttft_ms_p99 700 ms > 500" in lv.why
    late = [out(intended=i * 0.5, sent=i * 0.5 + 0.08) for i in range(10)]
    lv = level_of([late] * 3)
    assert lv.meets is None and "fell behind its schedule" in lv.why and lv.send_lag_ms_p99 == pytest.approx(80)
    assert level_of([good] * 2).meets is None  # noise unknown


def scripted(capacity):
    """A level function for a server that meets the SLOs up to ``capacity`` req/s."""
    seen = []

    def f(rate):
        seen.append(rate)
        return LoadLevel(rate=rate, trials=(), meets=rate <= capacity, limiting="" if rate <= capacity else "itl_ms_p99",
                         why="", attainment=1.0, goodput=None, send_lag_ms_p99=0.0)
    return f, seen


@given(capacity=st.floats(min_value=0.05, max_value=200.0))
def test_the_search_brackets_then_bisects_within_its_bounds(capacity):
    slo = Slo(bounds=SLO.bounds, rate_start=1.0, rate_max=64.0, resolution=0.1, max_levels=12)
    f, seen = scripted(capacity)
    s = search(f, slo)
    assert len(seen) <= slo.max_levels and all(0 < r <= slo.rate_max for r in seen)
    if capacity < 1.0:
        assert s.best is None and s.next_rate == 1.0
    elif capacity >= 64.0:
        assert s.best is not None and s.best.rate == 64.0 and s.next_rate is None
    else:
        assert s.best is not None and s.best.rate <= capacity < s.next_rate
        assert s.resolution is not None and (s.resolution <= slo.resolution * 1.01 or len(seen) == slo.max_levels)


def test_an_inconclusive_level_stops_the_search():
    def f(rate):
        return LoadLevel(rate=rate, trials=(), meets=None if rate >= 4 else True, limiting="", why="lag",
                         attainment=1.0, goodput=None, send_lag_ms_p99=99.0)
    s = search(f, SLO)
    assert s.inconclusive is not None and s.inconclusive.rate == 4.0 and s.best is not None and s.best.rate == 2.0


def test_the_lag_bound_is_the_larger_of_ms_and_a_share_of_the_gap():
    from perfgate.measuring.goodput import max_lag_ms

    slo = Slo(bounds=SLO.bounds, max_send_lag_ms=10.0, max_send_lag_gap=0.1)
    assert max_lag_ms(slo, 1.0) == 100.0 and max_lag_ms(slo, 100.0) == 10.0
    jitter = [out(intended=i, sent=i + 0.05) for i in range(10)]  # 50 ms late, a gap of 1 s
    assert judge_level(1.0, [load_trial(jitter, 10.0, slo, 1.0)] * 3, slo).meets is True
    assert judge_level(20.0, [load_trial(jitter, 10.0, slo, 20.0)] * 3, slo).meets is None
