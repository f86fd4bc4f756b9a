"""Which CPUs a launched server may run on (``--perfgate-server-cpus``): parsing a CPU list, and launching a process
with that affinity.

On a real H200 the batch-1 TTFT level belongs to the server process (docs/gate.md, "Latency on an H200"); where its
processes run is one suspect, so a session can pin every server it launches to a fixed set of CPUs. The affinity is
set on the launching thread for the moment of the launch (:func:`launched_on`): the child inherits it, and so does
every process and thread it starts (SGLang's scheduler and detokenizer), while the rest of the pytest process keeps
its own. Linux only (``os.sched_setaffinity``).

``auto`` (``auto:N``) chooses the CPUs from the machine (:func:`auto_cpus`): N physical cores (default
:data:`AUTO_CORES`), one logical CPU of each, so that no two of the server's processes share a core through its
hyper-threads (a scheduler that launches kernels beside a busy sibling runs slower), among the CPUs local to the GPU
(NVML's CPU affinity of the first visible GPU) where it can tell, leaving the core of CPU 0 (the interrupts')
out while there are cores enough. The record says which CPUs it chose (``host.server_cpus``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import groupby
from pathlib import Path

from perfgate.host import gpu

__all__ = ["AUTO_CORES", "auto_cpus", "core_groups", "cpu_list", "cpus_text", "launched_on", "parse_cpus"]

#: the physical cores ``auto`` chooses: one for each of a tp-1 SGLang server's busy processes (the tokenizer manager,
#: the scheduler, the detokenizer) and one more
AUTO_CORES = 4
#: where Linux describes its CPUs (core siblings per logical CPU)
SYS_CPU = Path("/sys/devices/system/cpu")


def parse_cpus(text: str, *, available: Iterable[int] | None = None) -> frozenset[int]:
    """``2-5``, ``0,2,4-6`` -> the CPU numbers; ``auto`` / ``auto:N`` -> :func:`auto_cpus`; ValueError naming the
    format, or the CPUs not in ``available`` (default: this process's own affinity)."""
    word, _, count = text.strip().partition(":")
    if word == "auto":
        if count and not (count.isdigit() and int(count) > 0):
            raise ValueError(f"{text!r}: auto takes a number of physical cores, e.g. auto:4")
        return auto_cpus(int(count) if count else AUTO_CORES, available=available)
    try:
        cpus = cpu_list(text)
    except ValueError:
        raise ValueError(f"{text!r} is no CPU list: write CPU numbers and ranges, e.g. 2-5 or 0,2,4-6, "
                         f"or auto") from None
    allowed = set(available) if available is not None else os.sched_getaffinity(0)
    missing = sorted(cpus - allowed)
    if missing:
        raise ValueError(f"CPUs {cpus_text(missing)} are not available here (this process may run on "
                         f"{cpus_text(allowed)}): pick CPUs among those")
    return frozenset(cpus)


def cpu_list(text: str) -> frozenset[int]:
    """Linux's CPU-list format (``0,2-4``, as ``/sys`` and ``taskset -c`` write it) -> the CPU numbers."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        lo, dash, hi = part.strip().partition("-")
        a, b = int(lo), int(hi) if dash else int(lo)
        if a < 0 or b < a:
            raise ValueError(part)
        cpus.update(range(a, b + 1))
    return frozenset(cpus)


def cpus_text(cpus: Iterable[int]) -> str:
    """The CPU numbers as ranges: ``{0, 2, 3, 4}`` -> ``0,2-4``."""
    runs = [[c for _, c in g] for _, g in groupby(enumerate(sorted(set(cpus))), key=lambda ic: ic[1] - ic[0])]
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


@contextmanager
def launched_on(cpus: frozenset[int] | None) -> Iterator[None]:
    """Inside the block the calling thread runs on ``cpus`` (a process it starts inherits them); as before after.
    ``None``: nothing changes."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def core_groups(cpus: Iterable[int], *, sys_cpu: Path = SYS_CPU) -> list[tuple[int, ...]]:
    """``cpus`` grouped by physical core (the hyper-threads of one core together, from each CPU's
    ``topology/thread_siblings_list``; a CPU Linux does not describe is a core of its own), in CPU order."""
    wanted, seen, out = set(cpus), set[int](), list[tuple[int, ...]]()
    for c in sorted(wanted):
        if c in seen:
            continue
        try:
            siblings = cpu_list((sys_cpu / f"cpu{c}" / "topology" / "thread_siblings_list").read_text())
        except (OSError, ValueError):
            siblings = frozenset({c})
        group = tuple(sorted((siblings & wanted) | {c}))
        seen.update(group)
        out.append(group)
    return out


def auto_cpus(n: int = AUTO_CORES, *, available: Iterable[int] | None = None, local: Iterable[int] | None = None,
              sys_cpu: Path = SYS_CPU) -> frozenset[int]:
    """``n`` physical cores, one logical CPU (the lowest) of each, from ``available`` (default: this process's
    affinity), among the GPU's local CPUs (``local``, default :func:`perfgate.host.gpu.local_cpus`; all where it
    cannot tell or too few are local), the core of CPU 0 last; ValueError naming how many cores there are."""
    allowed = set(available) if available is not None else os.sched_getaffinity(0)
    near = set(local if local is not None else gpu.local_cpus() or ())
    pool = allowed & near if len(core_groups(allowed & near, sys_cpu=sys_cpu)) >= n else allowed
    zero = set(next(g for g in core_groups(allowed | {0}, sys_cpu=sys_cpu) if 0 in g))  # CPU 0 and its siblings
    groups = sorted(core_groups(pool, sys_cpu=sys_cpu), key=lambda g: (bool(zero & set(g)), g))
    if len(groups) < n:
        raise ValueError(f"auto:{n} needs {n} physical cores and this process may run on {len(groups)} "
                         f"({cpus_text(pool)}): write auto:{max(1, len(groups))} or a CPU list")
    return frozenset(g[0] for g in groups[:n])
