"""Compare two reports: ``diff(old, new) -> Diff`` (pure; no I/O).

Sections:

- *unblocked*: ``xfail`` → ``pass`` / ``xpass`` (a backend started working),
- *newly broken*: ``pass`` / ``xpass`` → ``fail`` / ``error``,
- *changed*: every other outcome change (``pass`` → ``xfail``, ``fail`` → ``pass``, ...), and
  the same outcome with another failure category (``xfail(cuda-graph-capture)`` → ``xfail(oom)``),
- *regressed* / *improved*: decode throughput (``tok_s``), or the metric a record names (``metric``:
  a user's ``ttft_ms``, a latency, regresses when it rises), moved beyond noise,
- *unknown noise*: ``tok_s`` moved but neither report recorded a CI or a CV,
- *new* / *gone*: records present on one side only,
- the stack fingerprint of each side and the keys that changed,
- the machine of each side (:func:`perfgate.report.machines.compare_machines`: same, different, unknown).

"Beyond noise" uses what the reports recorded, never a fixed percentage:

1. both sides have ``tok_s_ci_low``/``tok_s_ci_high``: a change counts when the two
   bootstrap CIs of the median do not overlap;
2. else both sides have ``cv``: a change counts when
   ``|new - old| > 2 * sqrt(cv_old**2 + cv_new**2) * max(old, new)``
   (``max`` makes A→B and B→A agree; for a drop it is ``old``);
3. else the change is reported as *unknown noise* and never blocks; so is any record measured with
   fewer than ``perfgate.metrics.MIN_TRIALS`` trials (its ``n``), whatever interval it carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfgate.metrics import METRICS
from perfgate.report.machines import MachineMatch, compare_machines
from perfgate.report.records import Record, Report


PASSING = frozenset({"pass", "xpass"})
BROKEN = frozenset({"fail", "error"})

# verdicts of a throughput comparison
REGRESSED = "regressed"
IMPROVED = "improved"
WITHIN_NOISE = "within-noise"
UNKNOWN_NOISE = "unknown-noise"
UNCHANGED = "unchanged"

# transitions of a record
T_UNCHANGED = "unchanged"
T_UNBLOCKED = "unblocked"
T_NEWLY_BROKEN = "newly-broken"
T_CHANGED = "changed"
T_NEW = "new"
T_GONE = "gone"


@dataclass(frozen=True, kw_only=True)
class ThroughputChange:
    """Old → new decode tok/s of one record and whether the move is beyond noise."""

    old: float
    new: float
    verdict: str
    # "ci" (non-overlapping CIs), "cv" (2·sqrt(cv_old²+cv_new²)), or "none"
    basis: str
    old_ci: tuple[float, float] | None = None
    new_ci: tuple[float, float] | None = None
    threshold: float | None = None
    metric: str = "tok_s"  # what moved (a record of a user's test may be judged on a latency)
    higher_is_better: bool = True

    @property
    def ratio(self) -> float | None:
        """new / old, ``None`` when old is 0."""
        return self.new / self.old if self.old else None

    @property
    def goodness(self) -> float | None:
        """How much better the new value is, as a ratio: new/old for throughput, old/new for a latency (below
        1: worse). ``gate.min_ratio`` is compared with this."""
        if self.higher_is_better:
            return self.ratio
        return self.old / self.new if self.new else None


def compare_throughput(old: Record, new: Record) -> ThroughputChange | None:
    """Compare the records' metric (``tok_s`` unless the record names another, e.g. a user's ``ttft_ms``)
    in its direction; ``None`` unless both have it. A latency that rises is a regression."""
    metric = new.metric or old.metric
    a, b = old.num(metric), new.num(metric)
    if a is None or b is None:
        return None
    up = METRICS[metric].higher_is_better if metric in METRICS else new.prop("direction", "higher") != "lower"
    old_ci, new_ci = old.metric_ci(metric), new.metric_ci(metric)
    if a == b:
        return ThroughputChange(old=a, new=b, verdict=UNCHANGED, basis="none", old_ci=old_ci, new_ci=new_ci,
                                metric=metric, higher_is_better=up)
    worse, better = (REGRESSED, IMPROVED) if up else (IMPROVED, REGRESSED)
    if old_ci is not None and new_ci is not None:
        if new_ci[1] < old_ci[0]:
            verdict = worse
        elif new_ci[0] > old_ci[1]:
            verdict = better
        else:
            verdict = WITHIN_NOISE
        return ThroughputChange(old=a, new=b, verdict=verdict, basis="ci", old_ci=old_ci, new_ci=new_ci, metric=metric, higher_is_better=up)
    cv_key = "cv" if metric == "tok_s" else f"{metric}_cv"
    cv_a, cv_b = old.num(cv_key), new.num(cv_key)
    if cv_a is not None and cv_b is not None and not old.noise_unknown and not new.noise_unknown:
        threshold = 2.0 * math.sqrt(cv_a**2 + cv_b**2) * max(abs(a), abs(b))
        if abs(b - a) > threshold:
            verdict = worse if b < a else better
        else:
            verdict = WITHIN_NOISE
        return ThroughputChange(
            old=a, new=b, verdict=verdict, basis="cv", old_ci=old_ci, new_ci=new_ci, threshold=threshold, metric=metric, higher_is_better=up
        )
    return ThroughputChange(old=a, new=b, verdict=UNKNOWN_NOISE, basis="none", old_ci=old_ci, new_ci=new_ci,
                            metric=metric, higher_is_better=up)


def classify_transition(old: str | None, new: str | None) -> str:
    """Name the outcome transition of one record (``old``/``new`` ``None`` when absent)."""
    if old is None and new is None:
        raise ValueError("a record must exist on at least one side")
    if old is None:
        return T_NEW
    if new is None:
        return T_GONE
    if old == new:
        return T_UNCHANGED
    if old == "xfail" and new in PASSING:
        return T_UNBLOCKED
    if old in PASSING and new in BROKEN:
        return T_NEWLY_BROKEN
    return T_CHANGED


@dataclass(frozen=True, kw_only=True)
class RecordDiff:
    """One record (by key) old → new."""

    key: str
    old: Record | None
    new: Record | None
    transition: str
    throughput: ThroughputChange | None = None

    @property
    def old_outcome(self) -> str | None:
        return self.old.outcome if self.old else None

    @property
    def new_outcome(self) -> str | None:
        return self.new.outcome if self.new else None

    @property
    def outcome_changed(self) -> bool:
        return self.transition not in (T_UNCHANGED,)

    @property
    def config_changed(self) -> bool:
        """Both sides recorded a ``config`` hash and they differ (the server config changed)."""
        if not self.old or not self.new:
            return False
        a, b = self.old.config, self.new.config
        return bool(a and b and a != b)

    @property
    def category_changed(self) -> bool:
        """Same outcome, other failure category (e.g. an xfail now failing for another reason)."""
        if not self.old or not self.new:
            return False
        return self.old.outcome == self.new.outcome and self.old.category != self.new.category

    @property
    def verdict(self) -> str | None:
        return self.throughput.verdict if self.throughput else None

    @property
    def needs_expectation_update(self) -> bool:
        """Unblocked and the new report still expects a failure (``expected`` is not ``pass``)."""
        return self.transition == T_UNBLOCKED and bool(self.new) and self.new.expected != "pass"  # type: ignore[union-attr]

    @property
    def is_noteworthy(self) -> bool:
        """Whether this record appears in any section of the diff."""
        return self.outcome_changed or self.verdict in (REGRESSED, IMPROVED, UNKNOWN_NOISE)


@dataclass(frozen=True, kw_only=True)
class StackChange:
    """One stack fingerprint key whose value differs between the reports."""

    key: str
    old: str
    new: str


@dataclass(frozen=True, kw_only=True)
class Diff:
    """Everything that changed between two reports, record by record."""

    old_path: str
    new_path: str
    old_label: str
    new_label: str
    old_engine: str
    new_engine: str
    old_stack: tuple[tuple[str, str], ...]
    new_stack: tuple[tuple[str, str], ...]
    stack_changes: tuple[StackChange, ...]
    records: tuple[RecordDiff, ...]
    notes: tuple[str, ...] = ()
    machines: MachineMatch | None = None  # the machines the reports were measured on (perfgate.report.machines)
    old_machine: tuple[tuple[str, str], ...] = ()  # machine.* and calib.* of each side
    new_machine: tuple[tuple[str, str], ...] = ()

    def _where(self, transition: str) -> tuple[RecordDiff, ...]:
        return tuple(r for r in self.records if r.transition == transition)

    def _verdict(self, verdict: str) -> tuple[RecordDiff, ...]:
        return tuple(r for r in self.records if r.verdict == verdict)

    @property
    def unblocked(self) -> tuple[RecordDiff, ...]:
        """Unblocked records whose expectation still says xfail: the profile must be updated (gate exit 3)."""
        return tuple(r for r in self._where(T_UNBLOCKED) if r.needs_expectation_update)

    @property
    def unblocked_expected(self) -> tuple[RecordDiff, ...]:
        """Unblocked records the new report already expects to pass: nothing to update."""
        return tuple(r for r in self._where(T_UNBLOCKED) if not r.needs_expectation_update)

    @property
    def newly_broken(self) -> tuple[RecordDiff, ...]:
        return self._where(T_NEWLY_BROKEN)

    @property
    def changed(self) -> tuple[RecordDiff, ...]:
        return self._where(T_CHANGED)

    @property
    def new(self) -> tuple[RecordDiff, ...]:
        return self._where(T_NEW)

    @property
    def gone(self) -> tuple[RecordDiff, ...]:
        return self._where(T_GONE)

    @property
    def regressed(self) -> tuple[RecordDiff, ...]:
        return self._verdict(REGRESSED)

    @property
    def improved(self) -> tuple[RecordDiff, ...]:
        return self._verdict(IMPROVED)

    @property
    def unknown_noise(self) -> tuple[RecordDiff, ...]:
        return self._verdict(UNKNOWN_NOISE)

    @property
    def outcome_changes(self) -> tuple[RecordDiff, ...]:
        """Records whose outcome differs (including new and gone ones)."""
        return tuple(r for r in self.records if r.outcome_changed)

    def sections(self) -> dict[str, tuple[RecordDiff, ...]]:
        """Section name → records, in display order."""
        return {
            "unblocked": self.unblocked,
            "unblocked-expected": self.unblocked_expected,
            "newly-broken": self.newly_broken,
            "regressed": self.regressed,
            "improved": self.improved,
            "changed": self.changed,
            "unknown-noise": self.unknown_noise,
            "new": self.new,
            "gone": self.gone,
        }

    @property
    def is_empty(self) -> bool:
        """No outcome change, no throughput move (beyond noise or of unknown noise), same stack."""
        return not self.stack_changes and not any(r.is_noteworthy for r in self.records)


def stack_changes(old: dict[str, str], new: dict[str, str]) -> tuple[StackChange, ...]:
    """Keys whose values differ; a key present on one side only reads as ``unknown`` on the other."""
    keys = list(old) + [k for k in new if k not in old]
    out = []
    for k in keys:
        a, b = old.get(k, "unknown"), new.get(k, "unknown")
        if a != b:
            out.append(StackChange(key=k, old=a, new=b))
    return tuple(out)


def diff(old: Report, new: Report) -> Diff:
    """Compare two reports record by record (matched by record key)."""
    keys = sorted(set(old.by_key) | set(new.by_key))
    rows = []
    for k in keys:
        o, n = old.by_key.get(k), new.by_key.get(k)
        transition = classify_transition(o.outcome if o else None, n.outcome if n else None)
        if transition == T_UNCHANGED and o and n and o.category != n.category:
            transition = T_CHANGED  # same outcome, another reason: xfail(cuda-graph-capture) -> xfail(oom)
        tp = compare_throughput(o, n) if o and n else None
        rows.append(RecordDiff(key=k, old=o, new=n, transition=transition, throughput=tp))
    notes = list(old.notes) + list(new.notes)
    if old.engine and new.engine and old.engine != new.engine:
        notes.append(f"the reports come from different engines: {old.engine} → {new.engine}")
    os_, ns = old.stack, new.stack
    return Diff(
        old_path=old.path,
        new_path=new.path,
        old_label=old.label,
        new_label=new.label,
        old_engine=old.engine,
        new_engine=new.engine,
        old_stack=tuple(os_.items()),
        new_stack=tuple(ns.items()),
        stack_changes=stack_changes(os_, ns),
        records=tuple(rows),
        notes=tuple(notes),
        machines=compare_machines(old, new),
        old_machine=tuple(old.machine.items()),
        new_machine=tuple(new.machine.items()),
    )
