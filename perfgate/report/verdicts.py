"""The report model: two reports (and a history) → one verdict per record, which every view draws from (pure).

:func:`verdicts` reads a :class:`~perfgate.report.diff.Diff` (the judge's decisions, record by record) and the gate's
:class:`~perfgate.report.gate.GateResult` (which of them block, by which rule) and returns, per record, what a reader
needs: the section it is listed in, the metric it was judged on (its own: ``ttft_ms`` for a latency record, not
decode tok/s), the direction, old and new values with their unit, Δ %, the interval of Δ %, the decision, the noise
level and where that noise came from, the rules it blocks by and why. The text, Markdown, JSON and HTML views show
these; none decides again. :func:`verdict_of_reports` runs the gate and builds them in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perfgate.measuring.notation import change_interval_text
from perfgate.record import WHY_UNDECIDED
from perfgate.report.diff import UNCHANGED, UNDECIDED, Diff, RecordDiff
from perfgate.report.gate import Finding, GateResult, run_gate
from perfgate.report.policy import GatePolicy
from perfgate.report.records import Record, Report
from perfgate.report.words import judged_words, moved

__all__ = ["RecordVerdict", "Verdicts", "SECTION_ORDER", "section_of", "sections_of", "verdicts",
           "verdict_of_reports"]

#: the sections of a diff in display order (``undecided``: moved beyond its noise; ``undecided-unmoved``: not)
SECTION_ORDER: tuple[str, ...] = ("unblocked", "unblocked-expected", "newly-broken", "regressed", "improved",
                                  "changed", "undecided", "undecided-unmoved", "not-comparable", "new", "gone")


def sections_of(d: Diff) -> dict[str, tuple[RecordDiff, ...]]:
    """The diff's sections as every view shows them: an undecided record that did not move beyond its noise (its
    interval holds no change) is not listed as moved (perfgate.report.words.moved)."""
    out: dict[str, tuple[RecordDiff, ...]] = {}
    for name, recs in d.sections().items():
        if name != "undecided":
            out[name] = recs
            continue
        out[name] = tuple(r for r in recs if r.throughput is None or moved(r.throughput))
        out["undecided-unmoved"] = tuple(r for r in recs if r.throughput is not None and not moved(r.throughput))
    return out


def section_of(d: Diff) -> dict[str, tuple[str, ...]]:
    """Record key → the sections it is listed in (none: unchanged)."""
    out: dict[str, list[str]] = {}
    for name, recs in sections_of(d).items():
        for r in recs:
            out.setdefault(r.key, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True, kw_only=True)
class RecordVerdict:
    """One record's verdict as every view shows it."""

    key: str
    sections: tuple[str, ...]  # where the views list it (SECTION_ORDER), () when nothing changed
    old_outcome: str  # outcome label (with its category), "absent" on the side that lacks it
    new_outcome: str
    kind: str
    metric: str  # the number it was judged on: its own (``ttft_ms``, ``output_tok_s``), tok_s unless it names one
    unit: str  # the metric's unit ("tok/s", "ms"), "" when it has none
    higher_is_better: bool
    old: float | None
    new: float | None
    old_ci: tuple[float, float] | None  # each side's recorded interval of its figure
    new_ci: tuple[float, float] | None
    delta_pct: float | None  # (new/old - 1) x 100, in the metric's own units (a latency that rose: positive)
    interval_pct: tuple[float, float] | None  # the judge's interval of new/old as Δ %
    decision: str  # the judge's decision (regressed, improved, same, undecided, not-comparable, unchanged), "" none
    noise_level: str  # what the noise crossed: "same machine", "different machines", "trials", ""
    noise_source: str  # where the noise came from: "starts", "history", "prior", "none", ""
    noise_cv: float | None
    min_effect: float | None
    blocks: tuple[str, ...]  # the gate's rules it blocks by (newly-broken, regressed, ...), () when it does not
    updates: bool  # unblocked while the profile still expects a failure (gate exit 3)
    why: str  # the gate's detail where it blocks, else the judged change in words
    #: why it is undecided (perfgate.categories.Why): the judge's between the reports, else the NEW record's own
    #: (``why_undecided``, a stack pair's judged inside its run); "" when decided
    why_undecided: str = ""

    @property
    def blocking(self) -> bool:
        return bool(self.blocks)

    @property
    def figure(self) -> str:
        """``ttft_ms 269.9 → 278.2 ms (+3.1 %)``: the metric, old → new with its unit, Δ; "" without figures."""
        if self.old is None and self.new is None:
            return ""
        tail = f" {self.unit}" if self.unit else ""
        text = f"{self.metric} {_num(self.old)} → {_num(self.new)}{tail}"
        if self.delta_pct is not None:
            text += f" ({self.delta_pct:+.1f} %)"
        return text

    @property
    def interval(self) -> str:
        """``[+1.2, +4.9] %``, an end that bounds nothing as ``(-100`` or ``+∞)``
        (:func:`perfgate.measuring.notation.change_interval_text`); "" without an interval."""
        if self.interval_pct is None:
            return ""
        lo, hi = self.interval_pct
        return change_interval_text((1 + lo / 100, 1 + hi / 100))


@dataclass(frozen=True, kw_only=True)
class Verdicts:
    """The gate's exit and message (when gated) and every record's verdict, in the diff's key order."""

    exit_code: int | None
    message: str
    records: tuple[RecordVerdict, ...]
    notes: tuple[str, ...] = ()

    def in_section(self, name: str) -> tuple[RecordVerdict, ...]:
        return tuple(v for v in self.records if name in v.sections)

    @property
    def blocking(self) -> tuple[RecordVerdict, ...]:
        return tuple(v for v in self.records if v.blocks)

    @property
    def headline(self) -> str:
        """One line a reviewer reads first: the exit, what blocks and why (the first three blocking records)."""
        if self.exit_code is None:
            counts = [f"{len(self.in_section(s))} {s}" for s in ("newly-broken", "regressed", "undecided")
                      if self.in_section(s)]
            return "not gated: " + (", ".join(counts) if counts else "no change beyond noise")
        head = f"exit {self.exit_code}: {self.message}"
        rank = {name: i for i, name in enumerate(SECTION_ORDER)}
        blocking = sorted(self.blocking, key=lambda v: min((rank.get(s, 99) for s in v.sections), default=99))
        if not blocking:
            return head
        shown = "; ".join(f"{v.key} ({', '.join(v.blocks)}: "
                          f"{v.figure if 'regressed' in v.blocks and v.figure else v.why or v.figure})"
                          for v in blocking[:3])
        more = f"; and {len(blocking) - 3} more" if len(blocking) > 3 else ""
        return f"{head} — {shown}{more}"


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    ax = abs(x)
    return f"{x:.0f}" if ax >= 1000 else f"{x:.1f}" if ax >= 100 else f"{x:.2f}" if ax >= 1 else f"{x:.3g}"


def _label(r: Record | None) -> str:
    return r.outcome_label if r else "absent"


def _record_verdict(r: RecordDiff, sections: tuple[str, ...], blocking: Sequence[Finding],
                    updates: Sequence[Finding]) -> RecordVerdict:
    from perfgate.measuring.metrics import METRICS, unit_of

    rec = r.new or r.old
    assert rec is not None  # a record of a diff is on one side at least
    tp = r.throughput
    j = tp.judgement if tp else None
    metric = tp.metric if tp else rec.metric
    up = tp.higher_is_better if tp else (METRICS[metric].higher_is_better if metric in METRICS
                                         else rec.prop("direction", "higher") != "lower")
    old = tp.old if tp else (r.old.num(metric) if r.old else None)
    new = tp.new if tp else (r.new.num(metric) if r.new else None)
    ratio = tp.ratio if tp else None
    level = ""
    if j is not None:
        level = {"starts": "same machine", "side-by-side": "same machine, side by side",
                 "machines": f"{tp.machines} machines" if tp else "machines",
                 "trials": "trials"}.get(j.level.value, j.level.value)
    mine = [f for f in blocking if f.key == r.key]
    why = "; ".join(dict.fromkeys(f.detail for f in mine))
    if not why and tp is not None and tp.verdict != UNCHANGED:
        why = judged_words(tp)
    return RecordVerdict(
        key=r.key, sections=sections, old_outcome=_label(r.old), new_outcome=_label(r.new), kind=rec.kind,
        metric=metric, unit=unit_of(metric), higher_is_better=up, old=old, new=new,
        old_ci=r.old.metric_ci(metric) if r.old else None, new_ci=r.new.metric_ci(metric) if r.new else None,
        delta_pct=None if ratio is None else (ratio - 1) * 100,
        interval_pct=None if j is None or j.ci is None else ((j.ci[0] - 1) * 100, (j.ci[1] - 1) * 100),
        decision=tp.verdict if tp else "", noise_level=level, noise_source=j.noise_source if j else "",
        noise_cv=j.noise_cv if j else None, min_effect=j.min_effect if j else None,
        blocks=tuple(dict.fromkeys(f.rule for f in mine)), updates=any(f.key == r.key for f in updates), why=why,
        why_undecided=str(j.why) if j is not None and j.why is not None and tp is not None and tp.verdict == UNDECIDED
        else (r.new.prop(WHY_UNDECIDED) if r.new else ""))


def verdicts(d: Diff, gate: GateResult | None = None) -> Verdicts:
    """Every record's verdict from the diff (the judge's decisions) and the gate (what blocks): the one model the
    views draw from."""
    where = section_of(d)
    blocking = gate.blocking if gate else ()
    updates = gate.expectation_updates if gate else ()
    return Verdicts(
        exit_code=int(gate.exit_code) if gate else None,
        message=gate.message if gate else "",
        records=tuple(_record_verdict(r, where.get(r.key, ()), blocking, updates) for r in d.records),
        notes=d.notes)


def verdict_of_reports(old: Report, new: Report, policy: GatePolicy | None = None,
                       history: Sequence[Report] = ()) -> tuple[Diff, GateResult, Verdicts]:
    """Gate NEW against OLD (with the history's noise) and build the verdicts: what ``perfgate gate`` decides."""
    policy = policy or GatePolicy()
    d, result = run_gate(old, new, policy, history)
    return d, result, verdicts(d, result)
