"""The user trial's scenarios, as a user runs them: the wheel installed into a fresh venv (tests/wheelenv.py), a
project set up by ``perfgate init myperf`` in an empty directory, then the user's own profile (two configs of the
simulated seed box, a short workload) and their own test in place of the sample. Each scenario works on a copy of
that project. Asserted: exit codes, JUnit records and their properties, files, what the terminal says; never time.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.reliability.runs import BOOT, TOKEN_ENV, leftovers, read_junit, server_pgids
from tests.wheelenv import Result, WheelEnv

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.slow

MY_PROFILE = """schema_version = 1
description = "my box: the simulated seed box, two configs, a short workload"

[hardware]
gpu = "RTX PRO 6000 Blackwell"
count = 8
sm = "12.0"
interconnect = "pcie"

[engine]
name = "sim"
sim_hardware = "fixtures/sim/rtxpro6000-x8-pcie.toml"   # not in the project: the installed copy
sim_startup_s = 0.2
startup_timeout_s = 30

[model]
path = "moonshotai/Kimi-K2.5"
layers = 61
hidden = 7168

[server]
tp-size = 8
mem-fraction-static = 0.88
cuda-graph-max-bs-decode = 128
random-seed = 1

[modes.baseline]

[modes.small-chunks]
flags = { chunked-prefill-size = 2048 }

# TTFT's ceilings on a shared CI runner (the suite's own workers are its load, with the host watch off): the
# runner's scheduling adds a few ms to a ~100 ms TTFT (3.7 % once), so 10 % as the shipped simulated profile
# gives its latency floors, rather than the 3.3 % the simulator's quiet noise would write
[floors.baseline]
ttft_ms_tolerance = 0.1

[floors.small-chunks]
ttft_ms_tolerance = 0.1

[workload]
prompts = "fixtures/prompts/random-ids-128.jsonl"
max_new_tokens = 24
warmup = 1
trials = 3
max_cv = 0.5
request_timeout_s = 30
"""

MY_TEST = '''import pytest

pytestmark = pytest.mark.perfgate(kind="decode")


@pytest.mark.parametrize("metric", ["tok_s", "ttft_ms"])
def test_decode(perf_server, measure, perf_check, metric):
    perf_check(measure(perf_server), metric)
'''

#: small SLOs of the user's own (as tests/test_load_records.py's): two levels of 10 requests a trial
MY_SLO = """
[slo]
ttft_ms_p90 = 2000
tpot_ms_p90 = 200
attainment = 0.9
requests = 10
warmup_requests = 4
max_requests = 60
rate_start = 4
rate_max = 8
max_levels = 3
"""

GOODPUT_TEST = '''import pytest

pytestmark = [pytest.mark.load, pytest.mark.perfgate(kind="goodput")]


def test_goodput_under_my_slo(perf_server, measure, perf_check):
    perf_check(measure.goodput(perf_server), "goodput_rps")
'''

MODES = ("baseline", "small-chunks")
METRICS = ("tok_s", "ttft_ms")
RECORDS = [f"test_decode[mymodel:{mode}-{metric}]" for mode in MODES for metric in METRICS]
#: the stack-pair records perfgate init scaffolds (perftests/test_stack_pair.py): without a candidate each skips
PAIRS = [f"test_stack_pair[mymodel:{mode}]" for mode in MODES]


def _why(r: Result) -> str:
    return f"exit {r.rc}\n--- stdout\n{r.stdout[-6000:]}\n--- stderr\n{r.stderr[-3000:]}"


@pytest.fixture(scope="module")
def project(wheel_env: WheelEnv) -> Path:
    """``perfgate init myperf``, then the user's profile (named in pytest.ini) and test (in place of the sample)."""
    home = wheel_env.empty_dir("trial")
    r = wheel_env.sh("perfgate init myperf", cwd=home)
    assert r.rc == 0, _why(r)
    proj = home / "myperf"
    (proj / "baselines" / "mybox").mkdir()
    (proj / "baselines" / "mybox" / "mymodel.toml").write_text(MY_PROFILE)
    (proj / "pytest.ini").write_text("[pytest]\nperfgate_profile = mybox/mymodel\n")
    (proj / "perftests" / "test_mine.py").write_text(MY_TEST)
    assert (proj / "perftests" / "test_stack_pair.py").is_file()  # scaffolded: kept, as a user keeps it
    return proj


@pytest.fixture(scope="module")
def limits(wheel_env: WheelEnv, project: Path) -> tuple[Path, Result]:
    """A copy of the project whose limits ``--perfgate-update-baselines`` wrote, and that run."""
    proj = _copy(wheel_env, project, "limits")
    return proj, wheel_env.sh("pytest perftests/ --perfgate-update-baselines --junitxml=update.xml", cwd=proj)


def _copy(env: WheelEnv, proj: Path, name: str) -> Path:
    dest = env.empty_dir(name) / "myperf"
    shutil.copytree(proj, dest, ignore=shutil.ignore_patterns("perfgate-logs", "*.xml", ".pytest_cache"))
    return dest


def _profile(proj: Path) -> dict[str, object]:
    return tomllib.loads((proj / "baselines" / "mybox" / "mymodel.toml").read_text())


def test_my_own_profile_and_limits_are_written_then_checked(wheel_env: WheelEnv,
                                                            limits: tuple[Path, Result]) -> None:
    proj, update = limits
    assert update.rc == 0, _why(update)
    assert all(r.outcome == "skip" for r in read_junit(proj / "update.xml").values())  # no limits yet: recorded
    floors = _profile(proj)["floors"]
    assert isinstance(floors, dict)
    for mode in MODES:  # each mode's limits, with what they were measured on
        assert {"tok_s", "ttft_ms", "measured"} <= set(floors[mode]), floors
        assert floors[mode]["ttft_ms_tolerance"] == 0.1  # the user's own, kept: not rewritten from the noise
    assert floors["baseline"]["measured"]["engine"] == "sim"

    check = wheel_env.sh("pytest perftests/ --junitxml=check.xml", cwd=proj)
    assert check.rc == 0 and "4 passed" in check.stdout, _why(check)
    recs = read_junit(proj / "check.xml")
    assert sorted(recs) == sorted(RECORDS + PAIRS)
    assert all(recs.pop(p).outcome == "skip" for p in PAIRS)  # no --perfgate-candidate: nothing to pair
    for name, rec in recs.items():
        assert rec.outcome == "pass" and rec.props["kind"] == "decode", (name, rec.props)
        assert float(rec.props["limit"]) == floors[rec.props["mode"]][rec.props["metric"]]
        if rec.props["metric"] == "ttft_ms":
            assert float(rec.props["tolerance"]) == 0.1, rec.props


def test_an_injected_slowdown_fails_and_perfgate_gate_blocks_it(wheel_env: WheelEnv,
                                                                limits: tuple[Path, Result]) -> None:
    proj = _copy(wheel_env, limits[0], "slowdown")
    current = wheel_env.sh("pytest perftests/ --junitxml=current.xml", cwd=proj)
    assert current.rc == 0, _why(current)
    slow = wheel_env.sh("pytest perftests/ --junitxml=slow.xml", cwd=proj, env={"PERFGATE_SIM_SCALE": "0.9"})
    assert slow.rc == 1, _why(slow)
    recs = read_junit(proj / "slow.xml")
    for mode in MODES:  # 10 % slower decode: below its floor (3 % tolerance) in both configs
        rec = recs[f"test_decode[mymodel:{mode}-tok_s]"]
        assert (rec.outcome, rec.category) == ("fail", "slower-than-baseline"), rec.props
    gate = wheel_env.sh("perfgate gate current.xml slow.xml", cwd=proj)
    assert gate.rc == 1, _why(gate)
    assert "BLOCKED" in gate.out
    # the gate judges the records of the user's own kind, each in its metric's direction
    blocking = gate.stdout.split("Blocking:", 1)[1]
    for mode in MODES:
        assert re.search(rf"\[(newly-broken, )?regressed\] perftests\.test_mine::test_decode\[mymodel:{mode}-tok_s\]",
                         blocking), blocking


def test_a_paired_run_judges_the_candidate_on_start_pairs(wheel_env: WheelEnv, project: Path) -> None:
    proj = _copy(wheel_env, project, "paired")
    r = wheel_env.sh("pytest perftests/ -m stack_pair --perfgate-candidate env.PERFGATE_AA=1 "
                     "--perfgate-starts 1 --junitxml=pair.xml", cwd=proj)
    assert r.rc == 0, _why(r)
    for mode in MODES:  # the terminal's line: the ratio with its interval, and the decision
        assert re.search(rf"^  {mode} stack-pair +(pass|inconclusive) +tok_s [\d.]+ tok/s .*; "
                         rf"candidate/current x\d\.\d+ \[\d\.\d+, \d\.\d+\]", r.stdout, flags=re.M), _why(r)
    recs = read_junit(proj / "pair.xml")
    assert sorted(recs) == PAIRS
    for rec in recs.values():
        assert rec.props["candidate"] == "env.PERFGATE_AA=1" and float(rec.props["pair_ratio"]) > 0
        assert int(rec.props["pair_n"]) >= 1 and rec.outcome in ("pass", "inconclusive"), rec.props


def test_goodput_under_my_own_slos(wheel_env: WheelEnv, project: Path) -> None:
    proj = _copy(wheel_env, project, "goodput")
    with open(proj / "baselines" / "mybox" / "mymodel.toml", "a") as f:
        f.write(MY_SLO)
    (proj / "perftests" / "test_goodput_mine.py").write_text(GOODPUT_TEST)
    r = wheel_env.sh("pytest perftests/ -m load -k baseline --junitxml=load.xml -rs", cwd=proj)
    assert r.rc == 0, _why(r)
    (rec,) = read_junit(proj / "load.xml").values()
    p = rec.props
    assert p["kind"] == "goodput" and p["metric"] == "goodput_rps" and p["mode"] == "baseline"
    assert p["slo"] == "ttft_ms_p90 <= 2000, tpot_ms_p90 <= 200, attainment >= 0.9"  # the user's, not the seed's
    if rec.outcome == "skip":  # no floor yet: the interval recorded, and where to write one
        assert float(p["goodput_rps"]) > 0 and "[floors.baseline] goodput_rps" in r.stdout
    else:  # a busy machine: the sender fell behind, said so, never a number judged
        assert (rec.outcome, rec.category) == ("inconclusive", "client-behind"), p


def test_two_workers_start_each_config_once(wheel_env: WheelEnv, limits: tuple[Path, Result]) -> None:
    proj = _copy(wheel_env, limits[0], "xdist")
    r = wheel_env.sh("pytest perftests/ -n 2 --perfgate-starts 1 --junitxml=x.xml", cwd=proj)
    assert r.rc == 0 and "4 passed" in r.stdout, _why(r)
    recs = {k: v for k, v in read_junit(proj / "x.xml").items() if k not in PAIRS}
    assert sorted(recs) == sorted(RECORDS) and all(rec.outcome == "pass" for rec in recs.values())
    logs: dict[str, set[str]] = {}
    for rec in recs.values():
        logs.setdefault(rec.props["mode"], set()).add(rec.props["log"])
    assert {m: len(ls) for m, ls in logs.items()} == {m: 1 for m in MODES}, logs  # one server per config
    assert len(list((proj / "perfgate-logs").glob("run-*/gw*/*.log"))) == len(MODES)


def test_a_typo_in_my_profile_is_a_usage_error_that_names_the_fix(wheel_env: WheelEnv, project: Path) -> None:
    proj = _copy(wheel_env, project, "typo")
    prof = proj / "baselines" / "mybox" / "mymodel.toml"
    prof.write_text(prof.read_text().replace("max_new_tokens = 24", "max_new_token = 24"))
    r = wheel_env.sh("pytest perftests/", cwd=proj)
    assert r.rc == 4, _why(r)
    assert (f"{prof}: key 'workload.max_new_token': expected a known key" in r.out
            and "found 'max_new_token'; fix: did you mean 'max_new_tokens'?" in r.out), _why(r)
    assert "launching" not in r.out and not list(proj.glob("perfgate-logs/**/*.log"))  # refused before any start
    gate = wheel_env.sh("perfgate gate nope.xml other.xml", cwd=proj)  # a report that is not there
    assert gate.rc == 2 and "nope.xml: no such report file" in gate.stderr, _why(gate)


def test_an_interrupt_while_a_server_is_up_writes_the_junit_and_leaves_no_server(
        wheel_env: WheelEnv, limits: tuple[Path, Result]) -> None:
    proj = _copy(wheel_env, limits[0], "interrupt")
    token = uuid.uuid4().hex
    # real time on the simulated clock, so the session is still measuring when the signal comes; BOOT makes SIGINT
    # a KeyboardInterrupt even where this process was started with SIGINT ignored (a background job)
    env = wheel_env.env({TOKEN_ENV: token, "PERFGATE_SIM_SPEEDUP": "1", "PYTHONUNBUFFERED": "1"})
    out = proj / "output.txt"
    with open(out, "wb") as f:
        proc = subprocess.Popen([str(wheel_env.py), "-c", BOOT, "perftests/", "--junitxml=int.xml", "-rA"], cwd=proj,
                                env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        sent = False
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if not sent and any("The server is fired up" in p.read_text(errors="replace")
                                for p in (proj / "perfgate-logs").glob("run-*/*.log")):
                time.sleep(0.3)  # mid-measurement
                proc.send_signal(signal.SIGINT)
                sent = True
            time.sleep(0.05)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = out.read_text(errors="replace")
    assert sent, "the session ended before a server was up: " + said[-4000:]
    assert rc == pytest.ExitCode.INTERRUPTED, said[-4000:]
    recs = read_junit(proj / "int.xml")  # written, with the records of the session up to the interrupt
    assert recs and any(r.message.startswith("interrupted by ") for r in recs.values()), said[-4000:]
    pgids = [pg for d in (proj / "perfgate-logs").glob("run-*") for pg in server_pgids(d).values()]
    assert pgids, said[-4000:]
    deadline = time.monotonic() + 15
    while (left := leftovers(token, pgids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], left
