"""Faults and bad input lose nothing and leave nothing running (issue 6).

Real ``python -m pytest`` runs of throw-away projects against perfgate's simulated server, through
the machinery of ``tests/reliability/`` (which also prints the table in docs/reliability.md):
faults are injected with ``PERFGATE_SIM_FAULT`` in a mode's ``env``; "processes left" are found by
each server's process group (the ``# pgid:`` line perfgate writes in its log) and by an environment
token every process of a run inherits; "records lost" are tests that finished (a conftest ledger)
but have no ``<testcase>`` in the JUnit file. Unit tests below cover the GPU-memory wait (a fake
NVML), a stranger answering on the server's port, and the client's error for a hung stream.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

import perfgate.host.gpu
import perfgate.serving.server
from perfgate.client import GenRequest, stream_generate
from perfgate.errors import GpuMemoryNotReleased, PortInUse, ServerExitedError
from perfgate.host.procs import group_pids
from perfgate.profiles.config import ServerConfig
from perfgate.serving.manager import ServerManager
from perfgate.serving.server import Server
from tests import reliability as rel

HUNG_RUN_LIMIT_S = 90.0  # a run that waits out the stuck request's 600 s timeout is a hang, not slowness


def _why(run) -> str:
    return f"exit {run.returncode}; left {run.left}; lost {run.lost}\n{run.output[-4000:]}"


# ----------------------------------------------------------------------------- injected faults


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory):
    """Two sessions side by side, each: baseline, some faults of tests.reliability FAULTS, a healthy config."""
    return rel.run_faults(tmp_path_factory.mktemp("faults"))


def test_every_fault_is_injected():
    assert sorted(m for modes in rel.FAULT_SESSIONS for m in modes) == sorted(f.mode for f in rel.FAULTS)


EVIDENCE = {  # what each fault's failure message must show (from the log tail or the client)
    "crash-start": "injected by perfgate sim fault crash-at-start",
    "crash-mid": "injected by perfgate sim fault crash-mid-stream",
    "hang-ready": f"not ready after {rel.STARTUP_TIMEOUT_S} s",
    "hang-mid": f"no data from the server for {rel.REQUEST_TIMEOUT_S} s after 3 token(s)",
    "slow-start": f"not ready after {rel.STARTUP_TIMEOUT_S} s",
    "http-500": "HTTP 500",
    "malformed-sse": "malformed SSE data",
    "no-generate": f"no data from the server for {rel.REQUEST_TIMEOUT_S} s before the first token",
    "port-taken": "already answers before the server for port-taken was launched",
}


@pytest.mark.parametrize("fault", rel.FAULTS, ids=[f.mode for f in rel.FAULTS])
def test_each_fault_gives_a_classified_record_with_its_log(fault_runs, fault):
    faults_run = rel.run_of(fault_runs, fault.mode)
    r = faults_run.records[f"test_decode_floor[m:{fault.mode}]"]
    assert (r.element, r.outcome, r.category) == ("failure", "fail", fault.category), _why(faults_run)
    assert r.props["mode"] == fault.mode and r.props["config"]
    log = Path(r.props["log"])
    assert log.is_file() and log.read_text().startswith("# perfgate:")
    assert EVIDENCE[fault.mode] in r.text
    assert "last lines of the log:" in r.text and str(log) in r.text
    assert "During handling of the above exception" not in faults_run.output


@pytest.mark.parametrize("session", range(len(rel.FAULT_SESSIONS)))
def test_the_next_config_still_runs_and_nothing_is_left_or_lost(fault_runs, session):
    run = fault_runs[session]
    assert run.returncode == pytest.ExitCode.TESTS_FAILED
    for mode in ("baseline", "after"):
        assert run.records[f"test_decode_floor[m:{mode}]"].outcome == "pass", _why(run)
    faults = rel.FAULT_SESSIONS[session]
    launched = [m for m in faults if m != "port-taken"] + ["baseline", "after"]
    # every launched server wrote its process group, once a start: a start whose port another process took before
    # the server bound it (a parallel worker's server, or the port-taken fault) is started again on another port,
    # and that log says so once per retry
    logs = {k.split("#")[0] for k in run.pgids}
    assert sorted(next(mode for mode in launched if f"-{mode}-" in log) for log in logs) == sorted(launched), logs
    for log in logs:
        text = next(run.project.rglob(log)).read_text(errors="replace")
        starts = sum(k.startswith(log + "#") for k in run.pgids)
        assert starts == 1 + text.count("was taken by another process before the server bound it"), (log, starts)
    assert run.left == [] and run.lost == []
    assert len(run.finished) == len(run.records) == len(faults) + 2


# ----------------------------------------------------------------------------- interrupted sessions


@pytest.fixture(scope="module")
def signalled_runs(tmp_path_factory):
    """The stuck session once per signal (SIGINT, SIGTERM, SIGKILL), side by side."""
    return rel.run_signalled(tmp_path_factory.mktemp("signals"), timeout_s=HUNG_RUN_LIMIT_S)


def _checked(run):
    assert not run.timed_out, "pytest waited for the hung request instead of ending: " + _why(run)
    base = run.records["test_decode_floor[m:baseline]"]
    assert base.outcome == "pass" and Path(base.props["log"]).is_file(), _why(run)
    assert run.finished == ["perftests/test_baseline.py::test_decode_floor[m:baseline]"]
    assert "test_decode_floor[m:after]" not in run.records
    assert len(run.pgids) == 2 and run.left == [] and run.lost == [], _why(run)
    return run, run.records["test_decode_floor[m:stuck]"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_mid_measurement_keeps_the_records_and_leaves_nothing(signalled_runs, sig):
    run, stuck = _checked(signalled_runs[sig])
    assert run.signalled and run.returncode == pytest.ExitCode.INTERRUPTED
    assert (stuck.element, stuck.outcome) == ("error", "error")
    assert stuck.message.startswith("interrupted by ")
    assert stuck.props["mode"] == "stuck" and Path(stuck.props["log"]).is_file()  # what it had recorded
    assert "Traceback" not in run.output


def test_sigkill_the_reaper_cleans_up_and_the_junit_file_has_what_finished(signalled_runs):
    run, stuck = _checked(signalled_runs[signal.SIGKILL])
    assert run.signalled and run.returncode == -signal.SIGKILL
    assert (stuck.element, stuck.outcome) == ("error", "error") and stuck.message.startswith("did not finish")


#: the child's perftests/conftest.py for the pytest-timeout run: the budget of ``--timeout`` is the stuck test's alone
STUCK_ONLY_TIMEOUT = '''
"""pytest-timeout's budget (--timeout) for the stuck test only. The healthy baseline before it starts a server,
imports scipy (scipy.special parses docstrings at import) and measures: seconds that a loaded runner stretches past
any fixed budget, and a timeout fired there is the runner's load, not the thread method at work."""
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "[m:stuck]" not in item.name:
            item.add_marker(pytest.mark.timeout(0))  # 0: no timeout
'''


def test_pytest_timeout_thread_method_exits_and_leaves_nothing(tmp_path):
    """``--timeout-method thread`` ends the session while the stuck test waits on its hung stream (os._exit(1)
    after the stack dump), the baseline's record is kept and no process is left. The timeout applies to the stuck
    test only (:data:`STUCK_ONLY_TIMEOUT`): the baseline passes however long the runner's load makes it take."""
    pytest.importorskip("pytest_timeout")
    project = rel.stuck_project(tmp_path)
    (project / "perftests" / "conftest.py").write_text(STUCK_ONLY_TIMEOUT)
    run, stuck = _checked(rel.run_pytest(project, (*rel.STUCK_ARGS, *rel.TIMEOUT_ARGS), timeout_s=HUNG_RUN_LIMIT_S))
    assert run.returncode == 1 and "Timeout" in run.output  # os._exit(1) after the stack dump
    assert (stuck.element, stuck.outcome) == ("error", "error") and stuck.message.startswith("did not finish")


def test_a_test_raising_mid_measurement_leaves_nothing_and_the_next_config_runs(tmp_path):
    run = rel.run_pytest(rel.raising_project(tmp_path), rel.RAISING_ARGS)
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, _why(run)
    boom = run.records["test_raises_mid_measurement[m:boom]"]
    assert boom.element == "failure" and "a bug in the middle of a measurement" in boom.text
    assert Path(boom.props["log"]).is_file()  # recorded as soon as its server was up
    for mode in ("baseline", "after"):
        assert run.records[f"test_raises_mid_measurement[m:{mode}]"].outcome == "pass", _why(run)
    assert len(run.pgids) == 3 and run.left == [] and run.lost == []


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", rel.BAD_INPUTS, ids=[b.name for b in rel.BAD_INPUTS])
def test_bad_input_fails_early_naming_the_file_key_and_fix(tmp_path, bad):
    run = rel.run_pytest(rel.bad_input_project(tmp_path, bad), bad.args)
    assert run.returncode == bad.returncode, _why(run)
    for text in bad.says:
        assert text in run.output, _why(run)
    assert "Traceback" not in run.output
    assert run.left == [] and run.lost == []
    if bad.record is None:  # refused before collection: a usage error, no record
        assert "ERROR: perfgate: " in run.output and run.records == {}
        return
    name, outcome, category = bad.record
    r = run.records[name]
    assert (r.element, r.outcome, r.category) == ("failure", outcome, category), _why(run)
    log = Path(r.props["log"]).read_text()
    assert "# pgid: " in log and "Load weight begin" not in log  # refused by the launcher, before any load


# ----------------------------------------------------------------------------- units: GPU, port, client


@dataclass
class SleepEngine:
    """A server that never listens (tests only)."""

    script: str = "import time; time.sleep(60)"
    teardown_grace_s: float = 1.0
    name: str = "sleep"

    def command(self, config, *, host, port):
        return [sys.executable, "-c", self.script]

    def environment(self, config, base):
        return dict(base)


def _cfg(mode="baseline"):
    return ServerConfig.build(profile="t", mode=mode, engine="sleep", model_path="m", flags={"x": mode}, env={})


def _fake_nvml(monkeypatch, held):
    """NVML that sees a GPU and reports ``held()`` (a set of PIDs) as holding memory."""
    asked: list[set[int]] = []

    def holders(pids):
        asked.append(set(pids))
        return set(pids) & held()

    monkeypatch.setattr(perfgate.host.gpu, "available", lambda: True)
    monkeypatch.setattr(perfgate.host.gpu, "holders", holders)
    return asked


def test_teardown_waits_for_gpu_memory_and_names_the_pids_at_the_deadline(tmp_path, monkeypatch):
    s = Server(_cfg(), engine=SleepEngine(), log_dir=tmp_path, gpu_release_timeout_s=0.3)
    s.start()
    assert s.proc is not None
    leader = s.proc.pid
    asked = _fake_nvml(monkeypatch, lambda: {leader})  # the (dead) server's PID still holds GPU memory
    with pytest.raises(GpuMemoryNotReleased) as ei:
        s.stop()
    e = ei.value
    assert e.pids == [leader] and f"by PIDs [{leader}]" in str(e) and f"kill -9 {leader}" in str(e)
    assert e.log_path == str(s.log_path) and leader in asked[0]
    assert group_pids(leader) == []  # the processes themselves are gone


def test_teardown_returns_once_nvml_shows_the_memory_released(tmp_path, monkeypatch):
    s = Server(_cfg(), engine=SleepEngine(), log_dir=tmp_path, gpu_release_timeout_s=30)
    s.start()
    assert s.proc is not None
    leader = s.proc.pid
    polls = []

    def held():
        polls.append(1)
        return {leader} if len(polls) == 1 else set()  # released by the second poll

    _fake_nvml(monkeypatch, held)
    s.stop()
    assert len(polls) == 2


def test_a_failed_start_whose_gpu_memory_stays_held_blocks_the_next_launch(tmp_path, monkeypatch):
    held = {4242}

    def wait_gpu_release(self):
        raise GpuMemoryNotReleased("GPU memory still held by PIDs [4242]", pids=[4242], log_path=self.log_path)

    monkeypatch.setattr(Server, "_wait_gpu_release", wait_gpu_release)
    monkeypatch.setattr(perfgate.host.gpu, "holders", lambda pids: set(pids) & held)
    dies = SleepEngine(script="import sys; sys.exit(3)")
    mgr = ServerManager(engine_for=lambda c: dies, log_dir=tmp_path, startup_timeout_s=lambda c: 30)
    with pytest.raises(ServerExitedError):
        mgr.ensure(_cfg("a"))  # the start failure is the first record, as classified
    with pytest.raises(GpuMemoryNotReleased, match=r"PIDs \[4242\]"):
        mgr.ensure(_cfg("b"))  # not launched: it would only run out of memory
    assert mgr.starts == 1
    held.clear()  # NVML shows it free: the next config launches
    with pytest.raises(ServerExitedError):
        mgr.ensure(_cfg("b"))
    assert mgr.starts == 2


def test_a_stranger_answering_on_the_port_is_not_taken_for_the_server(tmp_path, monkeypatch):
    """The race the pre-launch check cannot close: another process takes the port after it."""
    import http.server
    import threading

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    stranger = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(perfgate.serving.server, "free_port", lambda host="127.0.0.1": stranger.server_address[1])
        monkeypatch.setattr(perfgate.serving.server, "port_answers", lambda host, port, timeout=0.5: False)
        s = Server(_cfg(), engine=SleepEngine(), log_dir=tmp_path, startup_timeout_s=30, poll_interval_s=0.1)
        with pytest.raises(PortInUse, match="not from the server perfgate started") as ei:
            with s:
                pass
        assert ei.value.category == "config-error" and s.pgid is None  # torn down
    finally:
        stranger.shutdown()
        stranger.server_close()


REQ = GenRequest(input_ids=(1, 2), max_new_tokens=4)


def _ticks():
    t = iter(range(10_000))
    return lambda: float(next(t))


def test_a_stream_that_stops_says_so_with_the_tokens_received():
    def hung():
        yield b'data: {"output_ids": [5], "meta_info": {"completion_tokens": 1}}\n\n'
        raise requests.ConnectionError("HTTPConnectionPool(host='127.0.0.1', port=1): Read timed out.")

    out = stream_generate("http://unused", REQ, chunks=hung(), clock=_ticks(), timeout_s=7)
    assert not out.success and out.completion_tokens == 1
    assert out.error == "no data from the server for 7 s after 1 token(s) (read timeout): the server stopped streaming"


@given(st.lists(st.binary(max_size=64), max_size=12))
def test_garbage_streams_are_counted_failures_never_exceptions(chunks):
    out = stream_generate("http://unused", REQ, chunks=chunks, clock=_ticks())
    assert out.success == (out.completion_tokens > 0 and out.error == "")
    if not out.success:
        assert out.error

