"""Compare two reports: ``diff(old, new) -> Diff`` (pure; no I/O).

Sections:

- *unblocked*: ``xfail`` → ``pass`` / ``xpass`` (a backend started working),
- *newly broken*: ``pass`` / ``xpass`` → ``fail`` / ``error``,
- *changed*: every other outcome change (``pass`` → ``xfail``, ``fail`` → ``pass``, ...), and
  the same outcome with another failure category (``xfail(cuda-graph-capture)`` → ``xfail(oom)``),
- *regressed* / *improved*: decode throughput (``tok_s``), or the metric a record names (``metric``:
  a user's ``ttft_ms``, a latency, regresses when it rises), moved beyond the noise it crosses and beyond
  the metric's practical floor (``min_effect``),
- *undecided*: it moved, but the noise it crosses could hide it (it says what would decide it),
- *not comparable*: the record's server config changed (its ``config`` hash), so its numbers are not a
  regression or an improvement of the same thing,
- *new* / *gone*: records present on one side only,
- the stack fingerprint of each side and the keys that changed,
- the machine of each side (:func:`perfgate.report.machines.compare_machines`: same, different, unknown).

Every numeric comparison is one call of :mod:`perfgate.measuring.judge`, at the level the two records cross: the same
machine (both carry one ``machine.id``) is judged against the noise between server starts, anything else
against the noise between machines. That noise comes, in this order, from the records' own repeated starts
(``start_values``, ``--perfgate-starts``), from a history of reports (:mod:`perfgate.report.noise`), or from
the documented priors of :mod:`perfgate.measuring.judge` (and says so). A record's within-start interval (its trials)
is added to it but never decides alone; a record measured with fewer than ``perfgate.measuring.metrics.MIN_TRIALS``
trials, or with no interval at all, is *undecided*.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

from perfgate.host.conditions import STATE as HOST_STATE
from perfgate.host.conditions import is_quiet
from perfgate.measuring.judge import Decision, Judgement, Level, default_min_effect, discounted, unpaired
from perfgate.measuring.metrics import METRICS
from perfgate.profiles.noise import prior_cv
from perfgate.record import MACHINE_ID  # MACHINE_ID: the property naming a record's machine
from perfgate.report.machines import MachineMatch, compare_machines
from perfgate.report.noise import Band, start_values
from perfgate.report.records import Record, Report
from perfgate.report.shift import environment_shift, shifted

PASSING = frozenset({"pass", "xpass"})
BROKEN = frozenset({"fail", "error"})

# verdicts of a metric comparison: the judge's decisions, and "unchanged" for identical figures
REGRESSED = Decision.REGRESSED.value
IMPROVED = Decision.IMPROVED.value
SAME = Decision.SAME.value
UNDECIDED = Decision.UNDECIDED.value
NOT_COMPARABLE = Decision.NOT_COMPARABLE.value
UNCHANGED = "unchanged"

# transitions of a record
T_UNCHANGED = "unchanged"
T_UNBLOCKED = "unblocked"
T_NEWLY_BROKEN = "newly-broken"
T_CHANGED = "changed"
T_NEW = "new"
T_GONE = "gone"

@dataclass(frozen=True, kw_only=True)
class Judging:
    """How a diff judges numbers: the practical floor per metric, the confidence, and noise bands from history.

    ``min_effect`` maps a metric name (or ``"default"``) to a fraction; a metric it does not name takes
    :func:`perfgate.measuring.judge.default_min_effect`.
    ``bands`` maps a record id to its :class:`~perfgate.report.noise.Band`; ``notes`` say what the history left
    out as a whole (the report being judged), and the diff carries them.
    """

    min_effect: Mapping[str, float] = field(default_factory=dict)
    confidence: float = 0.95
    bands: Mapping[str, Band] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def min_effect_for(self, metric: str, higher_is_better: bool) -> float:
        return default_min_effect(metric, higher_is_better=higher_is_better, floors=self.min_effect)


@dataclass(frozen=True, kw_only=True)
class MetricChange:
    """Old → new of one record's metric and the judge's decision on it."""

    old: float
    new: float
    verdict: str  # a Decision's text, or "unchanged"
    judgement: Judgement | None = None  # None: identical figures, or the configs differ
    old_ci: tuple[float, float] | None = None
    new_ci: tuple[float, float] | None = None
    metric: str = "tok_s"  # what moved (a record of a user's test may be judged on a latency)
    higher_is_better: bool = True
    machines: str = "unknown"  # "same" | "different" | "unknown": the level the comparison crossed
    why: str = ""  # why it has no judgement (config changed), or the judgement's detail
    band: Band | None = None  # the history band it was judged with (its reports: Band.provenance), if any

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

    @property
    def needs(self) -> str:
        return self.judgement.needs if self.judgement else ""


def same_machine(old: Record, new: Record) -> bool | None:
    """Both records name one machine (True), two (False), or either names none (None: unidentified)."""
    a, b = old.prop(MACHINE_ID), new.prop(MACHINE_ID)
    if not a or not b or "unknown" in (a, b):
        return None
    return a == b


def compare_metric(old: Record, new: Record, judging: Judging | None = None) -> MetricChange | None:
    """Judge the records' metric (``tok_s`` unless the record names another, e.g. a user's ``ttft_ms``) in its
    direction; ``None`` unless both have it."""
    judging = judging or Judging()
    metric = new.metric or old.metric
    a, b = old.num(metric), new.num(metric)
    if a is None or b is None:
        return None
    up = METRICS[metric].higher_is_better if metric in METRICS else new.prop("direction", "higher") != "lower"
    sm = same_machine(old, new)
    machines = {True: "same", False: "different", None: "unknown"}[sm]
    change = partial(MetricChange, old=a, new=b, old_ci=old.metric_ci(metric), new_ci=new.metric_ci(metric),
                     metric=metric, higher_is_better=up, machines=machines)  # typed, unlike a dict of keywords
    if old.config and new.config and old.config != new.config:
        return change(verdict=NOT_COMPARABLE, why=f"config {old.config} → {new.config}: another server config, so "
                      "not a change of the same thing")
    if a == b and start_values(old, metric) == start_values(new, metric):
        return change(verdict=UNCHANGED)
    va, vb = start_values(old, metric), start_values(new, metric)
    wa, wb = old.figure_cv(metric), new.figure_cv(metric)  # each start's own noise, from its trials
    min_effect = judging.min_effect_for(metric, up)
    if min(a, b) <= 0 or ((wa is None or wb is None) and (len(va) < 2 or len(vb) < 2)):
        j = Judgement(decision=Decision.UNDECIDED, ratio=b / a if a else None, ci=None, level=Level.TRIALS,
                      noise_cv=None, noise_source="none", min_effect=min_effect, n=min(len(va), len(vb)),
                      detail="the trials' noise is unknown (no interval, or fewer trials than an interval needs)",
                      needs="record it with at least 3 trials (and its interval) on both sides")
        return change(verdict=j.decision.value, judgement=j, why=j.detail)
    within = math.sqrt(((wa or 0.0) ** 2 + (wb or 0.0) ** 2) / 2)
    band = judging.bands.get(old.id) or judging.bands.get(new.id)
    # each metric's own prior (perfgate.profiles.noise): a p99 latency does not borrow decode tok/s's calm
    simulated = "sim" in (old.prop("engine"), new.prop("engine"))
    gpus = {old.gpu, new.gpu}  # each side's GPU kind; two kinds: the wider prior
    start_prior = max(prior_cv(metric, "starts", simulated=simulated, gpu=g) for g in gpus)
    machine_prior = max(prior_cv(metric, "machines", simulated=simulated, gpu=g) for g in gpus)
    if sm:
        cv, source = (band.start_cv, "history") if band and band.start_cv is not None else (None, "prior")
        if cv is not None:
            cv = math.hypot(cv, within)
        elif len(va) < 2 or len(vb) < 2:
            cv = math.hypot(start_prior, within)
        j = unpaired(va, vb, level=Level.STARTS, higher_is_better=up, min_effect=min_effect,
                     confidence=judging.confidence, band_cv=cv, band_source=source)
    else:
        cv, source = (band.machine_cv, "history") if band and band.machine_cv is not None else (machine_prior, "prior")
        start = band.start_cv if band and band.start_cv is not None else start_prior
        j = unpaired(va, vb, level=Level.MACHINES, higher_is_better=up, min_effect=min_effect,
                     confidence=judging.confidence, band_cv=cv, band_source=source,
                     start_cv=math.hypot(start, within),
                     machine_df=max(1, band.machines - 1) if band and band.machine_cv is not None else 0)
    used = band if j.noise_source == "history" else None  # not when the record's own starts or the prior judged
    j = unquiet(j, old, new)
    return change(verdict=j.decision.value, judgement=j, why=j.detail, band=used)


def unquiet(j: Judgement, old: Record, new: Record) -> Judgement:
    """A change measured on a disturbed host or a throttled GPU (either side's ``host.state``,
    :mod:`perfgate.host.conditions`) is undecided, never regressed or improved
    (:func:`perfgate.measuring.judge.discounted`)."""
    return discounted(j, [f"{side} {r.prop(HOST_STATE)}" for side, r in (("OLD", old), ("NEW", new))
                          if not is_quiet(r.prop(HOST_STATE))])


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
    throughput: MetricChange | None = None

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
        return self.transition == T_UNBLOCKED and self.new is not None and self.new.expected != "pass"

    @property
    def is_noteworthy(self) -> bool:
        """Whether this record appears in any section of the diff."""
        return self.outcome_changed or self.verdict in (REGRESSED, IMPROVED, UNDECIDED, NOT_COMPARABLE)


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
    def undecided(self) -> tuple[RecordDiff, ...]:
        return self._verdict(UNDECIDED)

    @property
    def not_comparable(self) -> tuple[RecordDiff, ...]:
        return self._verdict(NOT_COMPARABLE)

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
            "undecided": self.undecided,
            "not-comparable": self.not_comparable,
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


def history_notes(rows: list[RecordDiff]) -> list[str]:
    """One line per distinct set of history reports that judged records' noise came from: which reports the band
    used and which it left out (a step, outliers), with the records judged on it."""
    by_provenance: dict[str, list[str]] = {}
    for r in rows:
        band = r.throughput.band if r.throughput else None
        if band is not None:
            by_provenance.setdefault(band.provenance(), []).append(r.key)
    out = []
    for text, keys in by_provenance.items():
        who = keys[0] if len(keys) == 1 else f"{len(keys)} records ({keys[0]}, ...)"
        out.append(f"noise from history for {who}: {text}")
    return out


def unused_history_notes(rows: list[RecordDiff], judging: Judging | None) -> list[str]:
    """What the history given did not judge, and why: the records whose runs in it were all left out (measured on a
    busy host, before a step, outliers), so their prior judged them; one line per reason."""
    if judging is None or not judging.bands:
        return []
    unused: dict[str, list[str]] = {}
    for r in rows:
        rec = r.new or r.old
        band = judging.bands.get(rec.id) if rec is not None else None
        tp = r.throughput
        if band is None or tp is None or tp.band is not None or tp.judgement is None:
            continue
        if tp.judgement.noise_source not in ("prior", "starts+prior"):
            continue
        why = (f"all {len(band.disturbed)} of their run(s) in it measured on a busy host or a throttled GPU "
               f"(host.state), left out" if band.disturbed and not band.used else band.provenance())
        unused.setdefault(why, []).append(r.key)
    return [f"history not used for {len(keys)} record(s) ({keys[0]}{', ...' if len(keys) > 1 else ''}): {why}; "
            f"their noise prior judged them" for why, keys in unused.items()]


def diff(old: Report, new: Report, judging: Judging | None = None) -> Diff:
    """Compare two reports record by record (matched by record key), numbers judged by ``judging``."""
    keys = sorted(set(old.by_key) | set(new.by_key))
    rows = []
    for k in keys:
        o, n = old.by_key.get(k), new.by_key.get(k)
        transition = classify_transition(o.outcome if o else None, n.outcome if n else None)
        if transition == T_UNCHANGED and o and n and o.category != n.category:
            transition = T_CHANGED  # same outcome, another reason: xfail(cuda-graph-capture) -> xfail(oom)
        tp = compare_metric(o, n, judging) if o and n else None
        rows.append(RecordDiff(key=k, old=o, new=n, transition=transition, throughput=tp))
    notes = list(old.notes) + list(new.notes) + list(judging.notes if judging else ())
    notes += history_notes(rows)
    notes += unused_history_notes(rows, judging)
    if old.engine and new.engine and old.engine != new.engine:
        notes.append(f"the reports come from different engines: {old.engine} → {new.engine}")
    os_, ns = old.stack, new.stack
    changes, machines = stack_changes(os_, ns), compare_machines(old, new)
    shift = environment_shift(rows, old, new, machines, changes)
    if shift is not None:
        notes.append(shift.describe())
        if shift.environmental:
            moved = set(shift.keys)
            rows = [shifted(r, shift) if r.key in moved else r for r in rows]
    return Diff(
        old_path=old.path,
        new_path=new.path,
        old_label=old.label,
        new_label=new.label,
        old_engine=old.engine,
        new_engine=new.engine,
        old_stack=tuple(os_.items()),
        new_stack=tuple(ns.items()),
        stack_changes=changes,
        records=tuple(rows),
        notes=tuple(notes),
        machines=machines,
        old_machine=tuple(old.machine.items()),
        new_machine=tuple(new.machine.items()),
    )
