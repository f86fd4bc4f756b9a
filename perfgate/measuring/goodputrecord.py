"""The goodput record, pure, in one call (:func:`goodput_record`): a goodput search (one start's
:class:`~perfgate.measuring.goodput.Search`, or the starts' :class:`AcrossStarts`) and the limit in; the verdict with
every property (its SLOs, every level, the interval) and the floor to write out, as
:func:`perfgate.measuring.floorcheck.floor_record` concludes the floor record. The interval is judged against
``[floors.<mode>] goodput_rps`` (:func:`floor_verdict`) at the level the floor must repeat: with
``--perfgate-starts N`` the starts' means of both ends (docs/load.md, "Its floor"). The search that finds one
start's interval is :mod:`perfgate.measuring.goodput`; perfgate.plugin.loadcheck records the properties and notes
the floor; nothing is judged there.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from perfgate.categories import Category, Outcome
from perfgate.measuring.floorcheck import Concluded, floor_from
from perfgate.measuring.goodput import LoadLevel, Search, Slo
from perfgate.measuring.starts import start_stats
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.record import DIRECTION, METRIC, N_STARTS, START_CI_HIGH, START_CI_LOW, START_CV, START_VALUES, rounded

if TYPE_CHECKING:
    from perfgate.measuring.floorcheck import LimitAt

__all__ = ["GOODPUT", "GOODPUT_UNRESOLVED", "AcrossStarts", "Goodput", "Interval", "interval_text", "floor_verdict",
           "level_json", "search_properties", "search_text", "starts_properties", "starts_spread", "starts_text",
           "goodput_record"]

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


# -- over server starts ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AcrossStarts:
    """Goodput of one config over its server starts (``--perfgate-starts N``): each start's own search, and the
    starts level's interval, the mean of the starts' low ends to the mean of their high ends. A start is the unit
    a goodput floor must repeat: within a start a level every trial meets varies by under 0.01 %, between starts
    the knee moved a whole bisection step on an H200 (docs/load.md), so the floor is judged on the starts' means
    (:func:`floor_verdict`), and their spread is the record's goodput noise (``start_cv``)."""

    searches: tuple[Search, ...]

    @property
    def lows(self) -> tuple[float, ...]:
        return tuple(s.low for s in self.searches)

    @property
    def highs(self) -> tuple[float | None, ...]:
        return tuple(s.high for s in self.searches)

    @property
    def low(self) -> float:
        """The mean of the starts' low ends (good requests per second shown within the SLOs)."""
        return statistics.fmean(self.lows) if self.searches else 0.0

    @property
    def high(self) -> float | None:
        """The mean of the starts' high ends; None when a start found no level failing (its high end is open)."""
        hs = self.highs
        if not hs or any(h is None for h in hs):
            return None
        return statistics.fmean(h for h in hs if h is not None)

    @property
    def unresolved(self) -> tuple[LoadLevel, ...]:
        """Every start's unresolved levels between its ends."""
        return tuple(lv for s in self.searches for lv in s.unresolved)

    @property
    def inconclusive(self) -> LoadLevel | None:
        return next((s.inconclusive for s in self.searches if s.inconclusive is not None), None)

    @property
    def cv(self) -> float | None:
        """The relative sd of one start's low end around their mean (None below 2 starts or at 0)."""
        lows = self.lows
        if len(lows) < 2 or statistics.fmean(lows) <= 0:
            return None
        return statistics.stdev(lows) / statistics.fmean(lows)


@dataclass(frozen=True, kw_only=True)
class Goodput:
    """A goodput search of one mode against its SLOs (``perf_check(g, "goodput_rps")`` judges it)."""

    mode: str
    slo: Slo
    search: Search  # the first start's (the only one's without --perfgate-starts)
    trials: int
    time_scale: float
    #: with ``--perfgate-starts N`` (N >= 2, a launched server): every start's search, the floor judged on them
    across: AcrossStarts | None = None


class Interval(Protocol):
    """Goodput as an interval: one start's :class:`Search` or the starts' :class:`AcrossStarts`."""

    @property
    def low(self) -> float: ...

    @property
    def high(self) -> float | None: ...

    @property
    def unresolved(self) -> tuple[LoadLevel, ...]: ...


# -- the floor -------------------------------------------------------------------------------------------------


def interval_text(s: Interval) -> str:
    """The interval as the record's message and the terminal show it: ``[low, high) req/s``, the unresolved
    levels after it."""
    hi = f"{s.high:.4g}" if s.high is not None else "-"
    out = f"[{s.low:.4g}, {hi}) req/s"
    if s.unresolved:
        rates = sorted({lv.rate for lv in s.unresolved})
        out += f", unresolved at {', '.join(f'{r:g}' for r in rates)} req/s"
    return out


def floor_verdict(s: Interval, floor: float | None, tolerance: float, *, where: str, update_hint: str,
                  what: str) -> Verdict:
    """The goodput interval against ``[floors.<mode>] goodput_rps`` (higher is better), through the one limit
    judge (:func:`perfgate.measuring.verdict.judge_limit`) at each end; the bound is ``floor x (1 - tolerance)``:

    - **pass** when the low end (good requests per second at the highest level passed) clears the bound: the
      server was shown to serve that within the SLOs;
    - **fail** when the high end (the rate of the lowest level failed) is below the bound: the server was shown
      to miss the SLOs at a rate below it, so its goodput is below the floor;
    - else **inconclusive** (category ``unresolved``): the interval straddles the bound; more requests at its
      unresolved levels (``[slo] max_requests``) or a finer ``resolution`` decide it.

    No floor: a skip saying how to record one. The value carries its own interval (the levels' binomial
    decisions), so no noise over trials is asked of it. Over server starts (:class:`AcrossStarts`) both ends are
    the starts' means, so the floor is judged at the starts level, against a tolerance from the goodput noise
    between starts (``goodput_rps_tolerance``, :func:`perfgate.profiles.noise.limit_tolerance`), never by the
    lowest start.
    """
    v = judge_limit("goodput_rps", s.low, floor, tolerance, noise=None, max_cv=None, where=where,
                    update_hint=update_hint, what=what)
    if v.outcome in (Outcome.PASS, Outcome.SKIP) or floor is None:
        return v
    if s.high is not None:
        top = judge_limit("goodput_rps", s.high, floor, tolerance, noise=None, max_cv=None, where=where,
                          update_hint=update_hint, what=f"{what}: the SLOs were missed at {s.high:.4g} req/s")
        if top.outcome == Outcome.FAIL:
            return top
    bound = floor * (1 - tolerance)
    if s.high is None:
        more = "raise [slo] rate_max to find where the SLOs break"
    elif s.unresolved:
        more = "raise [slo] max_requests to resolve the levels between"
    else:
        more = "lower [slo] resolution to measure between"
    return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.UNRESOLVED,
                   message=f"inconclusive: {what} straddles the floor {floor:g} x (1 - {tolerance:g}) = "
                           f"{bound:.4g} req/s [{where}]; {more}")


# -- the record's figures and words ---------------------------------------------------------------------------


def level_json(lv: LoadLevel) -> dict[str, object]:
    """One goodput level as the record's ``load_levels`` JSON gives it."""
    tok = [t.output_tok_s for t in lv.trials if t.output_tok_s is not None]
    bounds = {f"{k}_bounds": [rounded(x, 3) if x is not None and x != float("inf") else None for x in b]
              for k, b in lv.bounds.items()}
    return {"rate": lv.rate, "meets": lv.meets, "decision": lv.decision, "requests": lv.requests,
            "trials": len(lv.trials), "good": lv.good, "attainment": round(lv.attainment, 4),
            "attainment_ci": [round(lv.attainment_low, 4), round(lv.attainment_high, 4)],
            "goodput_rps": round(lv.goodput_rps, 4) if lv.goodput_rps is not None else None,
            "achieved_rps": round(lv.achieved_rps, 4) if lv.achieved_rps is not None else None,
            "output_tok_s": round(statistics.median(tok), 2) if tok else None,
            "send_lag_ms_p99": round(lv.send_lag_ms_p99, 3) if lv.send_lag_ms_p99 is not None else None,
            "limiting": lv.limiting, **{k: round(v, 3) for k, v in {**lv.p99, **lv.values}.items()}, **bounds}


def search_properties(s: Search) -> dict[str, object]:
    """A goodput search's answer (one server start): the lowest level failed and its limiting metric, the
    resolution between the two, and the highest level passed with its attainment and requests."""
    out: dict[str, object] = {}
    if s.failed is not None:
        out[GOODPUT_RATE_NEXT] = s.failed.rate
        if s.failed.limiting:
            out[LIMITING_METRIC] = s.failed.limiting
    if s.resolution is not None:
        out[GOODPUT_RESOLUTION] = s.resolution
    if s.best is not None:
        out[GOODPUT_RATE] = s.best.rate
        out[ATTAINMENT] = s.best.attainment
        out[ATTAINMENT_LOW] = s.best.attainment_low
        out[LEVEL_REQUESTS] = s.best.requests
    return out


def search_text(s: Search) -> str:
    """What a goodput record of one start says: its interval and where the SLOs hold and break (none passed: the
    first level's reason and the fix)."""
    if s.best is not None and s.failed is not None:
        where = f"the SLOs hold at {s.best.rate:g} and break at {s.failed.rate:g} req/s"
    elif s.best is not None:
        where = f"the SLOs hold up to {s.best.rate:g} req/s, and no level above failed"
    else:
        first = min(s.levels, key=lambda lv: lv.rate) if s.levels else None
        hint = ("lower [slo] rate_start to find one that does" if first is None or first.meets is False else
                "raise [slo] max_requests to resolve the levels below")
        where = f"no level passed ({first.why if first else 'nothing measured'}; {hint})"
    return f"goodput {interval_text(s)} ({where})"


def starts_properties(a: AcrossStarts) -> dict[str, object]:
    """A goodput record over N server starts: every start's levels (``load_levels``) and interval
    (``goodput_starts``), and the starts' low and high ends (``start_values.*``)."""
    levels = [{"start": k, **level_json(lv)} for k, s in enumerate(a.searches, 1) for lv in s.levels]
    per = [{"start": k, "low": round(s.low, 4), "high": rounded(s.high, 4),
            "rate": s.best.rate if s.best is not None else None,
            "rate_next": s.failed.rate if s.failed is not None else None,
            "requests": s.best.requests if s.best is not None else 0,
            "unresolved": [lv.rate for lv in s.unresolved]} for k, s in enumerate(a.searches, 1)]
    return {LOAD_LEVELS: json.dumps(levels, separators=(",", ":")),
            GOODPUT_STARTS: json.dumps(per, separators=(",", ":")),
            N_STARTS: len(a.searches),
            START_VALUES: ",".join(f"{x:.6g}" for x in a.lows),
            f"{START_VALUES}.{GOODPUT}": ",".join(f"{x:.6g}" for x in a.lows),
            f"{START_VALUES}.{GOODPUT_HIGH}": ",".join("-" if x is None else f"{x:.6g}" for x in a.highs)}


def starts_spread(a: AcrossStarts) -> tuple[float | None, dict[str, object]]:
    """The goodput noise between starts: the CV of the starts' low ends, and its properties (``start_cv``, the
    mean's interval)."""
    cv, lo, hi = start_stats(a.lows)
    out: dict[str, object] = {}
    if cv is not None:
        out[START_CV] = cv
    if lo is not None and hi is not None:
        out[START_CI_LOW] = lo
        out[START_CI_HIGH] = hi
    return cv, out


def starts_text(a: AcrossStarts, cv: float | None, *, what_slo: str) -> str:
    """What a goodput record over N starts says: the mean interval, each start's, their spread and the SLOs."""
    spread = f", between-start CV {cv:.1%}" if cv is not None else ""
    return (f"goodput {interval_text(a)} (the mean of {len(a.searches)} server starts' intervals: "
            + "; ".join(interval_text(s) for s in a.searches) + f"{spread}; SLOs {what_slo})")


# -- the record, in one call ----------------------------------------------------------------------------------


def _behind(props: dict[str, object], lv: LoadLevel) -> Concluded:
    """A level whose sender fell behind: the search's answer rests on the client, so no verdict and no floor."""
    return Concluded(verdict=Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.CLIENT_BEHIND, properties=props,
                                     message=f"inconclusive: {lv.why}"))


def goodput_record(g: Goodput, *, at: LimitAt, update_hint: str) -> Concluded:
    """A goodput search (one start's, or ``g.across`` N starts) judged on ``[floors.<mode>] goodput_rps``
    (:func:`floor_verdict`): its SLOs, every level, the interval; a floor written from it is the interval's low end
    (shown met within the SLOs), over N starts with the tolerance their spread gives."""
    search, slo, trials, across = g.search, g.slo, g.trials, g.across
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
             **at.properties}
    v = floor_verdict(iv, at.limit, at.tolerance, where=at.where, update_hint=update_hint, what=what).led_by(props)
    return Concluded(verdict=v, floor=floor_from(GOODPUT, v, iv.low, n=n, cv=cv, why=why, starts=starts))
