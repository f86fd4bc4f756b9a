"""Many records of a report moving together (``perfgate gate``/``diff``): an environment shift, named with its
evidence (the machines, their calibration, a disturbed host); with that evidence and neither the stack nor the
moved records' configs changed, their regressions and improvements are undecided (docs/gate.md)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from perfgate.host.conditions import STATE as HOST_STATE
from perfgate.host.conditions import is_quiet
from perfgate.measuring.judge import Decision
from perfgate.report.machines import MachineMatch
from perfgate.report.records import Report

#: report.diff's RecordDiff (its key and throughput comparison); named loosely here, since diff imports this module
RecordDiff = Any

__all__ = ["Shift", "environment_shift", "shifted", "SHIFT_MIN_RECORDS", "SHIFT_SHARE", "SHIFT_AGREEMENT"]


#: an environment shift needs at least this many judged records ...
SHIFT_MIN_RECORDS = 3
#: ... this share of them moved the same way beyond their min effect ...
SHIFT_SHARE = 0.75
#: ... and those moves within this fraction of their median move (in log terms) of each other
SHIFT_AGREEMENT = 0.5


@dataclass(frozen=True, kw_only=True)
class Shift:
    """Many records of a report moved together: one cause under all of them (the environment, or the stack)."""

    keys: tuple[str, ...]  # the records that moved together
    judged: int  # the records judged on a number
    goodness: float  # their median goodness (new/old for throughput, old/new for a latency; below 1: worse)
    evidence: tuple[str, ...]  # what differs between the sides' environments
    stack_changed: bool

    configs_changed: bool = False  # a moved record's config (flags, env) differs between the sides

    @property
    def environmental(self) -> bool:
        """The environment is the likely cause: neither the stack nor a moved record's config changed, and the
        sides' environments differ on record (the machine, its calibration, a disturbed host). Without such
        evidence the decisions stand: a regression is never set aside on the pattern alone."""
        return not self.stack_changed and not self.configs_changed and bool(self.evidence)

    def describe(self) -> str:
        way = "slower" if self.goodness < 1 else "faster"
        head = (f"{len(self.keys)} of {self.judged} judged records moved together, {way} (median x{self.goodness:.4f} "
                "in each metric's good direction)")
        if self.stack_changed or self.configs_changed:
            what = "the stack" if self.stack_changed else "their configs"
            return head + f": {what} changed, so it may be {what}; if not, the environment" + (
                f" ({'; '.join(self.evidence)})" if self.evidence else "")
        if not self.evidence:
            return (head + ": nothing recorded differs between the sides' environments (the same machine, its "
                    "calibration, a quiet host), so the decisions stand; if nothing else changed, re-run both sides")
        return ("environment shift: " + head + ", the stack did not change"
                + (f"; evidence: {'; '.join(self.evidence)}" if self.evidence else "")
                + "; their regressions and improvements are undecided: re-run both sides on one quiet machine")


def environment_shift(rows: list[RecordDiff], old: Report, new: Report, machines: MachineMatch | None,
                      changes: tuple[object, ...]) -> Shift | None:
    """Whether many judged records moved the same way by about as much (see the constants), and the evidence of
    what moved under them: the machines, their calibration, and the host's state (``host.state``)."""
    judged: list[tuple[str, float, float]] = []
    for r in rows:
        tp = r.throughput
        if tp is None or tp.judgement is None or tp.goodness is None or tp.goodness <= 0:
            continue
        judged.append((r.key, math.log(tp.goodness), tp.judgement.min_effect))
    if len(judged) < SHIFT_MIN_RECORDS:
        return None
    for sign in (-1, 1):
        moved = [(k, g) for k, g, eff in judged if sign * g > math.log1p(eff)]
        if len(moved) < SHIFT_SHARE * len(judged):
            continue
        mid = statistics.median(g for _, g in moved)
        if sum(1 for _, g in moved if abs(g - mid) <= SHIFT_AGREEMENT * abs(mid)) < SHIFT_SHARE * len(judged):
            continue
        evidence = []
        if machines is not None and machines.same is False:
            evidence.append(machines.describe())
        elif machines is not None and machines.same and machines.differences:
            evidence.append(machines.describe())
        for name, ratio in (("HBM bandwidth", machines.hbm_ratio if machines else None),
                            ("GEMM throughput", machines.gemm_ratio if machines else None)):
            if ratio is not None and abs(ratio - 1) > 0.01:
                evidence.append(f"calibrated {name} x{ratio:.3f}")
        for side, rep in (("OLD", old), ("NEW", new)):
            states = {r.prop(HOST_STATE) for r in rep.records if not is_quiet(r.prop(HOST_STATE))}
            if states:
                evidence.append(f"{side} {sum(1 for r in rep.records if r.prop(HOST_STATE) in states)} record(s) "
                                f"measured disturbed ({sorted(states)[0]})")
        keys = tuple(k for k, _ in moved)
        configs = any(o.prop("config") != n.prop("config") for k in keys
                      if (o := old.by_key.get(k)) is not None and (n := new.by_key.get(k)) is not None)
        return Shift(keys=keys, judged=len(judged), goodness=math.exp(mid), evidence=tuple(evidence),
                     stack_changed=bool(changes), configs_changed=configs)
    return None


def shifted(r: RecordDiff, shift: Shift) -> RecordDiff:
    """A record that moved with an environment shift: its regression or improvement is undecided."""
    tp = r.throughput
    if tp is None or tp.judgement is None or tp.judgement.decision not in (Decision.REGRESSED, Decision.IMPROVED):
        return r
    j = replace(tp.judgement, decision=Decision.UNDECIDED,
                detail=f"{tp.judgement.detail}; would be {tp.judgement.decision.value}, but it moved with "
                       f"{len(shift.keys)} of {shift.judged} records (environment shift)",
                needs="re-run both sides on one quiet machine (an environment shift moved many records at once)")
    return replace(r, throughput=replace(tp, verdict=j.decision.value, judgement=j, why=j.detail))
