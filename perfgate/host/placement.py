"""Where a measured start's processes ran: per process of the session (SGLang's ``scheduler``, ``detokenizer`` and
tokenizer manager, a simulated server, and the ``client``: this pytest process), the CPU its busiest thread last ran
on during the measurement, and which of them shared a physical core.

Why per start: on a real H100 (2026-12-07, evidence/h100-x1/prefill-paired-2026-12-07/) the prefill's host time, where
batch-1 TTFT's level lives, read 19.6 ms on average over the starts whose scheduler ran on the tokenizer manager's CPU
and 25.8 ms over those whose did not, and a server with every process on one CPU answered at 26.8 ms against 38.2 ms
unpinned. The record carries it per start (``server.placement``, ``start_values.server.scheduler_shared``), so a
level can be read against where the scheduler ran. Linux only (``/proc/PID/task/TID/stat``); elsewhere, or where a
process cannot be read, nothing is recorded. Pure but for :func:`sample`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.host.affinity import SYS_CPU, core_groups

__all__ = ["ThreadSample", "Placement", "sample", "placement", "SCHEDULER", "CLIENT", "MIN_BUSY_S"]

PROC = Path("/proc")
#: the SGLang process whose CPU matters most for TTFT: it takes a request, launches the prefill's kernels one by one
SCHEDULER = "scheduler"
#: this pytest process, the client that sends the requests and reads the stream
CLIENT = "client"
#: a process whose threads used less CPU time than this over the measurement is left out (idle helpers)
MIN_BUSY_S = 0.05
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ThreadSample:
    """Each thread's CPU seconds and the CPU it last ran on, by (pid, tid); each process's name by pid."""

    threads: Mapping[tuple[int, int], tuple[float, int]] = field(default_factory=dict)
    names: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where a start's processes ran: (name, CPU of its busiest thread), the busiest process first, and the groups of
    names that shared one physical core."""

    cpus: tuple[tuple[str, int], ...]
    shared: tuple[tuple[str, ...], ...] = ()

    def text(self) -> str:
        """``scheduler@4 tokenizer@1 client@0; scheduler+tokenizer on one core`` (the record's ``server.placement``)."""
        where = " ".join(f"{name}@{cpu}" for name, cpu in self.cpus)
        one = ", ".join("+".join(g) for g in self.shared)
        return f"{where}; {one} on one core" if one else where

    def scheduler_shared(self) -> bool | None:
        """Whether the scheduler ran on a physical core with another of the processes (None: no scheduler seen, a
        simulated server's or an attached one's)."""
        names = [n for n, _ in self.cpus]
        if not any(n.split(".")[0] == SCHEDULER for n in names):
            return None
        return any(n.split(".")[0] == SCHEDULER for g in self.shared for n in g)


def _name(pid: int, me: int, proc: Path) -> str:
    if pid == me:
        return CLIENT
    try:
        comm = (proc / str(pid) / "comm").read_text().strip().removeprefix("sglang::")
        cmdline = (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"pid{pid}"
    # SGLang titles its processes sglang::scheduler_TP0, sglang::detokenizer (the comm cut at 15 characters, the
    # command line whole); the tokenizer manager keeps the launcher's command line
    title = cmdline.split(" ")[0].removeprefix("sglang::") if cmdline.startswith("sglang::") else comm
    if title.startswith(SCHEDULER):
        return SCHEDULER
    if cmdline.startswith("sglang::"):
        return title.split("_")[0]
    if "sglang.launch_server" in cmdline:
        return "tokenizer"
    return "sim-server" if "perfgate.sim" in cmdline else comm


def sample(pids: Iterable[int], *, proc: Path = PROC, me: int | None = None) -> ThreadSample:
    """Every thread of ``pids`` now: its CPU seconds (user + system) and the CPU it last ran on (field 39 of its
    ``stat``). Processes or threads that went away, or a system without ``/proc``, are left out."""
    me = os.getpid() if me is None else me
    threads: dict[tuple[int, int], tuple[float, int]] = {}
    names: dict[int, str] = {}
    for pid in pids:
        try:
            tids = [int(t.name) for t in (proc / str(pid) / "task").iterdir() if t.name.isdigit()]
        except OSError:
            continue
        names[pid] = _name(pid, me, proc)
        for tid in tids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (proc / str(pid) / "task" / str(tid) / "stat").read_text()
                f = stat[stat.rindex(")") + 2:].split()  # after the name: field 3 is f[0]
                threads[(pid, tid)] = ((int(f[11]) + int(f[12])) / _TICK, int(f[36]))
    return ThreadSample(threads=threads, names=names)


def placement(before: ThreadSample, after: ThreadSample, *, sys_cpu: Path = SYS_CPU,
              min_busy_s: float = MIN_BUSY_S) -> Placement | None:
    """Per process of ``after``: the CPU its busiest thread (the most CPU time since ``before``) last ran on, for
    processes that used at least ``min_busy_s``; and the processes sharing a physical core (:func:`core_groups`).
    None where no process was busy (nothing sampled, or not Linux)."""
    busiest: dict[int, tuple[float, int, float]] = {}  # pid -> (its busiest thread's seconds, its CPU, all threads')
    for (pid, tid), (secs, cpu) in after.threads.items():
        used = secs - before.threads.get((pid, tid), (0.0, cpu))[0]
        top, at, total = busiest.get(pid, (-1.0, cpu, 0.0))
        busiest[pid] = (used, cpu, total + used) if used > top else (top, at, total + used)
    busy = sorted(((total, pid, cpu) for pid, (_, cpu, total) in busiest.items() if total >= min_busy_s), reverse=True)
    if not busy:
        return None
    named: list[tuple[str, int]] = []
    for _, pid, cpu in busy:
        name = after.names.get(pid, f"pid{pid}")
        n = sum(1 for x, _ in named if x.split(".")[0] == name)
        named.append((f"{name}.{n + 1}" if n else name, cpu))
    core_of = {c: g for g in core_groups({cpu for _, cpu in named}, sys_cpu=sys_cpu) for c in g}
    by_core: dict[tuple[int, ...], list[str]] = {}
    for name, cpu in named:
        by_core.setdefault(core_of.get(cpu, (cpu,)), []).append(name)
    shared = tuple(tuple(names) for names in by_core.values() if len(names) > 1)
    return Placement(cpus=tuple(named), shared=shared)
