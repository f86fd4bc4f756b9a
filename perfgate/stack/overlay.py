"""The packages of a Python environment's folders, what differs between two, and an overlay folder that layers some
of one over the other (``perfgate bisect`` on real environments).

An environment's packages are the ``*.dist-info`` folders of its package folders (a venv's site-packages, or the
base and overlay folders that ``ci/device/bundle/build.sh`` builds and ``ci/device/upgrade.sh`` puts on
``PYTHONPATH``), the first folder holding a package winning, as on ``PYTHONPATH``. :func:`changed_packages` lists
the packages whose version differs between the current folders and the candidate's (or that only the candidate
has). :func:`build_overlay` makes a folder that holds exactly the chosen packages of the candidate: each package's
own top-level entries (from its ``RECORD``; a folder that other packages share, such as ``nvidia/``, is made a real
folder holding only this package's entries) and its ``dist-info``, linked, not copied. Put first on ``PYTHONPATH``
before the current environment's own path, it layers those packages over the current environment, so Python imports
them and ``importlib.metadata`` reports their versions. A package that only the current environment has cannot be
taken away by an overlay: :func:`changed_packages` says so (``removed``). ``.pth`` files are not processed on
``PYTHONPATH`` (only in site folders): a package that needs one is named in :attr:`Dist.pth`.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from perfgate.errors import ConfigError

__all__ = ["Dist", "Change", "read_dists", "changed_packages", "build_overlay", "normalize"]


def normalize(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503): lower case, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Dist:
    """One installed distribution: its name and version, the folder holding it, its ``dist-info`` folder and the
    files its ``RECORD`` lists (relative to the folder; files outside it, such as scripts in ``../../bin``, left
    out)."""

    name: str
    version: str
    folder: Path
    dist_info: str
    files: tuple[str, ...]

    @property
    def key(self) -> str:
        return normalize(self.name)

    @property
    def pth(self) -> tuple[str, ...]:
        """The ``.pth`` files it installs (not processed on ``PYTHONPATH``)."""
        return tuple(f for f in self.files if "/" not in f and f.endswith(".pth"))


@dataclass(frozen=True)
class Change:
    """A package that differs: its name, the current's version (None: the candidate adds it) and the candidate's
    (None: the candidate lacks it: an overlay cannot remove it)."""

    name: str
    current: str | None
    candidate: str | None

    def text(self) -> str:
        return f"{self.name} {self.current or '(absent)'} -> {self.candidate or '(absent)'}"


def _files_of(folder: Path, dist_info: str) -> tuple[str, ...]:
    record = folder / dist_info / "RECORD"
    files: list[str] = []
    if record.is_file():
        with record.open(newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                if not row or not row[0]:
                    continue
                p = PurePosixPath(row[0].replace("\\", "/"))
                if p.is_absolute() or ".." in p.parts:
                    continue
                files.append(str(p))
    else:  # no RECORD (an egg-style or hand-made install): the top-level names it declares
        top = folder / dist_info / "top_level.txt"
        names = top.read_text(encoding="utf-8").split() if top.is_file() else []
        files = [n for n in names if (folder / n).exists() or (folder / f"{n}.py").exists()]
        files = [n if (folder / n).exists() else f"{n}.py" for n in files]
    if not any(PurePosixPath(f).parts[0] == dist_info for f in files):
        files.append(f"{dist_info}/METADATA")
    return tuple(files)


def read_dists(folders: Sequence[str | Path]) -> dict[str, Dist]:
    """The distributions of ``folders`` by normalized name, the first folder holding a name winning (as on
    ``PYTHONPATH``). A folder that does not exist is a ConfigError naming it and the fix."""
    out: dict[str, Dist] = {}
    for raw in folders:
        folder = Path(raw)
        if not folder.is_dir():
            raise ConfigError(f"{folder}: not a package folder; fix: pass an environment's site-packages (e.g. "
                              f".venv/lib/python3.12/site-packages) or an overlay folder that holds *.dist-info")
        for info in sorted(folder.glob("*.dist-info")):
            meta = info / "METADATA"
            if not meta.is_file():
                continue
            headers = HeaderParser().parsestr(meta.read_text(encoding="utf-8", errors="replace"))
            name, version = headers.get("Name"), headers.get("Version")
            if not name or not version:
                continue
            d = Dist(name=str(name), version=str(version), folder=folder, dist_info=info.name,
                     files=_files_of(folder, info.name))
            out.setdefault(d.key, d)
    return out


def changed_packages(current: Mapping[str, Dist], candidate: Mapping[str, Dist]) -> list[Change]:
    """The packages whose version differs, or that one side lacks, by name (candidate's spelling where it has it)."""
    out = []
    for key in sorted(set(current) | set(candidate)):
        a, b = current.get(key), candidate.get(key)
        if a is not None and b is not None and a.version == b.version:
            continue
        ref = b if b is not None else a
        assert ref is not None
        out.append(Change(name=ref.name, current=a.version if a else None, candidate=b.version if b else None))
    return out


def _prefixes(files: Iterable[str]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for f in files:
        parts = PurePosixPath(f).parts
        for i in range(1, len(parts) + 1):
            out.add(parts[:i])
    return out


def _entries(dist: Dist, others: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The shallowest paths of ``dist``'s files that no other package of its folder has files under."""
    links: set[tuple[str, ...]] = set()
    for f in dist.files:
        parts = PurePosixPath(f).parts
        for i in range(1, len(parts) + 1):
            if parts[:i] not in others:
                links.add(parts[:i])
                break
    # a link inside another link is already there
    return sorted(p for p in links if not any(p[:i] in links for i in range(1, len(p))))


def build_overlay(dest: str | Path, chosen: Sequence[Dist], candidate: Mapping[str, Dist]) -> list[Path]:
    """Make ``dest`` (empty or absent) hold exactly ``chosen``'s files of the candidate, linked: each package's own
    top-level entries and its ``dist-info``; a folder that other candidate packages share is made a real folder
    holding only the chosen package's entries. Returns the links made."""
    out = Path(dest)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: an overlay folder must be new or empty; fix: remove it or pass another --out")
    out.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    for d in chosen:
        # the other packages of the same folder, chosen or not: what is shared with them is split
        others = _prefixes(f for o in candidate.values() if o.key != d.key and o.folder == d.folder
                           for f in o.files)
        for parts in _entries(d, others):
            src = d.folder.joinpath(*parts)
            if not src.exists() and not src.is_symlink():
                continue  # RECORD lists a file the install removed (a .pyc): nothing to link
            link = out.joinpath(*parts)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.exists() or link.is_symlink():
                continue
            os.symlink(src.resolve(), link, target_is_directory=src.is_dir())
            made.append(link)
    return made
