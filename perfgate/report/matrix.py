"""The compatibility matrix of one report: variants (rows) × modes (columns), by outcome (pure).

Columns are modes, prefixed with the profile when the report holds several profiles
(``kimi-k2.5:baseline``). The row ``(none)`` is the mode without a variant. When several
records fall in one cell (``acceptance`` and ``speculation-vs-baseline`` records of one mode,
the same profile on two boxes), ``variant`` records are preferred and the worst outcome wins:
error > fail > xpass > inconclusive > xfail > skip > pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.report.records import Record, Report

NO_VARIANT = "(none)"

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


@dataclass(frozen=True, kw_only=True)
class MatrixCell:
    """What one variant × mode cell shows."""

    outcome: str
    category: str
    tok_s: float | None
    keys: tuple[str, ...]

    @property
    def label(self) -> str:
        text = self.outcome
        if self.category and self.outcome != "pass":
            text += f"\n{self.category}"
        if self.tok_s is not None:
            text += f"\n{self.tok_s:.1f} tok/s"
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
    preferred = [r for r in records if r.kind == "variant"] or records
    worst = max(preferred, key=lambda r: SEVERITY.get(r.outcome, 0))
    tok = worst.num("tok_s")
    if tok is None:
        tok = next((r.num("tok_s") for r in preferred if r.num("tok_s") is not None), None)
    return MatrixCell(
        outcome=worst.outcome,
        category=worst.category,
        tok_s=tok,
        keys=tuple(r.key for r in records),
    )


def build_matrix(report: Report) -> Matrix:
    """Matrix of the records that carry a ``mode`` property (others are left out)."""
    recs = [r for r in report.records if r.mode]
    profiles = {r.profile for r in recs}
    multi = len(profiles) > 1

    def col(r: Record) -> str:
        return f"{r.profile}:{r.mode}" if multi else r.mode

    groups: dict[tuple[str, str], list[Record]] = {}
    row_order: list[str] = []
    col_order: list[str] = []
    for r in recs:
        row = r.variant or NO_VARIANT
        c = col(r)
        if row not in row_order:
            row_order.append(row)
        if c not in col_order:
            col_order.append(c)
        groups.setdefault((row, c), []).append(r)
    rows = sorted(row_order, key=lambda v: (v != NO_VARIANT, v))
    cols = col_order  # first-seen order: the suite runs baseline first
    cells = tuple(
        tuple(_pick(groups[(row, c)]) if (row, c) in groups else None for c in cols) for row in rows
    )
    return Matrix(rows=tuple(rows), columns=tuple(cols), cells=cells)
