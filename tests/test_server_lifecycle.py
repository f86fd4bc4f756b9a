"""Server lifecycle with real subprocesses and sockets: start, readiness, death, timeout, teardown."""

import os
import socket
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfgate.errors import PortInUse, ServerExitedError, ServerStartTimeout
from perfgate.host.procs import free_port, group_pids, port_answers
from perfgate.profiles.config import ServerConfig
from perfgate.serving.manager import ServerManager
from perfgate.serving.server import Progress, Server

# A tiny HTTP server that forks a child (like SGLang's schedulers) and answers /health_generate.
HEALTHY = textwrap.dedent("""
    import os, sys, time, http.server
    port = int(sys.argv[sys.argv.index('--port') + 1])
    if os.fork() == 0:          # a grandchild in the same process group, as SGLang's scheduler is
        time.sleep(3600)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b'ok')
        def log_message(self, *a): pass
    print('Load weight begin. avail mem=10 GB', flush=True)
    print('The server is fired up and ready to roll!', flush=True)
    http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
""")
DIES = "import sys; print('Traceback (most recent call last):'); print('AssertionError: deep_ep buffer'); sys.exit(3)"
HANGS = "import time; print('Load weight begin.', flush=True); time.sleep(3600)"
IGNORES_TERM = textwrap.dedent("""
    import signal, sys, time, http.server
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    port = int(sys.argv[sys.argv.index('--port') + 1])
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
        def log_message(self, *a): pass
    http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
""")


@dataclass
class ScriptEngine:
    """An engine whose server is a Python snippet (tests only)."""

    script: str
    teardown_grace_s: float = 1.0
    name: str = "script"

    def command(self, config, *, host, port):
        return [sys.executable, "-c", self.script, "--port", str(port)]

    def environment(self, config, base):
        return {**base, **config.env_dict}


def cfg(name="baseline"):
    return ServerConfig.build(profile="t", mode=name, engine="script", model_path="m", flags={"x": name}, env={})


def assert_gone(pgid):
    deadline = time.monotonic() + 5
    while group_pids(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_pids(pgid) == []


def test_healthy_server_starts_and_teardown_kills_the_whole_group(tmp_path):
    progress: list[Progress] = []
    s = Server(cfg(), engine=ScriptEngine(HEALTHY), log_dir=tmp_path, startup_timeout_s=30, on_progress=progress.append)
    with s:
        assert s.port is not None and s.pgid is not None
        assert port_answers("127.0.0.1", s.port)
        pgid = s.pgid
        assert len(group_pids(pgid)) == 2  # the server and its forked child
        assert s.startup_s is not None
    assert_gone(pgid)
    assert not port_answers("127.0.0.1", s.port)
    assert s.log_path is not None
    assert s.log_path.read_text().startswith("# perfgate:")
    assert progress[-1].phase == "ready"


def test_dead_process_fails_at_once_with_the_log_tail_and_category(tmp_path):
    """A server that dies fails as exited (its code, its category, its log), not at the start-up deadline: waiting
    for the deadline would raise ServerStartTimeout, no ServerExitedError (the error's type is the check, not a
    stopwatch)."""
    s = Server(cfg(), engine=ScriptEngine(DIES), log_dir=tmp_path, startup_timeout_s=60)
    with pytest.raises(ServerExitedError) as ei:
        with s:
            pass
    e = ei.value
    assert e.returncode == 3 and e.category == "assertion"
    assert "AssertionError: deep_ep buffer" in e.log_tail and e.log_path == str(s.log_path)
    assert "last lines of the log" in str(e)


def test_never_ready_times_out_and_leaves_nothing(tmp_path):
    s = Server(cfg(), engine=ScriptEngine(HANGS), log_dir=tmp_path, startup_timeout_s=1.5)
    with pytest.raises(ServerStartTimeout) as ei:
        with s:
            pass
    assert ei.value.category == "startup-timeout"
    assert "Load weight begin" in ei.value.log_tail
    assert s.pgid is None  # torn down


def test_sigterm_ignored_is_killed_after_grace(tmp_path):
    s = Server(cfg(), engine=ScriptEngine(IGNORES_TERM, teardown_grace_s=0.5), log_dir=tmp_path, startup_timeout_s=30)
    with s:
        pgid = s.pgid
    assert_gone(pgid)


def test_port_that_already_answers_is_refused(tmp_path):
    s1 = Server(cfg(), engine=ScriptEngine(HEALTHY), log_dir=tmp_path, startup_timeout_s=30)
    with s1:
        s2 = Server(cfg("other"), engine=ScriptEngine(HEALTHY), log_dir=tmp_path, port=s1.port)
        with pytest.raises(PortInUse):
            s2.start()


def _taken_port():
    """A socket bound to a port and not listening: nothing answers there, and a server's bind fails."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock, sock.getsockname()[1]


def test_a_port_taken_between_choice_and_bind_is_chosen_again(tmp_path, monkeypatch):
    """The race CI met: another process binds the port perfgate chose before the server does; the server exits
    with 'Address already in use', and the start is made again on another port (the manager's too), said in the
    log; the first attempt's processes are gone."""
    import perfgate.serving.server as server_mod

    sock, taken = _taken_port()
    ports = iter([taken])
    monkeypatch.setattr(server_mod, "free_port", lambda host="127.0.0.1": next(ports, None) or free_port(host))
    mgr = ServerManager(engine_for=lambda c: ScriptEngine(HEALTHY), log_dir=tmp_path, startup_timeout_s=lambda c: 30)
    try:
        s = mgr.ensure(cfg())
        assert s.port is not None and s.port != taken and port_answers("127.0.0.1", s.port) and mgr.starts == 1
        log = Path(mgr.logs[cfg().key]).read_text()
        assert "Address already in use" in log
        assert f"port {taken} was taken by another process before the server bound it" in log
        assert log.count("starting script server") == 2
        first_pgid = int(log.split("# pgid: ")[1].split()[0])
        assert first_pgid != s.pgid
        assert_gone(first_pgid)
    finally:
        mgr.stop()
        sock.close()


def test_a_taken_port_the_user_gave_is_not_swapped(tmp_path):
    sock, taken = _taken_port()
    try:
        s = Server(cfg(), engine=ScriptEngine(HEALTHY), log_dir=tmp_path, port=taken, startup_timeout_s=30)
        with pytest.raises(ServerExitedError, match="exited with code 1 during start-up"):
            with s:
                pass
        assert s.port == taken and s.log_path is not None
        assert "was taken by another process" not in s.log_path.read_text()
    finally:
        sock.close()


def test_manager_keeps_one_server_and_starts_each_config_once(tmp_path):
    mgr = ServerManager(engine_for=lambda c: ScriptEngine(HEALTHY), log_dir=tmp_path, startup_timeout_s=lambda c: 30)
    try:
        a = mgr.ensure(cfg("a"))
        assert mgr.ensure(cfg("a")) is a
        pg_a = a.pgid
        b = mgr.ensure(cfg("b"))
        assert_gone(pg_a)  # a was stopped before b started
        assert b is mgr.current and mgr.starts == 2
    finally:
        mgr.stop()


def test_co_resident_manager_keeps_two_servers_up_and_stops_the_oldest(tmp_path):
    """``resident=2`` (co-resident arms): a second config starts beside the first, both answer, asking for the
    first again starts nothing; a third stops the oldest; stop() takes every one down (no process left)."""
    mgr = ServerManager(engine_for=lambda c: ScriptEngine(HEALTHY), log_dir=tmp_path, startup_timeout_s=lambda c: 30,
                        resident=2)
    try:
        a = mgr.ensure(cfg("a"))
        b = mgr.ensure(cfg("b"))
        assert a.port is not None and b.port is not None and a.port != b.port
        assert port_answers("127.0.0.1", a.port) and port_answers("127.0.0.1", b.port)
        assert mgr.running() == [a, b] and mgr.current is b
        assert mgr.ensure(cfg("a")) is a and mgr.current is a and mgr.running() == [b, a] and mgr.starts == 2
        c = mgr.ensure(cfg("c"))  # a third: the oldest kept (b) stops
        assert_gone(b.pgid)
        assert mgr.running() == [a, c] and mgr.starts == 3
        groups = [s.pgid for s in mgr.running()]
    finally:
        mgr.stop()
    assert mgr.running() == []
    for g in groups:
        assert_gone(g)


def test_the_pool_remembers_a_failed_start_and_never_launches_it_again(tmp_path):
    """The manager raises a failed start's error; the session's pool (perfgate.plugin.pool) is what remembers
    the config failed: asked again, it answers the same verdict without a second launch."""
    from types import SimpleNamespace

    from perfgate.plugin.pool import Launcher, ServerFailed

    mgr = ServerManager(engine_for=lambda c: ScriptEngine(DIES), log_dir=tmp_path, startup_timeout_s=lambda c: 30)
    pool = Launcher(SimpleNamespace(fingerprint=None))
    pool._manager = mgr
    pool.launch_problem = lambda config: None  # type: ignore[method-assign]
    with pytest.raises(ServerFailed) as first:
        pool.endpoint(cfg())
    assert first.value.verdict.outcome == "fail" and "deep_ep buffer" in first.value.verdict.message
    with pytest.raises(ServerFailed) as again:
        pool.endpoint(cfg())
    assert again.value is first.value and pool.failure(cfg()) is first.value
    assert mgr.starts == 1 and pool.failure(cfg("other")) is None


def test_reaper_kills_the_group_when_the_owner_dies(tmp_path):
    """pytest killed with SIGKILL (or pytest-timeout's os._exit) must not leave the server behind."""
    import subprocess

    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from pathlib import Path
        from tests.test_server_lifecycle import Server, ScriptEngine, HEALTHY, cfg
        s = Server(cfg(), engine=ScriptEngine(HEALTHY), log_dir=Path({str(tmp_path)!r}), startup_timeout_s=30)
        s.launch()
        print(s.pgid, s.port, flush=True)
        time.sleep(3600)
    """)], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    assert owner.stdout is not None
    pgid, port = map(int, owner.stdout.readline().split())
    owner.stdout.close()
    assert group_pids(pgid)
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 15
    while group_pids(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_pids(pgid) == []
    assert not port_answers("127.0.0.1", port)


def _sim_config():
    from perfgate.serving.simprocess import SEED_BOX

    return ServerConfig.build(profile="t/m", mode="baseline", engine="sim", model_path="moonshotai/Kimi-K2.5",
                              flags={"tp-size": 8, "mem-fraction-static": 0.88, "cuda-graph-max-bs-decode": 128},
                              env={}, engine_options={"sim_hardware": str(SEED_BOX), "sim_startup_s": 0.3})


def test_a_second_start_of_a_config_reports_only_its_own_progress_and_ready_when_it_answers(tmp_path, monkeypatch):
    """Issue 32 item 3: every start of a config appends to one log; start 2 printed start 1's lines (their old
    timestamps) and "ready" while it was still loading. The two starts of the simulated server run in time zones
    12 hours apart, so no line of one carries a timestamp of the other whatever the clock says."""
    import re

    import requests

    from perfgate.engines.sim import SimEngine
    from perfgate.serving.server import PHASE_ORDER

    stamp = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]")
    runs = []
    for tz in ("PGA+06", "PGB-06"):  # POSIX TZ strings: UTC-6 and UTC+6
        monkeypatch.setenv("TZ", tz)
        events: list[Progress] = []
        answered: list[int] = []
        this: list[Server] = []

        def seen(ev, events=events, answered=answered, this=this):
            events.append(ev)
            if ev.phase == "ready":  # is the server this start launched answering when "ready" is said?
                answered.append(requests.get(f"{this[0].url}/health_generate", timeout=5).status_code)

        server = Server(_sim_config(), engine=SimEngine(), log_dir=tmp_path, startup_timeout_s=60, on_progress=seen,
                        progress_every_s=600)
        this.append(server)
        with server:
            pass
        runs.append((server, events, answered))
    (first, _, _), (second, events, answered) = runs
    assert first.log_path == second.log_path  # one log: start 2 appended after start 1, each after its header
    assert first.log_path is not None
    text = first.log_path.read_text()
    at = [m.start() for m in re.finditer(r"^# perfgate: .* starting ", text, re.MULTILINE)]
    assert len(at) == 2
    earlier, own = text[: at[1]], text[at[1]:]
    # start 2's progress: launching, then its own phases forward, ready last and once, while it answered
    phases = [e.phase for e in events]
    assert phases[0] == "launching" and phases[-1] == "ready" and phases.count("ready") == 1
    assert [PHASE_ORDER.index(p) for p in phases] == sorted({PHASE_ORDER.index(p) for p in phases})
    assert {"weights", "kv-cache", "cuda-graph", "warmup"} <= set(phases)
    assert answered == [200]
    assert second.own_log() == own  # what classifies a start that dies
    stamps_before = {m.group(1) for ln in earlier.splitlines() if (m := stamp.match(ln))}
    lines = [e.line for e in events if e.line]
    assert len(lines) >= 4
    for ln in lines:  # each line is start 2's own output, with start 2's timestamp, none of start 1's
        m = stamp.match(ln)
        assert m is not None and ln in own and ln not in earlier and m.group(1) not in stamps_before


AWARE_THEN_HEALTHY = HEALTHY.replace("print('Load weight begin.", "print('AssertionError: deep_ep buffer', flush=True)\n"
                                     "print('Load weight begin.")
CRASHES = "import sys; print('RuntimeError: something else broke', flush=True); sys.exit(1)"


def test_a_start_that_dies_is_classified_from_its_own_output_not_an_earlier_starts(tmp_path):
    with Server(cfg(), engine=ScriptEngine(AWARE_THEN_HEALTHY), log_dir=tmp_path, startup_timeout_s=30):
        pass  # start 1 printed an assertion line (and served)
    with pytest.raises(ServerExitedError) as ei:
        with Server(cfg(), engine=ScriptEngine(CRASHES), log_dir=tmp_path, startup_timeout_s=30):
            pass
    assert ei.value.returncode == 1 and ei.value.category == "crash"  # not start 1's "assertion"
