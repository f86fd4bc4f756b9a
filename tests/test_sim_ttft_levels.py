"""The simulator's host-side TTFT knobs (perfgate.sim.variation): PERFGATE_SIM_TTFT_MODES, levels of the prefill
step switching inside one start, seeded and counted in prefill steps; PERFGATE_SIM_PREFILL_DELAY_MS, a delay added
to every prefill step and to nothing else. Unit tier: the engine runs on a fake clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.serving.simprocess import SEED_BOX
from perfgate.sim import simulate_launch
from perfgate.sim.args import parse_argv
from perfgate.sim.engine_loop import EngineLoop, SimRequest
from perfgate.sim.variation import (
    DEFAULT_TTFT_DWELL,
    TtftModes,
    parse_prefill_delay_ms,
    parse_ttft_modes,
    prefill_levels,
)
from tests.test_sim_variation import TP8, _Clock


def test_ttft_modes_parse_and_default_off() -> None:
    assert parse_ttft_modes(None) is None and parse_ttft_modes(" ") is None
    assert parse_ttft_modes("1.0,1.6") == TtftModes(levels=(1.0, 1.6), dwell=DEFAULT_TTFT_DWELL)
    assert parse_ttft_modes("1,1.6,2/12") == TtftModes(levels=(1.0, 1.6, 2.0), dwell=12.0)
    assert parse_prefill_delay_ms(None) == parse_prefill_delay_ms("") == 0.0 and parse_prefill_delay_ms("2.8") == 2.8


@pytest.mark.parametrize("text", ["1.6", "1.0,0", "1.0,-1", "a,b", "1.0,1.6/0.5", "1.0,1.6/x", "1.0,inf"])
def test_a_bad_ttft_modes_names_the_variable_and_the_fix(text: str) -> None:
    with pytest.raises(ValueError, match=r"PERFGATE_SIM_TTFT_MODES=.*fix: e\.g\."):
        parse_ttft_modes(text)


@pytest.mark.parametrize("text", ["-1", "x", "nan", "inf"])
def test_a_bad_prefill_delay_names_the_variable_and_the_fix(text: str) -> None:
    with pytest.raises(ValueError, match=r"PERFGATE_SIM_PREFILL_DELAY_MS=.*fix: e\.g\."):
        parse_prefill_delay_ms(text)


def test_the_options_are_the_simulators_own() -> None:
    parsed = parse_argv(["--model-path", "m", "--sim-hardware", "h.toml", "--sim-ttft-modes", "1,1.6/8",
                         "--sim-prefill-delay-ms", "2.8"], "0.5.23")
    assert parsed.sim["sim_ttft_modes"] == "1,1.6/8" and parsed.sim["sim_prefill_delay_ms"] == "2.8"
    assert "sim_ttft_modes" not in parsed.fields


@settings(derandomize=True)
@given(st.integers(min_value=0, max_value=10_000), st.sampled_from([2.0, 8.0, 30.0]))
def test_levels_are_seeded_and_stay_dwell_steps_on_average(seed: int, dwell: float) -> None:
    modes = TtftModes(levels=(1.0, 1.6), dwell=dwell)
    a, b = prefill_levels(modes, seed), prefill_levels(modes, seed)
    xs = [a() for _ in range(3000)]
    assert xs == [b() for _ in range(3000)] and set(xs) <= {1.0, 1.6}
    switches = sum(x != y for x, y in zip(xs, xs[1:]))
    # a move after each step with probability 1 / dwell: the switches are binomial(2999, 1 / dwell), so the mean
    # stay is dwell steps. Within 6 sd of their mean (a seed outside it: about 2e-9; a +-25 % band was 2.7 sd at
    # dwell 30, and hypothesis found seed 199 past it)
    n, p = 2999, 1 / dwell
    assert abs(switches - n * p) < 6 * math.sqrt(n * p * (1 - p)) + 1


def test_no_modes_is_always_one() -> None:
    f = prefill_levels(None, 1)
    assert {f() for _ in range(10)} == {1.0}


def _ttft_and_decode(**kw: object) -> tuple[list[float], list[float]]:
    """Eight requests one after another on a fake clock: each one's TTFT and its decode time."""
    plan = simulate_launch(SEED_BOX, TP8, {})
    clock = _Clock()
    eng = EngineLoop(plan, lambda _: None, seed=1, clock=clock.time, sleep=clock.sleep, **kw)  # type: ignore[arg-type]
    eng.start()
    ttfts, decodes = [], []
    try:
        for i in range(8):
            r = eng.submit(SimRequest(input_ids=[5 + i, 6, 7, 8], max_new_tokens=4))
            while r.events.get(timeout=20) < 4:
                pass
            assert r.first_token_at is not None and r.finished_at is not None
            ttfts.append(r.first_token_at - r.created)
            decodes.append(r.finished_at - r.first_token_at)
    finally:
        eng.stop()
    return ttfts, decodes


def test_the_levels_and_the_delay_move_the_prefill_alone() -> None:
    base, base_dec = _ttft_and_decode()
    assert max(base) == pytest.approx(min(base), rel=1e-9)
    levels, dec = _ttft_and_decode(prefill_factor=prefill_levels(TtftModes(levels=(1.0, 3.0), dwell=2.0), 5))
    assert {round(t / base[0], 6) for t in levels} == {1.0, 3.0} and dec == pytest.approx(base_dec, rel=1e-9)
    delayed, dec = _ttft_and_decode(prefill_delay_s=0.0028, speed=2.0)
    # host-side: the delay is not divided by the machine's speed; the prefill's own time is
    assert delayed == pytest.approx([b / 2.0 + 0.0028 for b in base], rel=1e-9)
    assert dec == pytest.approx([d / 2.0 for d in base_dec], rel=1e-9)


def test_a_bad_value_is_caught_before_a_session_starts_a_server() -> None:
    from perfgate.sim.variation import env_problem

    assert env_problem({"PERFGATE_SIM_TTFT_MODES": "1.0,1.6/12", "PERFGATE_SIM_PREFILL_DELAY_MS": "2.8"}) is None
    assert "PERFGATE_SIM_TTFT_MODES='1.6'" in (env_problem({"PERFGATE_SIM_TTFT_MODES": "1.6"}) or "")
    assert "PERFGATE_SIM_PREFILL_DELAY_MS='-1'" in (env_problem({"PERFGATE_SIM_PREFILL_DELAY_MS": "-1"}) or "")


def test_host_levels_by_the_clock_are_shared_by_every_server_of_the_machine() -> None:
    """``/DWELLs``: the level is the host's at a moment, whatever the start's seed (co-resident arms share it)."""
    modes = parse_ttft_modes("1.0,1.6/20s")
    assert modes == TtftModes(levels=(1.0, 1.6), dwell=20.0, clock=True)
    clock = [1000.0]
    a = prefill_levels(modes, 1, speedup=4.0, now=lambda: clock[0])
    b = prefill_levels(modes, 2, speedup=4.0, now=lambda: clock[0])
    seen = []
    for t in range(400):  # 400 moments 1.25 s apart: 5 simulated seconds each at speed-up 4, 100 windows
        clock[0] = 1000.0 + 1.25 * t
        fa = a()
        assert fa == b() and fa == a()  # the same level for both servers, and unchanged within the moment
        seen.append(fa)
    assert set(seen) == {1.0, 1.6}
    assert all(seen[i] == seen[i - i % 4] for i in range(len(seen)))  # one level per 20 simulated seconds
    assert 0.3 < seen.count(1.6) / len(seen) < 0.7
    with pytest.raises(ValueError, match=r"PERFGATE_SIM_TTFT_MODES=.*fix: e\.g\."):
        parse_ttft_modes("1.0,1.6/0.5s")
