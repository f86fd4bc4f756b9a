"""The scenarios of the reliability runs: the faults injected into a simulated server, the stop signals,
a test that raises, and the bad inputs, each with the project it runs in and what perfgate must say."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.reliability.runs import (
    PROMPTS,
    RAISING_TEST,
    SIM_HW,
    Run,
    finish_all,
    make_project,
    profile_text,
    serving,
    start_pytest,
)

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
             says=("baselines/t/m.toml", "key 'workload.max_new_tokens'", "expected an integer",
                   "fix: write max_new_tokens = <")),
    BadInput(name="unknown-variant", what="unknown variant (--perfgate-variants nope)",
             args=("perftests/test_backends.py", "-m", "backends", "--perfgate-variants", "nope"),
             says=("--perfgate-variants: unknown variant 'nope'", "baselines/variants.toml")),
    BadInput(name="unknown-mode", what="unknown mode in an expectation",
             edit=lambda t: t + '\n[expectations.nccl-tree]\nbasline = { expect = "pass" }\n',
             says=("baselines/t/m.toml", "key 'expectations.nccl-tree.basline'", "fix: did you mean 'baseline'?")),
    BadInput(name="unknown-kind", what="an expectation naming no variant or record kind (a typo of one)",
             edit=lambda t: t + '\n[expectations.flor]\nbaseline = { expect = "pass" }\n',
             says=("baselines/t/m.toml", "[expectations.flor] (line ", "fix: did you mean 'floor'?")),
    BadInput(name="url-not-listening", what="--perfgate-url where nothing listens",
             args=("perftests/test_baseline.py", "-m", "baseline", "--perfgate-url", "http://127.0.0.1:9"),
             says=("--perfgate-url http://127.0.0.1:9", "connection refused", "fix: start the server there")),
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
