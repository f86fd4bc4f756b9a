"""Concluding the records judged against a limit: the floor record (perfgate.measuring.floorcheck.floor_record), a
goodput search and the speculation crossover. Each is one call below the pytest layer (the verdict with every
property, and the floor to write: perfgate.measuring.goodputrecord and perfgate.measuring.crossover for the load
records); here the limit is looked up once (perfgate.measuring.floorcheck.limit_at, each limit at its own
tolerance), the floor is noted for ``--perfgate-update-baselines`` and the record concluded, its properties recorded
in one place (PerfRun.conclude)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from perfgate.measuring.crossover import CROSSOVER, Levels, crossover_record
from perfgate.measuring.floorcheck import Concluded, LimitAt, limit_at
from perfgate.measuring.goodputrecord import GOODPUT, Goodput, goodput_record

if TYPE_CHECKING:
    from perfgate.plugin.runner import PerfRun
    from perfgate.record import Case

__all__ = ["conclude", "conclude_goodput", "conclude_crossover"]


def _at(perf: PerfRun, case: Case, metric: str) -> LimitAt:
    """``[floors.<mode>] <metric>`` at the mode's own concurrency, at that limit's own tolerance."""
    p = perf.state.profile
    c = p.workload_for(case.mode).concurrency
    at = limit_at(p.floors.get(case.mode), metric, mode=case.mode, concurrency=c, workload_concurrency=c, limit=None,
                  tolerance=None, profile_path=str(p.path))
    return replace(at, where=f"{p.path}, [floors.{case.mode}] {metric}")


def conclude(perf: PerfRun, case: Case, c: Concluded, at: LimitAt, *, note: bool = True,
             stored_floor: str | None = None) -> None:
    """The one end of a record judged against its limit (the floor record, a goodput search, a crossover): the floor
    its one call returned noted for ``--perfgate-update-baselines`` (``note``: unless the test gave its own limit),
    then the record concluded, its properties recorded there, in one place (PerfRun.conclude; ``stored_floor``: the
    stored limit a record that cannot check it loses, perfgate.measuring.verdict.lost_verdict)."""
    from perfgate.measuring.ledger import note_floor

    if note and c.floor is not None:
        note_floor(perf.state, case.mode, at.table, at.stored, c.floor)
    perf.conclude(case, c.verdict, stored_floor=stored_floor)


def conclude_goodput(perf: PerfRun, case: Case, g: Goodput) -> None:
    """A goodput search against ``[floors.<mode>] goodput_rps`` (perfgate.measuring.goodputrecord.goodput_record)."""
    at = _at(perf, case, GOODPUT)
    conclude(perf, case, goodput_record(g, at=at, update_hint=perf.update_command()), at)


def conclude_crossover(perf: PerfRun, case: Case, levels: Levels) -> None:
    """The baseline's levels (``levels.base`` None), or a speculative mode's crossover against the baseline's levels
    it was measured with, on ``[floors.<mode>] crossover`` (perfgate.measuring.crossover.crossover_record)."""
    at = _at(perf, case, CROSSOVER)
    conclude(perf, case, crossover_record(levels, at=at, update_hint=perf.update_command()), at)
