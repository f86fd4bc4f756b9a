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


def _typed_doc_blocks() -> list[str]:
    """docs/writing-tests.md's examples of the measure, perf_check and perf_compare fixtures, as a user copies them."""
    import re

    text = (REPO / "docs" / "writing-tests.md").read_text()
    return [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)
            if re.search(r"\b(measure|perf_check|perf_compare)\b", b) and "def test_" in b]


def test_the_fixture_types_are_public_names_of_perfgate() -> None:
    import perfgate
    from perfgate.plugin.api import Measure, PerfCheck, PerfServer
    from perfgate.plugin.compare import PerfCompare

    for name, cls in (("Measure", Measure), ("PerfCheck", PerfCheck), ("PerfServer", PerfServer),
                      ("PerfCompare", PerfCompare)):
        assert name in perfgate.__all__ and getattr(perfgate, name) is cls


def test_a_users_mypy_strict_passes_on_the_docs_fixture_examples(tmp_path: Path) -> None:
    blocks = _typed_doc_blocks()
    assert len(blocks) >= 4, "docs/writing-tests.md lost its fixture examples"
    pytest.importorskip("mypy", reason="mypy is a dev dependency")
    names = []
    for i, block in enumerate(blocks):
        (tmp_path / f"test_doc_{i}.py").write_text(block)
        names.append(f"test_doc_{i}.py")
    env = {**os.environ, "MYPYPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                        *names], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    # and it still sees a misuse: perf_check's metric is a str, measure's server a server
    (tmp_path / "test_wrong.py").write_text(
        "from perfgate import Measure, PerfCheck, PerfServer\n\n\n"
        "def test_x(perf_server: PerfServer, measure: Measure, perf_check: PerfCheck) -> None:\n"
        "    perf_check(measure(perf_server), 3)\n")
    bad = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                          "test_wrong.py"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)
    assert bad.returncode == 1 and 'Argument 2 to "__call__" of "PerfCheck" has incompatible type "int"' in bad.stdout, \
        bad.stdout
