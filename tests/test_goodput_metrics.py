"""Goodput metrics and the bounded search, on scripted outputs (no clock, no socket)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.client import RequestOutput
from perfgate.measuring.goodput import Bound, LoadTrial, Slo, judge_level, load_trial, misses, request_values, search

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


def test_a_requests_tpot_and_decode_rate_are_one_span() -> None:
    """RequestOutput.decode_span is the one home of a request's TPOT (request_values' ``tpot_ms``) and decode rate
    (``decode_tok_s``, the closed loop's tok_s): one output token has neither; no time between the first and the last
    chunk, a TPOT of 0 but no rate; without the last chunk's time, the end of the request."""
    o = out(ttft=0.2, itl=(0.01, 0.03, 0.08))
    assert o.decode_span == (3, pytest.approx(0.12)) and request_values(o)["tpot_ms"] == [o.tpot_ms]
    assert o.decode_tok_s == pytest.approx(25.0) and o.tpot_ms == pytest.approx(40.0)
    one = out(itl=())
    assert one.decode_span is None and one.tpot_ms is None and one.decode_tok_s is None
    assert "tpot_ms" not in request_values(one)
    still = replace(o, last_token_s=0.2)
    assert still.tpot_ms == 0.0 and still.decode_tok_s is None and request_values(still)["tpot_ms"] == [0.0]
    no_last = replace(o, last_token_s=None, latency_s=0.5)
    assert no_last.decode_span == (3, pytest.approx(0.3)) and no_last.decode_tok_s == pytest.approx(10.0)
    assert replace(o, success=False).decode_tok_s is None and replace(o, success=False).tpot_ms == o.tpot_ms


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


def test_a_level_passes_fails_is_unresolved_or_behind():
    good = [out(intended=i * 0.05, sent=i * 0.05) for i in range(100)]
    lv = level_of([good] * 3)  # 300 requests, all good: a p99 has its order-statistic bound from 299
    assert lv.meets is True and lv.decision == "pass" and lv.requests == 300 and lv.good == 300
    assert lv.bounds["ttft_ms_p99"][1] == pytest.approx(100.0) and lv.attainment_low > 0.99
    slow = [out(ttft=0.7, intended=i * 0.5, sent=i * 0.5) for i in range(10)]
    lv = level_of([slow] * 3)
    assert lv.meets is False and lv.decision == "fail" and lv.limiting == "ttft_ms_p99"
    assert "ttft_ms_p99 lower bound 700 ms > 500" in lv.why
    late = [out(intended=i * 0.5, sent=i * 0.5 + 0.08) for i in range(10)]
    lv = level_of([late] * 3)
    assert lv.meets is None and lv.behind and "fell behind its schedule" in lv.why
    assert lv.send_lag_ms_p99 == pytest.approx(80)
    lv = level_of([good[:10]] * 3)  # 30 good requests: too few for a p99's bound, not a failure
    assert lv.decision == "unresolved" and lv.point and "it needs 299 requests" in lv.why


def trial(rate, n, good, slo=SLO):
    """A scripted trial of ``n`` requests at ``rate``, ``good`` of them within every bound, the rest over the
    TTFT bound."""
    ttft = next(b for b in slo.bounds if b.metric == "ttft_ms")
    judged = {b.key: tuple([b.limit_ms / 2] * n) for b in slo.bounds}
    judged[ttft.key] = tuple([ttft.limit_ms / 2] * good + [ttft.limit_ms * 2] * (n - good))
    return LoadTrial(offered_rps=rate, achieved_rps=rate, requests=n, failures=0, good=good, attainment=good / n,
                     goodput_rps=rate * good / n, send_lag_ms_p99=0.5, output_tok_s=None, values={},
                     missed={ttft.key: n - good} if n > good else {}, wall_s=n / rate, judged=judged)


def scripted(capacity, per_trial=40, share=None, slo=SLO):
    """A server that serves every request within the SLOs up to ``capacity`` req/s and none above (or, with
    ``share``, that share of them at every rate: ``share(rate)``); records the trials asked of each rate."""
    asked: dict[float, int] = {}

    def measure(rate, trials, requests=None):
        asked[rate] = asked.get(rate, 0) + trials
        n = requests or per_trial
        if share is not None:
            good = round(n * share(rate))
        else:
            good = n if rate <= capacity else 0
        return [trial(rate, n, good, slo) for _ in range(trials)]
    return measure, asked


@settings(deadline=None, max_examples=40)
@given(capacity=st.floats(min_value=0.05, max_value=200.0))
def test_the_search_brackets_the_capacity_and_sizes_the_levels_that_decide_it(capacity):
    slo = Slo(bounds=SLO.bounds, attainment=0.9, rate_start=1.0, rate_max=64.0, resolution=0.1, max_levels=12)
    f, asked = scripted(capacity)
    s = search(f, slo, trials=3)
    assert len(asked) <= slo.max_levels and all(0 < r <= slo.rate_max for r in asked)
    assert all(lv.requests <= slo.budget + 40 for lv in s.levels)
    if capacity < 1.0:
        assert s.best is None and s.next_rate == 1.0 and s.low == 0.0
    elif capacity >= 64.0:
        assert s.best is not None and s.best.rate == 64.0 and s.next_rate is None and s.high is None
    else:
        assert s.best is not None and s.failed is not None and s.best.rate <= capacity < s.failed.rate
        assert s.resolution is not None and (s.resolution <= slo.resolution * 1.01 or len(asked) == slo.max_levels)
        assert s.low <= capacity < s.high
    if s.best is not None:  # the passed end was given the requests a p99 needs to pass: 299, in whole trials
        assert s.best.meets is True and s.best.requests >= slo.min_requests == 299
    assert not s.unresolved  # all good or all bad: every end resolves


def test_an_end_that_stays_unresolved_is_topped_up_to_the_budget_and_listed():
    slo = Slo(bounds=(Bound(metric="ttft_ms", percentile=90, limit_ms=500.0),), attainment=0.9, rate_start=1.0,
              rate_max=8.0, resolution=0.5, max_requests=400)
    # every request good up to 2 req/s, 90 % at 4 (on the required share: no interval leaves it), none at 8
    f, asked = scripted(0, share=lambda r: 1.0 if r <= 2 else 0.9 if r <= 4 else 0.0, slo=slo)
    s = search(f, slo, trials=3)
    assert s.best is not None and s.failed is not None
    assert [lv.rate for lv in s.unresolved] == [4.0] and s.best.rate == 2.0 and s.failed.rate == 5.66
    four = next(lv for lv in s.levels if lv.rate == 4.0)
    # a p90 passes from 29 requests: each top-up is one trial of the level's own size, up to the budget
    assert four.decision == "unresolved" and [t.requests for t in four.trials] == [40] * 10 and asked[4.0] == 10
    assert asked[5.66] == 3  # a clear failure needs no more than the first trials
    assert s.low == pytest.approx(2.0) and s.high == 5.66


def test_an_end_unresolved_at_the_budget_hands_over_to_the_next_level_in():
    """A p99 SLO: 1 and 2 req/s all good but on 150 requests each (under the 299 a pass needs), 4 req/s right on
    the required share (one request in 100 over), none good above: 4 stays unresolved at the budget, so 2 is
    topped up to the minimum and passes."""
    slo = Slo(bounds=SLO.bounds, attainment=0.99, rate_start=1.0, rate_max=16.0, resolution=0.5, max_requests=400)
    seen: dict[float, int] = {}

    def measure(rate, trials, requests=None):
        out = []
        for _ in range(trials):
            seen[rate] = seen.get(rate, 0) + 1
            n = requests or 50
            good = n if rate < 4 else n - n // 100 if rate == 4 else 0  # at 4: a share of 0.99 or a little more
            out.append(trial(rate, n, good))
        return out
    s = search(measure, slo, trials=3)
    levels = {lv.rate: lv for lv in s.levels}
    assert levels[4.0].decision == "unresolved" and levels[4.0].requests >= 400
    assert s.best is not None and s.best.rate == 2.0 and s.best.requests >= 299 and levels[1.0].requests == 150
    assert [lv.rate for lv in s.unresolved] == [4.0] and s.failed is not None and s.failed.rate == 5.66


def test_an_end_that_resolves_the_other_way_moves_the_interval():
    slo = Slo(bounds=SLO.bounds, attainment=0.9, rate_start=1.0, rate_max=4.0, resolution=0.9, max_requests=2000)
    # 4 req/s looks good on its first 120 requests (all good) but its share is 0.88: more requests fail it
    calls = {"n": 0}

    def measure(rate, trials, requests=None):
        out = []
        for _ in range(trials):
            n = requests or 40
            if rate < 4:
                out.append(trial(rate, n, n))
            else:
                calls["n"] += 1
                out.append(trial(rate, n, n if calls["n"] <= 3 else n * 3 // 4))
        return out
    s = search(measure, slo, trials=3)
    # 4 req/s fails on its fourth trial, a top-up of 179 requests (to the 299 a p99 needs); the bracket 2-4 is then
    # wider than the resolution: 2.83 is measured, and passes once topped up the same way
    assert [lv.rate for lv in s.levels] == [1.0, 2.0, 4.0, 2.83]
    assert s.failed is not None and s.failed.rate == 4.0 and [t.requests for t in s.failed.trials] == [40, 40, 40, 179]
    assert s.best is not None and s.best.rate == 2.83 and s.best.requests >= 299 and not s.unresolved


def test_a_sender_behind_stops_the_search():
    def measure(rate, trials, requests=None):
        t = trial(rate, 40, 40)
        return [replace(t, send_lag_ms_p99=99.0 if rate >= 4 else 0.5) for _ in range(trials)]
    s = search(measure, SLO, trials=3)
    assert s.inconclusive is not None and s.inconclusive.rate == 4.0 and s.inconclusive.decision == "behind"


def test_the_lag_bound_is_the_larger_of_ms_and_a_share_of_the_gap():
    from perfgate.measuring.goodput import max_lag_ms

    slo = Slo(bounds=SLO.bounds, max_send_lag_ms=10.0, max_send_lag_gap=0.1)
    assert max_lag_ms(slo, 1.0) == 100.0 and max_lag_ms(slo, 100.0) == 10.0
    jitter = [out(intended=i, sent=i + 0.05) for i in range(100)]  # 50 ms late, a gap of 1 s
    assert not judge_level(1.0, [load_trial(jitter, 10.0, slo, 1.0)] * 3, slo).behind
    assert judge_level(20.0, [load_trial(jitter, 10.0, slo, 20.0)] * 3, slo).behind


def test_the_warm_up_comes_first_and_the_measured_schedule_is_kept():
    from perfgate.client.schedule import arrival_offsets
    from perfgate.procedure import warmed_offsets

    measured = arrival_offsets("poisson", 4.0, 20, seed=0)
    warm = arrival_offsets("poisson", 4.0, 8, seed=1)
    both, shift = warmed_offsets(warm, measured, 4.0)
    assert both[:8] == warm and shift == pytest.approx(warm[-1] + 0.25)
    assert [x - shift for x in both[8:]] == pytest.approx(list(measured))
    assert warmed_offsets((), measured, 4.0) == (measured, 0.0)
