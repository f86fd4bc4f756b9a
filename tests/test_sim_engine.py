"""The simulated scheduler on a virtual clock: batching, timing, acceptance draws, determinism."""

from __future__ import annotations

import threading

import pytest

from perfgate.serving.simprocess import SEED_BOX
from perfgate.sim.behavior import simulate_launch
from perfgate.sim.engine_loop import EngineLoop, SimRequest, expected_output

TP8 = {"tp-size": 8, "cuda-graph-max-bs-decode": 128}
EAGLE3 = {"tp-size": 8, "speculative-algorithm": "EAGLE3", "speculative-num-steps": 3,
          "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4}


class VirtualClock:
    """time.monotonic / time.sleep stand-ins: sleeping advances the clock at once."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, dt: float) -> None:
        with self._lock:
            self.now += max(0.0, dt)


def run_all(plan, reqs, *, seed=1, fault=None, fault_after=3, on_crash=None, timeout=20.0):
    clock = VirtualClock()
    lines: list[str] = []
    eng = EngineLoop(plan, lines.append, seed=seed, clock=clock.time, sleep=clock.sleep, fault=fault,
                     fault_after=fault_after, on_crash=on_crash)
    for r in reqs:
        eng.submit(r)
    t0 = clock.time()
    eng.start()
    try:
        for r in reqs:
            while True:
                produced = r.events.get(timeout=timeout)
                if produced >= r.max_new_tokens or r.hung:
                    break
    finally:
        eng.stop()
    return eng, t0, lines


def test_64_concurrent_requests_follow_the_cost_model_exactly():
    plan = simulate_launch(SEED_BOX, TP8, {})
    reqs = [SimRequest(input_ids=[i, i + 1, i + 2, 7], max_new_tokens=20) for i in range(64)]
    eng, t0, lines = run_all(plan, reqs)
    prefill = plan.prefill_ms(sum(len(r.input_ids) - r.cached_tokens for r in reqs)) / 1000
    step = plan.step_s(64)
    for r in reqs:
        assert r.first_token_at - t0 == pytest.approx(prefill, abs=1e-9)
        assert r.finished_at - t0 == pytest.approx(prefill + 19 * step, rel=1e-9)
        assert r.output_ids == expected_output(r.input_ids, 20, plan.hardware.model.vocab)
    assert any(ln.startswith("Prefill batch, #new-seq: 64,") for ln in lines)


def test_requests_beyond_max_running_wait_for_a_slot():
    plan = simulate_launch(SEED_BOX, {**TP8, "max-running-requests": 2}, {})
    reqs = [SimRequest(input_ids=[i, 1], max_new_tokens=3) for i in range(3)]
    eng, t0, _ = run_all(plan, reqs)
    assert reqs[0].finished_at == reqs[1].finished_at
    assert reqs[2].first_token_at >= reqs[0].finished_at


def test_speculative_cycles_accept_around_the_acceptance_length():
    plan = simulate_launch(SEED_BOX, EAGLE3, {"SGLANG_SIMULATE_ACC_LEN": "2.5"})
    reqs = [SimRequest(input_ids=[5, i], max_new_tokens=400) for i in range(8)]
    eng, t0, lines = run_all(plan, reqs)
    verify = sum(r.verify_ct for r in reqs)
    decoded = sum(len(r.output_ids) - 1 for r in reqs)  # the first token comes from prefill
    assert 2.3 <= decoded / verify <= 2.7
    for r in reqs:
        assert r.proposed_drafts == r.verify_ct * 3
        assert 0 <= r.correct_drafts <= r.proposed_drafts
        assert r.output_ids == expected_output(r.input_ids, 400, plan.hardware.model.vocab)
    assert eng.avg_spec_accept_length is not None  # committed at the decode log lines
    assert any("accept len: " in ln for ln in lines if ln.startswith("Decode batch"))


def test_seeded_draws_are_reproducible():
    plan = simulate_launch(SEED_BOX, EAGLE3, {})
    runs = []
    for _ in range(2):
        reqs = [SimRequest(input_ids=[9, 9, i], max_new_tokens=60) for i in range(3)]
        run_all(plan, reqs, seed=1234)
        runs.append([(r.verify_ct, r.correct_drafts) for r in reqs])
    assert runs[0] == runs[1]


def test_outputs_identical_across_modes_and_wrong_output_fault():
    base = simulate_launch(SEED_BOX, TP8, {})
    spec = simulate_launch(SEED_BOX, EAGLE3, {})
    a = SimRequest(input_ids=[1, 2, 3], max_new_tokens=30)
    b = SimRequest(input_ids=[1, 2, 3], max_new_tokens=30)
    c = SimRequest(input_ids=[1, 2, 3], max_new_tokens=30)
    d = SimRequest(input_ids=[1, 2, 3], max_new_tokens=30)
    run_all(base, [a])
    run_all(spec, [b])
    run_all(spec, [c], fault="wrong-output")
    run_all(base, [d], fault="wrong-output")  # only speculative configs go wrong
    assert a.output_ids == b.output_ids == d.output_ids
    assert c.output_ids[:10] == a.output_ids[:10] and c.output_ids[10:] != a.output_ids[10:]


def test_mid_stream_faults_hit_after_n_tokens():
    plan = simulate_launch(SEED_BOX, TP8, {})
    hung = SimRequest(input_ids=[4, 4], max_new_tokens=20)
    run_all(plan, [hung], fault="hang-mid-stream", fault_after=5)
    assert hung.hung and len(hung.output_ids) == 5 and not hung.finished
    crashed: list[int] = []
    victim = SimRequest(input_ids=[4, 5], max_new_tokens=20)
    health = SimRequest(input_ids=[0], max_new_tokens=1, internal=True)
    run_all(plan, [health], fault="crash-mid-stream", fault_after=1, on_crash=lambda: crashed.append(1))
    assert crashed == []  # internal requests (health, warm-up) are exempt
    run_all(plan, [victim], fault="crash-mid-stream", fault_after=4,
            on_crash=lambda: crashed.append(len(victim.output_ids)))
    assert crashed and crashed[0] == 4


def test_prefix_cache_and_flush():
    plan = simulate_launch(SEED_BOX, TP8, {})
    first = SimRequest(input_ids=list(range(50)), max_new_tokens=1)
    clock = VirtualClock()
    eng = EngineLoop(plan, lambda s: None, clock=clock.time, sleep=clock.sleep)
    eng.start()
    try:
        eng.submit(first)
        first.events.get(timeout=10)
        again = eng.submit(SimRequest(input_ids=list(range(50)) + [7], max_new_tokens=1))
        again.events.get(timeout=10)
        assert again.cached_tokens == 50
        assert eng.flush_cache()
        third = eng.submit(SimRequest(input_ids=list(range(50)), max_new_tokens=1))
        third.events.get(timeout=10)
        assert third.cached_tokens == 0
    finally:
        eng.stop()


def test_acceptance_draws_start_over_at_a_flush():
    """A prompt's draws depend on its submissions since the last flush, not on what the start served before
    (the crossover's levels sent the latency record's prompts first: tests/test_sim_history.py)."""
    plan = simulate_launch(SEED_BOX, EAGLE3, {})
    clock = VirtualClock()
    eng = EngineLoop(plan, lambda s: None, seed=5, clock=clock.time, sleep=clock.sleep)
    eng.start()

    def verify_counts() -> list[int]:
        reqs = [eng.submit(SimRequest(input_ids=[i, 3, 9], max_new_tokens=64)) for i in range(8)]
        for r in reqs:
            while r.events.get(timeout=10) < r.max_new_tokens:
                pass
        while eng.counts() != (0, 0):
            clock.sleep(0.001)
        return [r.verify_ct for r in reqs]

    try:
        assert eng.flush_cache()
        first = verify_counts()
        repeated = verify_counts()  # the same prompts again, no flush: each its next draws
        assert eng.flush_cache()
        assert verify_counts() == first
        assert repeated != first
    finally:
        eng.stop()


def test_a_burst_is_split_by_its_arrival_times_not_by_when_the_engine_thread_woke():
    """Four requests 0.5 ms apart, the engine thread waking only after all four are queued (as when it waits for
    the GIL): the first arrival starts a prefill alone, at its arrival, and the other three share the next one.
    The engine used to take all four, or whatever had been queued when it woke: the latency record's bimodal TTFT."""
    plan = simulate_launch(SEED_BOX, TP8, {})
    clock = VirtualClock()
    lines: list[str] = []
    eng = EngineLoop(plan, lines.append, clock=clock.time, sleep=clock.sleep)
    reqs = [SimRequest(input_ids=[i, i + 1, 9], max_new_tokens=2) for i in range(4)]
    for r in reqs:
        eng.submit(r)
        clock.sleep(0.0005)
    eng.start()
    try:
        for r in reqs:
            while r.events.get(timeout=10) < r.max_new_tokens:
                pass
    finally:
        eng.stop()
    prefills = [ln.split(", ")[1] for ln in lines if ln.startswith("Prefill batch")]
    assert prefills == ["#new-seq: 1", "#new-seq: 3"]
    first = plan.prefill_ms(3) / 1000
    assert reqs[0].first_token_at - reqs[0].created == pytest.approx(first, abs=1e-9)  # from its arrival, not the wake
    for r in reqs[1:]:
        assert r.first_token_at - reqs[0].created == pytest.approx(first + plan.prefill_ms(9) / 1000, abs=1e-9)


def test_a_sped_up_engine_gains_its_clock_lead_at_each_step_end():
    """--sim-speedup 4: each step sleeps a quarter of its simulated time; at its deadline the simulated clock's lead
    grows by the other three quarters, so wall time + lead gained is the cost model's time, step by step."""
    plan = simulate_launch(SEED_BOX, TP8, {})
    clock = VirtualClock()
    eng = EngineLoop(plan, lambda s: None, clock=clock.time, sleep=clock.sleep, speedup=4.0)
    r = SimRequest(input_ids=[1, 2, 3], max_new_tokens=3)
    assert eng.ahead() == 0.0
    eng.submit(r)
    eng.start()
    try:
        while r.events.get(timeout=10) < r.max_new_tokens:
            pass
    finally:
        eng.stop()
    prefill, step = plan.prefill_ms(3) / 1000, plan.step_s(1)
    assert r.created_ahead == 0.0
    assert r.aheads[1] == pytest.approx(0.75 * prefill) and r.first_token_ahead == r.aheads[1]
    assert r.aheads[3] == pytest.approx(0.75 * (prefill + 2 * step)) and r.finished_ahead == r.aheads[3]
    sim_ttft = r.first_token_at - r.created + r.first_token_ahead - r.created_ahead
    sim_decode = r.finished_at - r.first_token_at + r.finished_ahead - r.first_token_ahead
    assert sim_ttft == pytest.approx(prefill, abs=1e-9) and sim_decode == pytest.approx(2 * step, abs=1e-9)
    assert eng.ahead() == pytest.approx(r.aheads[3])  # idle: the lead stays where the last step left it
