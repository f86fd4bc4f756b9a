"""Open-loop load: the schedule's properties (hypothesis), and the sender on real sockets against the simulator."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.client import GenRequest, Schedule, arrival_offsets, get_json, run_open_loop
from perfgate.measuring.goodput import Bound, Slo, load_trial
from perfgate.serving.simprocess import SimProcess

rates = st.floats(min_value=0.01, max_value=1e4, allow_nan=False, allow_infinity=False)


@given(rate=rates, n=st.integers(0, 300), seed=st.integers(0, 2**31), arrival=st.sampled_from(["constant", "poisson"]))
def test_a_schedule_is_sorted_bounded_and_reproducible(rate, n, seed, arrival):
    xs = arrival_offsets(arrival, rate, n, seed=seed)
    assert len(xs) == n and (not xs or xs[0] == 0.0)
    assert all(b >= a for a, b in zip(xs, xs[1:]))
    assert xs == arrival_offsets(arrival, rate, n, seed=seed)
    if arrival == "constant" and n > 1:
        assert xs[-1] == pytest.approx((n - 1) / rate)


@given(rate=rates, n=st.integers(1, 300), seed=st.integers(0, 2**31), arrival=st.sampled_from(["constant", "poisson"]),
       frac=st.floats(min_value=0.0, max_value=2.0))
def test_the_duration_bound_is_respected_and_only_cuts_the_tail(rate, n, seed, arrival, frac):
    full = arrival_offsets(arrival, rate, n, seed=seed)
    dur = frac * (full[-1] + 1.0 / rate)
    cut = Schedule(rate=rate, requests=n, arrival=arrival, duration_s=dur, seed=seed).offsets()
    assert all(t < dur for t in cut)
    assert cut == tuple(t for t in full if t < dur)


@settings(max_examples=30, deadline=None)
@given(rate=st.floats(min_value=0.1, max_value=1000.0), seed=st.integers(0, 2**31))
def test_poisson_gaps_have_the_rate_as_their_mean(rate, seed):
    n = 4000
    xs = arrival_offsets("poisson", rate, n, seed=seed)
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    # exponential gaps: sd = mean, so the mean of n-1 gaps is within 5 standard errors of 1/rate
    assert abs(statistics.fmean(gaps) * rate - 1) < 5 / math.sqrt(n - 1)
    assert statistics.stdev(gaps) * rate == pytest.approx(1.0, rel=0.15)


def test_other_seeds_give_other_poisson_schedules_and_bad_input_is_refused():
    assert arrival_offsets("poisson", 5, 20, seed=1) != arrival_offsets("poisson", 5, 20, seed=2)
    bads: tuple[dict[str, Any], ...] = (
        dict(arrival="bursty", rate=1, requests=3), dict(arrival="poisson", rate=0, requests=3),
        dict(arrival="poisson", rate=float("inf"), requests=3), dict(arrival="poisson", rate=1, requests=-1))
    for bad in bads:
        with pytest.raises(ValueError, match="arrival|rate|requests"):
            arrival_offsets(bad["arrival"], bad["rate"], bad["requests"])


def test_an_unreachable_server_gives_failed_outputs_with_their_send_times():
    from perfgate.host.procs import free_port

    offsets = (0.0, 0.01, 0.02)
    reqs = [GenRequest(input_ids=(1, 2, 3), max_new_tokens=4)] * 3
    outs, _ = run_open_loop(f"http://127.0.0.1:{free_port()}", reqs, offsets, timeout_s=5)
    assert [o.success for o in outs] == [False] * 3 and all("cannot connect" in o.error for o in outs)
    assert [o.intended_s for o in outs] == list(offsets)
    assert all(o.sent_s is not None and o.send_lag_s is not None and o.send_lag_s >= 0 for o in outs)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with SimProcess.start(["--tp-size", "8", "--cuda-graph-max-bs-decode", "128", "--sim-speedup", "8",
                           "--skip-tokenizer-init"], log_path=tmp_path_factory.mktemp("sim") / "sim.log") as s:
        s.wait_ready()
        yield s


@pytest.mark.timing
def test_open_loop_against_the_simulator_keeps_its_schedule_in_server_time(sim):
    url = f"http://127.0.0.1:{sim.port}"
    info = get_json(url, "/server_info")
    assert info is not None
    scale = float(info.get("perfgate_sim_speedup") or 1.0)
    assert scale == 8.0
    sched = Schedule(rate=8.0, requests=12, arrival="poisson", seed=3)
    reqs = [GenRequest(input_ids=(100 + i, 7, 8, 9), max_new_tokens=16) for i in range(12)]
    outs, wall = run_open_loop(url, reqs, sched.offsets(), timeout_s=30, time_scale=scale)
    assert all(o.success for o in outs), [o.error for o in outs]
    assert [o.intended_s for o in outs] == list(sched.offsets())
    assert all(o.send_lag_s is not None and o.send_lag_s >= 0 for o in outs)  # never sent early
    assert all(o.completion_tokens == 16 and len(o.itl_s) == 15 for o in outs)
    # in server time: the run lasts at least the schedule plus the last request's own latency
    assert outs[-1].latency_s is not None
    assert wall >= sched.offsets()[-1] + outs[-1].latency_s * 0.99
    slo = Slo(bounds=(Bound(metric="ttft_ms", percentile=99, limit_ms=10_000.0),))
    t = load_trial(outs, wall, slo, offered_rps=8.0)
    assert t.requests == 12 and t.good == 12 and t.attainment == 1.0 and t.failures == 0
    sent = [o.sent_s for o in outs if o.sent_s is not None]
    assert len(sent) == len(outs)  # every request was sent
    assert t.goodput_rps == pytest.approx(11 / (max(sent) - min(sent))) and t.send_lag_ms_p99 is not None


def test_the_simulators_speed_up_is_set_only_while_idle_and_real_time_restores_it(sim):
    """The load records' open-loop levels run the simulator at speed-up 1 (perfgate.procedure.real_time):
    the route takes a number > 0 while idle, and the block leaves the server at its own speed-up."""
    import requests

    from perfgate.procedure import real_time

    url = f"http://127.0.0.1:{sim.port}"

    def speed() -> Any:
        info = get_json(url, "/server_info")
        assert info is not None
        return info["perfgate_sim_speedup"]

    assert speed() == 8.0
    with real_time(url, 8.0):
        assert speed() == 1.0
        outs, _ = run_open_loop(url, [GenRequest(input_ids=(5, 6, 7), max_new_tokens=4)], (0.0,), timeout_s=30)
        assert outs[0].success
    assert speed() == 8.0
    bad = requests.post(f"{url}/perfgate/sim_speedup", json={"speedup": 0}, timeout=10)
    assert bad.status_code == 400 and "speedup must be a number > 0" in bad.text
    assert requests.get(f"{url}/perfgate/sim_speedup", timeout=10).json() == {"speedup": 8.0, "was": 8.0}
