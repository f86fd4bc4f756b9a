"""ci/stack-gate.sh end to end with fake venvs (their `python -m pytest` writes fixture reports)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report_factory import DEFAULT_STACK, perf_case, seed_cases, write_report

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "ci" / "stack-gate.sh"
WORKFLOW = ROOT / "ci" / "github-workflow.yml"

FAKE_PYTHON = """#!/usr/bin/env bash
# a venv's python: `-m pytest ... --junitxml=X` copies a fixture report to X and exits with RC
case "$*" in
  *"-m pip freeze"*) echo "fake-stack==1.0"; exit 0 ;;
  *"-m pytest"*)
    for a in "$@"; do
      case "$a" in --junitxml=*) [ -f "{report}" ] && cp "{report}" "${{a#--junitxml=}}" ;; esac
    done
    echo "fake pytest run"
    exit {rc} ;;
esac
exit 0
"""


def _venv(tmp_path: Path, name: str, report: Path, rc: int = 1) -> Path:
    venv = tmp_path / name
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(FAKE_PYTHON.format(report=report, rc=rc))
    py.chmod(0o755)
    return venv


def _run(tmp_path: Path, current: Path, candidate: Path, **env: str) -> subprocess.CompletedProcess[str]:
    locks = tmp_path / "cur.lock", tmp_path / "cand.lock"
    for lock in locks:
        lock.write_text("sglang==0.5.23\n")
    full_env = dict(
        os.environ,
        PERFGATE_OUT=str(tmp_path / "out"),
        PERFGATE_VENV_CURRENT=str(current),
        PERFGATE_VENV_CANDIDATE=str(candidate),
        PERFGATE=f"{shlex.quote(sys.executable)} -m perfgate.cli",
        PYTHONPATH=str(ROOT),
        **env,
    )
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, locks)], capture_output=True, text=True, env=full_env, timeout=120
    )


@pytest.fixture
def reports(tmp_path: Path) -> dict[str, Path]:
    xpass = perf_case(
        "baseline", "flashinfer-ar-fusion", outcome="xpass", tok_s=95.0, spread=1.0, expected="xfail:unsupported-arch"
    )
    unblocked = seed_cases()
    unblocked[3] = xpass
    broken = seed_cases()
    broken[0] = perf_case("baseline", outcome="fail", category="nccl-error", kind="floor",
                          classname="perftests.test_baseline", test="test_floor")
    newer = dict(DEFAULT_STACK, **{"stack.flashinfer": "0.8.0"})
    return {
        "current": write_report(tmp_path / "current-src.xml", seed_cases()),
        "unblocked": write_report(tmp_path / "unblocked-src.xml", unblocked, stack=newer),
        "broken": write_report(tmp_path / "broken-src.xml", broken, stack=newer),
    }


def test_script_syntax_and_usage() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 2 and "Usage:" in proc.stderr


def test_unblocked_candidate_exits_3_with_a_markdown_comment(tmp_path: Path, reports: dict[str, Path]) -> None:
    proc = _run(tmp_path, _venv(tmp_path, "cur", reports["current"]), _venv(tmp_path, "cand", reports["unblocked"]))
    assert proc.returncode == 3, proc.stderr
    out = tmp_path / "out"
    md = (out / "diff.md").read_text()
    assert "**gate: exit 3**" in md and "flashinfer 0.7.2 → 0.8.0" in md
    assert (out / "diff.json").is_file() and (out / "current.freeze.txt").read_text() == "fake-stack==1.0\n"
    assert "update their expectations" in proc.stderr


def test_broken_candidate_exits_1(tmp_path: Path, reports: dict[str, Path]) -> None:
    proc = _run(tmp_path, _venv(tmp_path, "cur", reports["current"]), _venv(tmp_path, "cand", reports["broken"]))
    assert proc.returncode == 1, proc.stderr
    assert "BLOCKED" in proc.stdout


def test_no_tests_selected_or_no_report_exits_2(tmp_path: Path, reports: dict[str, Path]) -> None:
    proc = _run(tmp_path, _venv(tmp_path, "cur", reports["current"]), _venv(tmp_path, "cand", reports["current"], rc=5))
    assert proc.returncode == 2 and "selected no tests" in proc.stderr
    proc = _run(tmp_path, _venv(tmp_path, "cur2", reports["current"]), _venv(tmp_path, "cand2", tmp_path / "none.xml"))
    assert proc.returncode == 2 and "wrote no report" in proc.stderr


def test_no_gate_mode_only_writes_reports(tmp_path: Path, reports: dict[str, Path]) -> None:
    proc = _run(
        tmp_path,
        _venv(tmp_path, "cur", reports["current"]),
        _venv(tmp_path, "cand", reports["broken"]),
        PERFGATE_NO_GATE="1",
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "current.xml").is_file() and (tmp_path / "out" / "candidate.xml").is_file()
    assert not (tmp_path / "out" / "diff.md").exists()


PAIRED_PYTHON = """#!/usr/bin/env bash
# the current venv's python in paired mode: `-m pytest` prints its arguments, writes a report, exits with RC
case "$*" in
  *"-m pip freeze"*) echo "fake-stack==1.0"; exit 0 ;;
  *"-m pytest"*)
    echo "args: $*"
    for a in "$@"; do
      case "$a" in --junitxml=*) [ -f "{report}" ] && cp "{report}" "${{a#--junitxml=}}" ;; esac
    done
    exit {rc} ;;
esac
exit 0
"""


@pytest.mark.parametrize(("rc", "expected"), [(0, 0), (1, 1), (5, 2), (4, 2)])
def test_paired_mode_is_one_session_with_the_candidates_python(tmp_path: Path, reports: dict[str, Path], rc: int,
                                                               expected: int) -> None:
    cur = _venv(tmp_path, "cur", reports["current"])
    (cur / "bin" / "python").write_text(PAIRED_PYTHON.format(report=reports["current"], rc=rc))
    cand = _venv(tmp_path, "cand", reports["current"], rc=99)  # never runs pytest in paired mode
    proc = _run(tmp_path, cur, cand, PERFGATE_GATE_MODE="paired", PERFGATE_STARTS="2")
    assert proc.returncode == expected, proc.stderr
    log = (tmp_path / "out" / "paired.pytest.log").read_text()
    assert f"--perfgate-candidate python={cand}/bin/python --perfgate-starts 2 --perfgate-max-starts 6" in log
    assert "perftests/ -m stack_pair" in log and "--junitxml=" in log
    assert not (tmp_path / "out" / "candidate.xml").exists() and (tmp_path / "out" / "candidate.freeze.txt").is_file()
    if rc == 0:
        assert (tmp_path / "out" / "paired.xml").is_file() and "paired gate: OK" in proc.stderr
    if rc == 1:
        assert "paired gate: BLOCKED" in proc.stderr


def test_an_unknown_gate_mode_is_a_usage_error(tmp_path: Path, reports: dict[str, Path]) -> None:
    cur = _venv(tmp_path, "cur", reports["current"])
    proc = _run(tmp_path, cur, cur, PERFGATE_GATE_MODE="pairs")
    assert proc.returncode == 2 and "expected reports or paired" in proc.stderr


def test_workflow_wires_the_gate() -> None:
    text = WORKFLOW.read_text()
    assert "\t" not in text
    for needle in (
        "pull_request:",
        "paths:",
        "self-hosted",
        "ci/stack-gate.sh",
        "PERFGATE_GATE_MODE: paired",
        "perfgate merge",
        "perfgate gate current.xml candidate.xml --format md -o diff.md",
        "issues.createComment",
        "pull-requests: write",
    ):
        assert needle in text, needle
