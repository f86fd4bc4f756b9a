"""The machinery of the reliability runs: a throw-away project, one ``python -m pytest`` subprocess of it
(optionally signalled mid-measurement), and what it left: records, processes, lost records.

The scenarios are in :mod:`tests.reliability.scenarios`; the package's docstring says what is checked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.simproject import PROMPTS, SEED_BOX_HARDWARE
from tests.simproject import SIM_SEED_BOX as SIM_HW

ROOT = Path(__file__).resolve().parents[2]  # the repository
TOKEN_ENV = "PERFGATE_RELIABILITY_TOKEN"
LEDGER_ENV = "PERFGATE_RELIABILITY_LEDGER"
TEARDOWN_GRACE_S = 5.0  # [engine] teardown_timeout_s of the test profile: the reaper's SIGTERM -> SIGKILL wait
STARTUP_TIMEOUT_S = 6  # [engine] startup_timeout_s: a healthy simulated server is ready in about a second
REQUEST_TIMEOUT_S = 2  # [workload] request_timeout_s: how long a hung stream is waited for

# ----------------------------------------------------------------------------- the project


def profile_text(modes: Mapping[str, str], *, engine: str = "sim", workload: str = "", extra: str = "") -> str:
    """A small profile of the simulated seed box: one ``[modes.<name>]`` per entry, a floor for each."""
    eng = (f'name = "sim"\nsim_hardware = "{SIM_HW}"\nsim_startup_s = 0.2\n' if engine == "sim"
           else 'name = "sglang"\n')
    body = [SEED_BOX_HARDWARE + f"""[engine]
{eng}startup_timeout_s = {STARTUP_TIMEOUT_S}
teardown_timeout_s = {TEARDOWN_GRACE_S:g}
[model]
path = "moonshotai/Kimi-K2.5"
[server]
tp-size = 8
mem-fraction-static = 0.88
cuda-graph-max-bs-decode = 128
random-seed = 1
"""]
    for name, text in modes.items():
        body.append(f"[modes.{name}]\n{text.strip()}\n" if text.strip() else f"[modes.{name}]\n")
    body.append(f"""[workload]
prompts = "{PROMPTS}"
max_new_tokens = 16
warmup = 1
trials = 3
max_cv = 1.0
request_timeout_s = {REQUEST_TIMEOUT_S}
{workload.strip()}
""")
    for name in modes:
        body.append(f"[floors.{name}]\ntok_s = 89.5\ntolerance = 0.5\n")
    body.append(extra)
    return "\n".join(body)


CONFTEST = '''
"""Test-only hooks of the reliability scenarios (not part of perfgate)."""
import http.server
import os
import threading

import perfgate.serving.server as _server
import perfgate.serving.manager as _server_manager

pytest_plugins = ["perfgate.plugin"]


def pytest_runtest_logreport(report):
    """The ledger: one line per test that finished (its teardown report), written at once."""
    ledger = os.environ.get("PERFGATE_RELIABILITY_LEDGER")
    if ledger and report.when == "teardown":
        with open(ledger, "a") as f:
            f.write(report.nodeid + "\\n")


class _Stranger(http.server.BaseHTTPRequestHandler):
    """Another server that already holds the port: answers everything with 200."""

    def _ok(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"not perfgate's server")

    do_GET = do_POST = _ok

    def log_message(self, *args):
        pass


_stranger = None
_real_free_port = _server.free_port
_real_ensure = _server_manager.ServerManager.ensure


def _ensure(self, config):
    """Fault "port-taken": the port perfgate picks for this mode's server is already served by a stranger."""
    global _stranger
    if config.mode != "port-taken":
        return _real_ensure(self, config)
    if _stranger is None:
        _stranger = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stranger)
        threading.Thread(target=_stranger.serve_forever, daemon=True).start()
    _server.free_port = lambda host="127.0.0.1": _stranger.server_address[1]
    try:
        return _real_ensure(self, config)
    finally:
        _server.free_port = _real_free_port


_server_manager.ServerManager.ensure = _ensure
'''

RAISING_TEST = '''
"""A perf test with a bug: it raises in the middle of its measurement (mode "boom" only)."""
import pytest


@pytest.mark.perfgate(kind="floor")
def test_raises_mid_measurement(perf_server, measure, perf_check, monkeypatch):
    if perf_server.mode == "boom":
        import perfgate.client

        def broken(*args, **kwargs):
            raise RuntimeError("a bug in the middle of a measurement")

        monkeypatch.setattr(perfgate.client, "run_batch", broken)
    perf_check(measure(perf_server), "tok_s")
'''

# booted this way so that SIGINT raises KeyboardInterrupt even where the caller ignores SIGINT
BOOT = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "import pytest; sys.exit(pytest.main(sys.argv[1:]))")


def make_project(where: Path, profile: str, *, variants: str | None = None,
                 files: Mapping[str, str] | None = None) -> Path:
    """A throw-away project: perftests (baseline + backends), the conftest above, baselines/t/m.toml."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "perftests").mkdir(exist_ok=True)
    for name in ("__init__.py", "test_baseline.py", "test_backends.py"):
        shutil.copy(ROOT / "perftests" / name, where / "perftests" / name)
    (where / "conftest.py").write_text(CONFTEST)
    (where / "baselines" / "t").mkdir(parents=True, exist_ok=True)
    if variants is None:
        shutil.copy(ROOT / "baselines" / "variants.toml", where / "baselines" / "variants.toml")
    else:
        (where / "baselines" / "variants.toml").write_text(variants)
    (where / "baselines" / "t" / "m.toml").write_text(profile)
    for rel, text in (files or {}).items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)
    return where


# ----------------------------------------------------------------------------- one run


@dataclass(frozen=True, kw_only=True)
class Record:
    """One ``<testcase>`` of the JUnit file."""

    classname: str
    name: str
    element: str  # "pass" | "failure" | "error" | "skipped"
    message: str
    text: str  # the failure / error / skipped element's text (pytest's full report)
    props: Mapping[str, str]
    time_s: float

    @property
    def outcome(self) -> str:
        return self.props.get("outcome") or {"pass": "pass", "failure": "fail"}.get(self.element, self.element)

    @property
    def category(self) -> str:
        return self.props.get("category", "")


@dataclass(kw_only=True)
class Run:
    """What one pytest subprocess did and left behind."""

    project: Path
    returncode: int
    output: str
    wall_s: float
    junit_exists: bool
    records: dict[str, Record]  # by test name, e.g. "test_decode_floor[m:baseline]"
    finished: list[str]  # node ids from the ledger
    pgids: dict[str, int]  # server log file name -> process group id
    left: list[str]  # processes still alive after the grace period
    signalled: bool = False
    timed_out: bool = False  # killed by run_pytest after timeout_s: the run hung

    @property
    def lost(self) -> list[str]:
        """Finished tests without a ``<testcase>`` in the JUnit file."""
        have = {(r.classname, r.name) for r in self.records.values()}
        return [n for n in self.finished if _junit_key(n) not in have]

    def log_of(self, mode: str) -> str:
        """The text of the server log for ``mode`` (empty if none)."""
        for p in sorted((self.project / "logs").rglob(f"*-{mode}-*.log")):
            return p.read_text(errors="replace")
        return ""


def _junit_key(nodeid: str) -> tuple[str, str]:
    path, _, name = nodeid.partition("::")
    return re.sub(r"\.py$", "", path).replace("/", "."), name


def read_junit(path: Path) -> dict[str, Record]:
    """Records of a JUnit file written by pytest (or kept current by perfgate's guard)."""
    out: dict[str, Record] = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        kids = [c for c in tc if c.tag in ("failure", "error", "skipped")]
        props = {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
        name = tc.get("name", "")
        out[name] = Record(classname=tc.get("classname", ""), name=name,
                           element=kids[0].tag if kids else "pass",
                           message=(kids[0].get("message", "") if kids else ""),
                           text=(kids[0].text or "") if kids else "", props=props,
                           time_s=float(tc.get("time", "0") or 0))
    return out


def server_pgids(log_dir: Path) -> dict[str, int]:
    """``# pgid: N`` lines that perfgate writes into each server log."""
    out: dict[str, int] = {}
    for p in sorted(log_dir.rglob("*.log")) if log_dir.is_dir() else []:
        for m in re.finditer(r"^# pgid: (\d+)$", p.read_text(errors="replace"), re.M):
            out[f"{p.name}#{m.start()}"] = int(m.group(1))
    return out


def leftovers(token: str, pgids: Sequence[int]) -> list[str]:
    """Live processes of the run: by process group (server logs) and by the run's environment token."""
    import psutil

    from perfgate.host.procs import group_pids

    left = [f"pgid {pg}: pids {pids}" for pg in sorted(set(pgids)) if (pids := group_pids(pg))]
    me = os.getpid()
    for p in psutil.process_iter(["pid", "status", "cmdline"]):
        if p.pid == me or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            env = p.environ()
        except psutil.Error:
            continue
        if env.get(TOKEN_ENV) == token:
            left.append(f"pid {p.pid}: {' '.join(p.info['cmdline'] or [])[:100]}")
    return left


def serving(mode: str, settle_s: float = 1.0) -> Callable[[Path], bool]:
    """A trigger: true ``settle_s`` after the server for ``mode`` reported ready (i.e. mid-measurement)."""
    seen: list[float] = []

    def ready(project: Path) -> bool:
        if not seen:
            for p in (project / "logs").rglob(f"*-{mode}-*.log"):
                if "The server is fired up" in p.read_text(errors="replace"):
                    seen.append(time.monotonic())
            return False
        return time.monotonic() - seen[0] >= settle_s

    return ready


class Pending:
    """A pytest subprocess started by :func:`start_pytest`; :meth:`finish` waits for it and checks."""

    def __init__(self, project: Path, args: Sequence[str], *, send: int | None = None,
                 when: Callable[[Path], bool] | None = None, timeout_s: float = 120.0,
                 grace_s: float = TEARDOWN_GRACE_S + 5.0) -> None:
        self.project, self.send, self.when, self.timeout_s, self.grace_s = project, send, when, timeout_s, grace_s
        self.token = uuid.uuid4().hex
        self.ledger = project / "ledger.txt"
        self.xml = project / "r.xml"
        for old in (self.ledger, self.xml):
            old.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PERFGATE_"))}
        # other installed pytest plugins (hypothesis, xdist, ...) are not loaded: 2 s less per run; what a
        # scenario needs it names with -p (pytest_timeout)
        env.update({TOKEN_ENV: self.token, LEDGER_ENV: str(self.ledger), "PYTHONUNBUFFERED": "1",
                    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                    "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)})
        cmd = [sys.executable, "-c", BOOT, *args, "--perfgate-profile=baselines/t/m.toml", f"--junitxml={self.xml}",
               f"--perfgate-log-dir={project / 'logs'}", "-p", "no:cacheprovider", f"--rootdir={project}", "-rA"]
        self.out_path = project / "output.txt"
        self.t0 = time.monotonic()
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

        self.signalled = self.timed_out = False
        self.wall_s: float | None = None

    def step(self) -> bool:
        """One look at the run: send the signal when due, kill it past its timeout; True once it exited."""
        proc = self.proc
        if proc.poll() is None:
            if time.monotonic() - self.t0 > self.timeout_s:
                proc.kill()
                self.timed_out = True
            elif self.send is not None and not self.signalled and (self.when is None or self.when(self.project)):
                proc.send_signal(self.send)
                self.signalled = True
            return False
        if self.wall_s is None:
            self.wall_s = time.monotonic() - self.t0
        return True

    def finish(self) -> Run:
        """Wait for the run (sending the signal when due), then for its processes to go; collect what it left."""
        proc, project = self.proc, self.project
        try:
            while not self.step():
                time.sleep(0.05)
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        signalled, timed_out = self.signalled, self.timed_out
        wall = self.wall_s or 0.0
        pgids = server_pgids(project / "logs")
        deadline = time.monotonic() + self.grace_s
        while (left := leftovers(self.token, list(pgids.values()))) and time.monotonic() < deadline:
            time.sleep(0.2)
        finished = self.ledger.read_text().split() if self.ledger.exists() else []
        xml = self.xml
        return Run(project=project, returncode=rc, output=self.out_path.read_text(errors="replace"), wall_s=wall,
                   junit_exists=xml.exists(), records=read_junit(xml) if xml.exists() else {}, finished=finished,
                   pgids=pgids, left=left, signalled=signalled, timed_out=timed_out)


def start_pytest(project: Path, args: Sequence[str], **kw: object) -> Pending:
    """Start ``python -m pytest ARGS`` in ``project`` (keywords: see :class:`Pending`)."""
    return Pending(project, args, **kw)  # type: ignore[arg-type]


def finish_all(pending: Sequence[Pending]) -> list[Run]:
    """Runs side by side: each gets its signal when due while the others go on."""
    try:
        while not all([p.step() for p in pending]):
            time.sleep(0.05)
    except BaseException:
        for p in pending:
            if p.proc.poll() is None:
                p.proc.kill()
        raise
    return [p.finish() for p in pending]


def run_pytest(project: Path, args: Sequence[str], *, send: int | None = None,
               when: Callable[[Path], bool] | None = None, timeout_s: float = 120.0,
               grace_s: float = TEARDOWN_GRACE_S + 5.0) -> Run:
    """Run ``python -m pytest ARGS`` in ``project``; optionally send signal ``send`` once ``when`` holds."""
    return Pending(project, args, send=send, when=when, timeout_s=timeout_s, grace_s=grace_s).finish()
