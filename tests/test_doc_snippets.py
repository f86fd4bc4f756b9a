"""The docs' code blocks that show perfgate's own tests carry the markers that select them: a user who copies one
and runs the documented `pytest -m <marker>` selects it (the stack-pair snippet without `stack_pair` selected
nothing: exit 5)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


#: markers that do not select a test for -m (perfgate's own marker names the kind, not a selection)
_NOT_SELECTING = {"perfgate", "parametrize", "skipif", "skip", "xfail", "usefixtures", "filterwarnings"}


def _marks(tree: ast.Module) -> dict[str, set[str]]:
    """Test function name -> the pytest markers its module and its decorators give it (perfgate's excluded)."""
    module: set[str] = set()
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            module |= set(re.findall(r"pytest\.mark\.(\w+)", ast.unparse(node.value)))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            own = {m for d in node.decorator_list for m in re.findall(r"pytest\.mark\.(\w+)", ast.unparse(d))}
            out[node.name] = (module | own) - _NOT_SELECTING
    return out


def _blocks() -> list[tuple[str, str]]:
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S):
            out.append((doc.name, block))
    return out


SHIPPED = {name: marks for f in sorted((ROOT / "perftests").glob("test_*.py"))
           for name, marks in _marks(ast.parse(f.read_text())).items()}
SHOWN = [(doc, name, marks) for doc, block in _blocks() for name, marks in _marks(ast.parse(block)).items()
         if name in SHIPPED]


def test_the_docs_show_perfgates_own_tests():
    assert {"test_stack_pair", "test_decode_floor", "test_variant"} <= {name for _, name, _ in SHOWN}


@pytest.mark.parametrize(("doc", "name", "marks"), SHOWN, ids=[f"{d}:{n}" for d, n, _ in SHOWN])
def test_a_snippet_of_a_shipped_test_carries_its_markers(doc: str, name: str, marks: set[str]) -> None:
    missing = SHIPPED[name] - marks
    assert not missing, f"{doc}: the snippet of {name} lacks pytest.mark.{', pytest.mark.'.join(sorted(missing))}"


def test_the_stack_pair_snippet_copied_is_selected_by_its_documented_marker(pytester: pytest.Pytester) -> None:
    block = next(b for doc, b in _blocks() if doc == "writing-tests.md" and "def test_stack_pair" in b)
    pytester.makepyfile(test_mine="import pytest\n\n" + block)
    r = pytester.runpytest_subprocess("-m", "stack_pair", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.OK, r.stdout.str() + r.stderr.str()
    r.stdout.fnmatch_lines(["*test_mine.py::test_stack_pair[[]*:baseline[]]*"])
