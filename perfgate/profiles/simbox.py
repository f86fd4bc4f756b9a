"""A simulated profile must describe the box and model its simulator serves (``fixtures/sim/*.toml``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfgate.errors import ProfileSchemaError
from perfgate.profiles import Hardware, ModelSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def check_sim_box(path: Path, sim_path: Path, hardware: Hardware, model: ModelSpec, server: Mapping[str, Any]) -> None:
    """The simulated box must be the box and model the profile describes, or the records would lie.

    The simulator serves the model and GPUs of its hardware file (``fixtures/sim/*.toml``); a profile for
    another model or GPU count would be measured as that box's model, and its records would carry the
    box's stack. Refused here, naming both sides.
    """
    try:
        box = tomllib.loads(sim_path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ProfileSchemaError(path, "engine.sim_hardware", "a readable simulated hardware file", str(sim_path),
                                 fix=str(e)) from None
    bh, bm = box.get("hardware", {}), box.get("model", {})
    fix = (f"point [engine] sim_hardware at a box file for this hardware and model, or write one: copy "
           f"{sim_path.name} under fixtures/sim/ and change its [hardware] and [model]")

    def refuse(key: str, ours: object, theirs: object) -> ProfileSchemaError:
        return ProfileSchemaError(path, key, f"what the simulated box serves ({sim_path.name}: {theirs})", ours,
                                  fix=fix)

    if bh.get("count") != hardware.count:
        raise refuse("hardware.count", hardware.count, f"{bh.get('count')} GPUs")
    if hardware.gpu.lower() not in str(bh.get("gpu", "")).lower():
        raise refuse("hardware.gpu", hardware.gpu, bh.get("gpu"))
    if str(bh.get("sm")) != hardware.sm:
        raise refuse("hardware.sm", hardware.sm, f"SM {bh.get('sm')}")
    if bh.get("interconnect") != hardware.interconnect:
        raise refuse("hardware.interconnect", hardware.interconnect, bh.get("interconnect"))
    name = str(bm.get("name", ""))
    ours = (model.name or "").lower()
    if (ours and name and ours not in name.lower() and name.lower() not in ours
            and Path(model.path).name.lower() not in name.lower()):
        raise refuse("model.name", model.name, name)
    for key in ("layers", "hidden"):
        want = getattr(model, key)
        if want is not None and bm.get(key) is not None and want != bm.get(key):
            raise refuse(f"model.{key}", want, f"{key} = {bm.get(key)} ({name})")
    tp = server.get("tp-size", server.get("tp", 1))
    if isinstance(tp, int) and not isinstance(tp, bool) and tp > hardware.count:
        raise ProfileSchemaError(path, "server.tp-size", f"at most the profile's {hardware.count} GPUs", tp,
                                 fix="lower tp-size or raise [hardware] count")
