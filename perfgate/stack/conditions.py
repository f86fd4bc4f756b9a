"""Stack conditions: what expectations use to say "this xfail holds only while ``flashinfer < 0.8``".

::

    flashinfer < 0.8
    sm == 12.0 and interconnect == pcie
    sglang >= 0.5.18 and gpu == "NVIDIA RTX PRO 6000 Blackwell Server Edition"

Clauses ``KEY OP VALUE`` joined by ``and``. Versions compare by :mod:`perfgate.versions`
(PEP 440, ignoring local labels: ``2.13.0+cpu`` equals ``2.13.0``); ``gpu`` and
``interconnect`` compare as case-insensitive strings (``==``/``!=`` only); an ``unknown`` or
unparsable stack piece never satisfies any comparison, ``!=`` included.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from perfgate.errors import ConfigError
from perfgate.stack import NAME_KEYS, VERSION_KEYS, Stack, _canonical_key
from perfgate.stack.probes import UNKNOWN
from perfgate.versions import compare, is_version

_OPS = ("<=", ">=", "==", "!=", "<", ">")
_CLAUSE = re.compile(
    r"""\s*(?P<key>[A-Za-z_][A-Za-z0-9_-]*)\s*
        (?P<op><=|>=|==|!=|<|>)\s*
        (?P<val>"[^"]*"|'[^']*'|[^\s"'<>=!]+(?:[ \t]+(?![Aa][Nn][Dd]\b)[^\s"'<>=!]+)*)\s*""",
    re.VERBOSE,
)


_CONDITION_HELP = (
    "write clauses 'KEY OP VALUE' joined by 'and', e.g. 'flashinfer < 0.8 and interconnect == pcie'; "
    f"KEY one of {', '.join(VERSION_KEYS + NAME_KEYS)}; OP one of {' '.join(_OPS)}"
)


_OPS_FN = {"==": operator.eq, "!=": operator.ne}  # names: equality only


@dataclass(frozen=True, kw_only=True)
class Clause:
    """One parsed ``KEY OP VALUE`` clause of a stack condition."""

    key: str
    op: str
    value: str


def parse_condition(expr: str) -> tuple[Clause, ...]:
    """Parse a stack condition into clauses; raises :class:`ConfigError` naming the fix."""
    if not isinstance(expr, str) or not expr.strip():
        raise ConfigError(f"stack condition {expr!r} is empty; fix: {_CONDITION_HELP}")
    clauses: list[Clause] = []
    pos = 0
    text = expr
    while True:
        m = _CLAUSE.match(text, pos)
        if m is None:
            raise ConfigError(
                f"stack condition {expr!r}: cannot parse at {text[pos:].strip()[:40]!r}; fix: {_CONDITION_HELP}"
            )
        raw_key, op, val = m.group("key"), m.group("op"), m.group("val")
        key = _canonical_key(raw_key)
        if key not in VERSION_KEYS and key not in NAME_KEYS:
            raise ConfigError(f"stack condition {expr!r}: unknown key {raw_key!r}; fix: {_CONDITION_HELP}")
        if val[:1] in "\"'":
            val = val[1:-1]
        val = val.strip()
        if not val:
            raise ConfigError(f"stack condition {expr!r}: empty value for {raw_key!r}; fix: {_CONDITION_HELP}")
        if key in NAME_KEYS:
            if op not in ("==", "!="):
                raise ConfigError(
                    f"stack condition {expr!r}: {raw_key!r} is a name, only == and != apply; "
                    f"fix: e.g. '{raw_key} == {val}'"
                )
            if key == "simulated" and val.lower() not in ("true", "false"):
                raise ConfigError(f"stack condition {expr!r}: simulated is true or false")
        elif not is_version(val):
            if re.search(r"\s(or|and)\s", f" {val} ", re.IGNORECASE):
                raise ConfigError(
                    f"stack condition {expr!r}: only 'and' joins clauses (no 'or', no parentheses); "
                    f"fix: {_CONDITION_HELP}"
                )
            example = {"sm": "9.0", "gpu_count": "8", "driver": "580.95.05"}.get(key, "0.8.0")
            raise ConfigError(
                f"stack condition {expr!r}: {val!r} is not a version for {raw_key!r}; "
                f"fix: e.g. '{raw_key} >= {example}'"
            )
        clauses.append(Clause(key=key, op=op, value=val))
        pos = m.end()
        if pos >= len(text):
            break
        m_and = re.compile(r"and\b", re.IGNORECASE).match(text, pos)
        if m_and is None:
            raise ConfigError(
                f"stack condition {expr!r}: expected 'and' at {text[pos:].strip()[:40]!r}; fix: {_CONDITION_HELP}"
            )
        pos = m_and.end()
    return tuple(clauses)


def clause_holds(clause: Clause, stack: Stack) -> bool:
    """Whether one clause holds; an unknown or unparsable stack piece never does."""
    actual = stack.value(clause.key)
    if actual.strip().lower() in ("", UNKNOWN):
        return False
    if clause.key in NAME_KEYS:
        return bool(_OPS_FN[clause.op](actual.strip().lower(), clause.value.strip().lower()))
    return is_version(actual.strip()) and compare(actual, clause.op, clause.value)


def condition_holds(expr: str, stack: Stack) -> bool:
    """Whether every clause of ``expr`` holds for ``stack`` (see the module docstring).

    Raises :class:`ConfigError` for a malformed expression.
    """
    return all(clause_holds(c, stack) for c in parse_condition(expr))
