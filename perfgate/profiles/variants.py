"""Variants: optimization attempts as data (``baselines/variants.toml``).

A variant is a delta on top of a profile's mode: SGLang flags and environment variables,
plus the backend it is meant to exercise (so a silent fallback to NCCL is caught), and
per-version spellings where SGLang renamed a flag. Adding an attempt is adding a TOML entry.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.categories import Backend
from perfgate.errors import ProfileNotFound, ProfileSchemaError
from perfgate.profiles.reader import TableReader, _close, env_table, flag_table
from perfgate.versions import compare, is_version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True, kw_only=True)
class Spelling:
    """``flag`` is spelled ``legacy`` by SGLang releases older than ``below``."""

    flag: str
    legacy: str
    below: str
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One optimization attempt: a named delta of flags and environment."""

    name: str
    description: str
    flags: Mapping[str, object] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    backend: Backend | None = None  # checked at load: one of Backend's values
    spellings: tuple[Spelling, ...] = ()
    # Python modules the server must import for this attempt to run at all (some SGLang releases ignore
    # a backend's flag without a word when its package is missing, e.g. --enable-mscclpp in 0.5.17)
    requires: tuple[str, ...] = ()

    def declared_keys(self) -> set[str]:
        return set(self.flags) | {f"env:{k}" for k in self.env}


@dataclass(frozen=True, kw_only=True)
class VariantSet:
    """The variants file: every variant and the global flag spellings."""

    path: Path
    variants: Mapping[str, Variant]
    spellings: tuple[Spelling, ...]
    warnings: tuple[str, ...] = ()

    def get(self, name: str) -> Variant:
        try:
            return self.variants[name]
        except KeyError:
            raise ProfileSchemaError(self.path, f"variants.{name}", "a variant defined in this file", name,
                                     fix=_close(name, self.variants)) from None


def _spellings(r: TableReader, key: str) -> tuple[Spelling, ...]:
    raw = r.get(key, list, "an array of tables [[spellings]] with flag, legacy, below", [])
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise r.err(f"{key}[{i}]", "a table with flag, legacy, below", item)
        sr = TableReader(r.path, item, f"{r.k(key)}[{i}].")
        sr.only({"flag", "legacy", "below", "note"})
        below = sr.req("below", str, "a version string")
        if not is_version(below):
            raise sr.err("below", "a version such as 0.5.17", below)
        out.append(Spelling(flag=sr.req("flag", str, "a flag name"), legacy=sr.req("legacy", str, "a flag name"),
                            below=below, note=sr.get("note", str, "a string", "")))
    return tuple(out)


def _backend(v: TableReader) -> Backend | None:
    """``backend``: what the attempt must exercise (a fallback to another is caught); one of :class:`Backend`."""
    known = [b.value for b in Backend]
    name = v.get("backend", str, f"the backend this attempt must exercise (one of {', '.join(known)})", None)
    if name is None:
        return None
    try:
        return Backend(name)
    except ValueError:
        raise v.err("backend", f"a backend perfgate can check ({', '.join(known)})", name,
                    fix=_close(name, known)) from None


def load_variants(path: str | Path) -> VariantSet:
    """Load and validate ``variants.toml``."""
    path = Path(path)
    if not path.is_file():
        raise ProfileNotFound(f"variants file not found: {path.resolve()}; fix: pass --perfgate-variants-file PATH "
                              f"(relative to the directory pytest runs in), or write baselines/variants.toml in the "
                              f"profile's project (schema: docs/profiles.md)")
    try:
        data = tomllib.loads(path.read_text())
    except UnicodeDecodeError as e:
        raise ProfileSchemaError(path, "(file)", "UTF-8 text", str(e), fix="save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileSchemaError(path, "(file)", "valid TOML", str(e),
                                 fix="fix the TOML syntax at the position shown") from None
    r = TableReader(path, data)
    r.only({"schema_version", "spellings", "variants"})
    sv = r.req("schema_version", int, "the integer 1")
    if sv != 1:
        raise r.err("schema_version", "1", sv)
    glob = _spellings(r, "spellings")
    vs = r.sub("variants", required=True)
    variants: dict[str, Variant] = {}
    for name in vs.data:
        if not name.replace("-", "").replace("_", "").isalnum():
            raise vs.err(name, "a variant name of letters, digits, '-' and '_'", name)
        v = vs.sub(name)
        v.only({"description", "flags", "env", "backend", "spellings", "requires"})
        requires = v.get("requires", list, "a list of Python module names, e.g. [\"mscclpp\"]", [])
        for i, mod in enumerate(requires):
            if not isinstance(mod, str) or not all(part.isidentifier() for part in mod.split(".")):
                raise v.err(f"requires[{i}]", "a Python module name such as mscclpp", mod)
        variants[name] = Variant(
            name=name,
            description=v.req("description", str, "a one-line description of the attempt"),
            flags=flag_table(v, "flags"),
            env=env_table(v, "env"),
            backend=_backend(v),
            spellings=_spellings(v, "spellings"),
            requires=tuple(requires),
        )
        if not variants[name].flags and not variants[name].env:
            raise v.err("flags", "at least one flag or env entry (a variant is a delta)",
                        fix="add flags = { ... } or env = { ... }")
    return VariantSet(path=path.resolve(), variants=variants, spellings=glob, warnings=tuple(r.warnings))


def spell_flags(flags: Mapping[str, object], spellings: tuple[Spelling, ...], version: str | None) -> dict[str, object]:
    """Rename canonical flags to the spelling of ``version`` (unknown version: canonical)."""
    if not version:
        return dict(flags)
    out: dict[str, object] = {}
    for k, val in flags.items():
        name = k
        for s in spellings:
            if s.flag == k and compare(version, "<", s.below):
                name = s.legacy
                break
        out[name] = val
    return out
