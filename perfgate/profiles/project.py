"""Setting up a user's project (``perfgate init``): a profile copied from another one (a shipped one, or one of a
checkout) with every profile it ``extends``, the variants file, and the local files the profile names that the
project would not otherwise find (a ``config.json``-only model of a checkout's ``fixtures/models/``). Files
perfgate ships (the simulated boxes, the prompt sets) are not copied: a profile's relative path falls back to the
shipped copy (:func:`perfgate.profiles.reader.resolve_path`).

Nothing here imports argparse or pytest; :mod:`perfgate.cli.init` is the command.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from perfgate.errors import ConfigError

__all__ = ["Copied", "copy_profile"]


@dataclass(frozen=True, kw_only=True)
class Copied:
    """One file or directory written into the project, and why."""

    path: Path
    source: Path
    why: str


def _chain(path: Path) -> list[Path]:
    """The profile and the profiles it extends, child first."""
    out = [path.resolve()]
    while True:
        data = tomllib.loads(out[-1].read_text())
        parent = data.get("extends")
        if not isinstance(parent, str):
            return out
        nxt = (out[-1].parent / parent).resolve()
        if nxt in out or not nxt.is_file():
            return out  # the loader (run below) says what is wrong
        out.append(nxt)


def _under_baselines(path: Path) -> tuple[Path, Path] | None:
    """(the project root holding ``baselines/``, the path relative to ``baselines/``), or None."""
    for parent in path.parents:
        if parent.name == "baselines":
            return parent.parent, path.relative_to(parent)
    return None


def _rel(src: Path, to: Path) -> str:
    """``to`` relative to the folder of ``src`` (both inside one tree), with ``/``."""
    import os

    return Path(os.path.relpath(to, src.parent)).as_posix()


def copy_profile(source: Path, dest_root: Path, *, force: bool = False) -> list[Copied]:
    """Copy the profile at ``source`` into ``dest_root/baselines/`` at its own ``<hardware>/<model>.toml``, with
    every parent of its ``extends`` chain (each at its place under ``baselines/``, its ``extends`` line rewritten
    when the place differs), ``baselines/variants.toml`` (the source project's, else the shipped one), and the
    local files its paths name that are neither shipped nor already in the project. Refuses to overwrite a file
    unless ``force``. Returns what it wrote, the profile first."""
    from perfgate.profiles.load import load_profile
    from perfgate.profiles.reader import resolve_path
    from perfgate.profiles.shipped import shipped_file

    prof = load_profile(source)  # a broken source is refused before anything is written
    chain = _chain(source)
    src_root = prof.root
    dest_base = dest_root / "baselines"
    places: list[Path] = []
    for p in chain:
        under = _under_baselines(p)
        places.append(dest_base / under[1] if under else
                      (places[-1].parent if places else dest_base / "mine") / p.name)
    plan: list[tuple[Path, Path, str, str]] = []  # (dest, source, text, why)
    for i, (p, dest) in enumerate(zip(chain, places)):
        text = p.read_text()
        if i + 1 < len(chain):
            text = re.sub(r'(?m)^(extends\s*=\s*)"[^"]*"', f'\\g<1>"{_rel(dest, places[i + 1])}"', text, count=1)
        why = "the profile" if i == 0 else f"extended by {places[i - 1].relative_to(dest_root)}"
        plan.append((dest, p, text, why))
    variants_src = resolve_path(src_root, "baselines/variants.toml")
    if variants_src.is_file() and not (dest_base / "variants.toml").exists():
        plan.append((dest_base / "variants.toml", variants_src, variants_src.read_text(),
                     "the variants (optimization attempts) the profile's variant records run"))
    trees: list[tuple[Path, Path]] = []
    for value in _local_paths(prof):
        try:
            rel = value.resolve().relative_to(src_root.resolve())
        except ValueError:
            continue  # outside the source project (an absolute path of this machine): left as written
        if shipped_file(rel) is not None or (dest_root / rel).exists():
            continue
        trees.append((dest_root / rel, value))
    clash = [d for d, *_ in plan if d.exists()] + [d for d, _ in trees if d.exists()]
    if clash and not force:
        raise ConfigError(f"{', '.join(str(c) for c in clash)} exist(s) already; nothing was written; "
                          f"fix: pick another directory, remove them, or pass --force to overwrite")
    out: list[Copied] = []
    for dest, src, text, why in plan:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        out.append(Copied(path=dest, source=src, why=why))
    for dest, src in trees:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dest)
        out.append(Copied(path=dest, source=src, why="a local file the profile names"))
    load_profile(out[0].path)  # the copy loads where it now is (its parents and paths found)
    return out


def _local_paths(prof: object) -> list[Path]:
    """The existing local files and directories a loaded profile names (the loader made them absolute)."""
    from perfgate.profiles import Profile

    assert isinstance(prof, Profile)
    vals: list[object] = [prof.model.path, prof.workload.prompts, prof.engine.sim_hardware]
    vals += [v for k, v in prof.server_flags.items() if k.endswith("-path")]
    for mode in prof.modes.values():
        vals += [v for k, v in mode.flags.items() if k.endswith("-path")]
        vals.append(getattr(mode.workload, "prompts", None))
    out = []
    for v in vals:
        if isinstance(v, (str, Path)) and Path(v).is_absolute() and Path(v).exists():
            out.append(Path(v))
    return list(dict.fromkeys(out))
