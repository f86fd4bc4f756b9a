"""Writing floors back into a profile's TOML (``--perfgate-update-baselines``, ``perfgate floors --write``,
``scripts/micro_floors.py --update``), pytest-free.

:func:`write_updates` sets ``[floors.<mode>] <key> = new`` and stamps the ``measured`` facts beside it, keeping the
file's layout (tomlkit keeps every comment, blank line and the order of the file; a new key or table goes in
through :func:`perfgate.profiles.tomledit.put`); :func:`write_profile` is the one way a profile is replaced: the
new text must load as a profile first, and the copy perfgate ships is never written. The session's
:class:`perfgate.measuring.ledger.Ledger` collects what to write and calls :func:`write_updates` at session finish.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.errors import ConfigError, PerfgateError
from perfgate.profiles import DEFAULT_TOLERANCE

__all__ = ["STAMPED", "write_updates", "write_profile"]

#: the entry of a ``measured`` table listing the limits its facts stamp, when the table's other limits have their own
STAMPED = "keys"



def write_updates(path: Path, updates: Sequence[tuple[str, str, object, object]],
                  meta: Mapping[str, Mapping[str, object]]) -> Path:
    """Set ``[floors.<mode>] <key> = new`` (``[floors.<mode>.c<N>]`` for ``<mode>.c<N>``) and its ``measured``
    table (comments are kept), through :func:`write_profile`."""
    import tomlkit

    from perfgate.profiles.load import load_profile
    from perfgate.profiles.tomledit import put

    path = Path(path)
    original = path.read_text()
    try:
        prof = load_profile(path)
        known = set(prof.floors)  # floors this profile has, with an ``extends`` parent's
        modes = set(prof.modes)
    except PerfgateError:
        known, modes = set(), set()
    doc = tomlkit.parse(original)
    floors: Any = doc.get("floors")
    if floors is None:
        put(doc, "floors", tomlkit.table(is_super_table=True))
        floors = doc["floors"]
    def table(name: str, *, create: bool, key: str = "") -> Any:
        """``[floors.<mode>]``, or ``[floors.<mode>.c<N>]`` for a name ``<mode>.c<N>`` (N a concurrency)."""
        mode, level = name, None
        m = re.fullmatch(r"(.+)\.(c\d+)", name)
        if m and m.group(1) in modes and name not in modes:
            mode, level = m.group(1), m.group(2)
        if mode not in floors:
            if not create:
                return None
            t = tomlkit.table()
            if key == "tok_s" and mode not in known and level is None:
                t["tolerance"] = DEFAULT_TOLERANCE
            put(floors, mode, t)
        if level is None:
            return floors[mode]
        if level not in floors[mode]:
            if not create:
                return None
            put(floors[mode], level, tomlkit.table())
        return floors[mode][level]

    before = {name: _floor_keys(table(name, create=False)) for name, *_ in updates}
    written: dict[str, set[str]] = {}
    for name, key, _old, new in updates:
        put(table(name, create=True, key=key), key, new)
        if _is_limit_key(key):  # a limit's own tolerance goes with it, under its stamp
            written.setdefault(name, set()).add(key)
    for name, m in meta.items():
        t = table(name, create=False)
        if t is None:
            continue
        values = {k: (v if isinstance(v, (int, float, bool)) else str(v)) for k, v in m.items()}
        _stamp(t, values, written.get(name, set()), before.get(name, set()))
    return write_profile(path, tomlkit.dumps(doc))


#: keys of a ``[floors.<mode>]`` table that are not limits
_NOT_LIMITS = frozenset({"tolerance", "accept_len_tolerance", "max_cv", "measured", STAMPED})


def _is_limit_key(k: str) -> bool:
    return k not in _NOT_LIMITS and not k.endswith(("_tolerance", "_noise"))


def _floor_keys(t: Any) -> set[str]:
    """The limits a floors table holds (numbers; not its tolerances, stamp or per-concurrency tables)."""
    if t is None:
        return set()
    return {k for k, v in t.items() if _is_limit_key(k) and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _stamp(t: Any, values: Mapping[str, object], keys: set[str], before: set[str]) -> None:
    """Write the ``measured`` facts of the limits ``keys`` just written into the floors table ``t``.

    A ``measured`` table is the stamp of one measurement. When the update writes every limit of the table, its
    facts replace the stamp whole (facts of an older measurement go). When the table keeps limits that another
    measurement stamped (a crossover floor from one run, a goodput floor from a later one), each written key gets
    its own ``[... .measured.<key>]`` table and the table's own facts keep stamping the others, listed in its
    ``keys`` entry: a later update never hands one measurement's machine and report to another's limit.
    """
    import tomlkit

    from perfgate.profiles.tomledit import put

    measured = t.get("measured")
    others = _floor_keys(t) - keys
    if measured is None or not others:
        if measured is None:
            put(t, "measured", tomlkit.table())  # before a comment that leads to the next table, not after it
            measured = t["measured"]
        for k in [k for k in measured if k not in values]:
            del measured[k]  # stale facts of an older measurement (kept in place: its comments stay)
        for k, v in values.items():
            put(measured, k, v)
        if others:  # the table's first stamp, beside limits written by hand: say which limits it stamps
            put(measured, STAMPED, " ".join(sorted(keys)))
        return
    subtables = {k for k, v in measured.items() if isinstance(v, dict)}
    stamped = (set(str(measured[STAMPED]).split()) if STAMPED in measured else before - subtables) - keys
    for k in keys:
        sub = tomlkit.table()
        for f, v in values.items():
            sub[f] = v
        put(measured, k, sub)  # replaces that key's older stamp whole
    flat = [k for k in measured if k not in subtables | keys]
    if not stamped:
        for k in flat:
            del measured[k]  # the facts stamped only keys that now have their own
    elif flat:
        put(measured, STAMPED, " ".join(sorted(stamped)))


def write_profile(path: Path, text: str) -> Path:
    """Replace the profile at ``path`` with ``text``, only if ``text`` loads as a profile there: it is written
    next to it first (same folder, so ``extends`` and relative paths resolve as they will), loaded, and then
    moved over the original in one step. A text that would not load leaves the file as it was and raises
    :class:`~perfgate.errors.ConfigError`. Every profile writer goes through here (``--perfgate-update-baselines``,
    ``scripts/micro_floors.py --update``)."""
    import os

    from perfgate.profiles.load import load_profile
    from perfgate.profiles.shipped import is_shipped_copy

    path = Path(path)
    if is_shipped_copy(path):
        raise ConfigError(f"{path} is the copy of the profile that perfgate ships, inside the installation: copy it "
                          f"(and the profile it extends) into your project's baselines/ (`perfgate init` does) and "
                          f"run again")
    tmp = path.with_name(f".{path.name}.perfgate-update.tmp")
    tmp.write_text(text)
    try:
        load_profile(tmp)
    except PerfgateError as e:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"updating {path} would break it ({e}); the file was left as it was") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path
