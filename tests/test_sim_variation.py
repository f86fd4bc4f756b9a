"""perfgate.sim.variation: a speed per simulated machine, a jitter per start, PERFGATE_SIM_SCALE, end to end."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.engines.sim import SimEngine, seed_key
from perfgate.profiles.config import ServerConfig
from perfgate.serving.simprocess import SEED_BOX, SimProcess
from perfgate.sim import simulate_launch
from perfgate.sim.engine_loop import EngineLoop, SimRequest
from perfgate.sim.trace import TraceRecorder
from perfgate.sim.variation import (
    MACHINE_SD,
    REFERENCE,
    START_SD,
    SimSpeed,
    check_machine_name,
    env_problem,
    machine_factor,
    modelled_calibration,
    parse_scale,
    parse_step_sd,
    start_jitter,
    step_noise,
)

TP8 = {"tp-size": 8, "mem-fraction-static": 0.88, "cuda-graph-max-bs-decode": 128}


def test_the_reference_machine_is_exactly_the_cost_model() -> None:
    assert machine_factor(REFERENCE) == 1.0
    assert SimSpeed.for_start(REFERENCE, seed=1).factor == 1.0
    assert modelled_calibration(REFERENCE, "NVIDIA H200") == (4130.0, 760.0)


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True))
def test_a_machine_factor_is_a_function_of_the_name(name: str) -> None:
    f = machine_factor(name)
    assert f == machine_factor(name) and 0.85 < f < 1.15
    assert check_machine_name(name) is None
    hbm, gemm = modelled_calibration(name, "NVIDIA H200")
    assert hbm == pytest.approx(4130.0 * f) and gemm == pytest.approx(760.0 * f)


def test_the_factor_is_the_same_in_another_process() -> None:
    code = "from perfgate.sim.variation import machine_factor; print(repr(machine_factor('h200-b')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout
    assert float(out) == machine_factor("h200-b") != 1.0


def test_machine_factors_are_lognormal_with_sd_1_6_percent() -> None:
    logs = [math.log(machine_factor(f"box-{i}")) for i in range(4000)]
    sd = statistics.stdev(logs)
    assert abs(statistics.fmean(logs)) < 4 * MACHINE_SD / math.sqrt(len(logs))
    assert sd == pytest.approx(MACHINE_SD, rel=0.06)
    assert statistics.fmean(math.exp(x) for x in logs) == pytest.approx(1.0, abs=0.002)


def test_start_jitter_is_seeded_and_has_sd_0_05_percent() -> None:
    assert start_jitter(42, "a") == start_jitter(42, "a")
    assert start_jitter(42, "a") != start_jitter(43, "a") and start_jitter(42, "a") != start_jitter(42, "b")
    assert start_jitter(None) != start_jitter(None)  # unseeded: each start its own
    logs = [math.log(start_jitter(i, REFERENCE)) for i in range(4000)]
    assert statistics.stdev(logs) == pytest.approx(START_SD, rel=0.06)
    assert abs(statistics.fmean(logs)) < 4 * START_SD / math.sqrt(len(logs))


@pytest.mark.parametrize("text", ["0", "-1", "abc", "inf", "nan"])
def test_a_bad_scale_names_the_variable_and_the_fix(text: str) -> None:
    with pytest.raises(ValueError, match=r"PERFGATE_SIM_SCALE=.*expected a speed multiplier > 0; fix: e\.g\."):
        parse_scale(text)


def test_scale_and_machine_names() -> None:
    assert parse_scale(None) == parse_scale("") == 1.0 and parse_scale("0.99") == 0.99
    assert check_machine_name("bad name") is not None and "PERFGATE_SIM_MACHINE" in str(check_machine_name("x/y"))
    s = SimSpeed(machine="m", factor=1.02, jitter=0.999, scale=0.99)
    assert s.speed == pytest.approx(1.02 * 0.999 * 0.99)


@pytest.mark.parametrize("text", ["-0.1", "1", "abc", "nan"])
def test_a_bad_step_sd_names_the_variable_and_the_fix(text: str) -> None:
    with pytest.raises(ValueError, match=r"PERFGATE_SIM_STEP_SD=.*in \[0, 1\); fix: e\.g\."):
        parse_step_sd(text)


def test_step_noise_is_seeded_lognormal_and_off_by_default() -> None:
    assert parse_step_sd(None) == parse_step_sd("") == 0.0 and parse_step_sd("0.05") == 0.05
    off = step_noise(0.0, 1)
    assert {off() for _ in range(10)} == {1.0}
    a, b, c = step_noise(0.05, "k:0"), step_noise(0.05, "k:0"), step_noise(0.05, "k:1")
    xs = [a() for _ in range(4000)]
    assert xs[:5] == [b() for _ in range(5)] and xs[:5] != [c() for _ in range(5)]
    assert statistics.stdev(math.log(x) for x in xs) == pytest.approx(0.05, rel=0.06)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        self.now += max(0.0, dt)


@pytest.mark.parametrize("speed", [1.0, 0.99, 1.03])
def test_every_step_takes_one_over_the_speed(speed: float) -> None:
    plan = simulate_launch(SEED_BOX, TP8, {})
    clock = _Clock()
    eng = EngineLoop(plan, lambda _: None, seed=1, speed=speed, clock=clock.time, sleep=clock.sleep)
    r = eng.submit(SimRequest(input_ids=[5, 6, 7], max_new_tokens=10))
    eng.start()
    try:
        while r.events.get(timeout=20) < 10:
            pass
    finally:
        eng.stop()
    assert r.first_token_at is not None and r.finished_at is not None
    assert r.finished_at - r.first_token_at == pytest.approx(9 * plan.step_s(1) / speed, rel=1e-9)
    tracer = TraceRecorder(plan, lambda _: None, lambda: 0.0, speed=speed)
    tracer.start({"num_steps": 1, "output_dir": "/nonexistent-not-written"})
    tracer._record("decode", 1, 0)
    kernels = [e["dur"] for e in tracer._events[0] if e.get("cat") == "kernel"]
    assert sum(kernels) == pytest.approx(plan.step_s(1) * 1e6 / speed, rel=1e-6)


def test_the_engine_passes_the_machine_seed_and_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = ServerConfig(profile="t/m", engine="sim", model_path="/m", mode="baseline")
    for k in ("PERFGATE_SIM_MACHINE", "PERFGATE_SIM_SCALE", "PERFGATE_SIM_START_SEED"):
        monkeypatch.delenv(k, raising=False)
    plain = SimEngine().command(cfg, host="127.0.0.1", port=1)
    again = SimEngine().command(cfg, host="127.0.0.1", port=1)
    assert not {"--sim-machine", "--sim-scale"} & set(plain)
    # without PERFGATE_SIM_START_SEED each start of a config gets its own seed "<seed key>:<n>", n counting up
    first, second = (a[a.index("--sim-start-seed") + 1] for a in (plain, again))
    key = seed_key(cfg)
    assert first.startswith(key + ":") and second == f"{key}:{int(first.split(':')[1]) + 1}"
    # the seed key is the config's without its absolute paths: the same start jitter in every checkout
    moved = replace(cfg, model_path="/elsewhere/m", flags=(("sim-hardware", "/clone/fixtures/sim/box.toml"),))
    here = replace(cfg, flags=(("sim-hardware", "/work/fixtures/sim/box.toml"),))
    assert seed_key(moved) == seed_key(here) and moved.key != here.key
    assert seed_key(replace(here, flags=(("sim-hardware", "/work/fixtures/sim/other.toml"),))) != seed_key(here)
    monkeypatch.setenv("PERFGATE_SIM_MACHINE", "h200-b")
    monkeypatch.setenv("PERFGATE_SIM_SCALE", "0.99")
    monkeypatch.setenv("PERFGATE_SIM_START_SEED", "3")
    argv = SimEngine().command(cfg, host="127.0.0.1", port=1)
    assert argv[argv.index("--sim-machine") + 1] == "h200-b" and argv[argv.index("--sim-scale") + 1] == "0.99"
    assert argv[argv.index("--sim-start-seed") + 1] == "3"


def _decode_tok_s(sim: SimProcess, n: int = 4, tokens: int = 96) -> float:
    from perfgate.client import run_batch
    from perfgate.client.stream import GenRequest
    from perfgate.measuring.metrics import compute_trial

    url = f"http://127.0.0.1:{sim.port}"
    rates = []
    for i in range(n):
        outs, wall = run_batch(url, [GenRequest(input_ids=(100 + i, 7, 8, 9), max_new_tokens=tokens)], timeout_s=60)
        t = compute_trial(outs, wall)
        assert t.failures == 0 and t.tok_s is not None
        rates.append(t.tok_s)
    return statistics.median(rates)


@pytest.mark.timing
def test_scale_0_99_measures_1_percent_slower_through_a_real_server(tmp_path) -> None:
    args = ["--tp-size", "8", "--mem-fraction-static", "0.88", "--cuda-graph-max-bs-decode", "128",
            "--random-seed", "7"]
    rates = {}
    for scale in ("1.0", "0.99"):
        env = {"PERFGATE_SIM_MACHINE": "h200-b", "PERFGATE_SIM_SCALE": scale, "PERFGATE_SIM_START_SEED": "7"}
        with SimProcess.start(args, log_path=tmp_path / f"sim-{scale}.log", env=env) as sim:
            sim.wait_ready()
            info = sim.get("/server_info")
            assert info["perfgate_sim_machine"] == "h200-b"
            assert info["perfgate_sim_machine_factor"] == machine_factor("h200-b")
            assert info["perfgate_sim_start_jitter"] == start_jitter(7, "h200-b")  # seeded by PERFGATE_SIM_START_SEED
            assert info["perfgate_sim_scale"] == float(scale)
            rates[scale] = _decode_tok_s(sim)
    # a loaded machine's stalls move one reading by ~0.2 %: the ratio is 0.99 to within 0.5 %, far from 1.0
    assert rates["0.99"] / rates["1.0"] == pytest.approx(0.99, abs=0.005)


def test_a_bad_machine_name_is_a_usage_error_of_the_simulator(tmp_path) -> None:
    env = {"PERFGATE_SIM_MACHINE": "no spaces please"}
    with SimProcess.start(["--tp-size", "8"], log_path=tmp_path / "sim.log", env=env) as sim:
        assert sim.wait_exit() == 2
    assert "PERFGATE_SIM_MACHINE='no spaces please'" in sim.log()


def test_the_simulators_variable_list_holds_every_name_its_sources_read() -> None:
    """perfgate.envnames.SIM_NAMES is the list a typo is judged against: every PERFGATE_SIM_* name in perfgate's sources is on it,
    and every name on it is in the sources beside its definition."""
    import re
    from pathlib import Path

    root = Path(__file__).parents[1] / "perfgate"
    text = "\n".join(p.read_text() for p in root.rglob("*.py"))
    named = set(re.findall(r"PERFGATE_SIM_[A-Z_]*[A-Z]", text))
    from perfgate.envnames import SIM_NAMES

    assert named == set(SIM_NAMES)


@pytest.mark.parametrize("env, words", [
    ({"PERFGATE_SIM_SCALLE": "0.97"}, "PERFGATE_SIM_SCALLE is not a variable the simulated server reads: did you mean "
                                      "PERFGATE_SIM_SCALE?"),
    ({"PERFGATE_SIM_SLOWDOWN": "1.03"}, "PERFGATE_SIM_SLOWDOWN is not a variable the simulated server reads: it "
                                        "would measure the same server. fix: one of PERFGATE_SIM_FAULT"),
    ({"PERFGATE_SIM_SCALE": "fast"}, "PERFGATE_SIM_SCALE"),
])
def test_a_variable_the_simulator_does_not_read_or_cannot_parse_is_named_with_the_fix(env, words) -> None:
    bad = env_problem(env)
    assert bad is not None and words in bad


def test_the_simulators_own_variables_and_others_pass() -> None:
    assert env_problem({"PERFGATE_SIM_SCALE": "0.97", "PERFGATE_AA": "1", "NCCL_ALGO": "Ring", "PATH": "/bin"}) is None
