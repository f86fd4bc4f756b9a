"""--perfgate-server-cpus: every launched server pinned to a CPU list, with the processes it starts (process tier:
a real simulated server, its process group's affinity read with psutil), the record says so (``host.server_cpus``), and a bad list
is a usage error naming the format or the CPUs that are not there. perfgate.host.affinity's parser and printer are
checked with hypothesis."""

from __future__ import annotations

import os

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.host.affinity import cpus_text, launched_on, parse_cpus
from tests.test_measurement import make_project, records, run


@given(st.sets(st.integers(min_value=0, max_value=255), min_size=1, max_size=40))
def test_a_cpu_list_prints_and_parses_back(cpus):
    text = cpus_text(cpus)
    assert parse_cpus(text, available=range(256)) == frozenset(cpus)
    assert " " not in text and text.count(",") <= len(cpus) - 1


@pytest.mark.parametrize("bad", ["", "a", "3-1", "-2", "1,,2", "2-x"])
def test_a_bad_cpu_list_names_the_format(bad):
    with pytest.raises(ValueError, match=r"e\.g\. 2-5 or 0,2,4-6"):
        parse_cpus(bad, available=range(8))


def test_cpus_that_are_not_there_are_named():
    with pytest.raises(ValueError, match=r"CPUs 8-10 are not available here .*0-7"):
        parse_cpus("6-10", available=range(8))


def test_a_launch_inherits_the_cpus_and_the_launcher_keeps_its_own():
    import subprocess
    import sys

    before = os.sched_getaffinity(0)
    one = frozenset({min(before)})
    with launched_on(one):
        p = subprocess.Popen([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                             stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=30)
    assert out.strip() == str(sorted(one))
    assert os.sched_getaffinity(0) == before


def test_a_server_and_every_process_it_starts_run_on_its_cpus(tmp_path):
    """A real (simulated) server launched with ``cpus``: every process of its group is pinned there, the launcher
    keeps its own CPUs, and the server's log says so."""
    from pathlib import Path

    from perfgate import load_profile
    from perfgate.engines import get_engine
    from perfgate.host.procs import group_pids
    from perfgate.serving.server import Server

    before = os.sched_getaffinity(0)
    cpu = min(before)
    root = Path(__file__).resolve().parents[1]
    cfg = load_profile(root / "baselines/sim-rtxpro6000-x8/kimi-k2.5.toml").config("baseline")
    with Server(cfg, engine=get_engine("sim"), log_dir=tmp_path, startup_timeout_s=60, cpus=frozenset({cpu})) as s:
        assert s.pgid is not None
        seen = [psutil.Process(pid).cpu_affinity() for pid in group_pids(s.pgid)]
        assert os.sched_getaffinity(0) == before
        assert s.log_path is not None and f"# cpus: {cpu}\n" in s.log_path.read_text()
    assert seen and all(a == [cpu] for a in seen), seen


def test_a_session_with_pinned_servers_says_so_in_its_records(pytester, monkeypatch):
    monkeypatch.setenv("PERFGATE_HOST_WATCH", "on")  # the suite turns the watch off; the record's host.* needs it
    cpu = min(os.sched_getaffinity(0))
    prof = make_project(pytester)
    r = run(pytester, prof, "-m", "baseline", "-k", "decode_floor", f"--perfgate-server-cpus={cpu}")
    r.assert_outcomes(passed=1)
    rec = records(pytester)["test_decode_floor[m:baseline]"]
    assert rec.get("host.server_cpus") == str(cpu), {k: v for k, v in rec.items() if k.startswith("host.")}
    logs = list(pytester.path.rglob("*baseline*.log"))
    assert logs and any(f"# cpus: {cpu}" in p.read_text() for p in logs)


def test_a_bad_cpu_list_is_a_usage_error(pytester):
    prof = make_project(pytester)
    r = run(pytester, prof, "-m", "baseline", "--perfgate-server-cpus=2-x")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--perfgate-server-cpus: '2-x' is no CPU list*e.g. 2-5 or 0,2,4-6*"])
