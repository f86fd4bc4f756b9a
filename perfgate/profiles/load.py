"""Loading a profile: the file read, ``extends`` merged, every section parsed, the result validated.

Also where profiles are found: under ``<project>/baselines/<hardware>/<model>.toml``.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfgate.errors import ProfileNotFound, ProfileSchemaError
from perfgate.profiles import SCHEMA_VERSION, Profile, limits, sections
from perfgate.profiles.reader import TableReader
from perfgate.profiles.simbox import check_sim_box
from perfgate.profiles.slo import slo as slo_section

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load_profile(path: str | Path) -> Profile:
    """Load and validate one profile file."""
    path = Path(path)
    if not path.is_file():
        raise ProfileNotFound(f"profile not found: {path}")
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise ProfileSchemaError(path, "(file)", "UTF-8 text", str(e), fix="save the file as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ProfileSchemaError(path, "(file)", "valid TOML", str(e),
                                 fix="fix the TOML syntax at the position shown") from None
    root = project_root_of(path)
    data = _merge_parents(path, data, seen=(path.resolve(),))
    r = TableReader(path, data)
    r.only({"schema_version", "name", "description", "hardware", "engine", "model", "server", "modes",
            "workload", "floors", "expectations", "variants", "micro", "slo"})
    sv = r.req("schema_version", int, f"the integer {SCHEMA_VERSION}")
    if sv != SCHEMA_VERSION:
        raise r.err("schema_version", f"{SCHEMA_VERSION}", sv, fix="this perfgate reads schema_version 1")
    default_name = f"{path.parent.name}/{path.stem}" if path.parent.name != "baselines" else path.stem
    name = r.get("name", str, "a string", None) or default_name
    hardware = sections.hardware(r)
    engine = sections.engine(r, root)
    model = sections.model(r, root)
    if engine.sim_hardware is not None:
        check_sim_box(path, engine.sim_hardware, hardware, model, r.data.get("server") or {})
    server_flags, server_env = sections.server(r, root)
    modes = sections.modes(r, root)
    workload = sections.workload(r, root)
    floors = limits.floors(r, modes, simulated=engine.name == "sim", gpu=hardware.gpu)
    expectations = sections.expectations(r, modes, text)
    vmodes, include, overrides = sections.variants(r, modes)
    micro = limits.micro(r)
    slos = slo_section(r, modes)
    return Profile(
        path=path.resolve(),
        name=name,
        root=root,
        description=r.get("description", str, "a string", ""),
        hardware=hardware,
        engine=engine,
        model=model,
        server_flags=server_flags,
        server_env=server_env,
        modes=modes,
        workload=workload,
        floors=floors,
        expectations=expectations,
        variant_modes=vmodes,
        variant_include=include,
        variant_overrides=overrides,
        micro=micro,
        slo=slos,
        warnings=tuple(r.warnings),
    )


#: the tables that are one entry each under ``extends``: a child's replaces the parent's whole, never merged
#: key by key (a child's ``{ expect = "pass" }`` must not keep the parent's ``when`` or ``category``); "*" is
#: any name. Every other table merges key by key; a value that is not a table is always replaced whole.
ENTRY_TABLES: tuple[tuple[str, ...], ...] = (
    ("expectations", "*", "*"),          # [expectations.<name>] <mode> = { expect, category, reason, when }
    ("floors", "*", "measured"),         # the stamp of the measurement a floor came from
    ("floors", "*", "*", "measured"),    # ... of a [floors.<mode>.c<N>] limit
    ("micro", "floors", "*"),            # "<backend>.<timing>.<bytes>" = { latency_us, tolerance, world_size }
    ("variants", "overrides", "*"),      # what the profile changes for one variant
)


def _is_entry(where: tuple[str, ...]) -> bool:
    return any(len(e) == len(where) and all(a in ("*", b) for a, b in zip(e, where)) for e in ENTRY_TABLES)


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any], where: tuple[str, ...] = ()) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and not _is_entry((*where, k)):
            out[k] = _deep_merge(out[k], v, (*where, k))
        else:
            out[k] = v
    return out


def _merge_parents(path: Path, data: dict[str, Any], seen: tuple[Path, ...]) -> dict[str, Any]:
    """``extends = "other.toml"``: the other profile's tables, overridden key by key by this one, down to the
    entries (:data:`ENTRY_TABLES`), which the child replaces whole."""
    parent = data.get("extends")
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ProfileSchemaError(path, "extends", "a path to another profile", parent)
    ppath = (path.parent / parent).resolve()
    if ppath in seen:
        raise ProfileSchemaError(path, "extends", "no cycle of extends", parent)
    if not ppath.is_file():
        raise ProfileSchemaError(
            path, "extends", "an existing profile file (a path relative to this profile's folder)", parent,
            fix=f"no file at {ppath}: copy the profile it extends there, or point extends at one that exists; "
                f"`perfgate init DIR --from <hardware>/<model>` copies a profile with every profile it extends")
    try:
        pdata = tomllib.loads(ppath.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ProfileSchemaError(ppath, "(file)", "valid TOML", str(e)) from None
    pdata = _merge_parents(ppath, pdata, seen + (ppath,))
    child = {k: v for k, v in data.items() if k != "extends"}
    merged = _deep_merge(pdata, child)
    merged.pop("name", None) if "name" not in child else None
    return merged


def project_root_of(path: Path) -> Path:
    """The directory holding ``baselines/`` (relative paths in a profile resolve against it)."""
    for parent in path.resolve().parents:
        if parent.name == "baselines":
            return parent.parent
    return path.resolve().parent


def find_profiles(root: Path) -> list[Path]:
    """Every profile file under ``root/baselines`` (variants.toml excluded)."""
    base = root / "baselines"
    return sorted(p for p in base.glob("*/*.toml"))


def resolve_profile(spec: str, root: Path) -> Path:
    """A profile given as a path, or as ``<hardware>/<model>`` under ``root/baselines``."""
    from perfgate.profiles.shipped import shipped_file

    p = Path(spec).expanduser()
    cands = [p, root / p, root / "baselines" / p, root / "baselines" / f"{spec}.toml"]
    for c in cands:
        if c.is_file():
            return c
    for rel in (p, Path("baselines") / p, Path("baselines") / f"{spec}.toml"):  # a profile perfgate ships
        found = shipped_file(rel)
        if found is not None:
            return found
    known = [str(x.relative_to(root / "baselines").with_suffix("")) for x in find_profiles(root)]
    hint = difflib.get_close_matches(spec, known, n=1)
    raise ProfileNotFound(
        f"profile '{spec}' not found (looked for a file, and under {root / 'baselines'}); "
        + (f"did you mean '{hint[0]}'? " if hint else "")
        + f"known profiles: {', '.join(known) or 'none'}"
    )
