"""An environment a lock is installed from and checked against (``perfgate bisect --current-lock/--candidate-lock``):
its interpreter's package folders and PEP 508 marker environment (:func:`interpreter_paths`), and some pins of a
lock (:mod:`perfgate.stack.lockfile`) installed without their dependencies into one folder with that interpreter's
own ``python -m pip install --no-deps --target``, their hashes checked where the lock has them for all
(:func:`install_pins`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.errors import ConfigError
from perfgate.stack.overlay import normalize

if TYPE_CHECKING:
    from perfgate.stack.lockfile import Pin

__all__ = ["interpreter_paths", "Installed", "install_pins"]

_PROBE = """
import json, os, platform, sys
impl = sys.implementation.version
iver = f"{impl.major}.{impl.minor}.{impl.micro}"
if impl.releaselevel != "final":
    iver += impl.releaselevel[0] + str(impl.serial)
print(json.dumps({"path": [p for p in sys.path[1:] if p], "markers": {
    "implementation_name": sys.implementation.name, "implementation_version": iver, "os_name": os.name,
    "platform_machine": platform.machine(), "platform_release": platform.release(),
    "platform_system": platform.system(), "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform}}))
"""


def interpreter_paths(python: str, pythonpath: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The package folders of ``python`` run with ``PYTHONPATH=pythonpath`` (``None``: this process's), in
    ``sys.path`` order (folders only; the script's own folder left out), and its PEP 508 marker environment. A
    ConfigError names the interpreter and the fix when it cannot be run."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False,
                              stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"{python}: cannot run the environment's interpreter: {e}; fix: --python PATH (the "
                          f"servers' interpreter)") from None
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"{python}: the interpreter did not say its package folders (exit {proc.returncode}): "
                          f"{tail}; fix: --python PATH (the servers' interpreter)") from None
    folders = [str(p) for p in data["path"] if Path(p).is_dir()]
    return folders, {str(k): str(v) for k, v in data["markers"].items()}


# ---------------------------------------------------------------- installing pins into one folder


@dataclass
class Installed:
    """What :func:`install_pins` did: the command, its log, and whether the hashes were checked."""

    command: list[str]
    log: Path
    hashes_checked: bool
    notes: list[str] = field(default_factory=list)


#: where pip's errors name a package: "... satisfies the requirement NAME==V", "... found for NAME==V", a hash
#: mismatch's "NAME==V from ..."
_PIP_NAMES = (re.compile(r"(?:the requirement|found for) ([A-Za-z0-9][A-Za-z0-9._\-\[\]]*)"),
              re.compile(r"THESE PACKAGES DO NOT MATCH THE HASHES.*?\n\s+([A-Za-z0-9][A-Za-z0-9._\-]*)==", re.S))


def install_pins(pins: Sequence[Pin], target: Path, *, python: str, wheelhouse: Path | None = None,
                 pip_args: str = "") -> Installed:
    """Install ``pins`` (no dependencies) into the new or empty folder ``target`` with ``python -m pip install
    --no-deps --target`` (``--no-index --find-links WHEELHOUSE`` with a wheelhouse, then ``pip_args``). The pins go
    through ``target``.txt beside it, with their hashes when every pin has them (pip then checks them); pip's output
    is ``target``.log. A failure is a ConfigError naming the package, pip's last lines and the fix."""
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target}: must be new or empty; fix: remove it or pass another --out")
    target.mkdir(parents=True, exist_ok=True)
    hashed = bool(pins) and all(p.hashes for p in pins)
    req = target.with_name(target.name + ".txt")
    req.write_text("".join((p.requirement() if hashed else f"{p.name}=={p.version}") + "\n" for p in pins),
                   encoding="utf-8")
    log = target.with_name(target.name + ".log")
    cmd = [python, "-m", "pip", "install", "--no-deps", "--target", str(target), "--disable-pip-version-check",
           "--no-input"]
    if wheelhouse is not None:
        if not wheelhouse.is_dir():
            raise ConfigError(f"--wheelhouse {wheelhouse}: not a folder; fix: a folder of the candidate's wheels "
                              f"(`pip download --no-deps -d DIR -r LOCK` or `pip wheel --no-deps -w DIR ...`)")
        cmd += ["--no-index", "--find-links", str(wheelhouse.resolve())]
    try:
        cmd += shlex.split(pip_args)
    except ValueError as e:
        raise ConfigError(f"--pip-args {pip_args!r}: {e}; fix: one shell string, e.g. --pip-args "
                          f"\"--index-url https://example/simple\"") from None
    cmd += ["-r", str(req)]
    notes = [] if hashed or not pins else [
        "the candidate's hashes are not checked: "
        + ("the lock has none" if not any(p.hashes for p in pins)
           else f"{', '.join(p.name for p in pins if not p.hashes)} lack(s) them")]
    with log.open("w", encoding="utf-8") as fh:
        fh.write("$ " + shlex.join(cmd) + "\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
        except OSError as e:
            raise ConfigError(f"{python}: cannot run pip: {e}; fix: --python PATH (the servers' interpreter)") from None
    if proc.returncode != 0:
        text = log.read_text(encoding="utf-8", errors="replace")
        names = {normalize(p.name): p for p in pins}
        said = [normalize(m.group(1).split("[")[0]) for rx in _PIP_NAMES for m in rx.finditer(text)]
        which = ", ".join(dict.fromkeys(f"{names[k].name}=={names[k].version}" for k in said if k in names))
        which = which or "the candidate's packages"
        tail = " | ".join(line.strip() for line in text.strip().splitlines()[-4:])
        if "DO NOT MATCH THE HASHES" in text:
            fix = ("the file pip found is not the one the lock pinned: put the locked wheel in --wheelhouse DIR, or "
                   "lock the candidate again (its hashes are the wheels it will run)")
        elif "No module named pip" in text:
            fix = f"install pip into the environment of {python} (`{python} -m ensurepip`)"
        else:
            fix = ("put the wheels in a folder and pass --wheelhouse DIR (`pip download --no-deps -d DIR "
                   "NAME==VERSION` where the index is reachable), or reach the index with --pip-args "
                   "\"--index-url URL\"")
        raise ConfigError(f"pip could not install {which} into {target} (exit {proc.returncode}): {tail}; fix: "
                          f"{fix}; pip's whole log: {log}")
    return Installed(command=cmd, log=log, hashes_checked=hashed, notes=notes)
