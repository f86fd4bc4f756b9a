"""Concluding the load records: a goodput search, and the speculation crossover. Each is one call below the pytest
layer (perfgate.measuring.loadverdict: the verdict with every property, and the floor to write); here the limit is
looked up once (perfgate.measuring.floorcheck.limit_at, each limit at its own tolerance), the floor is noted for
``--perfgate-update-baselines`` and the record concluded, its properties recorded in one place (PerfRun.conclude)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from perfgate.measuring.floorcheck import LimitAt, limit_at
from perfgate.measuring.loadrecord import CROSSOVER, GOODPUT
from perfgate.measuring.loadverdict import Concluded, crossover_record, goodput_record

if TYPE_CHECKING:
    from perfgate.plugin.loadrun import Goodput, Levels
    from perfgate.plugin.runner import PerfRun
    from perfgate.record import Case

__all__ = ["conclude_goodput", "conclude_crossover"]


def _at(perf: PerfRun, case: Case, metric: str) -> LimitAt:
    """``[floors.<mode>] <metric>`` at the mode's own concurrency, at that limit's own tolerance."""
    p = perf.state.profile
    c = p.workload_for(case.mode).concurrency
    at = limit_at(p.floors.get(case.mode), metric, mode=case.mode, concurrency=c, workload_concurrency=c, limit=None,
                  tolerance=None, profile_path=str(p.path))
    return replace(at, where=f"{p.path}, [floors.{case.mode}] {metric}")


def _conclude(perf: PerfRun, case: Case, c: Concluded, at: LimitAt) -> None:
    """Note the floor the record would write, then conclude it (its properties recorded there, in one place)."""
    from perfgate.measuring.ledger import note_tolerance, note_value

    f = c.floor
    if f is not None:
        note_value(perf.state, case.mode, f.metric, at.stored, f.new, n=f.n, cv=f.cv, why=f.why)
        if f.starts is not None and not f.why and perf.state.settings.update_baselines:
            note_tolerance(perf.state, case.mode, f.metric, starts=f.starts)
    perf.conclude(case, c.verdict)


def conclude_goodput(perf: PerfRun, case: Case, g: Goodput) -> None:
    """A goodput search against ``[floors.<mode>] goodput_rps`` (perfgate.measuring.loadverdict.goodput_record)."""
    at = _at(perf, case, GOODPUT)
    _conclude(perf, case, goodput_record(g.search, g.slo, trials=g.trials, across=g.across, at=at,
                                         update_hint=perf.update_command()), at)


def conclude_crossover(perf: PerfRun, case: Case, base: Levels, spec: Levels | None) -> None:
    """The baseline's levels, or a speculative mode's crossover against them on ``[floors.<mode>] crossover``
    (perfgate.measuring.loadverdict.crossover_record)."""
    at = _at(perf, case, CROSSOVER)
    _conclude(perf, case, crossover_record(base.loads, base.measurements, spec.measurements if spec else None,
                                           mode=case.mode, base_mode=base.mode, at=at,
                                           update_hint=perf.update_command()), at)
