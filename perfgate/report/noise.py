"""Noise bands learnt from a history of reports: how much one record moves between starts and between machines.

:func:`bands_from_reports` reads any set of reports (committed reports, a directory, what ``perfgate history``
reads) and gives, per record id, a :class:`Band`:

- ``start_cv``: the pooled sd of the record's log figure between runs (or starts) on *one* machine — every run
  of a machine counts, a run of several starts counts each start; the degrees of freedom say how much it rests on;
- ``machine_cv``: the sd of the machines' mean log figures, when three or more machines were seen.

Only runs of one server config are pooled (the record's ``config`` hash, the newest one seen); a run with no
``machine.id`` is a machine of its own (its offset cannot be told from a start's), so unidentified history
never makes a band narrower than it is. The band is per record and machine class (GPU model, count and
interconnect): a history mixing classes keeps the class of the newest report.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from perfgate.report.records import Record, Report

__all__ = ["Band", "bands_from_reports", "machine_class", "start_values", "MIN_START_DF", "MIN_MACHINES"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: a start band needs this many degrees of freedom (pooled over machines) before it replaces the prior
MIN_START_DF = 3
#: a machine band needs this many machines before it replaces the prior
MIN_MACHINES = 3


@dataclass(frozen=True, kw_only=True)
class Band:
    """One record's noise learnt from history (None: not enough history for that level)."""

    record: str
    machine_class: str
    start_cv: float | None
    start_df: int
    machine_cv: float | None
    machines: int
    runs: int

    def describe(self) -> str:
        start = (f"starts sd {self.start_cv:.3%} ({self.start_df} df)" if self.start_cv is not None
                 else "starts: too few")
        mach = (f"machines sd {self.machine_cv:.2%} ({self.machines} machines)" if self.machine_cv is not None
                else f"machines: {self.machines} seen")
        return f"{self.record} [{self.machine_class}]: {start}; {mach}; {self.runs} run(s)"


def machine_class(r: Record) -> str:
    """GPU model x count over interconnect: records of one class are judged against each other's noise."""
    s = r.stack_dict
    return f"{s.get('stack.gpu_count', '?')}x {s.get('stack.gpu', '?')} ({s.get('stack.interconnect', '?')})"


def start_values(r: Record, metric: str) -> list[float]:
    """A record's per-start figures of ``metric`` (``start_values.<metric>``, or ``start_values`` for the metric it
    is judged on, of a run with ``--perfgate-starts``), else its one figure."""
    text = r.prop(f"start_values.{metric}") or (r.prop("start_values") if metric == r.metric else "")
    if text:
        try:
            vals = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            vals = []
        if vals and all(v > 0 and math.isfinite(v) for v in vals):
            return vals
    x = r.num(metric)
    return [x] if x is not None else []


def bands_from_reports(reports: Iterable[Report]) -> dict[str, Band]:
    """A :class:`Band` per record id seen in ``reports`` (see the module docstring)."""
    seen: dict[str, list[tuple[Report, Record]]] = defaultdict(list)
    for rep in reports:
        for r in rep.records:
            if r.num(r.metric) is not None:
                seen[r.id].append((rep, r))
    out: dict[str, Band] = {}
    for rid, items in seen.items():
        items.sort(key=lambda it: it[0].started_at or _EPOCH)  # undated reports count as the oldest
        newest = items[-1][1]
        cls, config = machine_class(newest), newest.config
        runs = [r for _, r in items if machine_class(r) == cls and (not config or r.config == config)]
        by_machine: dict[str, list[list[float]]] = defaultdict(list)
        for i, r in enumerate(runs):
            mid = r.prop("machine.id")
            key = mid if mid and mid != "unknown" else f"unidentified-{i}"
            vals = [math.log(v) for v in start_values(r, r.metric)]
            if vals:
                by_machine[key].append(vals)
        ss, df = 0.0, 0
        means = []
        for machine_runs in by_machine.values():
            flat = [x for run in machine_runs for x in run]
            means.append(statistics.fmean(flat))
            if len(flat) >= 2:
                ss += sum((x - statistics.fmean(flat)) ** 2 for x in flat)
                df += len(flat) - 1
        start_cv = math.sqrt(ss / df) if df >= MIN_START_DF else None
        machine_cv = statistics.stdev(means) if len(means) >= MIN_MACHINES else None
        out[rid] = Band(record=rid, machine_class=cls, start_cv=start_cv, start_df=df, machine_cv=machine_cv,
                        machines=len(by_machine), runs=len(runs))
    return out
