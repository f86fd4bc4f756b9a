"""Reading a profile's TOML: typed access that names the dotted key in every error, and the
table parsers profiles and ``variants.toml`` share (flags, environment, paths)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perfgate import envnames
from perfgate.errors import ProfileSchemaError


def _close(word: str, options: Iterable[object]) -> str | None:
    opts = [str(o) for o in options]
    m = difflib.get_close_matches(word, opts, n=1)
    return f"did you mean '{m[0]}'?" if m else f"use one of {sorted(opts)}"


#: how a value of each TOML type is written, for the fix of a type error
_EXAMPLES: dict[type, str] = {str: '"..."', int: "3", float: "0.5", bool: "true", list: "[...]", dict: "{ ... }"}


def _type_fix(key: str, typ: type | tuple[type, ...], what: str) -> str:
    types = typ if isinstance(typ, tuple) else (typ,)
    shown = " or ".join(dict.fromkeys(f"{key} = {_EXAMPLES[t]}" for t in types if t in _EXAMPLES))
    return f"write it as {what}" + (f" ({shown})" if shown else "")


def _range_fix(key: str, what: str, lo: float | None, hi: float | None) -> str:
    bounds = " and ".join(b for b in (f">= {lo:g}" if lo is not None else "", f"<= {hi:g}" if hi is not None else "")
                          if b)
    return f"write {key} = <{what}>, a number {bounds}"


class TableReader:
    """Typed access into a TOML table that records the dotted key for error messages."""

    def __init__(self, path: Path, data: Mapping[str, Any], prefix: str = "",
                 warnings: list[str] | None = None) -> None:
        self.path = path
        self.data = data
        self.prefix = prefix
        # problems worth a loud line that are not errors, shared by every sub-table of one file
        self.warnings: list[str] = warnings if warnings is not None else []

    def warn(self, key: str, message: str) -> None:
        self.warnings.append(f"{self.path}: key '{self.k(key)}': {message}")

    def k(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def err(self, key: str, expected: str, found: object = None, fix: str | None = None) -> ProfileSchemaError:
        return ProfileSchemaError(self.path, self.k(key), expected, found, fix=fix)

    def only(self, allowed: set[str] | frozenset[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.err(key, f"a known key ({', '.join(sorted(allowed))})", key, fix=_close(key, allowed))

    def req(self, key: str, typ: type | tuple[type, ...], what: str) -> Any:
        if key not in self.data:
            raise self.err(key, what, fix=f"add `{key} = ...` under [{self.prefix.rstrip('.') or 'top level'}]")
        return self.get(key, typ, what, None)

    def get(self, key: str, typ: type | tuple[type, ...], what: str, default: Any) -> Any:
        if key not in self.data:
            return default
        v = self.data[key]
        if isinstance(v, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
            raise self.err(key, what, v, fix=_type_fix(key, typ, what))
        if not isinstance(v, typ):
            raise self.err(key, what, v, fix=_type_fix(key, typ, what))
        return v

    def num(self, key: str, what: str, default: Any = None, *, lo: float | None = None, hi: float | None = None,
            required: bool = False) -> Any:
        v = self.req(key, (int, float), what) if required else self.get(key, (int, float), what, default)
        if v is None:
            return v
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.err(key, what, v, fix=_range_fix(key, what, lo, hi))
        return v

    def int_(self, key: str, what: str, default: Any = None, *, lo: int | None = None, hi: int | None = None,
             required: bool = False) -> Any:
        """A whole number: ``4.5`` (or ``4.0``, or ``true``) is an error, never truncated."""
        v = self.data.get(key, None)
        if v is None:
            if required:
                raise self.err(key, what, fix=f"add {key} = <{what}>")
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            fix = (f"write {key} = {int(v)}" if isinstance(v, float) and v.is_integer()
                   else f"write {key} = <{what}>, a whole number without quotes or a decimal point")
            raise self.err(key, what, v, fix=fix)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.err(key, what, v, fix=_range_fix(key, what, lo, hi))
        return v

    def sub(self, key: str, required: bool = False) -> TableReader:
        v = self.data.get(key)
        if v is None:
            if required:
                raise self.err(key, "a table", fix=f"add a [{self.k(key)}] table")
            v = {}
        if not isinstance(v, dict):
            raise self.err(key, "a table", v, fix=f"write it as a table: a [{self.k(key)}] header with its keys "
                                                    f"below, or {key} = {{ ... }}")
        return TableReader(self.path, v, f"{self.k(key)}.", self.warnings)


def flag_table(r: TableReader, key: str) -> dict[str, object]:
    sub = r.sub(key)
    out: dict[str, object] = {}
    for name, v in sub.data.items():
        if name.startswith("-"):
            raise sub.err(name, "a flag name without leading dashes", name, fix=f"write `{name.lstrip('-')} = ...`")
        if isinstance(v, dict):
            raise sub.err(name, "a flag value (string, number, bool or list)", v)
        if isinstance(v, list) and not all(isinstance(x, (str, int, float)) for x in v):
            raise sub.err(name, "a list of strings or numbers", v)
        out[name] = v
    return out


def env_table(r: TableReader, key: str) -> dict[str, str]:
    sub = r.sub(key)
    out: dict[str, str] = {}
    for name, v in sub.data.items():
        if isinstance(v, (dict, list)):
            raise sub.err(name, "an environment value (string or number)", v)
        out[name] = str(v).lower() if isinstance(v, bool) else str(v)
        bad = envnames.problem(name)
        if bad is not None and bad[0] == "error":
            raise sub.err(name, "an environment variable NCCL, SGLang or the simulator reads", name, fix=bad[1])
        if bad is not None:
            sub.warn(name, bad[1])
    return out


def local_paths(root: Path, flags: dict[str, object]) -> dict[str, object]:
    """Path flags (``*-path``) given relative to the project, e.g. fixtures/models/..., made absolute."""
    out = dict(flags)
    for k, v in flags.items():
        if k.endswith("-path") and isinstance(v, str) and not Path(v).is_absolute() and (root / v).exists():
            out[k] = str((root / v).resolve())
    return out


def line_of(text: str, *needles: str) -> int | None:
    lines = text.splitlines()
    start = 0
    for needle in needles:
        for i in range(start, len(lines)):
            if needle in lines[i]:
                start = i
                break
        else:
            return None
    return start + 1


def resolve_path(root: Path, value: str) -> Path:
    """A file a profile names: absolute as given; relative against the project root (the directory holding
    ``baselines/``), else perfgate's shipped copy (the simulated boxes and prompt sets, ``fixtures/sim/*.toml``
    and ``fixtures/prompts/*.jsonl``); the root's path when neither exists, for the error to name."""
    from perfgate.profiles.shipped import shipped_file

    p = Path(value).expanduser()
    if p.is_absolute():
        return p
    local = root / p
    if local.exists():
        return local
    return shipped_file(p) or local
