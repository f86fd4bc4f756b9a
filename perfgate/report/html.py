"""A one-page, self-contained HTML report (inline styles, base64 PNGs, no network), verdict first.

With two or more reports the newest is gated against the one before it (the older ones are its history: their noise
bands), and the page opens with the gate's verdict in one line (exit code, what blocks and why), then the records
newly broken, regressed, unblocked and undecided, each with its own metric, Δ and interval, all drawn from
:func:`perfgate.report.verdicts.verdicts` (the page decides nothing). Then the compatibility matrix of the newest
report (one row per record kind), each record's own metric over the reports with its steps, and the stack and
machine of every report. Panels stack one under another; a wide table scrolls inside its panel and long names wrap,
so nothing overlaps from 2 to 100 reports and hundreds of records.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

from perfgate._version import __version__
from perfgate.categories import WHY_SAID
from perfgate.errors import ReportError
from perfgate.record import WHY_UNDECIDED
from perfgate.report.diff import diff, stack_changes
from perfgate.report.history import History, build_history, order_reports
from perfgate.report.matrix import ABSENT_COLOR, OUTCOME_COLORS, Matrix, build_matrix
from perfgate.report.policy import GatePolicy
from perfgate.report.records import Record, Report
from perfgate.report.render import SECTION_TITLES, fmt_num
from perfgate.report.steps import StepRow, step_rows, steps_table
from perfgate.report.verdicts import RecordVerdict, Verdicts, verdict_of_reports, verdicts

_CSS = """
* { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 1em 1.5em; color: #222; max-width: 1600px; }
h1 { font-size: 1.3em; margin: 0.2em 0 0.4em; } h2 { font-size: 1.1em; margin: 0 0 0.5em; }
h3 { font-size: 1em; margin: 0.8em 0 0.3em; }
.verdict { font-size: 1.05em; padding: 0.6em 0.9em; border-radius: 4px; border-left: 6px solid #2e7d32;
  background: #e8f5e9; overflow-wrap: anywhere; }
.verdict.blocked { border-color: #c62828; background: #ffebee; }
.verdict.unblocked { border-color: #1565c0; background: #e3f2fd; }
.verdict.none { border-color: #757575; background: #f5f5f5; }
.panel { margin: 1em 0; padding: 0.6em 0.8em; border: 1px solid #ddd; border-radius: 4px; min-width: 0; }
.scroll { overflow-x: auto; max-width: 100%; }
.scroll.tall { max-height: 36em; overflow-y: auto; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.key, td.why { overflow-wrap: anywhere; word-break: break-word; }
td.key { min-width: 14em; max-width: 34em; } td.why { min-width: 16em; max-width: 40em; }
td.num { text-align: right; white-space: nowrap; }
table.matrix td { text-align: center; min-width: 7em; }
tr.changed td { background: #fff3cd; }
.banner { padding: 0.4em 0.8em; border-radius: 4px; background: #e3f2fd; margin: 0.4em 0; }
.banner.sim { background: #fff3e0; }
img { max-width: 100%; height: auto; border: 1px solid #eee; display: block; }
small { color: #666; }
details summary { cursor: pointer; }
ul.legend { columns: 2 28em; margin: 0.3em 0; padding-left: 1.2em; font-size: 0.85em; }
ul.legend li { overflow-wrap: anywhere; }
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


def _runs(values: Sequence[str]) -> list[tuple[int, int, str]]:
    """Consecutive equal values as (first, last, value), indices from 0."""
    out: list[tuple[int, int, str]] = []
    for i, v in enumerate(values):
        if out and out[-1][2] == v:
            out[-1] = (out[-1][0], i, v)
        else:
            out.append((i, i, v))
    return out


def _runs_table(name: str, keys: Sequence[str], value_of: Sequence[dict[str, str]], strip: str = "") -> str:
    """One row per key: its value and the reports that had it (``#1–#99: 0.5.23; #100: 0.5.24``), so 100 reports
    read as a short table; keys that changed first, highlighted."""
    if not keys:
        return f"<p><small>No {name} properties recorded.</small></p>"
    n = len(value_of)
    rows = []
    for k in keys:
        runs = _runs([v.get(k, "unknown") for v in value_of])
        changed = len({v for _, _, v in runs}) > 1
        if not changed:
            cell = f"{escape(runs[0][2])} <small>(all {n} reports)</small>" if n > 1 else escape(runs[0][2])
        else:
            cell = "<br>".join(f"<small>#{a + 1}{'' if a == b else f'–#{b + 1}'}:</small> {escape(v)}"
                               for a, b, v in runs)
        cls = ' class="changed"' if changed else ""
        rows.append((not changed, f'<tr{cls}><td class="key">{escape(k.removeprefix(strip))}</td>'
                                  f'<td class="why">{cell}</td></tr>'))
    rows.sort(key=lambda r: r[0])
    return (f'<table class="stack"><tr><th>{escape(name)}</th><th>value (reports, oldest first)</th></tr>'
            + "".join(r for _, r in rows) + "</table>")


def _stack_table(reports: Sequence[Report]) -> str:
    stacks = [r.stack for r in reports]
    keys: list[str] = []
    for s in stacks:
        keys += [k for k in s if k not in keys]
    return _runs_table("stack", keys, stacks, "stack.")


#: the verdict sections the page lists first, in this order (the rest follow under "Other changes")
FIRST_SECTIONS: tuple[str, ...] = ("newly-broken", "regressed", "unblocked", "unblocked-expected", "undecided",
                                   "undecided-unmoved")
OTHER_SECTIONS: tuple[str, ...] = ("improved", "changed", "not-comparable", "new", "gone")


def _verdict_row(v: RecordVerdict) -> str:
    outcome = v.new_outcome if v.old_outcome == v.new_outcome else f"{v.old_outcome} → {v.new_outcome}"
    unit = f" {v.unit}" if v.unit else ""
    old = "—" if v.old is None else f"{fmt_num(v.old)}{unit}"
    new = "—" if v.new is None else f"{fmt_num(v.new)}{unit}"
    delta = "—" if v.delta_pct is None else f"{v.delta_pct:+.1f} %"
    noise = ", ".join(x for x in (v.noise_level, v.noise_source) if x)
    decision = v.decision + (f" <b>blocks: {escape(', '.join(v.blocks))}</b>" if v.blocks else "")
    return (f'<tr class="rec"><td class="key"><code>{escape(v.key)}</code></td><td>{escape(outcome)}</td>'
            f'<td class="metric"><code>{escape(v.metric)}</code> {"↑" if v.higher_is_better else "↓"}</td>'
            f'<td class="num">{escape(old)}</td><td class="num">{escape(new)}</td><td class="num">{escape(delta)}</td>'
            f'<td class="num">{escape(v.interval or "—")}</td><td>{decision}</td><td>{escape(noise)}</td>'
            f'<td class="why">{_why_cell(v)}</td></tr>')


def _why_cell(v: RecordVerdict) -> str:
    """The why column: an undecided record's reason first (perfgate.categories.Why, in words), then the figures."""
    code = v.why_undecided
    if code and code in WHY_SAID and WHY_SAID[code] not in v.why:
        return f"<b>undecided ({escape(code)})</b>: {escape(WHY_SAID[code])}; {escape(v.why)}"
    return escape(v.why)


_VERDICT_HEAD = ("<tr><th>record</th><th>outcome</th><th>metric</th><th>old</th><th>new</th><th>Δ</th>"
                 "<th>interval of Δ</th><th>decision</th><th>noise (level, source)</th><th>why</th></tr>")


def _section_tables(vs: Verdicts, names: Sequence[str], seen: set[str] | None = None) -> str:
    """The sections' tables in order, each record once: under the first (worst) section it is in (``seen``: the keys
    already shown, shared across calls)."""
    seen = set() if seen is None else seen
    out = []
    for name in names:
        recs = tuple(v for v in vs.in_section(name) if v.key not in seen)
        seen.update(v.key for v in recs)
        if not recs:
            continue
        out.append(f'<h3 id="s-{escape(name)}">{escape(SECTION_TITLES[name])} ({len(recs)})</h3>')
        out.append('<div class="scroll tall"><table class="verdicts">' + _VERDICT_HEAD)
        out += [_verdict_row(v) for v in recs]
        out.append("</table></div>")
    return "\n".join(out)


def _verdict_of(ordered: Sequence[Report], policy: GatePolicy) -> tuple[Verdicts | None, str]:
    """The newest report gated against the one before it (the older ones its history); None with one report. A
    pair the gate refuses (other hardware, engines) is diffed without a gate, and the line says why."""
    if len(ordered) < 2:
        return None, "one report: nothing to gate"
    old, new = ordered[-2], ordered[-1]
    try:
        _, _, vs = verdict_of_reports(old, new, policy, ordered[:-2])
        return vs, ""
    except ReportError as e:
        return verdicts(diff(old, new)), f"not gated: {e}"


def _verdict_panel(vs: Verdicts | None, why_not: str, ordered: Sequence[Report]) -> str:
    if vs is None:
        outcomes = Counter(r.outcome for r in ordered[-1].records)
        told = escape(", ".join(f"{n} {o}" for o, n in sorted(outcomes.items(),
                                                            key=lambda kv: (kv[0] == "pass", kv[0]))))
        own = f" — its records' own verdicts: {told} (<a href=\"#changes\">why</a>)" if told else ""
        return f'<p class="verdict none" id="verdict">{escape(why_not)}{own}</p>'
    cls = {1: "blocked", 3: "unblocked", 0: ""}.get(vs.exit_code if vs.exit_code is not None else -1, "none")
    line = vs.headline if not why_not else f"{why_not} — {vs.headline}"
    counts = " · ".join(f'<a href="#s-{n}">{len(vs.in_section(n))} {escape(n)}</a>'
                        for n in (*FIRST_SECTIONS, *OTHER_SECTIONS) if vs.in_section(n))
    changes = stack_changes(ordered[-2].stack, ordered[-1].stack)
    stack = "; ".join(f"{c.key.removeprefix('stack.')} {c.old} → {c.new}" for c in changes) or "unchanged"
    return (f'<p class="verdict {cls}" id="verdict"><b>{escape(line)}</b></p>\n'
            f'<p><small>{escape(ordered[-2].label)} → {escape(ordered[-1].label)}'
            f'{escape(_history_said(vs, ordered))}. {counts or "no change"}. '
            f'<a href="#stack">Stack</a>: {escape(stack)}.</small></p>')


def _own_verdicts(latest: Report) -> str:
    """With one report there is no verdict by comparison, but each record carries its own (a stack pair's judged
    inside the run, a floor's against the profile): the records that did not pass, with why, in the record's words
    (its ``reason``: a stack pair names the metric or TTFT leg that regressed, which its own metric, tok/s, may not
    show)."""
    rows = [r for r in latest.records if r.outcome != "pass"]
    if not rows:
        return "<p><small>One report: nothing to compare; every record passed.</small></p>"
    out = [f"<p><small>One report: nothing to compare. {len(rows)} of {len(latest.records)} record(s) did not pass, "
           "each for its own reason:</small></p>", '<table class="own">',
           "<tr><th>record</th><th>outcome</th><th>why</th></tr>"]
    for r in rows:
        color = OUTCOME_COLORS.get(r.outcome, "#ffffff")
        out.append(f'<tr><td class="key"><code>{escape(r.key)}</code></td>'
                   f'<td style="background:{color}">{escape(r.outcome_label)}</td>'
                   f'<td class="why">{_own_why(r)}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def _own_why(r: Record) -> str:
    code = r.prop(WHY_UNDECIDED)
    lead = f"<b>undecided ({escape(code)})</b>: {escape(WHY_SAID[code])}; " if code in WHY_SAID else ""
    return lead + escape(r.reason)


def _history_said(vs: Verdicts, ordered: Sequence[Report]) -> str:
    """What the older reports did: the noise history of the records judged on it, or why none was."""
    if len(ordered) <= 2:
        return ""
    used = sum(1 for v in vs.records if v.noise_source == "history")
    if used:
        return f" (older reports: the noise history of {used} record(s))"
    unused = next((n for n in vs.notes if n.startswith("history not used")), "")
    return (f" (older reports: {len(ordered) - 2}, no record judged on their noise"
            + (f": {unused.split(': ', 1)[1]}" if unused else "") + ")")


def _changes(vs: Verdicts | None, latest: Report) -> str:
    if vs is None:
        return _own_verdicts(latest)
    shown: set[str] = set()  # each record once on the page, under its worst finding
    first = _section_tables(vs, FIRST_SECTIONS, shown)
    other = _section_tables(vs, OTHER_SECTIONS, shown)
    notes = "".join(f"<li>{escape(n)}</li>" for n in vs.notes)
    return ((first or "<p>Nothing newly broken, regressed, unblocked or undecided.</p>")
            + (f"\n<details><summary>Other changes</summary>\n{other}</details>" if other else "")
            + (f"\n<details><summary>Notes ({len(vs.notes)})</summary><ul>{notes}</ul></details>" if notes else ""))


def _history_table(h: History) -> str:
    out = ['<table class="history">', "<tr><th>record</th><th>metric</th>"]
    out += [f"<th>#{i + 1}</th>" for i in range(len(h.columns))]
    out.append("<th>steps</th></tr>")
    for row in h.rows:
        unit = f" ({row.unit})" if row.unit else ""
        out.append(f'<tr><td class="key"><code>{escape(row.key)}</code></td>'
                   f'<td class="metric"><code>{escape(row.metric)}</code>{escape(unit)}</td>')
        for c in row.cells:
            if c is None:
                out.append("<td>—</td>")
            else:
                color = OUTCOME_COLORS.get(c.outcome, "#ffffff")
                text = c.outcome + ("" if c.value is None else f" {fmt_num(c.value)}")
                out.append(f'<td style="background:{color}">{escape(text)}</td>')
        steps = "; ".join(
            f"{s.direction} at #{s.index + 1}: {fmt_num(s.before)} → {fmt_num(s.after)}" for s in row.steps
        )
        out.append(f'<td class="why">{escape(steps)}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def _steps_panel(rows: list[StepRow], img: str) -> str:
    if not rows:
        return ""
    return (f'<div class="panel"><h2>Where each decode step goes (profile records, newest report)'
            f'</h2>\n{img}\n<div class="scroll">{steps_table(rows)}</div>\n<p><small>ms per step from SGLang\'s own '
            f'trace; all-reduce is the transfer (the least of any rank), skew apart.</small></p></div>\n')


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
    return ('<div class="panel"><h2>Serving under load (newest report)</h2>\n' + "\n".join(imgs)
            + "\n<p><small>Throughput against latency per config (its Pareto front), goodput per mode under the "
              "profile's [slo], and where speculation stops beating the baseline.</small></p></div>\n")


def _machine_table(ordered: Sequence[Report]) -> str:
    machines = [r.machine for r in ordered]
    keys: list[str] = []
    for m in machines:
        keys += [k for k in m if k not in keys]
    return _runs_table("machine", keys, machines)


def render_html(reports: Sequence[Report], *, plots: bool = True, title: str = "perfgate report",
                policy: GatePolicy | None = None) -> str:
    """The whole page as a string. ``plots=False`` leaves the PNGs out (no matplotlib needed); ``policy`` is the
    gate's (``[tool.perfgate.gate]``; the defaults without one)."""
    if not reports:
        raise ReportError("the HTML report needs at least one JUnit report")
    ordered = order_reports(reports)
    latest = ordered[-1]
    vs, why_not = _verdict_of(ordered, policy or GatePolicy())
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
            history_img = _b64_img(history_png(history), "each record's own metric over reports")
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
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>{_CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
{_verdict_panel(vs, why_not, ordered)}
<p class="{banner_cls}">{banner}. Newest report: {escape(latest.label)}.
<small>perfgate {escape(__version__)}, generated {generated}, {len(ordered)} report(s).</small></p>
<div class="panel" id="changes"><h2>Verdict by record (newest against the one before)</h2>
{_changes(vs, latest)}
</div>
{plot_note}
<div class="panel" id="matrix"><h2>Compatibility matrix (newest report, one row per record kind)</h2>
<div class="scroll">{matrix_table(matrix)}</div>
{matrix_img}
</div>
<div class="panel" id="trends"><h2>Each record's own metric over reports</h2>
{history_img}
<div class="scroll tall">{_history_table(history)}</div>
</div>
{_steps_panel(steps, steps_img)}{_load_panel(load_imgs)}<div class="panel" id="stack"><h2>Stack and machine</h2>
<details><summary>Reports ({len(ordered)})</summary><ul class="legend">{legend}</ul></details>
<div class="scroll tall">{_stack_table(ordered)}</div>
<div class="scroll tall">{_machine_table(ordered)}</div>
</div>
</body></html>
"""
