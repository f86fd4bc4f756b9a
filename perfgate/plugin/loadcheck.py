"""Concluding the load records: a goodput search, and the speculation crossover, recorded as JUnit
properties (names below) and judged against ``[floors.<mode>]`` in their direction (higher is better),
through the profile's expectations like any record."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome
from perfgate.measuring.loadrecord import (
    CROSSOVER,
    CROSSOVER_LEVELS,
    baseline_levels,
    crossover_of,
    crossover_properties,
    crossover_text,
    level_json,
)
from perfgate.measuring.loadrecord import max_running as max_running  # tests/test_crossover.py
from perfgate.measuring.metrics import Stat
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.plugin.ledger import note_value
from perfgate.profiles import DEFAULT_TOLERANCE
from perfgate.record import DIRECTION, LIMIT, METRIC, TOLERANCE

if TYPE_CHECKING:
    from perfgate.measuring.goodput import LoadLevel
    from perfgate.measuring.goodputfloor import AcrossStarts, Interval
    from perfgate.plugin.loadrun import Goodput, Levels
    from perfgate.plugin.runner import PerfRun
    from perfgate.record import Case

# goodput records (kind "goodput"): goodput as an interval (perfgate.measuring.goodput.search)
GOODPUT = "goodput_rps"  # the interval's low end: good requests per second at the highest level passed
GOODPUT_LOW = "goodput_rps_low"  # the same figure, under the interval's name (0: no level passed)
GOODPUT_HIGH = "goodput_rps_high"  # the interval's high end: the rate achieved at the lowest level failed
GOODPUT_RATE = "goodput_rate"  # the highest level passed (offered, req/s)
GOODPUT_RATE_NEXT = "goodput_rate_next"  # the lowest level failed (absent: none failed)
GOODPUT_RESOLUTION = "goodput_resolution"  # (next - rate) / rate
GOODPUT_UNRESOLVED = "goodput_unresolved"  # the levels between the two left unresolved, comma-separated (req/s)
GOODPUT_MIN_REQUESTS = "goodput_min_requests"  # the fewest requests with which a level can pass (the sizing rule)
SLO = "slo"  # the SLOs, as text
SLO_ATTAINMENT = "slo_attainment"  # the required attainment
SLO_CONFIDENCE = "slo_confidence"  # the one-sided confidence of each bound a level is decided on
ATTAINMENT = "attainment"  # the attainment at goodput_rate, pooled over its requests
ATTAINMENT_LOW = "attainment_low"  # its Clopper-Pearson lower bound
LEVEL_REQUESTS = "level_requests"  # the requests at goodput_rate, pooled over its trials
LIMITING_METRIC = "limiting_metric"  # the bound most requests missed at goodput_rate_next
SEND_LAG_MS_P99 = "send_lag_ms_p99"  # the worst level's send lag p99 (ms, server time)
ARRIVAL = "arrival"
LOAD_LEVELS = "load_levels"  # JSON: every level measured, in order (rate, decision, requests, attainment, ...)
GOODPUT_STARTS = "goodput_starts"  # JSON, with --perfgate-starts N: per start, its interval, levels and requests
# crossover records (kind "crossover"): perfgate.measuring.loadrecord names them


def _limit(perf: PerfRun, case: Case, metric: str) -> tuple[float | None, float, str]:
    """The mode's limit of ``metric``, its tolerance (the limit's own, ``Floor.tolerance_for``: never the decode
    floor's for goodput) and where it is written."""
    p = perf.state.profile
    fl = p.floors.get(case.mode)
    lim = fl.limit(metric) if fl is not None else None
    if fl is None:
        tol = DEFAULT_TOLERANCE
    elif metric == GOODPUT:
        tol = fl.tolerance_for(metric)
    else:
        tol = fl.tolerance
    return lim, tol, f"{p.path}, [floors.{case.mode}] {metric}"


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
    noise between starts (:func:`perfgate.plugin.ledger.note_tolerance`)."""
    if v.outcome == Outcome.INCONCLUSIVE:
        why = v.message.removeprefix("inconclusive: ")
    elif v.outcome == Outcome.FAIL and v.category != Category.SLOWER_THAN_BASELINE:
        why = f"the record failed ({v.category})"
    elif new <= 0 and not why:
        why = f"no {metric} above zero to make a floor of"
    note_value(perf.state, case.mode, metric, lim, new, n=n, cv=cv, why=why)
    if starts is not None and not why and perf.state.settings.update_baselines:
        from perfgate.plugin.ledger import note_tolerance

        note_tolerance(perf.state, case.mode, metric, starts=starts)


def _metric(perf: PerfRun, metric: str) -> None:
    """What the record is judged on, whatever its outcome (an inconclusive record says it too)."""
    perf.record(METRIC, metric)
    perf.record(DIRECTION, "higher")


def conclude_goodput(perf: PerfRun, case: Case, g: Goodput) -> None:
    """Record a goodput search (its interval, every level) and conclude the record on its floor
    (:func:`perfgate.measuring.goodputfloor.floor_verdict`)."""
    from perfgate.measuring.goodputfloor import interval_text

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
    if s.failed is not None:
        perf.record(GOODPUT_RATE_NEXT, s.failed.rate)
        if s.failed.limiting:
            perf.record(LIMITING_METRIC, s.failed.limiting)
    if s.resolution is not None:
        perf.record(GOODPUT_RESOLUTION, s.resolution)
    if s.best is not None:
        perf.record(GOODPUT_RATE, s.best.rate)
        perf.record(ATTAINMENT, s.best.attainment)
        perf.record(ATTAINMENT_LOW, s.best.attainment_low)
        perf.record(LEVEL_REQUESTS, s.best.requests)
    if s.best is not None and s.failed is not None:
        where = f"the SLOs hold at {s.best.rate:g} and break at {s.failed.rate:g} req/s"
    elif s.best is not None:
        where = f"the SLOs hold up to {s.best.rate:g} req/s, and no level above failed"
    else:
        first = min(s.levels, key=lambda lv: lv.rate) if s.levels else None
        hint = ("lower [slo] rate_start to find one that does" if first is None or first.meets is False else
                "raise [slo] max_requests to resolve the levels below")
        where = f"no level passed ({first.why if first else 'nothing measured'}; {hint})"
    # a floor written from this run is the interval's low end (shown met within the SLOs), as the crossover's is
    # its CI's low end: a level passed or failed at the knee is the levels' noise, not a change of the server
    _conclude_on_floor(perf, case, s, what=f"goodput {interval_text(s)} ({where})",
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
    from perfgate.measuring.goodputfloor import interval_text
    from perfgate.measuring.starts import start_stats
    from perfgate.record import N_STARTS, START_CI_HIGH, START_CI_LOW, START_CV, START_VALUES

    levels = [{"start": k, **level_json(lv)} for k, s in enumerate(a.searches, 1) for lv in s.levels]
    perf.record(LOAD_LEVELS, json.dumps(levels, separators=(",", ":")))
    per = [{"start": k, "low": round(s.low, 4), "high": _r(s.high, 4),
            "rate": s.best.rate if s.best is not None else None,
            "rate_next": s.failed.rate if s.failed is not None else None,
            "requests": s.best.requests if s.best is not None else 0,
            "unresolved": [lv.rate for lv in s.unresolved]} for k, s in enumerate(a.searches, 1)]
    perf.record(GOODPUT_STARTS, json.dumps(per, separators=(",", ":")))
    perf.record(N_STARTS, len(a.searches))
    perf.record(START_VALUES, ",".join(f"{x:.6g}" for x in a.lows))
    perf.record(f"{START_VALUES}.{GOODPUT}", ",".join(f"{x:.6g}" for x in a.lows))
    perf.record(f"{START_VALUES}.{GOODPUT_HIGH}", ",".join("-" if x is None else f"{x:.6g}" for x in a.highs))
    if a.inconclusive is not None:
        return _conclude_behind(perf, case, a.inconclusive)
    cv, lo, hi = start_stats(a.lows)
    if cv is not None:
        perf.record(START_CV, cv)
    if lo is not None and hi is not None:
        perf.record(START_CI_LOW, lo)
        perf.record(START_CI_HIGH, hi)
    spread = f", between-start CV {cv:.1%}" if cv is not None else ""
    what = (f"goodput {interval_text(a)} (the mean of {len(a.searches)} server starts' intervals: "
            + "; ".join(interval_text(s) for s in a.searches) + f"{spread}; SLOs {what_slo})")
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


def _r(x: float | None, nd: int = 2) -> float | None:
    return round(x, nd) if x is not None else None
