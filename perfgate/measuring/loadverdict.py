"""The load records in one call each, pure: what was measured in, the verdict with every property out.

A goodput search (:func:`goodput_record`) and a speculation crossover (:func:`crossover_record`) each take their
measurements, the SLOs and the limit they are judged against (:class:`perfgate.measuring.floorcheck.LimitAt`: the one
limit lookup, each limit at its own tolerance) and return a :class:`~perfgate.measuring.floorcheck.Concluded`, as
the floor record does (:func:`perfgate.measuring.floorcheck.floor_record`): the verdict, whose properties are
all the record's figures in the order recorded, and the floor ``--perfgate-update-baselines`` would write (or why not).
perfgate.plugin.loadcheck records the properties in one place and notes the floor; nothing is judged there.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome
from perfgate.measuring.floorcheck import Concluded, FloorWrite
from perfgate.measuring.goodputfloor import floor_verdict
from perfgate.measuring.loadrecord import (
    ARRIVAL,
    CROSSOVER,
    CROSSOVER_LEVELS,
    GOODPUT,
    GOODPUT_HIGH,
    GOODPUT_LOW,
    GOODPUT_MIN_REQUESTS,
    GOODPUT_UNRESOLVED,
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
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.record import DIRECTION, LIMIT, METRIC, TOLERANCE

if TYPE_CHECKING:
    from perfgate.measuring.floorcheck import LimitAt
    from perfgate.measuring.goodput import LoadLevel, Search
    from perfgate.measuring.goodputfloor import AcrossStarts, Interval
    from perfgate.measuring.metrics import Measurement
    from perfgate.profiles.slo import Slo

__all__ = ["FloorWrite", "Concluded", "goodput_record", "crossover_record"]  # the first two: floorcheck's


def _floor(metric: str, v: Verdict, new: float, *, n: int = 0, cv: float | None = None, why: str = "",
           starts: tuple[float, ...] | None = None) -> FloorWrite:
    """``new`` as the floor to write, unless the verdict is inconclusive, the record failed for another reason than
    being slower, or ``why`` says it cannot be one."""
    if v.outcome == Outcome.INCONCLUSIVE:
        why = v.message.removeprefix("inconclusive: ")
    elif v.outcome == Outcome.FAIL and v.category != Category.SLOWER_THAN_BASELINE:
        why = f"the record failed ({v.category})"
    elif new <= 0 and not why:
        why = f"no {metric} above zero to make a floor of"
    return FloorWrite(metric=metric, new=new, n=n, cv=cv, why=why, starts=starts)


def _limit_props(at: LimitAt) -> dict[str, object]:
    return {LIMIT: at.limit, TOLERANCE: at.tolerance} if at.limit is not None else {}


def _with(v: Verdict, props: dict[str, object]) -> Verdict:
    """``v`` with ``props`` recorded before its own properties."""
    return replace(v, properties={**props, **v.properties})


def _behind(props: dict[str, object], lv: LoadLevel) -> Concluded:
    """A level whose sender fell behind: the search's answer rests on the client, so no verdict and no floor."""
    return Concluded(verdict=Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.CLIENT_BEHIND, properties=props,
                                     message=f"inconclusive: {lv.why}"))


def goodput_record(search: Search, slo: Slo, *, trials: int, across: AcrossStarts | None, at: LimitAt,
                   update_hint: str) -> Concluded:
    """A goodput search (one start's, or ``across`` N starts) judged on ``[floors.<mode>] goodput_rps``
    (:func:`perfgate.measuring.goodputfloor.floor_verdict`): its SLOs, every level, the interval; a floor written
    from it is the interval's low end (shown met within the SLOs), over N starts with the tolerance their spread
    gives."""
    props: dict[str, object] = {
        METRIC: GOODPUT, DIRECTION: "higher", SLO: slo.describe(), SLO_ATTAINMENT: slo.attainment,
        SLO_CONFIDENCE: slo.confidence, GOODPUT_MIN_REQUESTS: slo.min_requests,
        ARRIVAL: f"{slo.arrival}, {slo.requests} requests a trial after {slo.warmup_requests} of warm-up, "
                 f"seed {slo.seed}",
        "n": trials}
    lags = [lv.send_lag_ms_p99 for lv in search.levels if lv.send_lag_ms_p99 is not None]
    if lags:
        props[SEND_LAG_MS_P99] = max(lags)
    if across is not None:
        props |= starts_properties(across)
        if across.inconclusive is not None:
            return _behind(props, across.inconclusive)
        cv, spread = starts_spread(across)
        props |= spread
        passed = all(s.best is not None for s in across.searches)
        return _on_floor(props, across, at, update_hint, what=starts_text(across, cv, what_slo=slo.describe()),
                         n=len(across.searches), cv=cv, starts=across.lows,
                         why="" if passed else "a start passed no level of the SLOs: no goodput to make a floor of")
    props[LOAD_LEVELS] = json.dumps([level_json(lv) for lv in search.levels], separators=(",", ":"))
    if search.inconclusive is not None:
        return _behind(props, search.inconclusive)
    props |= search_properties(search)
    # a floor written from this run is the interval's low end (shown met within the SLOs), as the crossover's is its
    # CI's low end: a level passed or failed at the knee is the levels' noise, not a change of the server
    return _on_floor(props, search, at, update_hint, what=search_text(search),
                     n=search.best.requests if search.best is not None else 0, cv=None, starts=(),
                     why="" if search.best is not None else "no level passed the SLOs: no goodput to make a floor of")


def _on_floor(props: dict[str, object], iv: Interval, at: LimitAt, update_hint: str, *, what: str, n: int,
              cv: float | None, starts: tuple[float, ...], why: str) -> Concluded:
    props = {**props, GOODPUT: iv.low, GOODPUT_LOW: iv.low,
             **({GOODPUT_HIGH: iv.high} if iv.high is not None else {}),
             GOODPUT_UNRESOLVED: ",".join(f"{r:g}" for r in sorted({lv.rate for lv in iv.unresolved})),
             **_limit_props(at)}
    v = _with(floor_verdict(iv, at.limit, at.tolerance, where=at.where, update_hint=update_hint, what=what), props)
    return Concluded(verdict=v, floor=_floor(GOODPUT, v, iv.low, n=n, cv=cv, why=why, starts=starts))


def crossover_record(loads: tuple[int, ...], base: tuple[Measurement, ...], spec: tuple[Measurement, ...] | None, *,
                     mode: str, base_mode: str, at: LimitAt, update_hint: str) -> Concluded:
    """The baseline's crossover record (``spec`` None: its levels, recorded, a pass), or a speculative mode's: where
    it stops beating the baseline, judged on ``[floors.<mode>] crossover`` at that limit's own tolerance (higher is
    better; a floor above the highest load measured is undecided when it still wins there). A floor written from it
    is the CI's low end: the crossover's own interval is several per cent wide, so its median as the floor would fail
    half the runs of an unchanged stack."""
    if spec is None:
        return Concluded(verdict=Verdict(
            outcome=Outcome.PASS, properties={CROSSOVER_LEVELS: baseline_levels(loads, base)},
            message=f"the baseline's output tok/s at {len(loads)} loads ({', '.join(map(str, loads))} streams), "
                    f"recorded"))
    x, pred = crossover_of(loads, base, spec)
    props = {METRIC: CROSSOVER, DIRECTION: "higher", **crossover_properties(x, pred, base_mode=base_mode),
             **_limit_props(at)}
    what = crossover_text(x, pred, mode=mode, base_mode=base_mode, loads=loads)
    v = _with(judge_limit(CROSSOVER, x.value, at.limit, at.tolerance, noise=None, max_cv=None, where=at.where,
                          what=what, highest=float(loads[-1]) if x.result == "always" else None,
                          update_hint=update_hint), props)
    new = x.ci_low if x.ci_low is not None else x.value
    return Concluded(verdict=v, floor=_floor(CROSSOVER, v, new,
                                             why=f"no {CROSSOVER} above zero to make a floor of" if x.value <= 0
                                             else ""))
