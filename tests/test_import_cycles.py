"""No import cycle among perfgate's modules: every import counts, TYPE_CHECKING and function-level ones included
(a cycle hidden behind a lazy import is still a cycle of the design). The graph is read with ``ast`` from the
sources, never by importing them; its strongly connected components (Tarjan) of more than one module are the
cycles."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "perfgate"



def _modules(root: Path) -> dict[str, Path]:
    mods = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its source (a package's own __init__ excepted)."""
    pkg = root.name
    mods = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        tree = ast.parse(f.read_text())
        base = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    b = base
                    for _ in range(node.level - 1):
                        b = b.rpartition(".")[0]
                    mod = f"{b}.{node.module}" if node.module else b
                else:
                    mod = node.module or ""
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            for t in targets:
                if t.split(".")[0] != pkg:
                    continue
                r = resolve(t)
                if r and r != m and not m.startswith(r + "."):  # a package's own __init__ is not a cycle
                    edges[m].add(r)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_perfgate_has_no_import_cycle():
    found = [sorted(c) for c in cycles(import_graph(PACKAGE))]  # TYPE_CHECKING and function-level imports too
    assert not found, "modules that import each other: " + "; ".join(", ".join(c) for c in found)


def test_the_pytest_layer_is_layered():
    """The session's state imports nothing of the pytest layer that acts on it (pool, runner, cases, ...); the
    ledger it holds, its settings and the record kinds' registry need no pytest and sit below the layer."""
    edges = import_graph(PACKAGE)
    plugin = {m for m in edges if m.startswith("perfgate.plugin.")}
    assert edges["perfgate.plugin.state"] & plugin <= {"perfgate.plugin.fingerprint", "perfgate.plugin.say"}
    for below in ("perfgate.measuring.ledger", "perfgate.profiles.settings", "perfgate.kinds"):
        assert not edges[below] & plugin, below
    # the registry is the bottom of the record's vocabulary: it imports only its kinds' names below it
    assert edges["perfgate.kinds"] <= {"perfgate.categories"}
    assert not edges["perfgate.categories"]


def test_the_check_finds_a_cycle_hidden_behind_type_checking(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n")
    (pkg / "c.py").write_text("def f():\n    from . import a\n")
    assert cycles(import_graph(pkg)) == [frozenset({"pkg.a", "pkg.b"})]
