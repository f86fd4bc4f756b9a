"""``--perfgate-update-baselines``: write measured floors back into a profile, keeping its layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import tomlkit


def write_updates(path: Path, updates: Sequence[tuple[str, str, object, object]],
                  meta: Mapping[str, Mapping[str, object]]) -> Path:
    """Set ``[floors.<mode>] <key> = new`` and ``[floors.<mode>.measured]`` (comments are kept)."""
    doc = tomlkit.parse(path.read_text())
    floors = doc.get("floors")
    if floors is None:
        floors = tomlkit.table(is_super_table=True)
        doc["floors"] = floors
    for mode, key, _old, new in updates:
        if mode not in floors:
            t = tomlkit.table()
            t["tolerance"] = 0.03
            floors[mode] = t
        floors[mode][key] = new
    for mode, m in meta.items():
        if mode not in floors:
            continue
        measured = tomlkit.table()
        for k, v in m.items():
            measured[k] = v if isinstance(v, (int, float, bool)) else str(v)
        floors[mode]["measured"] = measured
    path.write_text(tomlkit.dumps(doc))
    return path
