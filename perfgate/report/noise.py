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

A history keeps its regressions out of its band. A run measured on a busy host or a throttled GPU (its
``host.state`` is not ``quiet``, :mod:`perfgate.host.conditions`) is left out first. Per machine, the runs in
time order are searched for sustained steps with :func:`perfgate.report.history.detect_steps` (the steps
``perfgate history`` flags) and only the stretch since the last step counts; within that stretch a run whose
figure lies beyond :data:`OUTLIER_Z` robust sds (1.4826 x the MAD of the stretch's figures) and beyond
:data:`OUTLIER_MIN_REL` from their median is set aside (a slowed run or two that no step explains), once the
stretch has :data:`OUTLIER_MIN_RUNS` runs. Each :class:`Band` names the reports it used and those it left out, and
the report being judged is never part of its own history (:func:`without_judged`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from perfgate.host.conditions import STATE as HOST_STATE
from perfgate.host.conditions import is_quiet
from perfgate.report.history import detect_steps, record_sigma
from perfgate.report.records import Record, Report

__all__ = ["Band", "bands_from_reports", "machine_class", "start_values", "without_judged", "MIN_START_DF",
           "MIN_MACHINES", "OUTLIER_Z", "OUTLIER_MIN_REL", "OUTLIER_MIN_RUNS"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: a start band needs this many degrees of freedom (pooled over machines) before it replaces the prior
MIN_START_DF = 3
#: a machine band needs this many machines before it replaces the prior
MIN_MACHINES = 3
#: a run since the last step is set aside when its figure lies beyond this many robust sds from the median ...
OUTLIER_Z = 3.5
#: ... and beyond this fraction of it (``perfgate history``'s smallest step, ``--min-rel-step``)
OUTLIER_MIN_REL = 0.01
#: ... once the stretch has this many runs (the MAD of fewer says little)
OUTLIER_MIN_RUNS = 5


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
    used: tuple[str, ...] = ()  # the reports (labels) whose runs make the band, in time order
    before_step: tuple[str, ...] = ()  # left out: runs before their machine's last step
    outliers: tuple[str, ...] = ()  # left out: runs set aside as outliers of the stretch since the last step
    steps: tuple[str, ...] = ()  # the last step per machine that has one: "drop x0.970 at <label>"
    disturbed: tuple[str, ...] = ()  # left out: runs measured on a busy host or a throttled GPU (host.state)

    def provenance(self) -> str:
        """Which reports the band rests on and which it left out, and why."""
        text = f"{len(self.used)} report(s) used: {_names(self.used)}"
        if self.before_step:
            text += (f"; {len(self.before_step)} before the last step left out ({'; '.join(self.steps)}): "
                     f"{_names(self.before_step)}")
        if self.outliers:
            text += f"; {len(self.outliers)} outlier(s) set aside: {_names(self.outliers)}"
        if self.disturbed:
            text += f"; {len(self.disturbed)} measured disturbed (host.state) left out: {_names(self.disturbed)}"
        return text

    def describe(self) -> str:
        start = (f"starts sd {self.start_cv:.3%} ({self.start_df} df)" if self.start_cv is not None
                 else "starts: too few")
        mach = (f"machines sd {self.machine_cv:.2%} ({self.machines} machines)" if self.machine_cv is not None
                else f"machines: {self.machines} seen")
        return f"{self.record} [{self.machine_class}]: {start}; {mach}; {self.runs} run(s); {self.provenance()}"


def _names(labels: tuple[str, ...], most: int = 12) -> str:
    shown = ", ".join(labels[:most])
    return shown + (f", ... ({len(labels) - most} more)" if len(labels) > most else "")


def machine_class(r: Record) -> str:
    """GPU model x count over interconnect: records of one class are judged against each other's noise."""
    s = r.stack_dict
    return f"{s.get('stack.gpu_count', '?')}x {s.get('stack.gpu', '?')} ({s.get('stack.interconnect', '?')})"


def start_values(r: Record, metric: str, *, arm: str = "") -> list[float]:
    """A record's per-start figures of ``metric`` (``start_values.<metric>``, or ``start_values`` for the metric it
    is judged on, of a run with ``--perfgate-starts``), else its one figure; ``arm``: a property prefix, ``candidate.``
    for a stack pair's candidate arm."""
    text = r.prop(f"{arm}start_values.{metric}") or (r.prop(f"{arm}start_values") if metric == r.metric else "")
    if text:
        try:
            vals = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            vals = []
        if vals and all(v > 0 and math.isfinite(v) for v in vals):
            return vals
    x = r.num(f"{arm}{metric}")
    return [x] if x is not None else []


def without_judged(history: Iterable[Report], *judged: Report) -> tuple[list[Report], list[Report]]:
    """The history less the reports being judged (``perfgate gate OLD NEW``'s NEW, say): the same file, or a copy
    of it (the same start time and the same records' figures). Returns (kept, left out)."""

    def same(a: Report, b: Report) -> bool:
        if a.path and b.path and Path(a.path).resolve() == Path(b.path).resolve():
            return True
        return (a.started_at is not None and a.started_at == b.started_at
                and {r.key: r.number_dict for r in a.records} == {r.key: r.number_dict for r in b.records})

    kept: list[Report] = []
    out: list[Report] = []
    for rep in history:
        (out if any(same(rep, j) for j in judged) else kept).append(rep)
    return kept, out


@dataclass(frozen=True)
class _Stretch:
    """One machine's runs that count, and those left out."""

    kept: list[tuple[Report, Record]]
    before_step: list[Report]
    outliers: list[Report]
    step: str


def _since_last_step(runs: list[tuple[Report, Record]]) -> _Stretch:
    """One machine's runs (time order) from its last step on, with the stretch's outliers set aside."""
    levels = [r.num(r.metric) for _, r in runs]
    steps = detect_steps(levels, [record_sigma(r, r.metric) for _, r in runs]) if len(runs) >= 4 else ()
    cut = steps[-1].index if steps else 0
    step = ""
    if steps:
        s = steps[-1]
        step = f"{s.direction} x{s.ratio:.3f} at {runs[cut][0].label}" if s.ratio else f"step at {runs[cut][0].label}"
    stretch = runs[cut:]
    outliers: list[Report] = []
    if len(stretch) >= OUTLIER_MIN_RUNS:
        from scipy.stats import median_abs_deviation

        logs = [math.log(x) for _, r in stretch if (x := r.num(r.metric)) is not None and x > 0]
        med = statistics.median(logs)
        robust = float(median_abs_deviation(logs, scale="normal"))
        limit = max(OUTLIER_Z * robust, math.log1p(OUTLIER_MIN_REL))
        kept = []
        for rep, r in stretch:
            x = r.num(r.metric)
            if x is not None and x > 0 and abs(math.log(x) - med) > limit:
                outliers.append(rep)
            else:
                kept.append((rep, r))
        stretch = kept
    return _Stretch(kept=stretch, before_step=[rep for rep, _ in runs[:cut]], outliers=outliers, step=step)


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
        runs = [(rep, r) for rep, r in items if machine_class(r) == cls and (not config or r.config == config)]
        per_machine: dict[str, list[tuple[Report, Record]]] = defaultdict(list)
        disturbed = [rep for rep, r in runs if not is_quiet(r.prop(HOST_STATE))]
        for i, (rep, r) in enumerate(runs):
            if not is_quiet(r.prop(HOST_STATE)):
                continue  # measured on a busy host or a throttled GPU: not the noise of a quiet start
            mid = r.prop("machine.id")
            per_machine[mid if mid and mid != "unknown" else f"unidentified-{i}"].append((rep, r))
        by_machine: dict[str, list[list[float]]] = defaultdict(list)
        used: list[Report] = []
        before: list[Report] = []
        outliers: list[Report] = []
        steps: list[str] = []
        for key, series in per_machine.items():
            stretch = _since_last_step(series)
            before += stretch.before_step
            outliers += stretch.outliers
            steps += [stretch.step] if stretch.step else []
            for rep, r in stretch.kept:
                vals = [math.log(v) for v in start_values(r, r.metric)]
                if vals:
                    by_machine[key].append(vals)
                    used.append(rep)
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
                        machines=len(by_machine), runs=len(used), used=_labels(used), before_step=_labels(before),
                        outliers=_labels(outliers), steps=tuple(steps), disturbed=_labels(disturbed))
    return out


def _labels(reports: list[Report]) -> tuple[str, ...]:
    """The reports' labels in time order (undated ones first, as they sort in the history)."""
    return tuple(rep.label for rep in sorted(reports, key=lambda rep: rep.started_at or _EPOCH))
