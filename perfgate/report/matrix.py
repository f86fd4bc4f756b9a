"""The compatibility matrix: rows (the record kind, or the variant) × modes (columns), by outcome (pure).

The one matrix builder: the HTML report, ``perfgate plot`` and the terminal's record matrix
(perfgate.report.terminal) all call :func:`matrix_of`. Columns are modes, prefixed with the profile when the records
hold several profiles (``kimi-k2.5:baseline``). Each record kind has its own row (:func:`row_of`): ``(baseline)``
for the decode floor, ``(speculation)``, a variant by its name, any other kind as ``(kind metric)``, so a latency
record never shares the decode floor's cell. Each cell shows its record's own metric (``ttft_ms 278 ms``, not decode
tok/s). When several records still fall in one cell (the same profile on two boxes of a merged report), the worst
outcome wins (:data:`SEVERITY`): error > fail > xpass > inconclusive > xfail > skip > pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from perfgate.categories import RecordKind
from perfgate.record import unit_of
from perfgate.report.records import Record, Report

NO_VARIANT = "(baseline)"
"""The decode floor's row (a mode without a variant)."""
SPECULATION_ROW = "(speculation)"

SEVERITY: dict[str, int] = {
    "error": 6,
    "fail": 5,
    "xpass": 4,
    "inconclusive": 3,
    "xfail": 2,
    "skip": 1,
    "pass": 0,
}
"""Higher is worse; decides which record a shared matrix cell shows."""

OUTCOME_COLORS: dict[str, str] = {
    "pass": "#4caf50",
    "fail": "#e53935",
    "error": "#8e0000",
    "xfail": "#ffb74d",
    "xpass": "#42a5f5",
    "inconclusive": "#9e9e9e",
    "skip": "#e0e0e0",
}
"""Fill colour per outcome (shared by the PNG and the HTML matrix)."""

ABSENT_COLOR = "#ffffff"


def severity(outcome: str) -> int:
    """How bad an outcome is (:data:`SEVERITY`, 0 for an unknown one): the order the terminal and the report share."""
    return SEVERITY.get(outcome, 0)


def row_of(r: Record) -> str:
    """The matrix row of a record: its kind's (a variant by its name; any kind other than the floor, speculation and
    variant records one row per kind and metric)."""
    kind = r.kind
    if kind == RecordKind.VARIANT and r.variant:
        return r.variant
    if kind in ("", RecordKind.FLOOR, RecordKind.VARIANT) and not r.variant:
        return NO_VARIANT
    if kind == RecordKind.SPECULATION and not r.variant:
        return SPECULATION_ROW
    metric = r.prop("metric")
    return f"({kind or 'record'}" + (f" {metric}" if metric else "") + ")" + (f" +{r.variant}" if r.variant else "")


@dataclass(frozen=True, kw_only=True)
class MatrixCell:
    """What one row × mode cell shows: the worst record's outcome and its own metric."""

    outcome: str
    category: str
    metric: str
    value: float | None
    keys: tuple[str, ...]
    record: Record  # the record it shows (the worst of the cell)

    @property
    def tok_s(self) -> float | None:
        """The decode tok/s it shows, None when its record is judged on another metric."""
        return self.value if self.metric == "tok_s" else None

    @property
    def figure(self) -> str:
        """``86.9 tok/s`` or ``ttft_ms 278 ms``: the record's own metric with its unit; "" without one."""
        if self.value is None:
            return ""
        v = f"{self.value:.1f}" if abs(self.value) >= 10 else f"{self.value:.4g}"
        unit = unit_of(self.metric)
        if self.metric == "tok_s":
            return f"{v} tok/s"
        return f"{self.metric} {v}" + (f" {unit}" if unit else "")

    @property
    def label(self) -> str:
        text = self.outcome
        if self.category and self.outcome != "pass":
            text += f"\n{self.category}"
        if self.figure:
            text += f"\n{self.figure}"
        return text


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """Rows (variants) × columns (modes) → cell, ``None`` where nothing was recorded."""

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[MatrixCell | None, ...], ...]

    @property
    def is_empty(self) -> bool:
        return not self.rows or not self.columns

    def cell(self, row: str, column: str) -> MatrixCell | None:
        return self.cells[self.rows.index(row)][self.columns.index(column)]


def _pick(records: list[Record]) -> MatrixCell:
    worst = max(records, key=lambda r: severity(r.outcome))  # the first of equals: one order in every view
    metric = worst.metric
    return MatrixCell(outcome=worst.outcome, category=worst.category, metric=metric, value=worst.num(metric),
                      keys=tuple(r.key for r in records), record=worst)


def _row_rank(row: str) -> tuple[int, str]:
    """The floor, speculation, variants by name, then the other kinds in the order they ran (a stable sort)."""
    rank = 0 if row == NO_VARIANT else 1 if row == SPECULATION_ROW else 3 if row.startswith("(") else 2
    return (rank, row if rank == 2 else "")


def matrix_of(records: Iterable[Record], *, shown: Callable[[Record], bool] | None = None) -> Matrix:
    """The matrix of the records that carry a ``mode`` property (and that ``shown`` keeps; others are left out)."""
    recs = [r for r in records if r.mode and (shown is None or shown(r))]
    multi = len({r.profile for r in recs}) > 1

    def col(r: Record) -> str:
        return f"{r.profile}:{r.mode}" if multi else r.mode

    groups: dict[tuple[str, str], list[Record]] = {}
    row_order: list[str] = []
    col_order: list[str] = []
    for r in recs:
        row, c = row_of(r), col(r)
        if row not in row_order:
            row_order.append(row)
        if c not in col_order:
            col_order.append(c)
        groups.setdefault((row, c), []).append(r)
    rows = sorted(row_order, key=_row_rank)
    cols = col_order  # first-seen order: the suite runs baseline first
    cells = tuple(
        tuple(_pick(groups[(row, c)]) if (row, c) in groups else None for c in cols) for row in rows
    )
    return Matrix(rows=tuple(rows), columns=tuple(cols), cells=cells)


def build_matrix(report: Report) -> Matrix:
    """The matrix of one report (:func:`matrix_of` its records)."""
    return matrix_of(report.records)
