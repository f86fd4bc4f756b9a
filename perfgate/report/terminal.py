"""The records of a pytest session as its terminal summary prints them, from their properties alone: the record
matrix (row x mode, built by :func:`perfgate.report.matrix.matrix_of` like every report), one line per record
with its figure, interval, limit, comparisons and decision, and the step profiles' table. ``stats`` is pytest's
terminal reporter's ``stats`` (lists of reports carrying ``user_properties``); nothing here needs pytest.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from perfgate.host.conditions import STATE as HOST_STATE
from perfgate.host.conditions import is_quiet
from perfgate.kinds import PROFILE, figure_of, in_matrix
from perfgate.measuring.notation import interval_text
from perfgate.measuring.stackpair import PAIR_METRICS, PRIMARY
from perfgate.measuring.ttft_parts import LEG_METRICS, said
from perfgate.record import (
    DIRECTION,
    ITL_MODES,
    ITL_MULTIMODAL,
    LIMIT,
    METRIC,
    PAIR_CI_HIGH,
    PAIR_CI_LOW,
    PAIR_DECISION,
    PAIR_N,
    PAIR_RATIO,
    TOLERANCE,
    TTFT_MODES,
    TTFT_MULTIMODAL,
    TTFT_PART_PREFIX,
    TTFT_PROBES,
    TTFT_SPREAD_IN,
    pair_of,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from perfgate.profiles.config import ServerConfig
    from perfgate.profiles.settings import Settings
    from perfgate.report.records import Record

__all__ = ["COMPARISONS", "interval_cell", "matrix_lines", "profile_lines", "record_detail", "record_lines",
           "starts_line"]


def _records(stats: dict[str, list[Any]]) -> list[Record]:
    """This run's records as the report reads them (one per test, its last report's properties)."""
    from perfgate.report.records import Record, parse_number

    out: dict[str, Record] = {}
    for reports in stats.values():
        for rep in reports:
            props = dict(getattr(rep, "user_properties", ()) or ())
            if not props.get("outcome"):
                continue
            key = str(getattr(rep, "nodeid", id(rep)))
            texts = tuple((str(k), str(v)) for k, v in props.items())
            numbers = tuple((k, x) for k, v in texts if (x := parse_number(v)) is not None)
            out[key] = Record(key=key, id=key, classname="", name=key, outcome=str(props["outcome"]),
                              outcome_source="property", properties=texts, numbers=numbers)
    return list(out.values())


def matrix_lines(stats: dict[str, list[Any]]) -> list[str]:
    """The records of this run as a row (kind or variant) x mode matrix: outcome, category, the record's own metric,
    x baseline. Built by the report's matrix builder (perfgate.report.matrix.matrix_of: one row per record kind, the
    worst outcome of a shared cell by its one severity order)."""
    from perfgate.report.matrix import matrix_of

    m = matrix_of(_records(stats), shown=lambda r: in_matrix(r.kind))
    if m.is_empty:
        return []
    cells: dict[tuple[str, str], str] = {}
    for i, row in enumerate(m.rows):
        for j, mode in enumerate(m.columns):
            cell = m.cells[i][j]
            if cell is not None:
                cells[(row, mode)] = _cell_text(dict(cell.record.properties), row)
    rows, modes = m.rows, m.columns
    w0 = max(len(r) for r in rows)
    widths = {c: max(len(c), *(len(cells.get((r, c), "")) for r in rows)) for c in modes}
    out = ["perfgate: records (outcome, category, the record's own metric, x baseline):",
           "  " + " " * w0 + "  " + "  ".join(c.ljust(widths[c]) for c in modes)]
    for r in rows:
        out.append("  " + r.ljust(w0) + "  " + "  ".join(cells.get((r, c), "-").ljust(widths[c]) for c in modes))
    return out


def _cell_text(props: dict[str, str], row: str) -> str:
    """A cell: outcome, category, the record's own figure (named unless its row names it: ``(latency ttft_ms)``)."""
    text = props["outcome"]
    if props.get("category"):
        text += f" {props['category']}"
    metric = figure_of(props.get("kind", ""), props.get(METRIC, ""))
    if props.get(f"{metric}_low") is not None:  # an interval (goodput): [low, high)
        text += " " + interval_cell(props, metric)
    elif _num(props.get(metric)) is not None:
        named = f" {metric})" in row
        text += f" {'' if named else metric + ' '}{_fig(float(props[metric]))}"
    if props.get("vs_baseline"):
        text += f" x{float(props['vs_baseline']):.2f}"
    return text


def interval_cell(props: dict[str, Any], metric: str) -> str:
    """A record judged on an interval (goodput: ``<metric>_low``, ``<metric>_high``): ``[low, high)``, ``-`` for
    no high end, then the levels left unresolved (``?3.6,4``)."""
    from perfgate.measuring.goodputrecord import GOODPUT_UNRESOLVED

    hi = props.get(f"{metric}_high")
    out = f"[{float(props[f'{metric}_low']):.4g}, {f'{float(hi):.4g}' if hi is not None else '-'})"
    if props.get(GOODPUT_UNRESOLVED):
        out += f" ?{props[GOODPUT_UNRESOLVED]}"
    return out


#: the comparisons a record can carry, as its line says them: (ratio property, CI low, CI high, what it compares);
#: a record shows every one it carries, whatever its kind (a user's test comparing with perf_baseline too)
COMPARISONS: tuple[tuple[str, str, str, str], ...] = (
    ("vs_baseline", "vs_baseline_ci_low", "vs_baseline_ci_high", "vs baseline"),
    (PAIR_RATIO, PAIR_CI_LOW, PAIR_CI_HIGH, "candidate/current"),
    ("vs_sglang_bench", "vs_sglang_bench_judged_ci_low", "vs_sglang_bench_judged_ci_high", "perfgate/SGLang"),
)
_LEVEL = re.compile(r"^c(\d+)_output_tok_s$")  # a concurrency sweep's level (perfgate.measuring.checks)


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v not in (None, "") else None
    except ValueError:
        return None


def _spread_in(props: Mapping[str, str]) -> str:
    """Where a multi-modal TTFT's spread lives, from the probes' parts (perfgate.measuring.ttft_parts): ``; spread in
    to_forward (p10-p90 15.2 ms; prefill 0.4 ms)``; empty without parts."""
    part = props.get(TTFT_SPREAD_IN, "")
    s = _num(props.get(f"{TTFT_PART_PREFIX}{part}_spread_ms"))
    if not part or s is None:
        return ""
    pre = _num(props.get(f"{TTFT_PART_PREFIX}prefill_spread_ms"))
    gpu = f"; prefill {_fig(pre)} ms" if part != "prefill" and pre is not None else ""
    return f"; spread in {part} (p10-p90 {_fig(s)} ms{gpu})"


def _fig(v: float) -> str:
    """A figure to 4 significant digits, without an exponent below 10^7 (11171 µs, not 1.117e+04)."""
    return f"{v:.0f}" if 1e4 <= abs(v) < 1e7 else f"{v:.4g}"


def _ratio(v: float) -> str:
    return f"{v:.4f}"


def _interval(props: dict[str, str], low: str, high: str, *, ratio: bool) -> str:
    """A figure's interval, or a ratio's as the verdicts write it (perfgate.measuring.notation.interval_text: an end
    that bounds nothing as such)."""
    lo, hi = _num(props.get(low)), _num(props.get(high))
    if lo is None or hi is None:
        return " [no interval]"
    return " " + interval_text((lo, hi), infinity="inf") if ratio else f" [{_fig(lo)}, {_fig(hi)}]"


def record_detail(props: dict[str, str]) -> str:
    """A record's figure with its unit and interval, its limit, every comparison it carries with its interval, and
    the decision of a paired comparison (``pair_decision`` over ``pair_n`` start pairs); what the record does not
    carry is left out (a record concluded before it measured anything has no figure)."""
    from perfgate.measuring.metrics import unit_of

    parts: list[str] = []
    figure = figure_of(props.get("kind", ""), props.get(METRIC, ""))
    value = _num(props.get(figure))
    if value is not None:
        unit = unit_of(figure)
        text = f"{figure} {_fig(value)}" + (f" {unit}" if unit else "")
        if props.get(f"{figure}_low") is not None:  # an interval of its own (goodput: [low, high))
            text += " " + interval_cell(props, figure)
        else:
            text += _interval(props, f"{figure}_ci_low", f"{figure}_ci_high", ratio=False)
        limit = _num(props.get(LIMIT))
        if limit is not None:
            word = "ceiling" if props.get(DIRECTION) == "lower" else "floor"
            tol = _num(props.get(TOLERANCE))
            text += f", {word} {limit:g}" + (f" (tolerance {tol:.0%})" if tol else "")
        if figure == "crossover" and props.get("crossover_result"):
            text += f" ({props['crossover_result']})"
        parts.append(text)
    state = props.get(HOST_STATE, "")
    if not is_quiet(state):  # a busy host or a throttled GPU (perfgate.host.conditions): said, never hidden
        parts.append(f"{state} (re-run quiet)")
    for what, flag, modes, n in (("TTFT", TTFT_MULTIMODAL, TTFT_MODES, TTFT_PROBES),
                                 ("ITL", ITL_MULTIMODAL, ITL_MODES, "")):  # perfgate.measuring.probes
        if props.get(flag) == "true":  # named, never averaged: the modes and their shares
            parts.append(f"{what} multi-modal{f' over {props[n]} probes' if props.get(n) else ''}: {props[modes]}"
                         + (_spread_in(props) if what == "TTFT" else ""))
    levels = sorted((int(m.group(1)), v) for k, s in props.items()
                    if (m := _LEVEL.match(k)) and (v := _num(s)) is not None)
    if levels:
        parts.append("output tok/s by concurrency " + ", ".join(f"c{c} {_fig(v)}" for c, v in levels))
    for ratio, low, high, what in COMPARISONS:
        r = _num(props.get(ratio))
        if r is not None:
            parts.append(f"{what} x{_ratio(r)}" + _interval(props, low, high, ratio=True))
    if props.get(PAIR_DECISION):
        n = props.get(PAIR_N, "")
        over = f" over {n} start pair{'' if n == '1' else 's'}" if n else ""
        lead = props.get(METRIC, "")  # perf_compare(..., metric=): the metric the test is about, first
        if lead and lead != PRIMARY and props.get(pair_of(lead, "decision")):
            r = _num(props.get(pair_of(lead, "ratio")))
            parts.insert(0, f"{said(lead)} {props[pair_of(lead, 'decision')]}" + ("" if r is None else (
                f" x{_ratio(r)}" + _interval(props, pair_of(lead, "ci_low"), pair_of(lead, "ci_high"), ratio=True)))
                + over)
        parts.append(props[PAIR_DECISION] + over)
        # what else a stack pair called regressed (it fails the record while decode tok/s may read same): named
        for metric in PAIR_METRICS + LEG_METRICS:
            if metric not in (PRIMARY, lead) and props.get(pair_of(metric, "decision")) == "regressed":
                r = _num(props.get(pair_of(metric, "ratio")))
                parts.append(f"{said(metric)} regressed" + ("" if r is None else f" x{_ratio(r)}" + _interval(
                    props, pair_of(metric, "ci_low"), pair_of(metric, "ci_high"), ratio=True)))
    return "; ".join(parts)


def record_lines(stats: dict[str, list[Any]]) -> list[str]:
    """One line per record of this run, of every kind: its mode (and variant), kind, outcome and category, and
    :func:`record_detail` (its figure [interval], limit, comparisons [interval], decision). Skipped records that
    measured nothing (no candidate for a stack pair, no torch for the micro tier) are counted in one line:
    pytest's ``-rs`` says why each skipped."""
    records: dict[str, dict[str, str]] = {}
    for reports in stats.values():
        for rep in reports:
            props = dict(getattr(rep, "user_properties", ()) or ())
            if props.get("outcome") and props.get("kind"):
                records[str(getattr(rep, "nodeid", id(rep)))] = props
    if not records:
        return []
    rows, unmeasured = [], 0
    for props in records.values():
        detail = record_detail(props)
        if props["outcome"] == "skip" and not detail:
            unmeasured += 1
            continue
        name = props.get("mode", "") + (f"+{props['variant']}" if props.get("variant") else "")
        outcome = props["outcome"] + (f" {props['category']}" if props.get("category") else "")
        rows.append((f"{name} {props['kind']}".strip(), outcome, detail))
    out = ["perfgate: record by record (figure [interval], limit; comparison [interval], decision):"]
    if rows:
        w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
        out += [f"  {a.ljust(w0)}  {b.ljust(w1)}  {c}".rstrip() for a, b, c in rows]
    if unmeasured:
        out.append(f"  and {unmeasured} skipped record{'' if unmeasured == 1 else 's'} that measured nothing "
                   f"(-rs says why)")
    return out


def profile_lines(stats: dict[str, list[Any]]) -> list[str]:
    """The terminal table of this run's ``profile`` records: one line per config."""
    rows: list[tuple[str, ...]] = []
    for reports in stats.values():
        for rep in reports:
            p = dict(getattr(rep, "user_properties", ()) or ())
            if p.get("kind") != PROFILE or getattr(rep, "when", "call") != "call" or "allreduce_per_step" not in p:
                continue
            name = p.get("mode", "") + (f"+{p['variant']}" if p.get("variant") else "")
            share = float(p.get("allreduce_share", 0) or 0)
            rows.append((name, p.get("outcome", "") + (f" {p['category']}" if p.get("category") else ""),
                         f"{float(p['allreduce_per_step']):g}",
                         f"{float(p.get('allreduce_us_per_step', 0)) / 1000:.2f}",
                         f"{float(p.get('step_us', 0)) / 1000:.2f}", f"{share:.0%}",
                         str(p.get("allreduce_backend", "")),
                         f"{float(p.get('skew_us_per_step', 0)) / 1000:.2f}",
                         f"{float(p['speedup_ar_halved']):.2f}" if p.get("speedup_ar_halved") else "-"))
    if not rows:
        return []
    head = ("config", "outcome", "AR/step", "AR ms", "step ms", "share", "backend", "skew ms", "AR/2 x")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    out = ["perfgate: step profiles (SGLang's own trace; a step is a decode step or a verify pass; AR ms is the "
           "transfer, the least of any rank; AR/2 x: decode speed-up if all-reduce time halved):"]
    for r in (head, *rows):
        out.append("  " + "  ".join(c.ljust(w) if i in (0, 1, 6) else c.rjust(w) for i, (c, w) in
                                    enumerate(zip(r, widths))))
    return out


def starts_line(started: Sequence[str], configs: Mapping[str, ServerConfig], s: Settings) -> str:
    """The line of server starts per config (``started``: the config key of every start, in order; ``configs``: the
    session's by key, a candidate arm's named ``@candidate``); empty when every config started once."""
    if len(started) == len(set(started)) and s.starts == 1:
        return ""
    counts: dict[str, int] = {}
    for k in started:
        counts[k] = counts.get(k, 0) + 1
    names = {k: c.name + ("@candidate" if dict(c.engine_options).get("arm") else "") for k, c in configs.items()}
    how = f"--perfgate-starts {s.starts}" if s.starts_from == "option" else \
        f"[workload] starts = {s.starts}" if s.starts_from == "profile" else "one start each"
    return (f"perfgate: server starts per config ({how}): "
            + ", ".join(f"{names.get(k, k)} {n}" for k, n in counts.items()))
