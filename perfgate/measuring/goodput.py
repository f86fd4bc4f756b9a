"""Goodput under SLOs: pure functions from open-loop request outputs to rates, attainment and a decision
per load level, and the bounded search for the highest rate meeting the SLOs (its floor's verdict:
:mod:`perfgate.measuring.goodputrecord`).

Nothing here touches a clock, a socket or a file (as :mod:`perfgate.measuring.metrics`). The SLOs are bounds on
per-request metrics (:data:`REQUEST_METRICS`), each at a percentile: ``ttft_ms_p99 = 500`` says 99 % of a
level's requests get their first token within 500 ms. A request is *good* when it succeeded and its own
values are within every bound (its own ``q``-th percentile inter-token latency for ``itl_ms``);
*attainment* is the share of sent requests that are good; *goodput* is good requests per second of the
schedule (attainment x the rate achieved, the send times' span: the tail after the last send is not part of
the rate served).

A level is a binomial question asked of its requests, pooled over its trials (docs/load.md, "Deciding a
level"): it **passes** when the Clopper-Pearson lower bound of its attainment reaches the required one and the
order-statistic (distribution-free) upper bound of every bound's percentile is within its limit; it **fails**
when the Clopper-Pearson upper bound of its attainment is below the required one or the order-statistic lower bound of
a percentile is over its limit; otherwise it is **unresolved**, and the search gives it more requests (another
trial of the same rate) up to ``max_requests``. Each bound is one-sided at ``[slo] confidence``. Goodput is an
interval: the highest level passed and the lowest failed, with the unresolved levels between them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from perfgate.measuring.bounds import clopper_pearson, percentile_bounds
from perfgate.measuring.loadtrial import LoadTrial as LoadTrial
from perfgate.measuring.loadtrial import judged_value as judged_value
from perfgate.measuring.loadtrial import load_trial as load_trial
from perfgate.measuring.loadtrial import misses as misses
from perfgate.measuring.loadtrial import request_values as request_values
from perfgate.measuring.metrics import percentile
from perfgate.profiles.slo import REQUEST_METRICS as REQUEST_METRICS
from perfgate.profiles.slo import Bound as Bound
from perfgate.profiles.slo import Slo as Slo
from perfgate.profiles.slo import attainment_min_requests as attainment_min_requests
from perfgate.profiles.slo import default_budget as default_budget
from perfgate.profiles.slo import level_min_requests as level_min_requests
from perfgate.profiles.slo import min_requests as min_requests

#: a level's decisions (``LoadLevel.decision``)
PASS, FAIL, UNRESOLVED, BEHIND = "pass", "fail", "unresolved", "behind"


# the SLO's value types and their sizing rule (how many requests a level needs) are the profile's ([slo]):
# perfgate.profiles.slo is their one home, below the measuring code that searches with them
# -- a level ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LoadLevel:
    """The trials of one rate, their requests pooled and decided: ``meets`` True (passed), False (failed) or None
    (unresolved, or the sender fell behind: ``behind``); ``why`` says which and on what."""

    rate: float
    trials: tuple[LoadTrial, ...]
    meets: bool | None
    limiting: str  # the bound most requests missed ("" when none was missed)
    why: str
    attainment: float  # good / requests, pooled over the trials
    goodput_rps: float | None  # the pooled attainment x the achieved rate (median over trials)
    send_lag_ms_p99: float | None  # the worst trial's
    values: dict[str, float] = field(default_factory=dict)  # per bound key: its percentile over the level's requests
    p99: dict[str, float] = field(default_factory=dict)  # every metric's p99 over the level's requests
    point: bool = False  # the point estimates meet the SLOs: what steers the search past an unresolved level
    behind: bool = False  # the sender fell behind its schedule: no decision, the search stops here
    requests: int = 0
    good: int = 0
    attainment_low: float = 0.0  # the Clopper-Pearson bounds of the attainment, each one-sided at [slo] confidence
    attainment_high: float = 1.0
    #: per bound key: the order-statistic (lower, upper) bounds of its percentile (None: too few requests)
    bounds: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    achieved_rps: float | None = None  # requests sent per second of the schedule (median over trials)

    @property
    def decision(self) -> str:
        """``pass``, ``fail``, ``unresolved`` or ``behind``."""
        return BEHIND if self.behind else UNRESOLVED if self.meets is None else PASS if self.meets else FAIL

    @property
    def steer(self) -> bool:
        """Whether the search treats the level as meeting the SLOs: its decision, else its point estimates."""
        return self.meets if self.meets is not None else self.point


def max_lag_ms(slo: Slo, rate: float) -> float:
    """The send lag p99 beyond which a sender at ``rate`` fell behind: the larger of ``max_send_lag_ms`` and
    ``max_send_lag_gap`` x the mean gap between requests."""
    return max(slo.max_send_lag_ms, slo.max_send_lag_gap * 1000.0 / rate if rate > 0 else 0.0)


def decide(good: int, n: int, judged: Mapping[str, Sequence[float]], slo: Slo) -> tuple[bool | None, str]:
    """A level's decision from its pooled requests: ``good`` of ``n`` good, and per bound key each request's
    :func:`judged_value`. True (passed), False (failed) or None (unresolved), with the reason.

    - fails when the Clopper-Pearson upper bound of the attainment is below ``slo.attainment``, or a bound's
      order-statistic lower bound is over its limit (for a bound on every request: a request over it);
    - passes when the Clopper-Pearson lower bound reaches ``slo.attainment`` (an attainment of 1: every request
      good) and every bound's order-statistic upper bound is within its limit (a bound on every request: no
      request over);
    - else unresolved (the reason names what is short, and the requests that could settle it).
    """
    if n <= 0:
        return None, "no requests measured"
    lo, hi = clopper_pearson(good, n, slo.confidence)
    conf = f"{slo.confidence:g}"
    failed, short = [], []
    if hi < slo.attainment:
        failed.append(f"attainment {good}/{n} = {good / n:.3f}, upper bound {hi:.4f} < {slo.attainment:g}")
    elif slo.attainment >= 1.0:
        if good < n:
            failed.append(f"attainment {good}/{n} < 1")
    elif lo < slo.attainment:
        short.append(f"attainment {good}/{n} = {good / n:.3f}, lower bound {lo:.4f} < {slo.attainment:g}")
    for b in slo.bounds:
        low, up = percentile_bounds(judged.get(b.key, ()), b.percentile, slo.confidence)
        if low is not None and low > b.limit_ms:
            failed.append(f"{b.key} lower bound {_ms(low)} > {b.limit_ms:g}")
        elif b.percentile < 100 and (up is None or up > b.limit_ms):
            short.append(f"{b.key} upper bound {_ms(up) if up is not None else 'none'}"
                         + (f" > {b.limit_ms:g}" if up is not None else
                            f" (it needs {min_requests(b.percentile, slo.confidence)} requests)"))
    if failed:
        return False, f"misses the SLOs at {conf} confidence: " + "; ".join(failed)
    if short:
        return None, (f"unresolved after {n} requests at {conf} confidence: " + "; ".join(short)
                      + f" (a level passes from {level_min_requests(slo)} requests)")
    return True, f"meets the SLOs at {conf} confidence (attainment {good}/{n}, lower bound {lo:.4f})"


def _ms(x: float) -> str:
    return "a failed request" if math.isinf(x) else f"{x:.4g} ms"


def judge_level(rate: float, trials: Sequence[LoadTrial], slo: Slo) -> LoadLevel:
    """One level against the SLOs (:func:`decide` on the requests of all its trials); a sender that fell behind
    gives no decision (``behind``)."""
    lags = [t.send_lag_ms_p99 for t in trials if t.send_lag_ms_p99 is not None]
    lag = max(lags) if lags else None
    n = sum(t.requests for t in trials)
    good = sum(t.good for t in trials)
    att = good / n if n else 0.0
    pooled: dict[str, list[float]] = {}
    for t in trials:
        for k, xs in t.samples.items():
            pooled.setdefault(k, []).extend(xs)
    if pooled:
        values = {b.key: percentile(pooled[b.metric], b.percentile) for b in slo.bounds if pooled.get(b.metric)}
        p99 = {f"{k}_p99": percentile(xs, 99) for k, xs in sorted(pooled.items()) if xs}
    else:  # trials without their samples (scripted): the medians of their own figures
        values = {b.key: statistics.median(ys) for b in slo.bounds
                  if (ys := [t.values[b.key] for t in trials if b.key in t.values])}
        p99 = {k: statistics.median(zs) for k in sorted({k for t in trials for k in t.p99})
               if (zs := [t.p99[k] for t in trials if k in t.p99])}
    judged = {b.key: [x for t in trials for x in t.judged.get(b.key, ())] for b in slo.bounds}
    missed: dict[str, int] = {}
    for t in trials:
        for k, c in t.missed.items():
            missed[k] = missed.get(k, 0) + c
    limiting = max(missed, key=lambda k: (missed[k], k)) if missed else ""
    rates = [t.achieved_rps for t in trials if t.achieved_rps is not None]
    achieved = statistics.median(rates) if rates else None
    lo, hi = clopper_pearson(good, n, slo.confidence)
    point = n > 0 and att >= slo.attainment and all(
        sum(x <= b.limit_ms for x in judged[b.key]) >= b.percentile / 100 * len(judged[b.key])
        for b in slo.bounds if judged[b.key])
    bounds = {b.key: percentile_bounds(judged[b.key], b.percentile, slo.confidence) for b in slo.bounds}

    def level(meets: bool | None, why: str, behind: bool = False) -> LoadLevel:
        return LoadLevel(rate=rate, trials=tuple(trials), meets=meets, limiting=limiting, why=why, attainment=att,
                         goodput_rps=att * achieved if achieved is not None else None, send_lag_ms_p99=lag,
                         values=values, p99=p99, point=point, behind=behind, requests=n, good=good,
                         attainment_low=lo, attainment_high=hi, bounds=bounds, achieved_rps=achieved)

    bound = max_lag_ms(slo, rate)
    if lag is not None and lag > bound:
        return level(None, f"the sender fell behind its schedule at {rate:g} req/s: send lag p99 {lag:.1f} ms > "
                           f"{bound:.3g} ms (the client's limit on this machine, not the server's)", behind=True)
    meets, why = decide(good, n, judged, slo)
    return level(meets, f"{rate:g} req/s {why}")


# -- the search ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Search:
    """The bounded search's answer: goodput as an interval, and every level it measured (in order)."""

    levels: tuple[LoadLevel, ...]
    best: LoadLevel | None  # the highest level passed (below the lowest failed)
    failed: LoadLevel | None  # the lowest level failed (None: none failed)
    unresolved: tuple[LoadLevel, ...] = ()  # levels between the two ends left unresolved within the budget
    inconclusive: LoadLevel | None = None  # a level whose sender fell behind: the search stopped there

    @property
    def next_rate(self) -> float | None:
        """The lowest rate that failed (None: none did)."""
        return self.failed.rate if self.failed is not None else None

    @property
    def resolution(self) -> float | None:
        """The bracket's relative width (``None`` without both ends)."""
        if self.best is None or self.failed is None:
            return None
        return (self.failed.rate - self.best.rate) / self.best.rate

    @property
    def low(self) -> float:
        """The interval's low end: good requests per second at the highest level passed (0: none passed)."""
        if self.best is None:
            return 0.0
        return self.best.goodput_rps if self.best.goodput_rps is not None else self.best.rate

    @property
    def high(self) -> float | None:
        """The interval's high end: the request rate achieved at the lowest level failed, which the server did
        not serve within the SLOs (None: no level failed)."""
        if self.failed is None:
            return None
        return self.failed.achieved_rps if self.failed.achieved_rps is not None else self.failed.rate


#: measures ``trials`` more trials of one rate: on the profile's schedule (``[slo] requests``, ``duration_s``) when
#: the third argument is None, else each of that many requests (a top-up sized by request count)
Measure = Callable[[float, int, "int | None"], Sequence[LoadTrial]]


def top_up_size(slo: Slo, requests: int, trials: int) -> int:
    """The requests of a top-up trial of a level that has ``requests`` over ``trials`` trials: the larger of its
    own trials' mean size, what it is still short of the level minimum, and a third of that minimum; at most
    what the budget leaves (at least 1). One such trial brings a level to the minimum."""
    mean = math.ceil(requests / trials) if trials else 1
    want = max(mean, slo.min_requests - requests, math.ceil(slo.min_requests / 3))
    return max(1, min(want, slo.budget - requests))


def search(measure: Measure, slo: Slo, *, trials: int = 3) -> Search:
    """Goodput as an interval, within ``slo.max_levels`` distinct levels.

    1. Bracket by doubling from ``slo.rate_start`` (up to ``slo.rate_max``), then bisect geometrically until the
       bracket is narrower than ``slo.resolution`` (relative); each level first gets ``trials`` trials, and the
       search steers by its decision, or by its point estimates where it is unresolved.
    2. The bracket's ends decide it: the lowest level that steered down and the highest below it that steered up
       each get one more trial at a time while unresolved (of :func:`top_up_size` requests), up to
       ``slo.budget``; an end that resolves the other way moves the bracket, and the search goes on from the new
       ends (doubling or bisecting, within ``max_levels``), their ends topped up the same way; an end still
       unresolved at the budget stays so (it is listed), and the next level inward is topped up in its place.

    A level whose sender fell behind ends the search (its answer would rest on the client, not the server).
    """
    trials_of: dict[float, list[LoadTrial]] = {}
    judged: dict[float, LoadLevel] = {}
    order: list[float] = []
    budget = slo.budget

    def run(rate: float) -> LoadLevel:
        r = _round(rate)
        if r not in trials_of:
            order.append(r)
            trials_of[r] = list(measure(r, trials, None))
            judged[r] = judge_level(r, trials_of[r], slo)
        return judged[r]

    def top_up(r: float) -> None:
        lv = judged[r]
        while lv.meets is None and not lv.behind and lv.requests < budget:
            more = list(measure(r, 1, top_up_size(slo, lv.requests, len(trials_of[r]))))
            if not more or sum(t.requests for t in more) == 0:
                break
            trials_of[r].extend(more)
            lv = judged[r] = judge_level(r, trials_of[r], slo)

    def answer() -> Search:
        levels = tuple(judged[r] for r in order)
        behind = next((lv for lv in levels if lv.behind), None)
        fails = [lv for lv in levels if lv.meets is False]
        failed = min(fails, key=lambda lv: lv.rate) if fails else None
        passes = [lv for lv in levels if lv.meets is True and (failed is None or lv.rate < failed.rate)]
        best = max(passes, key=lambda lv: lv.rate) if passes else None
        lo = best.rate if best is not None else 0.0
        hi = failed.rate if failed is not None else math.inf
        unresolved = tuple(sorted((lv for lv in levels if lv.meets is None and not lv.behind and lo < lv.rate < hi),
                                  key=lambda lv: lv.rate))
        return Search(levels=levels, best=best, failed=failed, unresolved=unresolved, inconclusive=behind)

    def ends() -> tuple[float | None, float | None]:
        """The interval's ends as the search steers: the lowest level steering down, the highest below it up."""
        down = sorted(r for r in order if not judged[r].steer)
        hi = down[0] if down else None
        up = [r for r in order if judged[r].steer and (hi is None or r < hi)]
        return (max(up) if up else None), hi

    def navigate() -> bool:
        """Double, then bisect, from the current ends; False when a sender fell behind."""
        while len(order) < slo.max_levels:
            lo, hi = ends()
            if hi is None:  # nothing steered down yet: double from the highest level up
                if lo is not None and lo >= slo.rate_max:
                    return True
                rate = slo.rate_start if lo is None else min(lo * 2, slo.rate_max)
            elif lo is None:  # rate_start itself steered down
                return True
            else:
                rate = _round(math.sqrt(lo * hi))  # the geometric middle: the log of the bracket halves
                if (hi - lo) / lo <= slo.resolution or rate <= lo or rate >= hi:
                    return True
            if _round(rate) in trials_of:
                return True
            if run(rate).behind:
                return False
        return True

    done: set[float] = set()

    def to_decide() -> list[float]:
        """The levels that would be the interval's ends and are unresolved, not yet topped up: the lowest steering
        down and the highest below it steering up, passing over those already topped up that stayed unresolved
        (the next one in is then the end that can decide)."""
        spent = {r for r in done if judged[r].meets is None}
        down = sorted(r for r in order if not judged[r].steer and r not in spent)
        hi = down[0] if down else None
        up = sorted((r for r in order if judged[r].steer and r not in spent and (hi is None or r < hi)), reverse=True)
        return [r for r in (hi, up[0] if up else None) if r is not None and r not in done and judged[r].meets is None]

    # steer to a bracket, then give its unresolved ends more requests; an end that turns moves the bracket, and the
    # search goes on from there (each level is topped up once: the loop ends)
    while navigate():
        todo = to_decide()
        if not todo:
            break
        for r in todo:
            done.add(r)
            top_up(r)
            if judged[r].behind:
                return answer()
    return answer()


def _round(rate: float) -> float:
    """Rates to 3 significant digits (a level's name in the record)."""
    if rate <= 0:
        return rate
    d = 3 - int(math.floor(math.log10(rate))) - 1
    return round(rate, max(0, d))
