"""Which profile is for this box: a profile's ``[hardware]`` against the stack perfgate detected (pure).

A profile is for a box when its GPU is named in the NVML name (``H100`` in ``NVIDIA H100 80GB HBM3``), the box shows
at least as many GPUs as the profile's ``count`` and the compute capability is the profile's. When no profile is named,
the session runs the one :func:`profile_for` chooses among the real-SGLang profiles under ``baselines/``: the one for
the most of the box's GPUs (an H200 x2 box runs its tp-2 profile, not a one-GPU one), one with serving floors before
one of a micro-benchmark's alone (``h200-x2/allreduce``), and of a profile and one that ``extends`` it for the same
hardware, the parent (the general one: ``h200-x1/llama-3.1-8b-dummy`` before its load profile); then by path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:
    from perfgate.profiles import Profile
    from perfgate.stack import Stack

__all__ = ["hardware_matches", "profile_for"]


def hardware_matches(p: Profile, st: Stack) -> tuple[bool, str]:
    """Whether profile ``p`` is for the box of stack ``st``, and why not (``""`` when it is)."""
    gpu = str(st.gpu).lower()
    if st.gpu == "unknown" or p.hardware.gpu.lower() not in gpu and gpu not in p.hardware.gpu.lower():
        return False, f"GPU '{st.gpu}' is not '{p.hardware.gpu}'"
    try:
        if int(st.gpu_count) < p.hardware.count:
            return False, f"{st.gpu_count} GPUs visible, the profile needs {p.hardware.count}"
    except (TypeError, ValueError):
        return False, "GPU count unknown"
    if str(st.sm) != "unknown" and float(st.sm) != float(p.hardware.sm):
        return False, f"compute capability {st.sm} is not {p.hardware.sm}"
    return True, ""


def _extends(path: Path) -> Path | None:
    try:
        parent = tomllib.loads(path.read_text()).get("extends")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return (path.parent / parent).resolve() if isinstance(parent, str) else None


def profile_for(st: Stack, paths: Sequence[Path]) -> Path | None:
    """The real-SGLang profile of ``paths`` that a session on the box of ``st`` runs when none is named (module
    docstring), or None when none is for it; a file that does not load is passed over."""
    from perfgate.profiles.load import load_profile

    fits: dict[Path, int] = {}
    serving: set[Path] = set()  # with serving floors ([floors.<mode>]), not a micro-benchmark's alone
    for path in paths:
        try:
            prof = load_profile(path)
        except Exception:
            continue
        if prof.engine.name == "sglang" and hardware_matches(prof, st)[0]:
            fits[path.resolve()] = prof.hardware.count
            if prof.floors:
                serving.add(path.resolve())
    if not fits:
        return None
    # a fitting profile that another fitting profile of the same count extends ranks before it (parent first)
    extended = {parent for path, count in fits.items() if (parent := _extends(path)) in fits and fits[parent] == count}
    return min(fits, key=lambda p: (-fits[p], p not in serving, p not in extended, str(p)))
