"""The two stacks of ``perfgate bisect`` and how a step's candidate arm is spelled (:class:`Arms`): on the simulator
(:func:`sim_arms`: stack keys and versions), on real environments' package folders (:func:`site_arms`: an overlay
folder per step, perfgate.stack.overlay), or from two lock files (:func:`lock_arms`: the lock diff, the candidate's
changed pins installed once, then the folders' way). perfgate.cli.bisect runs the steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.cli.registry import usage_error

if TYPE_CHECKING:
    from perfgate.stack.overlay import Dist

__all__ = ["Arms", "sim_arms", "site_arms", "lock_arms"]


@dataclass
class Arms:
    """The changed packages (name -> (current version, candidate version)) and how a step's arm is spelled."""

    kind: str  # "sim" | "env"
    changes: dict[str, tuple[str | None, str | None]]
    #: the step's --perfgate-candidate SPEC for the packages layered, given the step's own folder
    spec: Callable[[tuple[str, ...], Path], str]
    notes: list[str] = field(default_factory=list)
    #: run once before the first step, given OUT (lock files: the candidate's packages installed); its lines printed
    prepare: Callable[[Path], list[str]] | None = None

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(self.changes)

    def change(self, name: str) -> str:
        old, new = self.changes[name]
        return f"{name} {old or '(absent)'} -> {new or '(absent)'}"


def sim_arms(sim_hardware: Path, current_overrides: str, candidate: str) -> Arms:
    """The simulator's arms: the current stack is the box file's with the session's ``--sim-stack`` /
    ``PERFGATE_SIM_STACK`` overrides; the candidate's versions are ``KEY=VER,...``; a package is a stack key."""
    from perfgate.errors import ProfileSchemaError
    from perfgate.sim.hardware import load_hardware, parse_stack_overrides

    try:
        wanted = parse_stack_overrides(candidate)
        hw = load_hardware(sim_hardware, parse_stack_overrides(current_overrides))
    except (ValueError, ProfileSchemaError) as e:
        raise usage_error(f"--candidate-sim-stack {candidate!r}: {e}; fix: KEY=VERSION,KEY=VERSION (stack keys "
                          f"of {sim_hardware}: {', '.join(sorted(load_hardware(sim_hardware).stack))})") from None
    known = set(hw.stack)
    unknown = [k for k in wanted if k not in known]
    if unknown:
        import difflib

        said = "; ".join(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(
            k, known, n=1, cutoff=0.6)) else "") for k in unknown)
        raise usage_error(f"--candidate-sim-stack {candidate!r}: no package {said} in the simulated box's stack; fix: "
                          f"one of {', '.join(sorted(known))}")
    changes: dict[str, tuple[str | None, str | None]] = {k: (hw.version(k), v) for k, v in wanted.items()
                                                         if hw.version(k) != v}

    def spec(pkgs: tuple[str, ...], folder: Path) -> str:
        return "sim-stack=" + ";".join(f"{k}={changes[k][1]}" for k in pkgs)

    return Arms(kind="sim", changes=changes, spec=spec)


def site_arms(current: Sequence[str], candidate: Sequence[str], pythonpath: str, python: str = "") -> Arms:
    """Real environments: the packages of ``current`` and ``candidate`` folders (first wins); a step's arm is the
    current environment with an overlay folder of the step's candidate packages first on ``PYTHONPATH``."""
    from perfgate.stack.overlay import build_overlay, changed_packages, normalize, read_dists

    cur, cand = read_dists(current), read_dists(candidate)
    changes: dict[str, tuple[str | None, str | None]] = {}
    notes = []
    by_name: dict[str, Dist] = {}
    for c in changed_packages(cur, cand):
        if c.candidate is None:
            notes.append(f"{c.text()}: an overlay cannot remove a package; left out of the search")
            continue
        changes[c.name] = (c.current, c.candidate)
        by_name[c.name] = cand[normalize(c.name)]
        if by_name[c.name].pth:
            notes.append(f"{c.name} installs {', '.join(by_name[c.name].pth)}: .pth files are not read on "
                         f"PYTHONPATH; layered without them")

    def spec(pkgs: tuple[str, ...], folder: Path) -> str:
        overlay = folder / "overlay"
        build_overlay(overlay, [by_name[p] for p in pkgs], cand)
        path = ":".join(x for x in (str(overlay.resolve()), pythonpath) if x)
        if "," in path:
            raise usage_error(f"{path}: a PYTHONPATH with a comma cannot be a --perfgate-candidate; fix: move the "
                              f"folders (or --out) to paths without commas")
        return (f"python={python}," if python else "") + f"env.PYTHONPATH={path}"

    return Arms(kind="env", changes=changes, spec=spec, notes=notes)


def _listed(items: Sequence[str], most: int = 5) -> str:
    return "; ".join(items[:most]) + (f"; and {len(items) - most} more" if len(items) > most else "")


def lock_arms(current_lock: Path, candidate_lock: Path, *, python: str, pythonpath: str,
              current_site: Sequence[str] | None = None, wheelhouse: Path | None = None, pip_args: str = "",
              candidate_python: str = "") -> Arms:
    """Two lock files: the changed packages are the lock diff (pins read for the marker environment of
    ``python``, the servers' interpreter). The current environment (the ``current_site`` folders, or ``python``'s
    package folders with ``PYTHONPATH=pythonpath``) is checked against the current lock: a changed package it
    does not hold at the locked version is an error, other differences are notes. Before the first step
    (:attr:`Arms.prepare`) the candidate's changed packages are installed into ``OUT/candidate-site``
    (perfgate.stack.pipinstall.install_pins), and a step's arm is :func:`site_arms`' with the current folders and
    ``[OUT/candidate-site, *the current folders]``, whose folder diff is checked against the lock diff."""
    from perfgate.stack.lockfile import diff_locks, mismatches, read_lock, same_version
    from perfgate.stack.overlay import normalize, read_dists
    from perfgate.stack.pipinstall import install_pins, interpreter_paths

    found, markers = interpreter_paths(python, pythonpath)
    folders = list(current_site) if current_site else found
    where = f"the folders {', '.join(folders)}" if current_site else f"{python} with PYTHONPATH={pythonpath!r}"
    cur, cand = read_lock(current_lock, markers), read_lock(candidate_lock, markers)
    changes: dict[str, tuple[str | None, str | None]] = {}
    notes = [*cur.notes, *cand.notes]
    for c in diff_locks(cur, cand):
        if c.candidate is None:
            notes.append(f"{c.text()}: an overlay cannot remove a package; left out of the search")
        else:
            changes[c.name] = (c.current, c.candidate)
    keys = {normalize(n): n for n in changes}
    wrong = mismatches(cur, read_dists(folders))
    said = [f"{pin.name} locked {pin.version}, " + (f"installed {v}" if v else "not installed")
            for key, (pin, v) in wrong.items() if key in keys]
    if said:
        raise usage_error(f"{current_lock}: the current environment ({where}) is not the current lock for the "
                          f"package(s) the candidate changes: {_listed(said)}; fix: install the current lock first "
                          f"(`pip install -r {current_lock}` / `uv pip sync {current_lock}` in the servers' "
                          f"environment), or pass that environment's own lock (`pip freeze`) as --current-lock")
    other = [f"{pin.name} locked {pin.version}, " + (f"installed {v}" if v else "not installed")
             for key, (pin, v) in wrong.items() if key not in keys]
    if other:
        notes.append(f"the current environment differs from {current_lock} in {len(other)} package(s) the "
                     f"candidate does not change (both arms run them alike): {_listed(other)}")
    layered: dict[str, Arms] = {}
    names: dict[str, str] = {}

    def prepare(out: Path) -> list[str]:
        if not keys:
            return ["the two locks pin the same versions of what an overlay can layer: nothing to install"]
        site = out / "candidate-site"
        done = install_pins([cand.pins[k] for k in keys], site, python=python, wheelhouse=wheelhouse,
                            pip_args=pip_args)
        arms.notes.extend(done.notes)
        on_site = site_arms(folders, [str(site), *folders], pythonpath, candidate_python)
        by_key = {normalize(n): n for n in on_site.changes}
        agree = True
        for key, name in keys.items():
            if key not in by_key:
                got = read_dists([site]).get(key)
                raise usage_error(f"{site}: {arms.change(name)}: pip left "
                                  + (f"{got.name} {got.version}, the current environment's version" if got
                                     else "no dist-info of it") + f" there, so no overlay can layer it; fix: read "
                                  f"{done.log} (does the wheel's own metadata say {name} {changes[name][1]}?)")
            names[name] = by_key[key]
            installed = on_site.changes[by_key[key]][1] or ""
            if not same_version(installed, changes[name][1] or ""):
                agree = False
                arms.notes.append(f"{name}: {candidate_lock} pins {changes[name][1]}, pip installed {installed}")
        extra = [on_site.change(n) for k, n in by_key.items() if k not in keys]
        if extra:
            agree = False
            arms.notes.append(f"{site} changes more than the lock diff, left out of the search: {_listed(extra)}")
        arms.notes.extend(on_site.notes)
        layered["arms"] = on_site
        hashes = "their hashes checked" if done.hashes_checked else "hashes not checked"
        return [f"installed the candidate's {len(keys)} changed package(s) into {site} ({hashes}; pip's log "
                f"{done.log}); its diff with the current environment "
                f"{'agrees' if agree else 'differs (see the notes)'} with the lock diff"]

    def spec(pkgs: tuple[str, ...], folder: Path) -> str:
        if "arms" not in layered:
            raise RuntimeError("lock_arms: prepare(out) runs before the first step")
        return layered["arms"].spec(tuple(names[p] for p in pkgs), folder)

    arms = Arms(kind="env", changes=changes, spec=spec, notes=notes, prepare=prepare)
    return arms
