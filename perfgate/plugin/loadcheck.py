"""Concluding the load records: a goodput search, and the speculation crossover, recorded as JUnit
properties (names below) and judged against ``[floors.<mode>]`` in their direction (higher is better),
through the profile's expectations like any record."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome
from perfgate.measuring.ledger import note_value
from perfgate.measuring.loadrecord import (
    ARRIVAL,
    CROSSOVER,
    CROSSOVER_LEVELS,
    GOODPUT,
    GOODPUT_HIGH,
    GOODPUT_LOW,
    GOODPUT_MIN_REQUESTS,
    LOAD_LEVELS,
    SEND_LAG_MS_P99,
    SLO,
    SLO_ATTAINMENT,
    SLO_CONFIDENCE,
    baseline_levels,
    crossover_of,
    crossover_properties,
    crossover_text,
    level_json,
    search_properties,
    search_text,
    starts_properties,
    starts_spread,
    starts_text,
)
from perfgate.measuring.loadrecord import GOODPUT_UNRESOLVED as GOODPUT_UNRESOLVED  # perfgate.plugin.terminal
from perfgate.measuring.loadrecord import max_running as max_running  # tests/test_crossover.py
from perfgate.measuring.metrics import Stat
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.record import DIRECTION, LIMIT, METRIC, TOLERANCE

if TYPE_CHECKING:
    from perfgate.measuring.goodput import LoadLevel
    from perfgate.measuring.goodputfloor import AcrossStarts, Interval
    from perfgate.plugin.loadrun import Goodput, Levels
    from perfgate.plugin.runner import PerfRun
    from perfgate.record import Case

# the records' property names: perfgate.measuring.loadrecord


def _limit(perf: PerfRun, case: Case, metric: str) -> tuple[float | None, float, str]:
    """The mode's limit of ``metric``, its tolerance and where it is written (perfgate.profiles.Profile.limit_of)."""
    p = perf.state.profile
    return (*p.limit_of(case.mode, metric), f"{p.path}, [floors.{case.mode}] {metric}")


def _against_floor(perf: PerfRun, case: Case, metric: str, got: float, what: str, *, ceiling: float | None = None,
                   noise: Stat | None = None, max_cv: float | None = None, new_floor: float | None = None) -> Verdict:
    """The record's value against ``[floors.<mode>] <metric>``: the one judge of a limit
    (:func:`perfgate.measuring.verdict.judge_limit`), with the properties every limit writes; under
    ``--perfgate-update-baselines`` ``new_floor`` (default: the value) is the floor written, unless the verdict
    is inconclusive or the record failed for another reason than being slower."""
    lim, tol, where = _limit(perf, case, metric)
    if lim is not None:
        perf.record(LIMIT, lim)
        perf.record(TOLERANCE, tol)
    v = judge_limit(metric, got, lim, tol, noise=noise, max_cv=max_cv, where=where, what=what, highest=ceiling,
                    update_hint=perf.update_command())
    _note(perf, case, metric, lim, v, got if new_floor is None else new_floor, n=noise.n if noise is not None else 0,
          cv=noise.cv if noise is not None else None,
          why=f"no {metric} above zero to make a floor of" if got <= 0 else "")
    return v


def _note(perf: PerfRun, case: Case, metric: str, lim: float | None, v: Verdict, new: float, *, n: int,
          cv: float | None = None, why: str = "", starts: tuple[float, ...] | None = None) -> None:
    """Under ``--perfgate-update-baselines``: ``new`` is the floor written, unless the verdict is inconclusive,
    the record failed for another reason than being slower, or ``why`` says it cannot be one. With ``starts``
    (goodput's per-start values, empty for one start) the floor gets ``<metric>_tolerance`` beside it, from the
    noise between starts (:func:`perfgate.measuring.ledger.note_tolerance`)."""
    if v.outcome == Outcome.INCONCLUSIVE:
        why = v.message.removeprefix("inconclusive: ")
    elif v.outcome == Outcome.FAIL and v.category != Category.SLOWER_THAN_BASELINE:
        why = f"the record failed ({v.category})"
    elif new <= 0 and not why:
        why = f"no {metric} above zero to make a floor of"
    note_value(perf.state, case.mode, metric, lim, new, n=n, cv=cv, why=why)
    if starts is not None and not why and perf.state.settings.update_baselines:
        from perfgate.measuring.ledger import note_tolerance

        note_tolerance(perf.state, case.mode, metric, starts=starts)


def _metric(perf: PerfRun, metric: str) -> None:
    """What the record is judged on, whatever its outcome (an inconclusive record says it too)."""
    perf.record(METRIC, metric)
    perf.record(DIRECTION, "higher")


def conclude_goodput(perf: PerfRun, case: Case, g: Goodput) -> None:
    """Record a goodput search (its interval, every level) and conclude the record on its floor
    (:func:`perfgate.measuring.goodputfloor.floor_verdict`)."""
    s, slo = g.search, g.slo
    _metric(perf, GOODPUT)
    perf.record(SLO, slo.describe())
    perf.record(SLO_ATTAINMENT, slo.attainment)
    perf.record(SLO_CONFIDENCE, slo.confidence)
    perf.record(GOODPUT_MIN_REQUESTS, slo.min_requests)
    perf.record(ARRIVAL, f"{slo.arrival}, {slo.requests} requests a trial after {slo.warmup_requests} of warm-up, "
                         f"seed {slo.seed}")
    perf.record("n", g.trials)
    lags = [lv.send_lag_ms_p99 for lv in s.levels if lv.send_lag_ms_p99 is not None]
    if lags:
        perf.record(SEND_LAG_MS_P99, max(lags))
    if g.across is not None:
        return _conclude_starts(perf, case, g.across, what_slo=slo.describe())
    perf.record(LOAD_LEVELS, json.dumps([level_json(lv) for lv in s.levels], separators=(",", ":")))
    if s.inconclusive is not None:
        return _conclude_behind(perf, case, s.inconclusive)
    for k, val in search_properties(s).items():
        perf.record(k, val)
    # a floor written from this run is the interval's low end (shown met within the SLOs), as the crossover's is
    # its CI's low end: a level passed or failed at the knee is the levels' noise, not a change of the server
    _conclude_on_floor(perf, case, s, what=search_text(s),
                       n=s.best.requests if s.best is not None else 0, cv=None, starts=(),
                       why="" if s.best is not None else "no level passed the SLOs: no goodput to make a floor of")


def _conclude_on_floor(perf: PerfRun, case: Case, iv: Interval, *, what: str, n: int, cv: float | None,
                       starts: tuple[float, ...], why: str) -> None:
    """Record the interval's ends and conclude the record on ``[floors.<mode>] goodput_rps``
    (:func:`perfgate.measuring.goodputfloor.floor_verdict`); under ``--perfgate-update-baselines`` the floor
    written is the low end, with the tolerance the starts' spread gives (``starts``)."""
    from perfgate.measuring.goodputfloor import floor_verdict

    perf.record(GOODPUT, iv.low)
    perf.record(GOODPUT_LOW, iv.low)
    if iv.high is not None:
        perf.record(GOODPUT_HIGH, iv.high)
    perf.record(GOODPUT_UNRESOLVED, ",".join(f"{r:g}" for r in sorted({lv.rate for lv in iv.unresolved})))
    lim, tol, src = _limit(perf, case, GOODPUT)
    if lim is not None:
        perf.record(LIMIT, lim)
        perf.record(TOLERANCE, tol)
    v = floor_verdict(iv, lim, tol, where=src, update_hint=perf.update_command(), what=what)
    _note(perf, case, GOODPUT, lim, v, iv.low, n=n, cv=cv, why=why, starts=starts)
    perf.conclude(case, v)


def _conclude_starts(perf: PerfRun, case: Case, a: AcrossStarts, *, what_slo: str) -> None:
    """A goodput record over N server starts: every start's interval and levels, the starts' means as the
    interval the floor is judged on, their spread as the goodput noise between starts; a floor written from it
    is the mean of the starts' low ends, with the tolerance that noise gives (``goodput_rps_tolerance``)."""
    for k, val in starts_properties(a).items():
        perf.record(k, val)
    if a.inconclusive is not None:
        return _conclude_behind(perf, case, a.inconclusive)
    cv, spread = starts_spread(a)
    for k, val in spread.items():
        perf.record(k, val)
    what = starts_text(a, cv, what_slo=what_slo)
    passed = all(s.best is not None for s in a.searches)
    _conclude_on_floor(perf, case, a, what=what, n=len(a.searches), cv=cv, starts=a.lows,
                       why="" if passed else "a start passed no level of the SLOs: no goodput to make a floor of")


def _conclude_behind(perf: PerfRun, case: Case, lv: LoadLevel) -> None:
    """A level whose sender fell behind: the search's answer rests on the client, so no verdict."""
    perf.conclude(case, Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.CLIENT_BEHIND,
                                message=f"inconclusive: {lv.why}"))


def conclude_crossover(perf: PerfRun, case: Case, base: Levels, spec: Levels | None) -> None:
    """The baseline's record: its levels, recorded (pass). A speculative mode's: the crossover against
    them, judged against ``[floors.<mode>] crossover`` (higher is better)."""
    if spec is None:
        perf.record(CROSSOVER_LEVELS, baseline_levels(base.loads, base.measurements))
        perf.conclude(case, Verdict(outcome=Outcome.PASS,
                                    message=f"the baseline's output tok/s at {len(base.loads)} loads "
                                            f"({', '.join(map(str, base.loads))} streams), recorded"))
        return
    x, pred = crossover_of(base.loads, base.measurements, spec.measurements)
    _metric(perf, CROSSOVER)
    for k, val in crossover_properties(x, pred, base_mode=base.mode).items():
        perf.record(k, val)
    what = crossover_text(x, pred, mode=case.mode, base_mode=base.mode, loads=base.loads)
    # a floor written from this run is the CI's low end: the crossover's own interval is several per cent wide,
    # wider than any tolerance, so its median as the floor would fail half the runs of an unchanged stack
    perf.conclude(case, _against_floor(perf, case, CROSSOVER, x.value, what,
                                       ceiling=float(base.loads[-1]) if x.result == "always" else None,
                                       new_floor=x.ci_low if x.ci_low is not None else x.value))

