"""Render a :class:`Diff` (optionally with a gate decision) or a :class:`History`.

Three formats: ``text`` (a terminal table), ``md`` (Markdown for a pull-request comment) and
``json`` (for tools). Rendering never decides anything: it shows what diff/gate/history found.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from perfgate.report.diff import Diff, MetricChange, RecordDiff
from perfgate.report.gate import Finding, GateResult
from perfgate.report.history import History
from perfgate.report.records import Record
from perfgate.report.verdicts import RecordVerdict, sections_of, verdicts
from perfgate.report.words import judged_words, moved

FORMATS: tuple[str, ...] = ("text", "md", "json")

SECTION_TITLES: dict[str, str] = {
    "unblocked": "Unblocked (xfail → pass/xpass): update the expectations",
    "unblocked-expected": "Unblocked, already expected to pass (nothing to update)",
    "newly-broken": "Newly broken (pass → fail/error)",
    "regressed": "Regressed beyond noise (tok/s, or the record's metric in its direction)",
    "improved": "Improved beyond noise (tok/s, or the record's metric in its direction)",
    "changed": "Other outcome changes",
    "undecided": "Moved, undecided: beyond its noise, the floor not decided (not blocking; what would decide it)",
    "undecided-unmoved": "Undecided, not moved beyond its noise: too noisy to rule out the floor (not blocking; what "
                         "would decide it)",
    "not-comparable": "Not comparable: the record's server config changed (not blocking)",
    "new": "New records",
    "gone": "Gone records",
}


def fmt_num(x: float | None) -> str:
    """A compact number: ``—`` when absent."""
    if x is None:
        return "—"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _side(v: RecordVerdict, x: float | None, ci: tuple[float, float] | None) -> str:
    """One side's figure with its interval and unit: ``89.5 [88.7, 90.3] tok/s``, or with the metric it names,
    ``ttft_ms 270 [262, 281] ms``."""
    if x is None:
        return "—"
    text = f"{fmt_num(x)} [{fmt_num(ci[0])}, {fmt_num(ci[1])}]" if ci is not None else fmt_num(x)
    text = f"{text} {v.unit}" if v.unit else text
    return text if v.metric == "tok_s" else f"{v.metric} {text}"


def _noise(v: RecordVerdict) -> str:
    if v.decision in ("unchanged", "not-comparable") or not v.noise_level:
        return v.decision
    return f"{v.decision} ({v.noise_level}, {v.noise_source})"


def _record_row(v: RecordVerdict, config_changed: bool = False) -> list[str]:
    changed = v.old_outcome != v.new_outcome
    return [
        v.key,
        f"{v.old_outcome} → {v.new_outcome}" if changed else (v.new_outcome if v.new_outcome != "absent"
                                                               else v.old_outcome),
        _side(v, v.old, v.old_ci),
        _side(v, v.new, v.new_ci),
        "—" if v.delta_pct is None else f"{v.delta_pct:+.1f}%",
        _noise(v) + (" config changed" if config_changed else ""),
    ]


def _rows(d: Diff, recs: Sequence[RecordDiff], gate: GateResult | None = None) -> list[list[str]]:
    """The table rows of these records, drawn from their verdicts (perfgate.report.verdicts)."""
    by_key = {v.key: v for v in verdicts(d, gate).records}
    return [_record_row(by_key[r.key], r.config_changed) for r in recs]


#: the old and new columns name no unit: each cell says its metric's (tok/s, ms, req/s, ...)
RECORD_HEADERS = ["record", "outcome", "old", "new", "Δ", "noise"]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """A plain aligned table."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip()]
    lines.append(indent + "  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], code_first: bool = True) -> str:
    """A GitHub-flavoured Markdown table (first column as code)."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        cells = [_md_escape(c) for c in row]
        if code_first and cells:
            cells[0] = f"`{cells[0]}`"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _stack_rows(d: Diff) -> list[list[str]]:
    old, new = dict(d.old_stack), dict(d.new_stack)
    keys = list(old) + [k for k in new if k not in old]
    changed = {c.key for c in d.stack_changes}
    return [
        [k, old.get(k, "unknown"), new.get(k, "unknown"), "changed" if k in changed else ""] for k in keys
    ]


def sections(d: Diff) -> dict[str, tuple[RecordDiff, ...]]:
    """The diff's sections as every view shows them (:func:`perfgate.report.verdicts.sections_of`)."""
    return sections_of(d)


def _summary(d: Diff) -> str:
    parts = [f"{len(v)} {k}" for k, v in sections(d).items()]
    return ", ".join(parts) + f" (of {len(d.records)} records)"


def _stack_change_line(d: Diff) -> str:
    if not d.stack_changes:
        return "stack unchanged"
    return "; ".join(f"{c.key.removeprefix('stack.')} {c.old} → {c.new}" for c in d.stack_changes)


def _machine_line(d: Diff) -> str:
    """``same machine <id>``, ``different machines ...: gpu_uuid A vs B, ...`` or why it is unknown."""
    return d.machines.describe() if d.machines is not None else "machine unknown"


def render_diff_text(d: Diff, gate: GateResult | None = None) -> str:
    """Terminal rendering: header, stack, summary, sections, then every record."""
    out = [
        f"perfgate diff  OLD {d.old_label} [{d.old_engine or 'engine ?'}]  →  NEW {d.new_label} "
        f"[{d.new_engine or 'engine ?'}]",
    ]
    if gate is not None:
        out.append(f"gate: exit {int(gate.exit_code)}: {gate.message}")
    for note in d.notes:
        out.append(f"note: {note}")
    out.append("")
    out.append("Stack: " + _stack_change_line(d))
    rows = _stack_rows(d)
    if rows:
        out.append(text_table(["key", "old", "new", ""], rows))
    out.append("Machine: " + _machine_line(d))
    out.append("")
    out.append("Summary: " + _summary(d))
    for name, recs in sections(d).items():
        if not recs:
            continue
        out.append("")
        out.append(f"{SECTION_TITLES[name]}: {len(recs)}")
        out.append(text_table(RECORD_HEADERS, _rows(d, recs, gate)))
        out.extend(_judged_lines(recs))
    if gate is not None:
        out.extend(_gate_text(gate))
    out.append("")
    out.append(f"All records: {len(d.records)}")
    out.append(text_table(RECORD_HEADERS, _rows(d, d.records, gate)))
    return "\n".join(out) + "\n"


def _judged_lines(recs: Sequence[RecordDiff]) -> list[str]:
    """What the judge saw for each judged record: the ratio, its interval, the level and what would decide it."""
    out = []
    for r in recs:
        tp = r.throughput
        if tp is None or tp.verdict in ("unchanged",) or not tp.why:
            continue
        out.append(f"    {r.key}: {judged_words(tp)}")
    return out


def by_record(findings: Sequence[Finding]) -> list[tuple[str, str, str]]:
    """Findings once per record: ``(key, its rules, their details)`` in the order of each record's first finding
    (a record newly broken and regressed is one blocking record)."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for f in findings:
        rules, details = out.setdefault(f.key, ([], []))
        rules.append(f.rule)
        if f.detail not in details:
            details.append(f.detail)
    return [(k, ", ".join(rules), "; ".join(details)) for k, (rules, details) in out.items()]


def _gate_text(gate: GateResult) -> list[str]:
    out = []
    if gate.blocking:
        out += ["", f"Blocking: {len(gate.blocking_records)} record(s)"]
        out += [f"  [{rules}] {key}: {detail}" for key, rules, detail in by_record(gate.blocking)]
    if gate.expectation_updates:
        out += ["", "Expectations to update:"]
        out += [f"  {f.key}: {f.detail}" for f in gate.expectation_updates]
    if gate.ignored:
        out += ["", "Ignored by gate.ignore:"]
        out += [f"  [{rules}] {key}: {detail}" for key, rules, detail in by_record(gate.ignored)]
    return out


def render_diff_md(d: Diff, gate: GateResult | None = None) -> str:
    """Markdown for a pull-request comment."""
    out = ["### perfgate: stack diff", ""]
    if gate is not None:
        icon = {0: "✅", 1: "❌", 3: "🔓"}.get(int(gate.exit_code), "⚠️")
        out += [f"{icon} **gate: exit {int(gate.exit_code)}** — {_md_escape(gate.message)}", ""]
    out.append(
        f"**OLD** `{d.old_label}` ({d.old_engine or 'engine ?'}) → **NEW** `{d.new_label}` "
        f"({d.new_engine or 'engine ?'})"
    )
    out.append("")
    for note in d.notes:
        out.append(f"> note: {_md_escape(note)}")
    if d.notes:
        out.append("")
    if d.stack_changes:
        out.append("**Stack changes:** " + _md_escape(_stack_change_line(d)))
        out.append("")
        out.append(md_table(["key", "old", "new"], [[c.key, c.old, c.new] for c in d.stack_changes]))
    else:
        out.append("**Stack:** unchanged")
    out.append("")
    out.append("**Machine:** " + _md_escape(_machine_line(d)))
    out.append("")
    out.append("**Summary:** " + _summary(d))
    for name, recs in sections(d).items():
        if not recs:
            continue
        out += ["", f"#### {SECTION_TITLES[name]} ({len(recs)})", ""]
        out.append(md_table(RECORD_HEADERS, _rows(d, recs, gate)))
        judged = _judged_lines(recs)
        if judged:  # what the judge saw, and why an undecided one is undecided
            out += [""] + [f"- {_md_escape(line.strip())}" for line in judged]
    if gate is not None and (gate.blocking or gate.expectation_updates):
        out += ["", "#### Gate findings", ""]
        rows = [list(row) for row in by_record(gate.blocking + gate.expectation_updates)]
        out.append(md_table(["record", "rule", "detail"], rows))
    out += ["", f"<details><summary>All {len(d.records)} records and the full stack</summary>", ""]
    out.append(md_table(RECORD_HEADERS, _rows(d, d.records, gate)))
    out.append("")
    out.append(md_table(["key", "old", "new", ""], _stack_rows(d)))
    out += ["", "</details>", ""]
    return "\n".join(out)


def _record_json(r: Record | None) -> dict[str, object] | None:
    if r is None:
        return None
    return {
        "outcome": r.outcome,
        "outcome_source": r.outcome_source,
        "category": r.category,
        "expected": r.expected,
        "reason": r.reason,
        "kind": r.kind,
        "config": r.config,
        "numbers": r.number_dict,
    }


def verdict_json(v: RecordVerdict) -> dict[str, object]:
    """One record's verdict (perfgate.report.verdicts.RecordVerdict) as JSON."""
    return {"key": v.key, "sections": list(v.sections), "old_outcome": v.old_outcome, "new_outcome": v.new_outcome,
            "kind": v.kind, "metric": v.metric, "unit": v.unit,
            "direction": "higher" if v.higher_is_better else "lower", "old": v.old, "new": v.new,
            "delta_pct": v.delta_pct, "interval_pct": list(v.interval_pct) if v.interval_pct else None,
            "decision": v.decision, "noise_level": v.noise_level, "noise_source": v.noise_source,
            "noise_cv": v.noise_cv, "min_effect": v.min_effect, "blocks": list(v.blocks), "updates": v.updates,
            "why": v.why, "why_undecided": v.why_undecided}


def diff_to_json(d: Diff, gate: GateResult | None = None) -> dict[str, object]:
    """The diff (and gate decision) as plain JSON-able data."""

    def tp_json(tp: MetricChange | None) -> dict[str, object] | None:
        if tp is None:
            return None
        return {
            "old": tp.old,
            "new": tp.new,
            "ratio": tp.ratio,
            "verdict": tp.verdict,
            "metric": tp.metric,
            "machines": tp.machines,
            "level": tp.judgement.level.value if tp.judgement else None,
            "noise_source": tp.judgement.noise_source if tp.judgement else None,
            "noise_cv": tp.judgement.noise_cv if tp.judgement else None,
            "ratio_ci": list(tp.judgement.ci) if tp.judgement and tp.judgement.ci else None,
            "min_effect": tp.judgement.min_effect if tp.judgement else None,
            "detail": tp.why,
            "needs": tp.needs,
            "moved": moved(tp),
            "words": judged_words(tp),
            "old_ci": list(tp.old_ci) if tp.old_ci else None,
            "new_ci": list(tp.new_ci) if tp.new_ci else None,
            "history": None if tp.band is None else {
                "used": list(tp.band.used), "before_step": list(tp.band.before_step),
                "outliers": list(tp.band.outliers), "steps": list(tp.band.steps)},
        }

    data: dict[str, object] = {
        "old": {"path": d.old_path, "label": d.old_label, "engine": d.old_engine, "stack": dict(d.old_stack),
                "machine": dict(d.old_machine)},
        "new": {"path": d.new_path, "label": d.new_label, "engine": d.new_engine, "stack": dict(d.new_stack),
                "machine": dict(d.new_machine)},
        "stack_changes": [{"key": c.key, "old": c.old, "new": c.new} for c in d.stack_changes],
        "machines": None if d.machines is None else {
            "same": d.machines.same, "old_id": d.machines.old_id or None, "new_id": d.machines.new_id or None,
            "differences": [{"key": k, "old": a, "new": b} for k, a, b in d.machines.differences],
            "hbm_ratio": d.machines.hbm_ratio, "gemm_ratio": d.machines.gemm_ratio,
            "summary": d.machines.describe(),
        },
        "sections": {k: [r.key for r in v] for k, v in sections(d).items()},
        "records": [
            {
                "key": r.key,
                "transition": r.transition,
                "old_outcome": r.old_outcome,
                "new_outcome": r.new_outcome,
                "config_changed": r.config_changed,
                "throughput": tp_json(r.throughput),
                "old": _record_json(r.old),
                "new": _record_json(r.new),
            }
            for r in d.records
        ],
        "verdicts": [verdict_json(v) for v in verdicts(d, gate).records],
        "notes": list(d.notes),
        "empty": d.is_empty,
    }
    if gate is not None:
        data["gate"] = {
            "exit_code": int(gate.exit_code),
            "message": gate.message,
            "blocking": [{"key": f.key, "rule": f.rule, "detail": f.detail} for f in gate.blocking],
            "blocking_records": list(gate.blocking_records),
            "expectation_updates": [
                {"key": f.key, "rule": f.rule, "detail": f.detail} for f in gate.expectation_updates
            ],
            "ignored": [{"key": f.key, "rule": f.rule, "detail": f.detail} for f in gate.ignored],
            "policy": {
                "block_on": sorted(gate.policy.block_on),
                "allow_inconclusive": gate.policy.allow_inconclusive,
                "min_ratio": gate.policy.min_ratio,
                "ignore": list(gate.policy.ignore),
                "allow_mixed_engines": gate.policy.allow_mixed_engines,
                "source": gate.policy.source,
            },
        }
    return data


def render_diff(d: Diff, fmt: str, gate: GateResult | None = None) -> str:
    """Render in ``text``, ``md`` or ``json``."""
    if fmt == "text":
        return render_diff_text(d, gate)
    if fmt == "md":
        return render_diff_md(d, gate)
    if fmt == "json":
        return json.dumps(diff_to_json(d, gate), indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")


# --- history ---------------------------------------------------------------------------


def _cell_text(outcome: str, value: float | None) -> str:
    return outcome if value is None else f"{outcome} {fmt_num(value)}"


def _history_rows(h: History) -> list[list[str]]:
    rows = []
    for row in h.rows:
        cells = [_cell_text(c.outcome, c.value) if c else "—" for c in row.cells]
        steps = "; ".join(
            f"{s.direction} at #{s.index + 1}: {fmt_num(s.before)} → {fmt_num(s.after)}"
            + (f" ({(s.ratio - 1) * 100:+.1f}%)" if s.ratio is not None else "")
            for s in row.steps
        )
        rows.append([row.key, row.metric + (f" ({row.unit})" if row.unit else ""), *cells, steps])
    return rows


def render_history(h: History, fmt: str) -> str:
    """The history table (one column per report, in time order) with detected steps."""
    headers = ["record", "metric", *[f"#{i + 1}" for i in range(len(h.columns))], "steps"]
    legend = [f"#{i + 1} = {c.label} ({c.path})" for i, c in enumerate(h.columns)]
    if fmt == "json":
        data = {
            "columns": [
                {"label": c.label, "path": c.path, "time": c.time.isoformat() if c.time else None} for c in h.columns
            ],
            "rows": [
                {
                    "key": row.key,
                    "metric": row.metric,
                    "unit": row.unit,
                    "direction": "higher" if row.higher_is_better else "lower",
                    "cells": [None if c is None else {"outcome": c.outcome, "value": c.value,
                                                      **({"tok_s": c.value} if row.metric == "tok_s" else {})}
                              for c in row.cells],
                    "steps": [
                        {"index": s.index, "before": s.before, "after": s.after, "direction": s.direction}
                        for s in row.steps
                    ],
                }
                for row in h.rows
            ],
        }
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    rows = _history_rows(h)
    n_steps = len(h.steps)
    if fmt == "md":
        out = ["### perfgate: history", "", *[f"- {_md_escape(x)}" for x in legend], ""]
        out.append(f"**{n_steps} sustained step(s)** in each record's own metric across {len(h.columns)} reports.")
        out += ["", md_table(headers, rows), ""]
        return "\n".join(out)
    if fmt == "text":
        out = ["perfgate history", *["  " + x for x in legend], ""]
        out.append(f"{n_steps} sustained step(s) in each record's own metric across {len(h.columns)} reports")
        out.append(text_table(headers, rows))
        return "\n".join(out) + "\n"
    raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")
