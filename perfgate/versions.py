"""Version strings: parsing and comparison, one set of rules for all of perfgate.

Versions order as PEP 440 (:class:`packaging.version.Version`) orders them, ignoring local labels
(``2.9.1+cu129`` equals ``2.9.1``): a pre-release sorts below its release (``0.5.18rc0 < 0.5.18``),
as pip and SGLang's own version checks order them. A string PEP 440 cannot read (``580.95.05``
reads; ``12.8 (driver)`` does not) compares by its leading dotted numbers.

A list of package versions (``flashinfer=0.8.0,cuda=13.1``: a stack's overrides) is read by :func:`key_versions`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from typing import Any

from packaging.version import InvalidVersion, Version

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def parse_version(text: str) -> tuple[int, ...]:
    """The leading dotted numbers: ``"0.5.23"`` -> ``(0, 5, 23)``; ``"2.9.1+cu129"`` -> ``(2, 9, 1)``."""
    parts: list[int] = []
    for piece in str(text).strip().split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.end() != len(piece):
            break
    return tuple(parts)


def is_version(text: str) -> bool:
    """Whether ``text`` is a PEP 440 version."""
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _key(text: str) -> Version | None:
    try:
        return Version(Version(text.strip()).public)
    except InvalidVersion:
        nums = parse_version(text)
        return Version(".".join(map(str, nums))) if nums else None


def compare(have: str, op: str, want: str) -> bool:
    """``have OP want`` (``op`` one of ``== != < <= > >=``); False when either side is no version."""
    a, b = _key(have), _key(want)
    if a is None or b is None:
        return False
    return bool(_OPS[op](a, b))


def version_at_least(text: str | None, minimum: str) -> bool:
    """True when version ``text`` is >= ``minimum`` (False when ``text`` is None or no version)."""
    return text is not None and compare(text, ">=", minimum)


def _not_key_version(item: str) -> Exception:
    return ValueError(f"stack override {item!r} is not KEY=VERSION")


def key_versions(text: str | None, sep: str = ",", *,
                 bad: Callable[[str], Exception] = _not_key_version) -> Iterator[tuple[str, str, str]]:
    """The items of a ``KEY=VER`` list (``"flashinfer=0.8.0, cuda=13.1"``), in order, as (item, key, version), each
    stripped: an empty item is skipped, a key given twice comes twice, a version keeps any ``=`` after the first. The
    first item without ``=`` raises ``bad(item)`` (a ValueError naming it unless the caller words its own) when it is
    reached, after the items before it. The one parser of perfgate's stack overrides: the simulator's
    (perfgate.sim.hardware.parse_stack_overrides), the stack's (perfgate.stack.parse_overrides, which checks the keys
    and versions) and a candidate arm's ``sim-stack=`` (perfgate.profiles.settings.parse_candidate, ``;`` between)."""
    for item in (text or "").split(sep):
        item = item.strip()
        if not item:
            continue
        key, eq, version = item.partition("=")
        if not eq:
            raise bad(item)
        yield item, key.strip(), version.strip()
