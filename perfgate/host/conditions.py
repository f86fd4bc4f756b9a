"""The host's and the GPUs' conditions while one server start is measured: is this a quiet measurement?

A busy host looks like a regression (issue 40: on a 2-core runner shared with other jobs, 2 of 10 identical runs
failed their limits, 0 of 10 when quiet). So every measured start is watched
(:class:`perfgate.host.watch.Watch`): the CPU time of the
whole host and of perfgate's own processes at the start and end of the window (psutil), the 1-minute load
average, and every :data:`SAMPLE_S` seconds the GPUs' SM clock, power, temperature and clock-event (throttle)
reasons through NVML (nvidia-ml-py). Without NVML or a GPU the GPU figures are absent; nothing here raises.

*Ours* are this process and its descendants (perfgate's servers are its children) and the processes holding
memory on the GPUs CUDA sees here with their parent's tree (an attached server); everything else is *others*.

A start is **disturbed** (:func:`disturbances`) when, over its window,

- other processes used more than half of the cores ours left free (:func:`others_limit`: half of ``cpus - ours``,
  never below :data:`OTHERS_CPU_LIMIT`, half of one core): on a 2-core runner whose server and client use one core,
  a busy loop beside them disturbs; on a 128-core GPU box, other jobs on 40 cores do not,
- the hypervisor stole more than :data:`STEAL_LIMIT` (5 %) of the host's CPU time, or
- a GPU reported a throttling clock-event reason (:data:`THROTTLING`: software power cap, hardware slowdown,
  software or hardware thermal slowdown, power brake) in any sample.

The load average is recorded but never decides alone: perfgate's own server threads raise it.

What a disturbed start means for a verdict is decided here too, once (:func:`pair_kind`, :func:`one_sided`): in an
alternated paired run, load that both arms of a pair saw cancels in their ratio and widens the pairs' spread, which
the judge measures, so such a pair is kept (``shared``); only a pair with one arm disturbed and the other quiet
(``one-sided``) is left out and replaced within the budget. An unpaired check (a limit, two reports, a history)
cannot cancel the load: a miss measured disturbed is inconclusive, never a failure (:func:`unpaired_miss`).
The pure parts (:func:`cpu_window`, :func:`gpu_summary`, :func:`disturbances`, :func:`combine`) take samples
and are unit-tested; :class:`perfgate.host.watch.Watch` only gathers them.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfgate.categories import Word

__all__ = ["WATCH_ENV", "watch_enabled", "CpuSample", "GpuSample", "Conditions", "cpu_window", "gpu_summary",
           "disturbances",
           "combine", "throttle_names", "OTHERS_CPU_LIMIT", "FREE_SHARE", "STEAL_LIMIT", "SAMPLE_S", "THROTTLING",
           "PREFIX", "STATE", "SERVER_CPUS", "QUIET", "others_limit", "is_quiet", "PairKind", "pair_kind",
           "one_sided", "unpaired_miss", "RERUN_QUIET"]

#: other processes' CPU above this many cores (averaged over the window) make a start disturbed, at the least
OTHERS_CPU_LIMIT = 0.5
#: ... and above this share of the cores our processes left free
FREE_SHARE = 0.5
#: CPU steal above this fraction of the host's CPU time makes a start disturbed
STEAL_LIMIT = 0.05
#: seconds between GPU samples
SAMPLE_S = 1.0
#: ``PERFGATE_HOST_WATCH=off`` watches no start: records carry no ``host.*`` and nothing is discounted as measured on
#: a busy host. For a runner whose load is known and accepted: perfgate's own test suite, whose parallel workers
#: and simulated servers are the load (its tests of the watch turn it back on).
WATCH_ENV = "PERFGATE_HOST_WATCH"


def watch_enabled() -> bool:
    """False when ``PERFGATE_HOST_WATCH`` is off (``off``, ``0``, ``false``, ``no``)."""
    return os.environ.get(WATCH_ENV, "on").strip().lower() not in ("off", "0", "false", "no")

#: NVML clock-event (throttle) reasons that slow the GPU down, by bit (nvmlClocksEventReason*)
THROTTLING: dict[int, str] = {0x4: "sw-power-cap", 0x8: "hw-slowdown", 0x20: "sw-thermal", 0x40: "hw-thermal",
                              0x80: "hw-power-brake"}
#: reasons that are no throttling: idle, application clocks, sync boost, display clock
_BENIGN: dict[int, str] = {0x1: "gpu-idle", 0x2: "applications-clocks", 0x10: "sync-boost", 0x100: "display-clock"}

#: the record properties' prefix, and the one that says whether the record was measured quietly
PREFIX = "host."
STATE = "host.state"
#: the CPUs the run's servers were pinned to (--perfgate-server-cpus; absent: not pinned)
SERVER_CPUS = PREFIX + "server_cpus"
QUIET = "quiet"


@dataclass(frozen=True, kw_only=True)
class CpuSample:
    """CPU seconds at one moment: the whole host's (all CPUs summed) and our processes'."""

    t: float  # monotonic seconds
    busy: float  # user + nice + system + irq + softirq
    steal: float
    total: float  # every state but guest (counted in user)
    ours: Mapping[int, float] = field(default_factory=dict)  # pid -> user + system seconds


@dataclass(frozen=True, kw_only=True)
class GpuSample:
    """One GPU at one moment (None: NVML could not say)."""

    index: int
    sm_mhz: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    reasons: int | None = None  # the clock-event reasons' bitmask


@dataclass(frozen=True, kw_only=True)
class Conditions:
    """What one or more measured starts saw; ``None`` figures were not measured (no GPU, no psutil)."""

    starts: int = 1
    cpus: int | None = None
    load_1m: float | None = None
    steal: float | None = None  # fraction of the host's CPU time
    others_cpu: float | None = None  # cores
    ours_cpu: float | None = None  # cores: perfgate's processes and its servers
    sm_clock_mhz: float | None = None  # the median sample of the slowest GPU
    sm_clock_min_mhz: float | None = None
    power_w: float | None = None  # the median sample of the hungriest GPU
    temp_c: float | None = None  # the hottest sample
    reasons: int | None = None  # every clock-event reason seen (bitwise or)
    disturbed: tuple[str, ...] = ()  # why (disturbances), per start that was
    disturbed_starts: int = 0
    server_cpus: str = ""  # the CPUs the servers were pinned to (--perfgate-server-cpus; "": any)

    @property
    def quiet(self) -> bool:
        return not self.disturbed

    def state(self) -> str:
        """``quiet``, or ``disturbed: <why>`` (the record's ``host.state``; over several starts,
        ``disturbed (k of n starts): <why, from the worst figures>``)."""
        if self.quiet:
            return QUIET
        count = f" ({self.disturbed_starts} of {self.starts} starts)" if self.starts > 1 else ""
        return f"disturbed{count}: " + "; ".join(dict.fromkeys(self.disturbed))

    def properties(self) -> dict[str, object]:
        """The record properties (``host.*``): only what was measured."""
        out: dict[str, object] = {STATE: self.state(), PREFIX + "starts": self.starts,
                                  PREFIX + "disturbed_starts": self.disturbed_starts}
        for name, value in (("cpus", self.cpus), ("load_1m", self.load_1m), ("others_cpu", self.others_cpu),
                            ("ours_cpu", self.ours_cpu),
                            ("gpu_sm_clock_mhz", self.sm_clock_mhz), ("gpu_sm_clock_min_mhz", self.sm_clock_min_mhz),
                            ("gpu_power_w", self.power_w), ("gpu_temp_c", self.temp_c)):
            if value is not None:
                out[PREFIX + name] = round(float(value), 3)
        if self.steal is not None:
            out[PREFIX + "steal_pct"] = round(100 * self.steal, 3)
        if self.reasons is not None:
            out[PREFIX + "gpu_throttle"] = ",".join(throttle_names(self.reasons, only_throttling=True)) or "none"
        if self.server_cpus:
            out[SERVER_CPUS] = self.server_cpus
        return out


#: what a measurement on a busy host or a throttled GPU needs to decide an unpaired check
RERUN_QUIET = ("re-run quiet: measure again on a quiet host with an unthrottled GPU (the record's host.* properties "
               "say what disturbed it), or compare in alternated pairs (--perfgate-candidate), where a load both arms "
               "share cancels")


def is_quiet(state: str) -> bool:
    """Whether a start's ``host_state`` (or a record's ``host.state``) is quiet; "" (not watched) counts as quiet."""
    return state in ("", QUIET)


class PairKind(Word):
    """How one start pair's two arms were measured (:func:`pair_kind`)."""

    QUIET = "quiet"  # both arms quiet: kept
    SHARED = "shared"  # both arms disturbed: the load both saw cancels in their ratio; kept
    ONE_SIDED = "one-sided"  # one arm disturbed, the other quiet: left out and replaced


def pair_kind(a: str, b: str) -> PairKind:
    """The kind of a start pair from its two starts' ``host_state``."""
    qa, qb = is_quiet(a), is_quiet(b)
    if qa and qb:
        return PairKind.QUIET
    return PairKind.SHARED if not qa and not qb else PairKind.ONE_SIDED


def one_sided(pairs: Sequence[tuple[str, str]]) -> tuple[int, ...]:
    """The pairs (1-based) that a paired judge leaves out: one arm disturbed, the other quiet."""
    return tuple(i + 1 for i, (a, b) in enumerate(pairs) if pair_kind(a, b) is PairKind.ONE_SIDED)


def unpaired_miss(state: str) -> str:
    """Why a miss of an unpaired check (a limit, two reports) measured in ``state`` decides nothing ("" when the
    measurement was quiet: the miss stands)."""
    return "" if is_quiet(state) else f"measured {state}; {RERUN_QUIET}"


def throttle_names(reasons: int, *, only_throttling: bool = False) -> list[str]:
    """The names of the set bits of a clock-event bitmask (the throttling ones only, if asked)."""
    known = dict(THROTTLING) if only_throttling else {**_BENIGN, **THROTTLING}
    return [name for bit, name in sorted(known.items()) if reasons & bit]


def cpu_window(start: CpuSample, end: CpuSample) -> tuple[float | None, float | None]:
    """(others' CPU in cores, steal as a fraction of the host's CPU time) between two samples; None when the window
    is empty. A process of ours that appeared in the window counts all its CPU time; one that ended in it is
    counted as others' (its time is gone from the end sample)."""
    wall = end.t - start.t
    total = end.total - start.total
    if wall <= 0 or total <= 0:
        return None, None
    ours = sum(max(0.0, t - start.ours.get(pid, 0.0)) for pid, t in end.ours.items())
    others = max(0.0, (end.busy - start.busy) - ours) / wall
    steal = max(0.0, end.steal - start.steal) / total
    return others, steal


def gpu_summary(samples: Sequence[GpuSample]) -> dict[str, float | int | None]:
    """The GPUs over a window: the slowest GPU's median and lowest SM clock, the hungriest GPU's median power, the
    hottest sample and every clock-event reason seen."""
    by_gpu: dict[int, list[GpuSample]] = {}
    for s in samples:
        by_gpu.setdefault(s.index, []).append(s)

    def med(xs: Iterable[float | None]) -> float | None:
        vals = [x for x in xs if x is not None]
        return statistics.median(vals) if vals else None

    clocks = [m for g in by_gpu.values() if (m := med(s.sm_mhz for s in g)) is not None]
    powers = [m for g in by_gpu.values() if (m := med(s.power_w for s in g)) is not None]
    lows = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    temps = [s.temp_c for s in samples if s.temp_c is not None]
    reasons = [s.reasons for s in samples if s.reasons is not None]
    ored = 0
    for r in reasons:
        ored |= r
    return {"sm_clock_mhz": min(clocks) if clocks else None, "sm_clock_min_mhz": min(lows) if lows else None,
            "power_w": max(powers) if powers else None, "temp_c": max(temps) if temps else None,
            "reasons": ored if reasons else None}


def others_limit(cpus: int | None, ours_cpu: float | None) -> float:
    """The most CPU (cores) other processes may use over a start's window before it is disturbed: half of the cores
    ours left free (:data:`FREE_SHARE` of ``cpus - ours_cpu``), never below :data:`OTHERS_CPU_LIMIT`; that floor alone
    where the host's size or our use is unknown."""
    if not cpus or ours_cpu is None:
        return OTHERS_CPU_LIMIT
    return max(OTHERS_CPU_LIMIT, FREE_SHARE * (cpus - ours_cpu))


def disturbances(*, others_cpu: float | None, steal: float | None, reasons: int | None,
                 worst: bool = False, cpus: int | None = None, ours_cpu: float | None = None) -> tuple[str, ...]:
    """Why a start was not measured quietly (empty: it was); see the module for the limits (``cpus``, ``ours_cpu``:
    the host's CPUs and our processes' use, which scale the others' limit: :func:`others_limit`). ``worst``: the
    figures are the worst of several starts ("up to")."""
    out = []
    up = "up to " if worst else ""
    limit = others_limit(cpus, ours_cpu)
    if others_cpu is not None and others_cpu > limit:
        out.append(f"host busy: other processes used {up}{others_cpu:.2f} CPU cores (limit {limit:.2g} of "
                   f"{cpus or '?'})")
    if steal is not None and steal > STEAL_LIMIT:
        out.append(f"host busy: CPU steal {up}{steal:.1%} (limit {STEAL_LIMIT:.0%})")
    if reasons:
        names = throttle_names(reasons, only_throttling=True)
        if names:
            out.append(f"GPU throttled: {', '.join(names)}")
    return tuple(out)


def ours_window(start: CpuSample, end: CpuSample) -> float | None:
    """Our processes' CPU in cores between two samples (None for an empty window)."""
    wall = end.t - start.t
    if wall <= 0:
        return None
    return sum(max(0.0, t - start.ours.get(pid, 0.0)) for pid, t in end.ours.items()) / wall


def conditions(start: CpuSample | None, end: CpuSample | None, gpu: Sequence[GpuSample], *, cpus: int | None,
               load_1m: float | None) -> Conditions:
    """One start's :class:`Conditions` from its window's samples."""
    others, steal = cpu_window(start, end) if start is not None and end is not None else (None, None)
    ours = ours_window(start, end) if start is not None and end is not None else None
    g = gpu_summary(gpu)
    reasons = g["reasons"]
    why = disturbances(others_cpu=others, steal=steal, reasons=int(reasons) if reasons is not None else None,
                       cpus=cpus, ours_cpu=ours)
    return Conditions(cpus=cpus, load_1m=load_1m, steal=steal, others_cpu=others, ours_cpu=ours,
                      sm_clock_mhz=_f(g["sm_clock_mhz"]), sm_clock_min_mhz=_f(g["sm_clock_min_mhz"]),
                      power_w=_f(g["power_w"]), temp_c=_f(g["temp_c"]),
                      reasons=int(reasons) if reasons is not None else None, disturbed=why,
                      disturbed_starts=1 if why else 0)


def _f(x: float | int | None) -> float | None:
    return None if x is None else float(x)


def combine(parts: Sequence[Conditions]) -> Conditions | None:
    """Several starts (a record's own and those it compares with) as one: the worst of each figure, every reason."""
    if not parts:
        return None

    def worst(values: Iterable[float | None], pick: Any = max) -> float | None:
        vals = [v for v in values if v is not None]
        return pick(vals) if vals else None

    if len(parts) == 1:
        return parts[0]
    reasons = [c.reasons for c in parts if c.reasons is not None]
    ored = 0
    for r in reasons:
        ored |= r
    steal, others = worst(c.steal for c in parts), worst(c.others_cpu for c in parts)
    ours = worst((c.ours_cpu for c in parts), min)
    cpus = next((c.cpus for c in parts if c.cpus), None)
    disturbed_starts = sum(c.disturbed_starts for c in parts)
    # the reasons again from the worst figures (each is some start's), or as the starts said them
    why = disturbances(others_cpu=others, steal=steal, reasons=ored if reasons else None, worst=True, cpus=cpus,
                       ours_cpu=ours) if disturbed_starts else ()
    return Conditions(
        starts=sum(c.starts for c in parts), cpus=cpus,
        load_1m=worst(c.load_1m for c in parts), steal=steal, others_cpu=others, ours_cpu=ours,
        sm_clock_mhz=worst((c.sm_clock_mhz for c in parts), min),
        sm_clock_min_mhz=worst((c.sm_clock_min_mhz for c in parts), min), power_w=worst(c.power_w for c in parts),
        temp_c=worst(c.temp_c for c in parts), reasons=ored if reasons else None,
        disturbed=why or tuple(dict.fromkeys(w for c in parts for w in c.disturbed)),
        disturbed_starts=disturbed_starts, server_cpus=",".join(dict.fromkeys(c.server_cpus for c in parts
                                                                             if c.server_cpus)))
