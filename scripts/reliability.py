#!/usr/bin/env python
"""Faults and bad input, measured: every scenario of issue 6 as a real subprocess run of pytest.

    python scripts/reliability.py                         # print the Markdown table
    python scripts/reliability.py --out docs/reliability.md
    python scripts/reliability.py --only sigterm,timeout  # some scenarios (names: --list)

Each scenario builds a throw-away project (perftests, a small simulated profile, a conftest),
runs ``python -m pytest`` on it against perfgate's simulated server — faults are injected with
the simulator's ``PERFGATE_SIM_FAULT`` through a mode's ``env`` — optionally sends a signal
mid-measurement, then checks:

- **processes left**: every process whose environment carries the run's unique token (the
  servers, their children, the reapers) and every server process group named by a
  ``# pgid:`` line of a server log, after a grace period for the reaper (teardown grace + 5 s);
- **records lost**: tests that finished (a conftest hook appends each test's id to a ledger
  file at its teardown) but have no ``<testcase>`` in the JUnit file.

It exits 1 if any row has processes left, records lost, or an outcome other than expected.
``tests/test_reliability.py`` runs the same scenarios (this module is its machinery) and
asserts on the records in detail. Nothing here needs a GPU.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIM_HW = ROOT / "fixtures" / "sim" / "rtxpro6000-x8-pcie.toml"
PROMPTS = ROOT / "fixtures" / "prompts" / "random-ids-128.jsonl"
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
    body = [f"""schema_version = 1
[hardware]
gpu = "RTX PRO 6000 Blackwell"
count = 8
sm = "12.0"
interconnect = "pcie"
[engine]
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
        for p in sorted((self.project / "logs").glob(f"*-{mode}-*.log")):
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
    for p in sorted(log_dir.glob("*.log")) if log_dir.is_dir() else []:
        for m in re.finditer(r"^# pgid: (\d+)$", p.read_text(errors="replace"), re.M):
            out[f"{p.name}#{m.start()}"] = int(m.group(1))
    return out


def leftovers(token: str, pgids: Sequence[int]) -> list[str]:
    """Live processes of the run: by process group (server logs) and by the run's environment token."""
    import psutil

    from perfgate.serving.procs import group_pids

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
            for p in (project / "logs").glob(f"*-{mode}-*.log"):
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


# ----------------------------------------------------------------------------- the scenarios


@dataclass(frozen=True, kw_only=True)
class Fault:
    """A fault injected into one mode's simulated server, and the record it must give."""

    mode: str
    what: str
    env: str  # the mode's TOML body
    category: str


def _fault(name: str) -> str:
    return f'env = {{ PERFGATE_SIM_FAULT = "{name}" }}'


FAULTS: tuple[Fault, ...] = (
    Fault(mode="crash-start", what="crash at start", env=_fault("crash-at-start"), category="crash"),
    Fault(mode="crash-mid", what="crash mid-stream", env=_fault("crash-mid-stream"), category="crash"),
    Fault(mode="hang-ready", what="hang before ready", env=_fault("hang-before-ready"), category="startup-timeout"),
    Fault(mode="hang-mid", what="hang mid-stream (no more tokens)", env=_fault("hang-mid-stream"), category="crash"),
    Fault(mode="slow-start", what="slow start beyond the deadline", env=_fault("slow-start"),
          category="startup-timeout"),
    Fault(mode="http-500", what="HTTP 500 on /generate", env=_fault("http-500"), category="crash"),
    Fault(mode="malformed-sse", what="malformed SSE event", env=_fault("malformed-sse"), category="crash"),
    Fault(mode="no-generate", what="health OK, never generates", env=_fault("health-no-generate"), category="crash"),
    Fault(mode="port-taken", what="port already taken by another server",
          env='env = { PERFGATE_TEST_TAG = "port-taken" }', category="config-error"),
)
HEALTHY_AFTER = 'env = { PERFGATE_TEST_TAG = "after" }'  # a distinct config that runs after the faults


#: the faults in two sessions that run side by side (each waits out one start-up deadline and one hung stream)
FAULT_SESSIONS: tuple[tuple[str, ...], ...] = (
    ("crash-start", "crash-mid", "hang-ready", "hang-mid", "http-500"),
    ("slow-start", "malformed-sse", "no-generate", "port-taken"),
)


def faults_project(where: Path, modes: Sequence[str]) -> Path:
    """Baseline, the faults of ``modes``, then a healthy config: one session."""
    by_mode = {f.mode: f for f in FAULTS}
    table = {"baseline": "", **{m: by_mode[m].env for m in modes}, "after": HEALTHY_AFTER}
    return make_project(where, profile_text(table))


def run_faults(where: Path) -> list[Run]:
    """Every fault of :data:`FAULTS`: the sessions of :data:`FAULT_SESSIONS`, concurrently."""
    pending = [start_pytest(faults_project(where / f"faults{i}", modes), FAULTS_ARGS)
               for i, modes in enumerate(FAULT_SESSIONS)]
    return finish_all(pending)


def run_of(runs: Sequence[Run], mode: str) -> Run:
    """The run (of :func:`run_faults`) that holds ``mode``'s record."""
    return runs[next(i for i, modes in enumerate(FAULT_SESSIONS) if mode in modes)]


FAULTS_ARGS = ("perftests/test_baseline.py", "-m", "baseline")

STUCK_MODES = {
    "baseline": "",
    # a server that stops streaming mid-request: the measurement blocks (10 minutes) unless interrupted
    "stuck": _fault("hang-mid-stream") + "\n[modes.stuck.workload]\nwarmup = 0\nrequest_timeout_s = 600",
    "after": HEALTHY_AFTER,
}


def stuck_project(where: Path) -> Path:
    """Baseline, then a server that hangs mid-measurement (two requests in flight), then a healthy config."""
    return make_project(where, profile_text(STUCK_MODES, workload="concurrency = 2"))


STUCK_ARGS = ("perftests/test_baseline.py", "-m", "baseline")
TIMEOUT_ARGS = ("-p", "pytest_timeout", "--timeout", "6", "--timeout-method", "thread")


#: signals sent mid-measurement (when the stuck server has been serving for a second)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def run_signalled(where: Path, *, timeout_s: float = 120.0) -> dict[int, Run]:
    """The stuck session once per signal of :data:`STOP_SIGNALS`, side by side."""
    pending = [start_pytest(stuck_project(where / sig.name), STUCK_ARGS, send=sig, when=serving("stuck"),
                            timeout_s=timeout_s) for sig in STOP_SIGNALS]
    return dict(zip(STOP_SIGNALS, finish_all(pending)))


def raising_project(where: Path) -> Path:
    modes = {"baseline": "", "boom": 'env = { PERFGATE_TEST_TAG = "boom" }', "after": HEALTHY_AFTER}
    return make_project(where, profile_text(modes), files={"perftests/test_raising.py": RAISING_TEST})


RAISING_ARGS = ("perftests/test_raising.py",)

BAD_FLAG_VARIANTS = """schema_version = 1
[variants.typo]
description = "a flag SGLang does not have (a typo of enable-torch-symm-mem)"
flags = { enable-torch-symm-memory = true }
"""


@dataclass(frozen=True, kw_only=True)
class BadInput:
    """Bad input, and what perfgate must say: exit code, and text that names the file, key and fix."""

    name: str
    what: str
    edit: Callable[[str], str] = lambda text: text
    args: tuple[str, ...] = ("perftests/test_baseline.py", "-m", "baseline")
    variants: str | None = None
    returncode: int = 4
    says: tuple[str, ...] = ()
    record: tuple[str, str, str] | None = None  # (test name, outcome, category)


BAD_INPUTS: tuple[BadInput, ...] = (
    BadInput(name="malformed-toml", what="malformed TOML",
             edit=lambda t: t.replace("[workload]", "[workload\n"),
             says=("baselines/t/m.toml", "expected valid TOML", "fix: fix the TOML syntax")),
    BadInput(name="unknown-key", what="unknown key in [workload]",
             edit=lambda t: t.replace("trials = 3", "trials = 3\nmax_new_tokns = 16"),
             says=("baselines/t/m.toml", "key 'workload.max_new_tokns'", "fix: did you mean 'max_new_tokens'?")),
    BadInput(name="wrong-type", what="wrong type (a string for an integer)",
             edit=lambda t: t.replace("max_new_tokens = 16", 'max_new_tokens = "16"'),
             says=("baselines/t/m.toml", "key 'workload.max_new_tokens'", "expected an integer")),
    BadInput(name="unknown-variant", what="unknown variant (--perfgate-variants nope)",
             args=("perftests/test_backends.py", "-m", "backends", "--perfgate-variants", "nope"),
             says=("--perfgate-variants: unknown variant 'nope'", "baselines/variants.toml")),
    BadInput(name="unknown-mode", what="unknown mode in an expectation",
             edit=lambda t: t + '\n[expectations.nccl-tree]\nbasline = { expect = "pass" }\n',
             says=("baselines/t/m.toml", "key 'expectations.nccl-tree.basline'", "fix: did you mean 'baseline'?")),
    BadInput(name="missing-prompts", what="missing prompt file",
             edit=lambda t: t.replace(str(PROMPTS), "fixtures/prompts/nope.jsonl"),
             says=("baselines/t/m.toml", "key 'workload.prompts'", "nope.jsonl", "fix: point it at a file")),
    BadInput(name="hardware-mismatch", what="profile for other hardware (engine sglang, no GPU here)",
             edit=lambda t: t.replace('name = "sim"', 'name = "sglang"')
             .replace(f'sim_hardware = "{SIM_HW}"\n', "").replace("sim_startup_s = 0.2\n", ""),
             says=("baselines/t/m.toml", "key 'hardware.gpu'", "8x RTX PRO 6000 Blackwell", "detected GPU: unknown",
                   "--perfgate-allow-hardware-mismatch")),
    BadInput(name="hardware-mismatch-allowed", what="the same with --perfgate-allow-hardware-mismatch (no SGLang here)",
             edit=lambda t: t.replace('name = "sim"', 'name = "sglang"')
             .replace(f'sim_hardware = "{SIM_HW}"\n', "").replace("sim_startup_s = 0.2\n", ""),
             args=("perftests/test_baseline.py", "-m", "baseline", "--perfgate-allow-hardware-mismatch"),
             returncode=1, says=("No module named 'sglang'",),
             record=("test_decode_floor[m:baseline]", "fail", "missing-dependency")),
    BadInput(name="unknown-sglang-flag", what="unknown SGLang flag in a variant",
             args=("perftests/test_backends.py", "-m", "backends"), variants=BAD_FLAG_VARIANTS,
             returncode=1, says=("baselines/variants.toml [variants.typo] flags: key 'enable-torch-symm-memory'",
                                 "fix: did you mean --enable-torch-symm-mem?",
                                 "unrecognized arguments: --enable-torch-symm-memory"),
             record=("test_variant[m:baseline+typo]", "fail", "bad-flag")),
)


def bad_input_project(where: Path, bad: BadInput) -> Path:
    return make_project(where, bad.edit(profile_text({"baseline": ""})), variants=bad.variants)


# ----------------------------------------------------------------------------- the table


@dataclass(kw_only=True)
class Row:
    scenario: str
    outcome: str
    left: int
    lost: int
    time_s: float
    ok: bool
    notes: list[str] = field(default_factory=list)


def _rec(r: Record | None) -> str:
    return f"{r.outcome}/{r.category}" if r is not None and r.category else (r.outcome if r else "no record")


def _fault_rows(where: Path) -> list[Row]:
    runs = run_faults(where)
    rows = []
    for f in FAULTS:
        run = run_of(runs, f.mode)
        r = run.records.get(f"test_decode_floor[m:{f.mode}]")
        ok = r is not None and r.outcome == "fail" and r.category == f.category and bool(r.props.get("log"))
        rows.append(Row(scenario=f"fault: {f.what}", outcome=f"exit {run.returncode}; {_rec(r)}", left=len(run.left),
                        lost=len(run.lost), time_s=r.time_s if r else 0.0, ok=ok))
    for i, run in enumerate(runs):
        after = run.records.get("test_decode_floor[m:after]")
        rows.append(Row(scenario=f"next config after the faults of session {i + 1} "
                        f"({', '.join(FAULT_SESSIONS[i])})", outcome=f"exit {run.returncode}; {_rec(after)}",
                        left=len(run.left), lost=len(run.lost), time_s=after.time_s if after else 0.0,
                        ok=after is not None and after.outcome == "pass"))
    return rows


def _stop_rows(where: Path) -> list[Row]:
    rows = []
    by_signal = run_signalled(where)
    cases: list[tuple[str, Run, int]] = [
        ("pytest gets SIGINT (Ctrl-C) mid-measurement", by_signal[signal.SIGINT], 2),
        ("pytest gets SIGTERM mid-measurement", by_signal[signal.SIGTERM], 2),
        ("pytest killed with SIGKILL mid-measurement", by_signal[signal.SIGKILL], -9),
        ("pytest-timeout fires (--timeout-method thread: os._exit)",
         run_pytest(stuck_project(where / "timeout"), STUCK_ARGS + TIMEOUT_ARGS), 1),
    ]
    for label, run, rc in cases:
        stuck_outcome = "error"
        base = run.records.get("test_decode_floor[m:baseline]")
        stuck = run.records.get("test_decode_floor[m:stuck]")
        ok = (run.returncode == rc and base is not None and base.outcome == "pass" and stuck is not None
              and stuck.outcome == stuck_outcome)
        how = f" ({stuck.message.split(' while ')[0]})" if stuck is not None and stuck.message else ""
        rows.append(Row(scenario=label, outcome=f"exit {run.returncode}; baseline {_rec(base)}, "
                        f"running test {_rec(stuck)}{how}", left=len(run.left), lost=len(run.lost),
                        time_s=run.wall_s, ok=ok))
    run = run_pytest(raising_project(where / "raising"), RAISING_ARGS)
    boom = run.records.get("test_raises_mid_measurement[m:boom]")
    after = run.records.get("test_raises_mid_measurement[m:after]")
    rows.append(Row(scenario="a test raises mid-measurement", outcome=f"exit {run.returncode}; {_rec(boom)}, "
                    f"next config {_rec(after)}", left=len(run.left), lost=len(run.lost), time_s=run.wall_s,
                    ok=boom is not None and boom.outcome == "fail" and after is not None and after.outcome == "pass"))
    return rows


def _bad_rows(where: Path) -> list[Row]:
    rows = []
    for bad in BAD_INPUTS:
        run = run_pytest(bad_input_project(where / bad.name, bad), bad.args)
        ok = run.returncode == bad.returncode and all(s in run.output for s in bad.says) \
            and "Traceback" not in run.output
        outcome = f"exit {run.returncode}"
        t = run.wall_s
        if bad.record is not None:
            r = run.records.get(bad.record[0])
            outcome += f"; {_rec(r)}"
            ok = ok and r is not None and (r.outcome, r.category) == bad.record[1:]
            t = r.time_s if r else t
        else:
            outcome += " (usage error before collection)"
        rows.append(Row(scenario=f"bad input: {bad.what}", outcome=outcome, left=len(run.left), lost=len(run.lost),
                        time_s=t, ok=ok))
    return rows


GROUPS: dict[str, Callable[[Path], list[Row]]] = {"faults": _fault_rows, "stops": _stop_rows, "bad-input": _bad_rows}


def render(rows: Sequence[Row], *, command: str) -> str:
    lines = [
        "# Reliability: faults injected and bad input tried",
        "",
        f"Generated by `{command}` (perfgate's simulated server, no GPU); regenerate with",
        "`python scripts/reliability.py --out docs/reliability.md`. Each row is a real `python -m pytest` run",
        "(or one record of it). *processes left*: processes of the run still alive after the reaper's",
        "grace period, found by the run's environment token and by each server's process group",
        "(`# pgid:` in its log). *records lost*: tests that finished but have no `<testcase>` in the JUnit",
        "file. *time*: the record's duration, or the whole pytest run for the rows without one.",
        "",
        "| scenario | outcome (pytest exit code; record outcome/category) | processes left | records lost "
        "| time (s) | as expected |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r.scenario} | {r.outcome} | {r.left} | {r.lost} | {r.time_s:.1f} | "
                     f"{'yes' if r.ok else '**NO**'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    ap.add_argument("--only", default="", help=f"comma-separated groups: {', '.join(GROUPS)}")
    ap.add_argument("--keep", type=Path, help="keep the throw-away projects under this directory")
    ap.add_argument("--list", action="store_true", help="list the groups and exit")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(GROUPS))
        return 0
    groups = [g for g in a.only.split(",") if g] or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        ap.error(f"unknown group(s) {unknown}; choose from {', '.join(GROUPS)}")
    where = a.keep or Path(tempfile.mkdtemp(prefix="perfgate-reliability-"))
    rows: list[Row] = []
    try:
        for g in groups:
            rows.extend(GROUPS[g](where / g))
    finally:
        if a.keep is None:
            shutil.rmtree(where, ignore_errors=True)
    text = render(rows, command="python scripts/reliability.py" + (f" --only {a.only}" if a.only else ""))
    print(text, end="")
    if a.out:
        a.out.write_text(text)
    bad = [r for r in rows if r.left or r.lost or not r.ok]
    if bad:
        print(f"\n{len(bad)} row(s) with processes left, records lost or an unexpected outcome: "
              + "; ".join(r.scenario for r in bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
