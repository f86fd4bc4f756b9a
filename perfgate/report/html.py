"""A one-page, self-contained HTML report: matrix, plots (base64 PNG) and stack side by side.

The newest report (by time) gives the compatibility matrix; all reports give the stack table
(one column per report, changed keys highlighted), the tok/s history plot and, with two or
more reports, the changes between the last two.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

from perfgate._version import __version__
from perfgate.errors import ReportError
from perfgate.report.diff import diff
from perfgate.report.history import History, build_history, order_reports
from perfgate.report.matrix import ABSENT_COLOR, OUTCOME_COLORS, Matrix, build_matrix
from perfgate.report.records import Report
from perfgate.report.render import SECTION_TITLES, fmt_num, sections
from perfgate.report.steps import StepRow, step_rows, steps_table

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.4em; }
.row { display: flex; flex-wrap: wrap; gap: 2em; align-items: flex-start; }
.panel { flex: 1 1 420px; min-width: 320px; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
table.matrix td { text-align: center; min-width: 7em; }
tr.changed td { background: #fff3cd; }
.banner { padding: 0.5em 1em; border-radius: 4px; background: #e3f2fd; }
.banner.sim { background: #fff3e0; }
img { max-width: 100%; border: 1px solid #eee; }
small { color: #666; }
"""


def _b64_img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def matrix_table(m: Matrix) -> str:
    """The matrix as an HTML table, cells coloured by outcome."""
    if m.is_empty:
        return "<p><small>No record carries mode/variant properties: no matrix.</small></p>"
    out = ['<table class="matrix">', "<tr><th>variant \\ mode</th>"]
    out += [f"<th>{escape(c)}</th>" for c in m.columns]
    out.append("</tr>")
    for i, row in enumerate(m.rows):
        out.append(f"<tr><th>{escape(row)}</th>")
        for j in range(len(m.columns)):
            cell = m.cells[i][j]
            if cell is None:
                out.append(f'<td style="background:{ABSENT_COLOR}">—</td>')
                continue
            color = OUTCOME_COLORS.get(cell.outcome, "#ffffff")
            title = escape("\n".join(cell.keys))
            label = "<br>".join(escape(x) for x in cell.label.split("\n"))
            out.append(f'<td class="o-{escape(cell.outcome)}" style="background:{color}" title="{title}">{label}</td>')
        out.append("</tr>")
    out.append("</table>")
    return "\n".join(out)


def _stack_table(reports: Sequence[Report]) -> str:
    stacks = [r.stack for r in reports]
    keys: list[str] = []
    for s in stacks:
        keys += [k for k in s if k not in keys]
    if not keys:
        return "<p><small>No stack properties recorded.</small></p>"
    out = ["<table>", "<tr><th>stack</th>"]
    out += [f"<th>#{i + 1}</th>" for i in range(len(reports))]
    out.append("</tr>")
    for k in keys:
        values = [s.get(k, "unknown") for s in stacks]
        cls = ' class="changed"' if len(set(values)) > 1 else ""
        out.append(f"<tr{cls}><td>{escape(k.removeprefix('stack.'))}</td>")
        out += [f"<td>{escape(v)}</td>" for v in values]
        out.append("</tr>")
    out.append("</table>")
    return "\n".join(out)


def _changes(reports: Sequence[Report]) -> str:
    if len(reports) < 2:
        return "<p><small>One report: nothing to compare.</small></p>"
    d = diff(reports[-2], reports[-1])
    if d.is_empty:
        return "<p>No change between the last two reports.</p>"
    out = []
    for name, recs in sections(d).items():
        if not recs:
            continue
        out.append(f"<h3>{escape(SECTION_TITLES[name])} ({len(recs)})</h3>")
        out.append("<table><tr><th>record</th><th>outcome</th><th>tok/s old</th><th>tok/s new</th></tr>")
        for r in recs:
            o = r.old.outcome_label if r.old else "absent"
            n = r.new.outcome_label if r.new else "absent"
            to = fmt_num(r.old.num("tok_s")) if r.old else "—"
            tn = fmt_num(r.new.num("tok_s")) if r.new else "—"
            out.append(
                f"<tr><td><code>{escape(r.key)}</code></td><td>{escape(o)} → {escape(n)}</td>"
                f"<td>{escape(to)}</td><td>{escape(tn)}</td></tr>"
            )
        out.append("</table>")
    return "\n".join(out)


def _history_table(h: History) -> str:
    out = ["<table>", "<tr><th>record</th>"]
    out += [f"<th>#{i + 1}</th>" for i in range(len(h.columns))]
    out.append("<th>steps</th></tr>")
    for row in h.rows:
        out.append(f"<tr><td><code>{escape(row.key)}</code></td>")
        for c in row.cells:
            if c is None:
                out.append("<td>—</td>")
            else:
                color = OUTCOME_COLORS.get(c.outcome, "#ffffff")
                text = c.outcome + ("" if c.tok_s is None else f" {fmt_num(c.tok_s)}")
                out.append(f'<td style="background:{color}">{escape(text)}</td>')
        steps = "; ".join(
            f"{s.direction} at #{s.index + 1}: {fmt_num(s.before)} → {fmt_num(s.after)}" for s in row.steps
        )
        out.append(f"<td>{escape(steps)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _steps_panel(rows: list[StepRow], img: str) -> str:
    if not rows:
        return ""
    return (f'<div class="row"><div class="panel"><h2>Where each decode step goes (profile records, newest report)'
            f'</h2>\n{img}\n{steps_table(rows)}\n<p><small>ms per step from SGLang\'s own trace; all-reduce is the '
            f'transfer (the least of any rank), skew apart.</small></p></div></div>\n')


def _load_imgs(latest: Report) -> list[str]:
    """The newest report's load plots (perfgate.report.loadplot); none without goodput or crossover records."""
    from perfgate.report.loadplot import crossover_png, goodput_png, load_data, pareto_png

    data = load_data(latest)
    if data.empty:
        return []
    out = [_b64_img(pareto_png(data), "throughput against latency"), _b64_img(goodput_png(data), "goodput per mode")]
    return out + ([_b64_img(crossover_png(data), "speculation crossover")] if data.crossovers else [])


def _load_panel(imgs: list[str]) -> str:
    if not imgs:
        return ""
    return ('<div class="row"><div class="panel"><h2>Serving under load (newest report)</h2>\n' + "\n".join(imgs)
            + "\n<p><small>Throughput against latency per config (its Pareto front), goodput per mode under the "
              "profile's [slo], and where speculation stops beating the baseline.</small></p></div></div>\n")


def render_html(reports: Sequence[Report], *, plots: bool = True, title: str = "perfgate report") -> str:
    """The whole page as a string. ``plots=False`` leaves the PNGs out (no matplotlib needed)."""
    if not reports:
        raise ReportError("the HTML report needs at least one JUnit report")
    ordered = order_reports(reports)
    latest = ordered[-1]
    matrix = build_matrix(latest)
    history = build_history(ordered)
    steps = step_rows(latest)
    matrix_img = history_img = steps_img = ""
    load_imgs: list[str] = []
    plot_note = ""
    if plots:
        try:
            from perfgate.report.plot import history_png, matrix_png, steps_png

            matrix_img = _b64_img(matrix_png(matrix, title=f"compatibility matrix — {latest.label}"), "matrix")
            history_img = _b64_img(history_png(history), "tok/s history")
            if steps:
                steps_img = _b64_img(steps_png(steps), "step profiles")
            load_imgs = _load_imgs(latest)
        except ReportError as e:
            plot_note = f"<p><small>Plots left out: {escape(str(e))}</small></p>"
    sim = latest.simulated
    banner_cls = "banner sim" if sim else "banner"
    engine = latest.engine or "unknown engine"
    banner = f"engine: <b>{escape(engine)}</b>" + (" — <b>SIMULATED</b> (no GPU measured)" if sim else "")
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    legend = "".join(
        f"<li>#{i + 1}: {escape(r.label)} <small>({escape(r.path)})</small></li>" for i, r in enumerate(ordered)
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{_CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
<p class="{banner_cls}">{banner}. Newest report: {escape(latest.label)}.
<small>perfgate {escape(__version__)}, generated {generated}.</small></p>
<ul>{legend}</ul>
{plot_note}
<div class="row">
<div class="panel"><h2>Compatibility matrix (newest report)</h2>
{matrix_table(matrix)}
{matrix_img}
</div>
<div class="panel"><h2>Stack</h2>
{_stack_table(ordered)}
</div>
</div>
<div class="row">
<div class="panel"><h2>Decode tok/s over reports</h2>
{history_img}
{_history_table(history)}
</div>
<div class="panel"><h2>Changes since the previous report</h2>
{_changes(ordered)}
</div>
</div>
{_steps_panel(steps, steps_img)}{_load_panel(load_imgs)}</body></html>
"""
