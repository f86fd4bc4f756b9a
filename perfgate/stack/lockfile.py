"""The pinned packages of a lock file, and how two locks and an environment differ (``perfgate bisect
--current-lock FILE --candidate-lock FILE``; docs/bisect.md, "From two lock files").

A lock file pins every package of an environment to one version. Three formats are read (:func:`read_lock`):

* pip requirements with exact pins, as ``pip freeze``, ``pip-compile`` and ``uv pip compile`` (or ``uv export
  --format requirements-txt``) write them: ``name==version``, extras (``name[x]==version``), environment markers
  after ``;``, ``--hash=`` options (also on backslash-continued lines), comments and blank lines. Index options
  (``--index-url``, ``--find-links``, ...) are skipped with a note (``perfgate bisect --pip-args`` passes them to
  pip), an editable install (``-e``) is left out with a note (it is no version), ``-r`` / ``-c`` are refused (the
  pins of one environment are one file). A line that is not an exact pin (``>=``, ``~=``, ``name @ URL``) is an
  error naming the file, the line and the fix.
* ``uv.lock`` (uv's TOML): ``[[package]]`` tables with ``name`` and ``version``. It locks every platform's
  packages at once: given the environment's markers, the packages are those reachable from the project over
  dependencies whose markers hold there (extras and dependency groups included).
* ``pylock.toml`` / ``pylock.NAME.toml`` (PEP 751): ``[[packages]]`` with ``name``, ``version`` and an optional
  ``marker``.

Names compare as pip compares them (:func:`perfgate.stack.overlay.normalize`), their spelling kept for display;
versions compare as PEP 440 does (``1.0`` is ``1.0.0``; a local label such as ``+cu128`` counts). The project
itself (an editable or virtual source) is no pin and is left out with a note.

:func:`diff_locks` is what changes between two locks, :func:`mismatches` what an installed environment holds
off its lock; installing pins and asking an interpreter for its folders is :mod:`perfgate.stack.pipinstall`.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from perfgate.errors import ConfigError
from perfgate.stack.overlay import Change, Dist, normalize

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

__all__ = ["Pin", "Lock", "read_lock", "parse_requirements", "parse_uv_lock", "parse_pylock", "diff_locks",
           "same_version", "mismatches", "PIN_FIX"]

#: how to make a lock file of exact pins
PIN_FIX = ("pin every package to one version (name==version): `pip freeze > FILE` in the environment, or "
           "`pip-compile` / `uv pip compile` the requirements")
_COMMENT = re.compile(r"(^|\s+)#.*$")
#: option lines of a requirements file that say where to find packages, not which: skipped, with a note
_INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--no-index", "--trusted-host",
                  "--pre", "--prefer-binary", "--only-binary", "--no-binary", "--require-hashes", "--use-feature",
                  "--config-settings")


@dataclass(frozen=True)
class Pin:
    """One package pinned to one version: its name as the lock spells it, where (``FILE:LINE``, or ``FILE:
    [[package]] NAME``), its marker (``""``: none) and its hashes (``sha256:...``; pip checks them)."""

    name: str
    version: str
    where: str
    marker: str = ""
    hashes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return normalize(self.name)

    def requirement(self) -> str:
        """The line pip installs it from: ``name==version`` and its hashes."""
        return f"{self.name}=={self.version}" + "".join(f" --hash={h}" for h in self.hashes)


@dataclass(frozen=True)
class Lock:
    """The pins of one lock file by normalized name, and what was left out of it (notes)."""

    path: Path
    pins: Mapping[str, Pin]
    notes: tuple[str, ...] = ()

    def versions(self) -> dict[str, str]:
        """Name (as spelled) -> version."""
        return {p.name: p.version for p in self.pins.values()}


def same_version(a: str, b: str) -> bool:
    """Whether two version strings name one release (PEP 440: ``1.0`` is ``1.0.0``, local labels count)."""
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a.strip() == b.strip()


def _holds(marker: str, environment: Mapping[str, str] | None, where: str) -> bool:
    if not marker or environment is None:
        return True
    try:
        return bool(Marker(marker).evaluate(dict(environment)))
    except InvalidMarker as e:
        raise ConfigError(f"{where}: marker {marker!r}: {e}; fix: a PEP 508 marker") from None


class _Pins:
    """Pins being collected: a second pin of a name with another version is an error naming both places."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pins: dict[str, Pin] = {}
        self.notes: list[str] = []

    def add(self, pin: Pin, fix: str) -> None:
        old = self.pins.get(pin.key)
        if old is None:
            self.pins[pin.key] = pin
        elif not same_version(old.version, pin.version):
            raise ConfigError(f"{pin.where}: {pin.name} {pin.version} is pinned again ({old.where}: {old.version}); "
                              f"fix: {fix}")

    def lock(self) -> Lock:
        return Lock(path=self.path, pins=dict(self.pins), notes=tuple(self.notes))


# ---------------------------------------------------------------- pip requirements


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with backslash continuations joined, as pip joins them (a comment line ends
    one)."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.endswith("\\") or _COMMENT.match(line):
            if _COMMENT.match(line):
                line = " " + line
            if parts:
                out.append((first, "".join(parts) + line))
                parts = []
            else:
                out.append((number, line))
        else:
            if not parts:
                first = number
            parts.append(line[:-1])
    if parts:
        out.append((first, "".join(parts)))
    return out


def _split_options(line: str) -> tuple[str, list[str]]:
    """The requirement and its options (``--hash=...``), split as pip splits them: at the first word that starts
    with ``-``."""
    words = line.split(" ")
    for i, w in enumerate(words):
        if w.startswith("-"):
            return " ".join(words[:i]).strip(), shlex.split(" ".join(words[i:]))
    return line.strip(), []


def _hashes(options: list[str], where: str) -> tuple[str, ...]:
    out: list[str] = []
    it = iter(options)
    for opt in it:
        if opt.startswith("--hash="):
            out.append(opt.partition("=")[2])
        elif opt == "--hash":
            out.append(next(it, ""))
    for h in out:
        if not re.fullmatch(r"\w+:[0-9A-Fa-f]+", h):
            raise ConfigError(f"{where}: --hash={h}: expected ALGORITHM:HEXDIGEST; fix: e.g. --hash=sha256:9f86d0...")
    return tuple(out)


def parse_requirements(text: str, path: str | Path, environment: Mapping[str, str] | None = None) -> Lock:
    """The exact pins of a requirements file's text. ``environment``: a marker environment (PEP 508) where a pin
    whose marker does not hold is left out; ``None`` keeps every pin."""
    path = Path(path)
    acc = _Pins(path)
    for number, raw in _logical_lines(text):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        where = f"{path}:{number}"
        if line.startswith("-"):
            word = re.split(r"[\s=]", line, maxsplit=1)[0]
            if word in ("-e", "--editable"):
                acc.notes.append(f"{where}: {line!r}: an editable install is no pinned version; left out (install it "
                                 f"in both environments alike, or pin a release)")
            elif word in ("-r", "--requirement", "-c", "--constraint"):
                raise ConfigError(f"{where}: {line!r}: a lock file that includes another is not read; fix: pass the "
                                  f"pins of the environment as one file (`pip freeze > FILE`, or `pip-compile` / "
                                  f"`uv pip compile` with the included files as inputs)")
            elif word in _INDEX_OPTIONS:
                acc.notes.append(f"{where}: {line!r}: skipped (where to find packages, not which; perfgate bisect "
                                 f"--pip-args passes index options to pip)")
            else:
                raise ConfigError(f"{where}: {line!r}: an option a lock file does not hold; fix: remove the line "
                                  f"({PIN_FIX})")
            continue
        spec, options = _split_options(line)
        try:
            req = Requirement(spec)
        except InvalidRequirement as e:
            raise ConfigError(f"{where}: {spec!r} is not a requirement ({e}); fix: {PIN_FIX}") from None
        specs = list(req.specifier)
        if req.url or len(specs) != 1 or specs[0].operator not in ("==", "===") or specs[0].version.endswith("*"):
            what = "a URL without a version" if req.url else "not an exact pin"
            raise ConfigError(f"{where}: {spec!r} is {what}; fix: {PIN_FIX}")
        marker = str(req.marker) if req.marker is not None else ""
        if not _holds(marker, environment, where):
            continue
        acc.add(Pin(name=req.name, version=specs[0].version, where=where, marker=marker,
                    hashes=_hashes(options, where)),
                fix="one pin per package (a marker tells two apart only where they hold)")
    return acc.lock()


# ---------------------------------------------------------------- uv.lock and pylock.toml


def _table_list(data: Mapping[str, Any], key: str, path: Path) -> list[dict[str, Any]]:
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise ConfigError(f"{path}: {key}: expected an array of tables ([[{key}]]); fix: pass the file uv (or the "
                          f"tool named by created-by) wrote, unedited")
    return items


def _uv_hashes(pkg: Mapping[str, Any]) -> tuple[str, ...]:
    files = [pkg.get("sdist") or {}, *(pkg.get("wheels") or [])]
    return tuple(str(f["hash"]) for f in files if isinstance(f, dict) and f.get("hash"))


def parse_uv_lock(data: Mapping[str, Any], path: str | Path, environment: Mapping[str, str] | None = None) -> Lock:
    """The pins of a ``uv.lock``. ``environment``: the packages reachable from the project (the editable or
    virtual sources; without one, every package nothing depends on) over dependencies, extras and dependency
    groups whose markers hold there; ``None``: every package."""
    path = Path(path)
    acc = _Pins(path)
    entries = _table_list(data, "package", path)
    nodes: dict[tuple[str, str], dict[str, Any]] = {}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for pkg in entries:
        name = pkg.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}: a [[package]] without a name; fix: pass the file uv wrote, unedited")
        by_name.setdefault(normalize(name), []).append(pkg)
        nodes[(normalize(name), str(pkg.get("version", "")))] = pkg

    def local(pkg: Mapping[str, Any]) -> bool:
        source = pkg.get("source") or {}
        return isinstance(source, dict) and bool({"editable", "virtual"} & set(source))

    reached: list[dict[str, Any]] = entries
    if environment is not None:
        def fork_holds(pkg: Mapping[str, Any]) -> bool:
            forks = pkg.get("resolution-markers") or []
            return not forks or any(_holds(str(m), environment, f"{path}: {pkg['name']}") for m in forks)

        def edges(pkg: Mapping[str, Any]) -> list[dict[str, Any]]:
            deps = list(pkg.get("dependencies") or [])
            for table in ("optional-dependencies", "dev-dependencies"):
                for group in (pkg.get(table) or {}).values():
                    deps += list(group or [])
            return [d for d in deps if isinstance(d, dict)]

        def resolve(dep: Mapping[str, Any]) -> dict[str, Any] | None:
            key = normalize(str(dep.get("name", "")))
            if "version" in dep:
                return nodes.get((key, str(dep["version"])))
            options = [p for p in by_name.get(key, []) if fork_holds(p)] or by_name.get(key, [])
            return options[0] if len(options) == 1 else None

        depended = {normalize(str(d.get("name", ""))) for p in entries for d in edges(p)}
        roots = [p for p in entries if local(p)] or [p for p in entries if normalize(p["name"]) not in depended]
        seen: set[int] = set()
        todo = list(roots)
        reached = []
        while todo:
            pkg = todo.pop()
            if id(pkg) in seen:
                continue
            seen.add(id(pkg))
            reached.append(pkg)
            for dep in edges(pkg):
                if _holds(str(dep.get("marker", "")), environment, f"{path}: {pkg['name']} -> {dep.get('name')}"):
                    target = resolve(dep)
                    if target is not None:
                        todo.append(target)
        order = {id(p): i for i, p in enumerate(entries)}
        reached.sort(key=lambda p: order[id(p)])
    for pkg in reached:
        where = f"{path}: [[package]] {pkg['name']}"
        if local(pkg) or not pkg.get("version"):
            acc.notes.append(f"{where}: the project itself (an editable or virtual source), no pinned release; "
                             f"left out")
            continue
        acc.add(Pin(name=str(pkg["name"]), version=str(pkg["version"]), where=where, hashes=_uv_hashes(pkg)),
                fix="the pins of one environment: `uv export --format requirements-txt > FILE`, or "
                    "`uv pip compile` for this platform")
    return acc.lock()


def parse_pylock(data: Mapping[str, Any], path: str | Path, environment: Mapping[str, str] | None = None) -> Lock:
    """The pins of a PEP 751 ``pylock.toml``: each ``[[packages]]`` entry whose ``marker`` holds in
    ``environment`` (``None``: every entry)."""
    path = Path(path)
    acc = _Pins(path)
    for pkg in _table_list(data, "packages", path):
        name = pkg.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}: a [[packages]] entry without a name; fix: pass the file its tool wrote")
        where = f"{path}: [[packages]] {name}"
        if not _holds(str(pkg.get("marker", "")), environment, where):
            continue
        directory = pkg.get("directory")
        if not pkg.get("version") or (isinstance(directory, dict) and directory.get("editable")):
            acc.notes.append(f"{where}: a folder or repository without a pinned version; left out")
            continue
        files = [pkg.get("sdist") or {}, *(pkg.get("wheels") or [])]
        hashes = tuple(f"{algo}:{value}" for f in files if isinstance(f, dict)
                       for algo, value in (f.get("hashes") or {}).items())
        acc.add(Pin(name=name, version=str(pkg["version"]), where=where, marker=str(pkg.get("marker", "")),
                    hashes=hashes), fix="one entry per package where its markers hold")
    return acc.lock()


def read_lock(path: str | Path, environment: Mapping[str, str] | None = None) -> Lock:
    """The pins of the lock file at ``path``: ``uv.lock`` and ``pylock[.NAME].toml`` (or any ``.lock`` / ``.toml``
    holding ``[[package]]`` or ``[[packages]]``) as TOML, anything else as a pip requirements file.
    ``environment``: the marker environment the pins are for (``None``: every pin). A ConfigError names the file,
    the line or entry, and the fix."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such lock file; fix: pass the path of a requirements lock (`pip freeze > "
                          f"FILE`), a uv.lock or a pylock.toml") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read the lock file: {e}") from None
    if p.suffix not in (".lock", ".toml"):
        return parse_requirements(text, p, environment)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not TOML ({e}); fix: pass uv.lock or pylock.toml as their tool wrote them (a "
                          f"requirements lock is read by any other name, e.g. requirements.txt)") from None
    if "packages" in data and "lock-version" in data:
        return parse_pylock(data, p, environment)
    if "package" in data:
        return parse_uv_lock(data, p, environment)
    raise ConfigError(f"{p}: neither a uv.lock ([[package]]) nor a pylock.toml (lock-version, [[packages]]); fix: "
                      f"pass one of those, or a requirements lock by another name (requirements.txt)")


# ---------------------------------------------------------------- two locks, and an environment against a lock


def diff_locks(current: Lock, candidate: Lock) -> list[Change]:
    """The packages whose pinned version differs, or that one lock lacks (sorted by normalized name; the
    candidate's spelling where it has the package)."""
    out = []
    for key in sorted(set(current.pins) | set(candidate.pins)):
        a, b = current.pins.get(key), candidate.pins.get(key)
        if a is not None and b is not None and same_version(a.version, b.version):
            continue
        ref = b if b is not None else a
        assert ref is not None
        out.append(Change(name=ref.name, current=a.version if a else None, candidate=b.version if b else None))
    return out


def mismatches(lock: Lock, installed: Mapping[str, Dist]) -> dict[str, tuple[Pin, str | None]]:
    """The lock's pins that ``installed`` (:func:`perfgate.stack.overlay.read_dists`) does not hold at the locked
    version, by normalized name: (pin, the installed version or None)."""
    out: dict[str, tuple[Pin, str | None]] = {}
    for key, pin in lock.pins.items():
        d = installed.get(key)
        if d is None or not same_version(d.version, pin.version):
            out[key] = (pin, d.version if d is not None else None)
    return out
