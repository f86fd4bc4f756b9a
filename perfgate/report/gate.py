"""The CI gate: a :class:`GatePolicy` applied to a :class:`~perfgate.report.diff.Diff`.

Exit codes (``perfgate gate OLD.xml NEW.xml``; documented in ``docs/gate.md``):

====  =====================================================================================
0     nothing that the policy blocks on
1     a blocking change: newly broken, regressed beyond noise (and below ``min_ratio``),
      and, if the policy says so, gone records, other outcome changes, new failing records,
      records that passed and lost their verdict (``lost-verdict``, on by default: too noisy, too few
      trials, a warm cache), and any record that became inconclusive (``allow_inconclusive = false``)
2     usage error or unreadable input (bad option, missing/invalid report, bad policy,
      an empty NEW or OLD report, reports of different profiles that share no record,
      reports from different hardware or engines unless allowed)
3     only unblocked records whose expectations must be updated (``xfail`` → ``xpass``, or
      → ``pass`` while the new report still expects a failure)
====  =====================================================================================

1 wins over 3: a regression is reported even when something also unblocked.

The policy (:mod:`perfgate.report.policy`) lives in the project's ``pyproject.toml`` under
``[tool.perfgate.gate]``; command-line options override it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.categories import Why
from perfgate.errors import ConfigError, ExitCode, ReportError
from perfgate.record import WHY_UNDECIDED
from perfgate.report.diff import REGRESSED, UNDECIDED, Diff, Judging, RecordDiff, diff
from perfgate.report.noise import bands_from_reports, without_judged
from perfgate.report.policy import GatePolicy
from perfgate.report.records import Report

#: the hardware fingerprint: reports that differ in any of these measured different machines
HARDWARE_KEYS: tuple[str, ...] = ("stack.gpu", "stack.gpu_count", "stack.sm", "stack.interconnect")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One record that the gate reports, and why."""

    key: str
    rule: str
    detail: str


@dataclass(frozen=True, kw_only=True)
class GateResult:
    """The gate's decision."""

    exit_code: ExitCode
    blocking: tuple[Finding, ...]
    expectation_updates: tuple[Finding, ...]
    ignored: tuple[Finding, ...]
    policy: GatePolicy
    message: str

    @property
    def blocking_records(self) -> tuple[str, ...]:
        """The records that block, once each, in the order of their first finding (a record can break more than
        one rule: newly broken and regressed)."""
        return tuple(dict.fromkeys(f.key for f in self.blocking))


def _detail(r: RecordDiff, rule: str) -> str:
    tp = r.throughput
    if rule in ("regressed", "undecided") and tp is not None:
        from perfgate.measuring.metrics import unit_of

        unit = unit_of(tp.metric)
        from perfgate.report.words import judged_words

        what = unit if tp.metric == "tok_s" else tp.metric
        tail = f" {unit}" if unit and tp.metric != "tok_s" else ""
        return f"{what} {tp.old:g} → {tp.new:g}{tail}: {judged_words(tp)}"
    o = r.old.outcome_label if r.old else "absent"
    n = r.new.outcome_label if r.new else "absent"
    return f"{o} → {n}"


def evaluate(d: Diff, policy: GatePolicy) -> GateResult:
    """Apply the policy to a diff and decide the exit code."""
    blocking: list[Finding] = []
    updates: list[Finding] = []
    ignored: list[Finding] = []

    def add(target: list[Finding], r: RecordDiff, rule: str, detail: str | None = None) -> None:
        rec = r.new or r.old
        assert rec is not None  # a record of a diff is on one side at least (classify_transition)
        rid = rec.id
        f = Finding(key=r.key, rule=rule, detail=detail or _detail(r, rule))
        if policy.ignored(r.key, rid):
            ignored.append(f)
        else:
            target.append(f)

    on = policy.block_on
    for r in d.records:
        t = r.transition
        if t == "newly-broken" and "newly-broken" in on:
            add(blocking, r, "newly-broken")
        elif t == "gone" and "gone" in on:
            add(blocking, r, "gone")
        elif t == "new" and "new-failing" in on and r.new_outcome in ("fail", "error"):
            add(blocking, r, "new-failing")
        elif t == "new" and "unjudged" in on:
            add(blocking, r, "unjudged", f"absent → {r.new.outcome_label if r.new else '?'}: no baseline record to "
                                         f"judge it against; run the baseline for it (or gate without unjudged)")
        elif t == "changed" and "changed" in on:
            add(blocking, r, "changed")
        elif t == "unblocked" and "unblocked" in on and r.needs_expectation_update:
            add(updates, r, "unblocked")
        if r.new_outcome == "inconclusive" and r.old_outcome != "inconclusive":
            before = r.old.outcome_label if r.old else "absent"
            why = f"{before} → {r.new.outcome_label if r.new else 'inconclusive'}: {r.new.reason if r.new else ''}"
            # a limit missed on a busy host (why_undecided host-busy) is the load's as much as the change's: an
            # unpaired check cannot tell which, so it is said (undecided, and why) and blocks nothing (issue 52)
            busy = r.new is not None and r.new.prop(WHY_UNDECIDED) == Why.HOST_BUSY
            if r.old_outcome in ("pass", "xpass") and "lost-verdict" in on and not busy:
                add(blocking, r, "lost-verdict", why)
            elif not policy.allow_inconclusive:
                add(blocking, r, "inconclusive", why)
        tp = r.throughput
        if tp is not None and tp.verdict == REGRESSED and "regressed" in on:
            ratio = tp.goodness  # new/old for throughput, old/new for a latency
            if ratio is None or ratio < policy.min_ratio:
                add(blocking, r, "regressed")
        if tp is not None and tp.verdict == UNDECIDED and "undecided" in on:
            add(blocking, r, "undecided")

    if blocking:
        code = ExitCode.BLOCKED
        records = len({f.key for f in blocking})
        msg = f"BLOCKED: {records} blocking record(s): " + ", ".join(sorted({f.rule for f in blocking}))
        if updates:
            msg += f"; also {len(updates)} unblocked record(s) whose expectations must be updated"
    elif updates:
        code = ExitCode.UNBLOCKED
        msg = (
            f"UNBLOCKED: {len(updates)} record(s) now pass while the profile expects a failure; "
            "update their expectations (baselines/*.toml) and re-run"
        )
    else:
        code = ExitCode.OK
        msg = "OK: no blocking change"
    return GateResult(
        exit_code=code,
        blocking=tuple(blocking),
        expectation_updates=tuple(updates),
        ignored=tuple(ignored),
        policy=policy,
        message=msg,
    )


def check_comparable(old: Report, new: Report, policy: GatePolicy) -> None:
    """Refuse inputs a gate cannot judge (exit 2): an empty NEW or OLD report, reports of two profiles that share no
    record, different hardware, mixed engines."""
    if not new.records:
        raise ReportError(
            f"{new.path}: the NEW report has no test cases; a gate that ran nothing must not pass "
            "(check the pytest selection, -m, and the pytest exit code)"
        )
    if not old.records:
        raise ReportError(
            f"{old.path}: the OLD report has no test cases, so there is nothing to gate {new.path} against; make it "
            "with the selection the NEW run uses (pytest ... --junitxml=OLD.xml) and check that run's pytest exit "
            "code (5: no test ran)")
    for side, r in (("OLD", old), ("NEW", new)):
        if not r.stack and not r.engine and not any(rec.outcome_source == "property" for rec in r.records):
            raise ReportError(
                f"{r.path}: the {side} report is no perfgate report (no stack.*, no engine, no record's outcome "
                f"property): a JUnit file from another tool, or a pytest run without perfgate's plugin; fix: pass "
                f"the --junitxml of `pytest perftests/` run with perfgate")
    if old.profile and new.profile and old.profile != new.profile and not set(old.by_key) & set(new.by_key):
        hw = [k.removeprefix("stack.") for k in HARDWARE_KEYS if old.stack.get(k, "") != new.stack.get(k, "")]
        raise ReportError(
            f"the reports come from different profiles ({old.profile} in {old.path}, {new.profile} in {new.path}"
            + (f"; their hardware differs too: {', '.join(hw)}" if hw else "")
            + f"), so no record of one is a record of the other ({len(old.records)} would be gone, "
              f"{len(new.records)} unjudged); gate reports of one profile (--perfgate-profile), or compare them "
              "side by side with `perfgate diff OLD.xml NEW.xml`")
    if not policy.allow_hardware_mismatch:
        differ = [k for k in HARDWARE_KEYS if old.stack.get(k, "unknown") != new.stack.get(k, "unknown")]
        if differ:
            raise ReportError(
                "the reports come from different hardware (" + ", ".join(
                    f"{k.removeprefix('stack.')} {old.stack.get(k, 'unknown')} in {old.path} vs "
                    f"{new.stack.get(k, 'unknown')} in {new.path}" for k in differ)
                + "): their numbers are not comparable; gate against a baseline of the same hardware, or set "
                  "gate.allow_hardware_mismatch = true (--allow-hardware-mismatch)")
    if old.engine and new.engine and old.engine != new.engine and not policy.allow_mixed_engines:
        raise ReportError(
            f"the reports come from different engines ({old.engine} in {old.path}, {new.engine} in "
            f"{new.path}); compare like with like, or set gate.allow_mixed_engines = true"
        )


def judging_for(policy: GatePolicy, history: Sequence[Report] = (), judged: Sequence[Report] = ()) -> Judging:
    """What the diff judges numbers with under this policy: its min_effect table and the history's bands. A report
    being judged (``judged``: the NEW report) never counts in its own history, even when its folder is passed."""
    kept, left_out = without_judged(history, *judged)
    notes = tuple(f"history: {rep.label} left out, it is the report being judged" for rep in left_out)
    return Judging(min_effect=dict(policy.min_effect), bands=bands_from_reports(kept) if kept else {}, notes=notes)


def history_paths(specs: Sequence[str], *, base: Path | None = None) -> list[Path]:
    """The report files named by ``gate.history`` / ``--history``: files, directories (every ``*.xml`` below)
    and globs, relative to ``base`` (the pyproject's folder) when not absolute."""
    out: list[Path] = []
    for spec in specs:
        p = Path(spec)
        if not p.is_absolute() and base is not None:
            p = base / p
        if p.is_dir():
            out += sorted(p.rglob("*.xml"))
        elif any(c in spec for c in "*?["):
            root = Path(p.anchor) if p.is_absolute() else (base or Path.cwd())
            pattern = str(p.relative_to(p.anchor)) if p.is_absolute() else spec
            out += sorted(root.glob(pattern))
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError(f"gate.history: {spec!r} is no report file, directory or glob that matches anything "
                              f"(looked at {p}); fix the path, or leave history out to use the documented priors")
    return out


def run_gate(old: Report, new: Report, policy: GatePolicy, history: Sequence[Report] = ()) -> tuple[Diff, GateResult]:
    """Check the inputs, diff them (numbers judged with the policy's min_effect and the history's noise
    bands) and apply the policy."""
    check_comparable(old, new, policy)
    d = diff(old, new, judging_for(policy, history, (new,)))
    return d, evaluate(d, policy)
