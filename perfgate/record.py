"""The record contract: what one perf test writes into JUnit, and how values are written.

One JUnit ``<testcase>`` per record. Its identity is a :class:`Case` (kind, mode, variant of one
profile); its numbers and verdict travel as ``<property>`` elements, written by the runner, the public
API and the micro tier through :func:`fmt`, and read back by ``perfgate.report.junit_read``, which
takes :data:`TEXT_PROPERTIES` from here. docs/records.md lists every property.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Case", "TEXT_PROPERTIES", "case_of", "config_scope", "fmt"]


@dataclass(frozen=True)
class Case:
    """One record to produce: a kind of check, in a mode, optionally with a variant."""

    profile: str
    kind: str
    mode: str
    variant: str | None = None

    @property
    def id(self) -> str:
        return f"{self.profile.split('/')[-1]}:{self.mode}" + (f"+{self.variant}" if self.variant else "")

    @property
    def expectation_key(self) -> str:
        return self.variant or self.kind

    def baseline(self, base_mode: str) -> Case:
        return Case(self.profile, "floor", base_mode, None)


def case_of(item: Any) -> Case | None:
    """The Case a collected test produces (its ``perf_case`` or ``perf_server`` parameter), if any."""
    cs = getattr(item, "callspec", None)
    if cs is None:
        return None
    c = cs.params.get("perf_case", cs.params.get("perf_server"))
    return c if isinstance(c, Case) else None


def config_scope(nodeid: str) -> tuple[str, str | None] | None:
    """(mode, variant) of a perf test from its node id (``...[<Case.id>]``), the inverse of :attr:`Case.id`;
    None for any other test."""
    if nodeid.endswith("]") and "[" in nodeid:
        param = nodeid[nodeid.rindex("[") + 1:-1]
        if ":" in param:
            mode, _, variant = param.split(":", 1)[1].partition("+")
            return mode, variant or None
    return None


def fmt(v: object) -> str:
    """A property value as written: booleans ``true``/``false``, floats to 6 significant digits."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


#: properties that are text even when they look like numbers (``config`` is a hash)
TEXT_PROPERTIES: frozenset[str] = frozenset({
    "engine", "profile", "mode", "variant", "config", "log", "kind", "outcome", "category", "expected",
    "reason", "backend", "metric", "direction", "exercised", "nccl_warning",
})
