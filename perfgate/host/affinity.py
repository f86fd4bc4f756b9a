"""Which CPUs a launched server may run on (``--perfgate-server-cpus``): parsing a CPU list, and launching a process
with that affinity.

On a real H200 the batch-1 TTFT level belongs to the server process (docs/gate.md, "Latency on an H200"); where its
processes run is one suspect, so a session can pin every server it launches to a fixed set of CPUs. The affinity is
set on the launching thread for the moment of the launch (:func:`launched_on`): the child inherits it, and so does
every process and thread it starts (SGLang's scheduler and detokenizer), while the rest of the pytest process keeps
its own. Linux only (``os.sched_setaffinity``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import groupby

__all__ = ["parse_cpus", "cpus_text", "launched_on"]


def parse_cpus(text: str, *, available: Iterable[int] | None = None) -> frozenset[int]:
    """``2-5``, ``0,2,4-6`` -> the CPU numbers; ValueError naming the format, or the CPUs not in ``available``
    (default: this process's own affinity)."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, dash, hi = part.strip().partition("-")
            a, b = int(lo), int(hi) if dash else int(lo)
            if a < 0 or b < a:
                raise ValueError(part)
            cpus.update(range(a, b + 1))
    except ValueError:
        raise ValueError(f"{text!r} is no CPU list: write CPU numbers and ranges, e.g. 2-5 or 0,2,4-6") from None
    allowed = set(available) if available is not None else os.sched_getaffinity(0)
    missing = sorted(cpus - allowed)
    if missing:
        raise ValueError(f"CPUs {cpus_text(missing)} are not available here (this process may run on "
                         f"{cpus_text(allowed)}): pick CPUs among those")
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
