"""The paths a profile or a variant hands to SGLang, checked before any server starts.

A model (``[model] path``, a ``*-path`` flag such as ``speculative-draft-model-path``) is a local path or a
Hugging Face repo id. The rule (docs/profiles.md, "Paths"):

- a value that names an existing file or directory (absolute, or relative to the project root) is that
  path (the loader has made it absolute);
- otherwise a value of the form ``name`` or ``org/name`` (letters, digits, ``-``, ``_``, ``.``; at most one
  ``/``; not starting with ``.``, ``/`` or ``~``) is a Hugging Face repo id, left for SGLang to download;
- anything else (``/models/x``, ``./x``, ``fixtures/models/x``, ``~/x``) is a local path that does not
  exist: an error naming the file, the key and the fix, before any launch. Without it real SGLang spends
  ~40 s starting, then dies quoting a repo-id error, and the record says ``crash``.

Only the real engine reads these paths: a simulated profile's are not checked.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfgate.profiles import Profile
    from perfgate.profiles.variants import VariantSet

__all__ = ["is_repo_id", "path_problem", "missing_paths"]

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def is_repo_id(value: str) -> bool:
    """Whether ``value`` has the form of a Hugging Face repo id (``name`` or ``org/name``)."""
    return bool(_REPO_ID.match(value)) and ".." not in value


def path_problem(value: str, root: Path) -> str | None:
    """Why ``value`` (a model or a ``*-path`` flag) cannot reach SGLang, or None."""
    p = Path(value).expanduser()
    local = p if p.is_absolute() else root / p
    if local.exists() or (not value.startswith(("./", "~")) and is_repo_id(value)):
        return None
    return (f"expected an existing file or directory, or a Hugging Face repo id (org/name), found {value!r}: no "
            f"such path ({local}{'' if p.is_absolute() else ', relative paths resolve against the project root'})")


def _path_flags(flags: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    for k, v in flags.items():
        if k.endswith("-path") and isinstance(v, str):
            yield k, v


def missing_paths(profile: Profile, variants: VariantSet | None = None) -> list[str]:
    """Every path the real engine would be handed that does not exist, one line each (file, key, fix)."""
    if profile.simulated:
        return []
    root, out = profile.root, []
    fix = ("fix: point it at the weights on this machine (an absolute path, or one relative to the project "
           "root), or write the Hugging Face repo id (org/name)")

    def check(file: Path, key: str, value: str) -> None:
        why = path_problem(value, root)
        if why is not None:
            out.append(f"{file}: key '{key}': {why}; {fix}")

    check(profile.path, "model.path", profile.model.path)
    for k, v in _path_flags(profile.server_flags):
        check(profile.path, f"server.{k}", v)
    for mode in profile.modes.values():
        for k, v in _path_flags(mode.flags):
            check(profile.path, f"modes.{mode.name}.flags.{k}", v)
    for name, over in profile.variant_overrides.items():
        for k, v in _path_flags(over):
            check(profile.path, f"variants.overrides.{name}.{k}", v)
    if variants is not None:
        names = profile.variant_include if profile.variant_include is not None else tuple(variants.variants)
        for variant in (variants.variants[n] for n in names if n in variants.variants):
            for k, val in _path_flags(variant.flags):
                check(variants.path, f"variants.{variant.name}.flags.{k}", val)
    py = profile.engine.python
    if py and not (Path(py).expanduser().is_file() if "/" in py else shutil.which(py)):
        out.append(f"{profile.path}: key 'engine.python': expected the interpreter that runs SGLang, found {py!r}: "
                   f"no such file{'' if '/' in py else ' on PATH'}; fix: give its absolute path, or leave python "
                   f"out to use the one running pytest")
    return out
