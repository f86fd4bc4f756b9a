"""PNG plots with matplotlib: each record's own metric over reports, and the compatibility matrix.

matplotlib is an optional dependency (``pip install perfgate[plot]``) and is imported lazily,
inside the functions. The plots use the object-oriented API on a :class:`Figure` rendered by
the Agg canvas: no pyplot, no global backend switch, no display needed.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from perfgate.errors import ReportError
from perfgate.report.history import History
from perfgate.report.matrix import ABSENT_COLOR, OUTCOME_COLORS, Matrix

MAX_PANELS = 36


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ReportError(
            "plotting needs matplotlib, which is not installed; install it with "
            "`pip install 'perfgate[plot]'`"
        ) from e
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _to_png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _short(key: str, limit: int = 60) -> str:
    name = key.split("::", 1)[-1]
    return name if len(name) <= limit else name[: limit - 1] + "…"


#: the most report labels one panel's x axis shows
MAX_TICKS = 12
#: the y axis of a panel spans at least this fraction of its median: a 0.002 tok/s wobble stays flat
MIN_Y_SPAN = 0.04


def _y_range(cells: Any, ys: list[float]) -> tuple[float, float]:
    """Limits covering the points and their intervals, and at least ±MIN_Y_SPAN/2 of the median."""
    vals = list(ys)
    for c in cells:
        if c is not None and c.ci is not None:
            vals.extend(c.ci)
    lo, hi = min(vals), max(vals)
    mid = sorted(ys)[len(ys) // 2]
    half = max((hi - lo) / 2 * 1.15, abs(mid) * MIN_Y_SPAN / 2, 1e-9)
    centre = (hi + lo) / 2
    return centre - half, centre + half


def history_png(h: History) -> bytes:
    """Small multiples: one panel per record with its own metric on its own axis (tok/s, ttft_ms, ...), points
    coloured by outcome, steps marked (red: worse in the metric's direction)."""
    rows = [r for r in h.rows if any(c is not None and c.value is not None for c in r.cells)]
    truncated = len(rows) > MAX_PANELS
    rows = rows[:MAX_PANELS]
    n = max(len(rows), 1)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig = _figure(4.2 * ncols, 2.6 * nrows + 0.6)
    x_labels = [f"#{i + 1}" for i in range(len(h.columns))]
    if not rows:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no record carries a figure", ha="center", va="center")
        ax.set_axis_off()
        return _to_png(fig)
    for i, row in enumerate(rows):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        pts = [(j, c, c.value) for j, c in enumerate(row.cells) if c is not None and c.value is not None]
        xs, ys = [j for j, _, _ in pts], [t for _, _, t in pts]
        ax.plot(xs, ys, color="#555555", linewidth=1, zorder=1)
        colors = [OUTCOME_COLORS.get(c.outcome, "#000000") for _, c, _ in pts]
        ax.scatter(xs, ys, c=colors, s=28, zorder=2, edgecolors="black", linewidths=0.4)
        # each point's recorded confidence interval, where the report has one (none: no bar, not a zero bar)
        for j, c, _ in pts:
            ci = c.ci
            if ci is not None:
                ax.vlines(j, ci[0], ci[1], color="#333333", linewidth=1.2, zorder=1.5)
        lo_y, hi_y = _y_range(row.cells, ys)
        ax.set_ylim(lo_y, hi_y)
        for s in row.steps:
            worse = (s.direction == "drop") == row.higher_is_better
            ax.axvline(s.index - 0.5, color="#d32f2f" if worse else "#1976d2", linestyle="--")
        ax.set_title(_short(row.key), fontsize=8)
        every = max(1, math.ceil(len(h.columns) / MAX_TICKS))  # 100 reports: #1, #10, #19, ... not a smear
        ticks = list(range(0, len(h.columns), every))
        ax.set_xticks(ticks)
        ax.set_xticklabels([x_labels[t] for t in ticks], fontsize=7)
        ax.set_xlim(-0.5, max(len(h.columns) - 0.5, 0.5))
        ax.tick_params(axis="y", labelsize=7)
        ax.set_ylabel(row.metric + (f" ({row.unit})" if row.unit and row.metric != "tok_s" else " (tok/s)"
                                    if row.metric == "tok_s" else ""), fontsize=7)
    title = "each record's own metric over reports (dashed: sustained step; red: worse)"
    if truncated:
        title += f" — first {MAX_PANELS} records"
    fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(hspace=0.6, wspace=0.3)
    return _to_png(fig)


def matrix_png(m: Matrix, title: str = "compatibility matrix") -> bytes:
    """The variants × modes grid, each cell coloured by outcome and labelled."""
    nr, nc = max(len(m.rows), 1), max(len(m.columns), 1)
    fig = _figure(2.0 + 1.9 * nc, 1.2 + 0.75 * nr)
    from matplotlib.patches import Patch, Rectangle

    ax = fig.add_subplot(1, 1, 1)
    if m.is_empty:
        ax.text(0.5, 0.5, "no record carries mode/variant properties", ha="center", va="center")
        ax.set_axis_off()
        return _to_png(fig)
    for i in range(len(m.rows)):
        for j in range(len(m.columns)):
            cell = m.cells[i][j]
            color = OUTCOME_COLORS.get(cell.outcome, "#000000") if cell else ABSENT_COLOR
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=color, edgecolor="white", linewidth=2))
            if cell is not None:
                ink = "white" if cell.outcome == "error" else "black"
                ax.text(j + 0.5, i + 0.5, cell.label, ha="center", va="center", fontsize=7, color=ink)
    ax.set_xlim(0, nc)
    ax.set_ylim(nr, 0)
    ax.set_xticks([j + 0.5 for j in range(nc)])
    ax.set_xticklabels(m.columns, fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(nr)])
    ax.set_yticklabels(m.rows, fontsize=8)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    handles = [Patch(facecolor=c, edgecolor="#999999", label=o) for o, c in OUTCOME_COLORS.items()]
    ax.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=4, fontsize=7, frameon=False
    )
    ax.set_title(title, fontsize=10, pad=24)
    return _to_png(fig)


def write_png(data: bytes, path: str | Path) -> Path:
    """Write PNG bytes, creating the folder."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


#: the colours of a step's parts in the stacked bar
PART_COLORS = {"gemm": "#4c72b0", "attention": "#55a868", "allreduce": "#c44e52", "allreduce_wait": "#e8a5a7",
               "allgather": "#dd8452",
               "other": "#8172b2", "idle": "#dddddd"}


def steps_png(rows: list[Any], title: str = "where each decode step goes (ms per step)") -> bytes:
    """One horizontal stacked bar per config: GEMM / attention / all-reduce (transfer, then the ranks' wait
    inside it) / all-gather / other / idle."""
    from perfgate.report.steps import PARTS

    fig = _figure(9.0, 1.2 + 0.42 * max(1, len(rows)))
    ax = fig.add_subplot(1, 1, 1)
    if not rows:
        ax.text(0.5, 0.5, "no profile record (run pytest -m profile)", ha="center", va="center")
        ax.set_axis_off()
        return _to_png(fig)
    labels = [_short(r.config, 40) for r in rows]
    left = [0.0] * len(rows)
    for part in PARTS:
        widths = [r.ms[part] for r in rows]
        ax.barh(labels, widths, left=left, color=PART_COLORS[part], label=part, height=0.6)
        left = [a + b for a, b in zip(left, widths)]
    for i, r in enumerate(rows):
        if r.allreduce_per_step:
            ax.text(left[i], i, f"  {r.allreduce_per_step:g} AR, {r.ms['allreduce'] / max(r.step_ms, 1e-9):.0%}",
                    va="center", fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (a decode step, or a speculative verify pass)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=7, fontsize=7, frameon=False)
    ax.set_title(title, fontsize=10, pad=22)
    ax.set_xlim(0, max(left) * 1.2)
    return _to_png(fig)
