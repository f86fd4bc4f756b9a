"""``--perfgate-update-baselines``: write measured floors back into a profile, keeping its layout.

Only the keys that change are touched (tomlkit keeps every comment, blank line and the order of
the file); each updated mode gets a ``[floors.<mode>.measured]`` table with the date, trials,
CV and the stack fingerprint. The result is loaded again before this returns; a file that would
no longer load is put back as it was and :class:`~perfgate.errors.ConfigError` is raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomlkit

from perfgate.errors import ConfigError, PerfgateError

DEFAULT_TOLERANCE = 0.03


def write_updates(path: Path, updates: Sequence[tuple[str, str, object, object]],
                  meta: Mapping[str, Mapping[str, object]]) -> Path:
    """Set ``[floors.<mode>] <key> = new`` and ``[floors.<mode>.measured]`` (comments are kept)."""
    from perfgate.profiles.load import load_profile

    path = Path(path)
    original = path.read_text()
    try:
        known = set(load_profile(path).floors)  # floors this profile has, with an ``extends`` parent's
    except PerfgateError:
        known = set()
    doc = tomlkit.parse(original)
    floors: Any = doc.get("floors")
    if floors is None:
        floors = tomlkit.table(is_super_table=True)
        doc["floors"] = floors
    for mode, key, _old, new in updates:
        if mode not in floors:
            t = tomlkit.table()
            if key == "tok_s" and mode not in known:
                t["tolerance"] = DEFAULT_TOLERANCE
            floors[mode] = t
        floors[mode][key] = new
    for mode, m in meta.items():
        if mode not in floors:
            continue
        values = {k: (v if isinstance(v, (int, float, bool)) else str(v)) for k, v in m.items()}
        measured = floors[mode].get("measured")
        if measured is None:
            measured = tomlkit.table()
            floors[mode]["measured"] = measured
        for k in [k for k in measured if k not in values]:
            del measured[k]  # stale facts of an older measurement
        for k, v in values.items():
            measured[k] = v
    path.write_text(tomlkit.dumps(doc))
    try:
        load_profile(path)
    except PerfgateError as e:
        path.write_text(original)
        raise ConfigError(f"updating {path} would break it ({e}); the file was left as it was") from None
    return path
