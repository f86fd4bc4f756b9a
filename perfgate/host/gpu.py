"""GPUs through NVML (nvidia-ml-py): which ones CUDA would see here, which processes hold memory.

The one home of ``CUDA_VISIBLE_DEVICES`` rules (:func:`visible_indices`): entries are indices or
(prefixes of) ``GPU-``/``MIG-`` UUIDs, CUDA stops at the first entry that names no device, and a
duplicate hides every device. Nothing here imports torch or raises.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterable
from typing import Any


@functools.lru_cache(maxsize=1)
def _nvml() -> Any:  # the pynvml module (it publishes no types), or None
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def available() -> bool:
    """True when NVML works and sees at least one GPU, visible to CUDA here or not (memory holders)."""
    nv = _nvml()
    if nv is None:
        return False
    try:
        return int(nv.nvmlDeviceGetCount()) > 0
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
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    procs = getattr(nv, fn)(h)
                except Exception:
                    continue
                found.update(p.pid for p in procs if p.pid in want)
    except Exception:
        return set()
    return found




def text(value: object) -> str:
    """An NVML string (bytes in older nvidia-ml-py) as text."""
    if isinstance(value, bytes):
        return value.decode(errors="replace").strip()
    return str(value).strip()


def shutdown(pynvml: Any) -> None:
    with contextlib.suppress(Exception):
        pynvml.nvmlShutdown()


def visible_indices(spec: str, count: int, uuids: list[str] | None = None) -> list[int]:
    """Physical device indices a CUDA_VISIBLE_DEVICES value selects (CUDA's rules, see the module)."""
    uuids = uuids or []
    out: list[int] = []
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            break
        idx: int | None = None
        if re.fullmatch(r"-?\d+", entry):
            n = int(entry)
            idx = n if 0 <= n < count else None
        elif entry.upper().startswith(("GPU-", "MIG-")):
            matches = [i for i, u in enumerate(uuids) if u and u.upper().startswith(entry.upper())]
            idx = matches[0] if len(matches) == 1 else None
        if idx is None:
            break
        if idx in out:
            return []
        out.append(idx)
    return out


def visible_handles(pynvml: Any) -> list[Any]:
    """NVML handles of the devices CUDA would see, in CUDA_VISIBLE_DEVICES order (NVML initialised)."""
    count = int(pynvml.nvmlDeviceGetCount())
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return handles
    uuids: list[str] = []
    for h in handles:
        try:
            uuids.append(text(pynvml.nvmlDeviceGetUUID(h)))
        except Exception:
            uuids.append("")
    return [handles[i] for i in visible_indices(spec, count, uuids)]


def visible_count() -> int:
    """How many GPUs CUDA would see here (NVML honouring CUDA_VISIBLE_DEVICES); 0 when NVML fails.

    Fast (no subprocess, no torch); NVML is initialised and shut down again on each call.
    """
    try:
        import pynvml
    except Exception:
        return 0
    try:
        pynvml.nvmlInit()
    except Exception:
        return 0
    try:
        return len(visible_handles(pynvml))
    except Exception:
        return 0
    finally:
        shutdown(pynvml)


def local_cpus() -> frozenset[int] | None:
    """The CPUs NVML says are local to the first GPU CUDA would see here (its NUMA node's), or None where it cannot
    tell (no NVML, no GPU). NVML is initialised and shut down again on the call (its count of initialisations stays as
    it was: the cached handle of :func:`available` and :func:`holders` keeps working)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        handles = visible_handles(pynvml)
        if not handles:
            return None
        words = (os.cpu_count() or 64) // 64 + 1
        masks = pynvml.nvmlDeviceGetCpuAffinity(handles[0], words)
        return frozenset(64 * i + b for i, m in enumerate(masks) for b in range(64) if int(m) >> b & 1)
    except Exception:
        return None
    finally:
        shutdown(pynvml)


def visible_entries() -> list[str] | None:
    """The ``CUDA_VISIBLE_DEVICES`` entries CUDA would honour here, in order (every GPU's index when it is
    unset); None when NVML cannot say. Entries keep their spelling (an index or a UUID), so a subset of them
    is a valid ``CUDA_VISIBLE_DEVICES`` for a child process."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        spec = os.environ.get("CUDA_VISIBLE_DEVICES")
        if spec is None:
            return [str(i) for i in range(count)]
        uuids = [text(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
        return [e.strip() for e in spec.split(",")][:len(visible_indices(spec, count, uuids))]
    except Exception:
        return None
    finally:
        shutdown(pynvml)


def gpu_visible() -> bool:
    """Whether an NVIDIA GPU is visible to CUDA here (see :func:`visible_count`). Never raises."""
    return visible_count() > 0
