"""NVML helpers (nvidia-ml-py): is a GPU there, which processes hold GPU memory."""

from __future__ import annotations

import functools
from collections.abc import Iterable


@functools.lru_cache(maxsize=1)
def _nvml() -> object | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def available() -> bool:
    """True when NVML works and sees at least one GPU."""
    nv = _nvml()
    if nv is None:
        return False
    try:
        return int(nv.nvmlDeviceGetCount()) > 0  # type: ignore[attr-defined]
    except Exception:
        return False


def holders(pids: Iterable[int]) -> set[int]:
    """Which of ``pids`` NVML lists as holding memory on any GPU."""
    nv = _nvml()
    want = set(pids)
    if nv is None or not want:
        return set()
    found: set[int] = set()
    try:
        for i in range(nv.nvmlDeviceGetCount()):  # type: ignore[attr-defined]
            h = nv.nvmlDeviceGetHandleByIndex(i)  # type: ignore[attr-defined]
            for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    procs = getattr(nv, fn)(h)
                except Exception:
                    continue
                found.update(p.pid for p in procs if p.pid in want)
    except Exception:
        return set()
    return found


