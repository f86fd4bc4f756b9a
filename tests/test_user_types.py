"""The public names keep their types for a user's type checker (perfgate ships py.typed): mypy --strict on a
user's typed test module finds a misspelt outcome and accepts the right one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

GOOD = '''
from perfgate import Category, Outcome, Verdict

def judged() -> Verdict:
    return Verdict(outcome=Outcome.FAIL, category=Category.SLOWER_THAN_BASELINE, message="slower")
'''

BAD = '''
from perfgate import Verdict

def judged() -> Verdict:
    return Verdict(outcome="passs", message="a typo mypy must see")
'''


def _mypy(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy", reason="mypy is a dev dependency")
    (tmp_path / "test_mine.py").write_text(text)
    env = {**os.environ, "MYPYPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                           "--ignore-missing-imports", "test_mine.py"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=600)


def test_py_typed_ships() -> None:
    assert (REPO / "perfgate" / "py.typed").is_file()
    assert "py.typed" in (REPO / "pyproject.toml").read_text()


def test_a_users_mypy_sees_perfgates_types(tmp_path: Path) -> None:
    ok = _mypy(tmp_path, GOOD)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = _mypy(tmp_path, BAD)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert 'Argument "outcome" to "Verdict" has incompatible type "str"; expected "Outcome"' in bad.stdout
