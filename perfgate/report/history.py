"""History across many reports: a table of outcome and each record's own metric per record, and change points.

Each row follows the metric its record is judged on (:attr:`Record.metric`: ``ttft_ms`` for a latency record,
``output_tok_s``, decode ``tok_s`` unless it names another), so a TTFT-only regression shows as a step in its row.

Reports are ordered by time: the ``perfgate.started_at`` suite property, else the testsuite
timestamp; reports with neither keep their command-line order, after the dated ones.

A *step* (change point) is a sustained change of level in a record's series, found by
binary segmentation on medians (pure Python, :mod:`statistics`; no numpy):

1. the split point is the one that minimises the summed absolute deviation of both segments
   from their medians, each segment having at least ``min_segment`` points (default 2, so a
   change seen in one report only is never a step);
2. the split is a step when the medians differ by more than ``threshold`` (default 3) times
   the noise scale — the larger of the report-to-report scatter (MAD of successive
   differences / sqrt 2, which a step or an outlier barely moves) and the median per-report
   noise recorded in the reports (``Record.figure_cv``: the CI half-width / 1.96, else the trials' CV over
   sqrt n x 1.25) — and by at least ``min_rel_step`` (default 1%) of the old level, and at least 75% of the
   points of each segment lie on their own side of the midpoint between the two medians;
3. both segments are searched again for further steps.

A single outlier moves neither median, so it is not a step.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from perfgate.report.records import Record, Report

_MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True, kw_only=True)
class Column:
    """One report in the history, in time order."""

    label: str
    path: str
    time: datetime | None
    stack: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One record in one report: its outcome and its own metric's value."""

    outcome: str
    value: float | None = None
    metric: str = "tok_s"
    # noise of this measurement as a standard deviation in the metric's unit, when the report recorded one
    sigma: float | None = None
    # the recorded confidence interval of the median, when the report recorded one
    ci: tuple[float, float] | None = None

    @property
    def tok_s(self) -> float | None:
        """Decode tok/s, None when the record is judged on another metric."""
        return self.value if self.metric == "tok_s" else None


@dataclass(frozen=True, kw_only=True)
class Step:
    """A sustained change of level: from column ``index`` on, the row's metric sits at ``after``."""

    index: int
    before: float
    after: float

    @property
    def ratio(self) -> float | None:
        return self.after / self.before if self.before else None

    @property
    def direction(self) -> str:
        return "drop" if self.after < self.before else "rise"


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    """One record across all reports (``None`` where a report lacks it)."""

    key: str
    cells: tuple[Cell | None, ...]
    steps: tuple[Step, ...] = ()
    metric: str = "tok_s"  # the record's own metric (the newest report's record names it)
    higher_is_better: bool = True

    @property
    def values(self) -> list[float | None]:
        return [c.value if c else None for c in self.cells]

    @property
    def tok_s(self) -> list[float | None]:
        return [c.tok_s if c else None for c in self.cells]

    @property
    def unit(self) -> str:
        from perfgate.record import unit_of

        return unit_of(self.metric)


@dataclass(frozen=True, kw_only=True)
class History:
    """The table: columns are reports in time order, rows are records."""

    columns: tuple[Column, ...]
    rows: tuple[HistoryRow, ...]

    @property
    def steps(self) -> list[tuple[str, Step]]:
        """Every detected step with its record key."""
        return [(row.key, s) for row in self.rows for s in row.steps]


def _sort_key(item: tuple[int, Report]) -> tuple[int, datetime, int]:
    i, r = item
    t = r.started_at
    return (0, t, i) if t is not None else (1, datetime.min.replace(tzinfo=timezone.utc), i)


def order_reports(reports: Sequence[Report]) -> list[Report]:
    """Reports in time order (undated ones last, in the given order)."""
    return [r for _, r in sorted(enumerate(reports), key=_sort_key)]


def record_sigma(rec: Record, metric: str = "tok_s") -> float | None:
    """The noise of one record's ``metric`` as an sd in its unit (:meth:`Record.figure_cv` times the figure);
    None when the record recorded none."""
    cv, x = rec.figure_cv(metric), rec.num(metric)
    return abs(cv * x) if cv is not None and x is not None else None


def _scatter_sigma(xs: Sequence[float]) -> float:
    """Point-to-point noise from successive differences (robust to steps and single outliers)."""
    if len(xs) < 2:
        return 0.0
    diffs = [abs(b - a) for a, b in zip(xs, xs[1:], strict=False)]
    return _MAD_TO_SIGMA * statistics.median(diffs) / math.sqrt(2)


def _l1_cost(xs: Sequence[float]) -> float:
    m = statistics.median(xs)
    return sum(abs(x - m) for x in xs)


def detect_steps(
    values: Sequence[float | None],
    sigmas: Sequence[float | None] | None = None,
    *,
    min_segment: int = 2,
    threshold: float = 3.0,
    min_rel_step: float = 0.01,
) -> tuple[Step, ...]:
    """Sustained steps in a series (``None`` = missing point; indices refer to ``values``)."""
    if min_segment < 1:
        raise ValueError("min_segment must be >= 1")
    sig = list(sigmas) if sigmas is not None else [None] * len(values)
    pts = [(i, float(v), sig[i]) for i, v in enumerate(values) if v is not None]
    steps: list[Step] = []

    def search(seg: list[tuple[int, float, float | None]]) -> None:
        n = len(seg)
        if n < 2 * min_segment:
            return
        xs = [v for _, v, _ in seg]
        best_k, best_cost = None, None
        for k in range(min_segment, n - min_segment + 1):
            cost = _l1_cost(xs[:k]) + _l1_cost(xs[k:])
            if best_cost is None or cost < best_cost:
                best_k, best_cost = k, cost
        assert best_k is not None
        a, b = xs[:best_k], xs[best_k:]
        ma, mb = statistics.median(a), statistics.median(b)
        delta = mb - ma
        if delta == 0:
            return
        recorded = [s for _, _, s in seg if s is not None]
        noise = statistics.median(recorded) if recorded else 0.0
        scale = max(_scatter_sigma(xs), noise)
        significant = abs(delta) > threshold * scale and abs(delta) >= min_rel_step * abs(ma)
        mid = (ma + mb) / 2
        beyond = sum(1 for x in b if (x - mid) * delta > 0) / len(b)
        near = sum(1 for x in a if (x - mid) * delta < 0) / len(a)
        if not (significant and beyond >= 0.75 and near >= 0.75):
            return
        steps.append(Step(index=seg[best_k][0], before=ma, after=mb))
        search(seg[:best_k])
        search(seg[best_k:])

    search(pts)
    return tuple(sorted(steps, key=lambda s: s.index))


def build_history(
    reports: Sequence[Report],
    *,
    min_segment: int = 2,
    threshold: float = 3.0,
    min_rel_step: float = 0.01,
) -> History:
    """Order the reports by time, tabulate every record's own metric and detect its steps."""
    ordered = order_reports(reports)
    columns = tuple(
        Column(label=r.label, path=r.path, time=r.started_at, stack=tuple(r.stack.items())) for r in ordered
    )
    keys: list[str] = []
    seen: set[str] = set()
    for r in ordered:
        for rec in r.records:
            if rec.key not in seen:
                seen.add(rec.key)
                keys.append(rec.key)
    rows = []
    from perfgate.record import METRICS

    for key in sorted(keys):
        newest = next(r.by_key[key] for r in reversed(ordered) if key in r.by_key)
        metric = newest.metric
        up = METRICS[metric].higher_is_better if metric in METRICS else newest.prop("direction") != "lower"
        cells: list[Cell | None] = []
        for r in ordered:
            found = r.by_key.get(key)
            cells.append(
                None if found is None else Cell(outcome=found.outcome, value=found.num(metric), metric=metric,
                                                sigma=record_sigma(found, metric), ci=found.metric_ci(metric))
            )
        steps = detect_steps(
            [c.value if c else None for c in cells],
            [c.sigma if c else None for c in cells],
            min_segment=min_segment,
            threshold=threshold,
            min_rel_step=min_rel_step,
        )
        rows.append(HistoryRow(key=key, cells=tuple(cells), steps=steps, metric=metric, higher_is_better=up))
    return History(columns=columns, rows=tuple(rows))
