"""The host's state on a real record (process tier: a pytester session against the simulated server): every
measured record carries host.state and the host's figures; GPU figures only where NVML sees a GPU."""

from __future__ import annotations

from tests.test_plugin import cases, make_project, props


def test_a_measured_record_carries_the_hosts_state(pytester, monkeypatch) -> None:
    monkeypatch.setenv("PERFGATE_HOST_WATCH", "on")  # the suite turns it off (tests/conftest.py)
    prof = make_project(pytester)
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline", f"--perfgate-profile={prof}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    p = props(cases(pytester.path / "r.xml")["test_decode_floor[m:baseline]"])
    state = p["host.state"]
    assert state == "quiet" or state.startswith("disturbed: ")
    assert int(p["host.starts"]) == 1 and int(p["host.cpus"]) >= 1
    assert float(p["host.others_cpu"]) >= 0 and 0 <= float(p["host.steal_pct"]) <= 100
    if state != "quiet":  # a busy runner: the terminal's record line says so too
        r.stdout.fnmatch_lines(["*disturbed: *(re-run quiet)*"])
    gpu = {k for k in p if k.startswith("host.gpu_")}
    assert not gpu or {"host.gpu_sm_clock_mhz", "host.gpu_throttle"} <= gpu


def test_a_child_process_is_ours_not_others() -> None:
    """perfgate's servers are its children: their CPU time is counted as ours, never as another process's."""
    import subprocess
    import sys
    import time

    from perfgate.host.watch import cpu_sample

    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        a = cpu_sample()
        time.sleep(1.0)
        b = cpu_sample()
    finally:
        child.kill()
        child.wait()
    assert a is not None and b is not None
    assert child.pid in b.ours and b.ours[child.pid] - a.ours.get(child.pid, 0.0) > 0.2


def test_each_start_carries_the_load_it_was_measured_under(pytester, monkeypatch) -> None:
    """Issue 52: with two starts, the record carries each start's others' CPU beside each start's metrics
    (``start_values.host.others_cpu``), so how far a metric moved can be read against the load."""
    monkeypatch.setenv("PERFGATE_HOST_WATCH", "on")
    prof = make_project(pytester)
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline", "-k", "decode_floor", f"--perfgate-profile={prof}",
                                      "--perfgate-starts", "2", "--junitxml=r.xml", "-p", "no:cacheprovider")
    assert r.ret in (0, 1), r.stdout.str()
    p = props(cases(pytester.path / "r.xml")["test_decode_floor[m:baseline]"])
    loads = [float(x) for x in p["start_values.host.others_cpu"].split(",")]
    assert len(loads) == len(p["start_values.tok_s"].split(",")) == 2 and min(loads) >= 0
    assert float(p["host.ours_cpu"]) > 0  # the servers and the client: counted as ours
