"""Goodput under SLOs: pure functions from open-loop request outputs to rates, attainment and a verdict
per load level, and the bounded search for the highest rate meeting the SLOs.

Nothing here touches a clock, a socket or a file (as :mod:`perfgate.measuring.metrics`). The SLOs are bounds on
per-request metrics (:data:`REQUEST_METRICS`), each at a percentile: ``ttft_ms_p99 = 500`` says 99 % of a
level's requests get their first token within 500 ms. A request is *good* when it succeeded and its own
values are within every bound (its own ``q``-th percentile inter-token latency for ``itl_ms``);
*attainment* is the share of sent requests that are good; *goodput* is good requests per second of the
schedule (attainment x the rate achieved, the send times' span: the tail after the last send is not part of
the rate served). A level
meets the SLOs when every bound holds at its percentile over the level's requests and the attainment
reaches the required one (vLLM's ``--goodput``, GuideLLM's SLO objectives).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from perfgate.client import RequestOutput
from perfgate.measuring.metrics import MIN_TRIALS, Stat, percentile, stat

#: per-request metrics an SLO can bound (all in ms; lower is better)
REQUEST_METRICS: dict[str, str] = {
    "ttft_ms": "time to first token",
    "itl_ms": "inter-token latency (every gap of every request)",
    "tpot_ms": "time per output token after the first, per request",
    "e2e_ms": "end-to-end latency, per request",
}


@dataclass(frozen=True, kw_only=True)
class Bound:
    """One SLO: ``metric`` at its ``percentile`` over a level's requests within ``limit_ms``."""

    metric: str
    percentile: float
    limit_ms: float

    @property
    def key(self) -> str:
        q = f"{self.percentile:g}".replace(".", "_")
        return self.metric if self.percentile == 100 else f"{self.metric}_p{q}"


@dataclass(frozen=True, kw_only=True)
class Slo:
    """A mode's SLOs and how its goodput is searched (``[slo]`` / ``[slo.<mode>]`` of a profile)."""

    bounds: tuple[Bound, ...]
    attainment: float = 0.99  # the share of requests that must be good
    # a sender later at p99 than both of these fell behind its schedule (inconclusive): ms, and a share of the
    # schedule's mean gap between requests (jitter well inside a gap does not change the load offered)
    max_send_lag_ms: float = 10.0
    max_send_lag_gap: float = 0.1
    arrival: str = "poisson"
    requests: int = 32  # per trial of a level (each trial replays the same seeded schedule)
    duration_s: float | None = None  # and no send after this many seconds of a trial
    seed: int = 0
    rate_start: float = 1.0  # requests per second: the search doubles from here...
    rate_max: float = 64.0  # ...up to here
    resolution: float = 0.1  # ...then bisects until the bracket is this narrow (relative)
    max_levels: int = 12
    crossover_levels: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)  # closed-loop streams of the crossover record
    max_new_tokens: int | None = None  # tokens per request under load (default: the most any mode's workload asks)
    trials: int | None = None  # trials per level (default: the workload's)

    def describe(self) -> str:
        return ", ".join(f"{b.key} <= {b.limit_ms:g}" for b in self.bounds) + f", attainment >= {self.attainment:g}"


def request_values(o: RequestOutput) -> dict[str, list[float]]:
    """One successful request's values of :data:`REQUEST_METRICS` (a metric it has none of is absent)."""
    out: dict[str, list[float]] = {}
    if o.ttft_s is not None:
        out["ttft_ms"] = [o.ttft_s * 1000]
    if o.latency_s is not None:
        out["e2e_ms"] = [o.latency_s * 1000]
    if o.itl_s:
        out["itl_ms"] = [x * 1000 for x in o.itl_s]
    end = o.last_token_s if o.last_token_s is not None else o.latency_s
    n = o.completion_tokens - o.first_chunk_tokens
    if o.ttft_s is not None and end is not None and n > 0:
        out["tpot_ms"] = [(end - o.ttft_s) * 1000 / n]
    return out


def misses(o: RequestOutput, slo: Slo) -> tuple[str, ...]:
    """The bounds (keys) one request misses; a failed request misses ``errors``."""
    if not o.success:
        return ("errors",)
    vals = request_values(o)
    out = []
    for b in slo.bounds:
        xs = vals.get(b.metric)
        if xs and percentile(xs, b.percentile) > b.limit_ms:
            out.append(b.key)
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class LoadTrial:
    """One open-loop trial: what was offered, what was served, and how well."""

    offered_rps: float  # the schedule's rate
    achieved_rps: float | None  # requests sent / the span of their send times
    requests: int
    failures: int
    good: int
    attainment: float
    goodput_rps: float | None  # attainment x achieved_rps: good requests per second of the schedule sent
    send_lag_ms_p99: float | None
    output_tok_s: float | None
    values: dict[str, float]  # per bound key: that percentile over the trial's requests
    missed: dict[str, int]  # per bound key (and "errors"): requests that missed it
    wall_s: float
    p99: dict[str, float] = field(default_factory=dict)  # <metric>_p99 of every REQUEST_METRICS, bound or not


def load_trial(outputs: Sequence[RequestOutput], wall_s: float, slo: Slo, offered_rps: float) -> LoadTrial:
    """Turn one open-loop trial's outputs into a :class:`LoadTrial`."""
    ok = [o for o in outputs if o.success]
    pooled: dict[str, list[float]] = {}
    for o in ok:
        for k, xs in request_values(o).items():
            pooled.setdefault(k, []).extend(xs)
    values = {b.key: percentile(pooled[b.metric], b.percentile) for b in slo.bounds if pooled.get(b.metric)}
    missed: dict[str, int] = {}
    good = 0
    for o in outputs:
        m = misses(o, slo)
        good += not m
        for k in m:
            missed[k] = missed.get(k, 0) + 1
    sent = sorted(o.sent_s for o in outputs if o.sent_s is not None)
    span = sent[-1] - sent[0] if len(sent) > 1 else 0.0
    lags = [o.send_lag_s * 1000 for o in outputs if o.send_lag_s is not None]
    n = len(outputs)
    return LoadTrial(
        offered_rps=offered_rps,
        achieved_rps=(len(sent) - 1) / span if span > 0 else None,
        requests=n,
        failures=n - len(ok),
        good=good,
        attainment=good / n if n else 0.0,
        # per second of the schedule, not of the run: the run's last requests' tail (no arrivals, the batch
        # draining) is no part of the rate served (vLLM divides by the run's duration, tail included)
        goodput_rps=(good / n) * ((len(sent) - 1) / span) if span > 0 and n else None,
        send_lag_ms_p99=percentile(lags, 99) if lags else None,
        output_tok_s=sum(o.completion_tokens for o in ok) / wall_s if ok and wall_s > 0 else None,
        values=values,
        missed=missed,
        wall_s=wall_s,
        p99={f"{k}_p99": percentile(xs, 99) for k, xs in sorted(pooled.items())},
    )


@dataclass(frozen=True, kw_only=True)
class LoadLevel:
    """The trials of one rate, judged: ``meets`` True / False, or None (inconclusive: ``why`` says)."""

    rate: float
    trials: tuple[LoadTrial, ...]
    meets: bool | None
    limiting: str  # the bound most requests missed ("" when none was missed)
    why: str
    attainment: float  # median over trials
    goodput: Stat | None  # good requests per second across trials
    send_lag_ms_p99: float | None  # the worst trial's
    values: dict[str, float] = field(default_factory=dict)  # per bound key: median over trials
    p99: dict[str, float] = field(default_factory=dict)  # every metric's p99, median over trials


def max_lag_ms(slo: Slo, rate: float) -> float:
    """The send lag p99 beyond which a sender at ``rate`` fell behind: the larger of ``max_send_lag_ms`` and
    ``max_send_lag_gap`` x the mean gap between requests."""
    return max(slo.max_send_lag_ms, slo.max_send_lag_gap * 1000.0 / rate if rate > 0 else 0.0)


def judge_level(rate: float, trials: Sequence[LoadTrial], slo: Slo) -> LoadLevel:
    """One level against the SLOs: medians over trials; a sender that fell behind is inconclusive."""
    lags = [t.send_lag_ms_p99 for t in trials if t.send_lag_ms_p99 is not None]
    lag = max(lags) if lags else None
    att = statistics.median([t.attainment for t in trials]) if trials else 0.0
    values = {b.key: statistics.median(xs) for b in slo.bounds
              if (xs := [t.values[b.key] for t in trials if b.key in t.values])}
    missed: dict[str, int] = {}
    for t in trials:
        for k, c in t.missed.items():
            missed[k] = missed.get(k, 0) + c
    limiting = max(missed, key=lambda k: (missed[k], k)) if missed else ""
    good = stat([t.goodput_rps for t in trials if t.goodput_rps is not None])
    p99 = {k: statistics.median(xs) for k in sorted({k for t in trials for k in t.p99})
           if (xs := [t.p99[k] for t in trials if k in t.p99])}

    def level(meets: bool | None, why: str) -> LoadLevel:
        return LoadLevel(rate=rate, trials=tuple(trials), meets=meets, limiting=limiting, why=why, attainment=att,
                         goodput=good, send_lag_ms_p99=lag, values=values, p99=p99)

    bound = max_lag_ms(slo, rate)
    if lag is not None and lag > bound:
        return level(None, f"the sender fell behind its schedule at {rate:g} req/s: send lag p99 {lag:.1f} ms > "
                           f"{bound:.3g} ms (the client's limit on this machine, not the server's)")
    if len(trials) < MIN_TRIALS:
        return level(None, f"noise unknown: {len(trials)} trial(s) at {rate:g} req/s (it needs at least {MIN_TRIALS})")
    over = [f"{k} {values[k]:.4g} ms > {b.limit_ms:g}" for b in slo.bounds if (k := b.key) in values
            and values[k] > b.limit_ms]
    if over or att < slo.attainment:
        what = "; ".join(over + ([f"attainment {att:.3f} < {slo.attainment:g}"] if att < slo.attainment else []))
        return level(False, f"{rate:g} req/s misses the SLOs: {what}")
    return level(True, f"{rate:g} req/s meets the SLOs (attainment {att:.3f})")


@dataclass(frozen=True, kw_only=True)
class Search:
    """The bounded search's answer: the highest rate meeting the SLOs and every level it measured."""

    levels: tuple[LoadLevel, ...]
    best: LoadLevel | None  # the highest rate that met the SLOs
    next_rate: float | None  # the lowest rate that missed them (None: rate_max met them)
    inconclusive: LoadLevel | None  # a level that gave no verdict: the search stopped there

    @property
    def resolution(self) -> float | None:
        """The bracket's relative width (``None`` without both ends)."""
        if self.best is None or self.next_rate is None:
            return None
        return (self.next_rate - self.best.rate) / self.best.rate


def search(measure_level: Callable[[float], LoadLevel], slo: Slo) -> Search:
    """Bracket by doubling from ``slo.rate_start`` (up to ``slo.rate_max``), then bisect until the bracket is
    narrower than ``slo.resolution`` (relative), at most ``slo.max_levels`` levels; an inconclusive level ends
    the search (its answer would rest on the client, not the server)."""
    levels: list[LoadLevel] = []
    lo: LoadLevel | None = None
    hi: float | None = None

    def run(rate: float) -> LoadLevel | None:
        lv = measure_level(_round(rate))
        levels.append(lv)
        return lv

    rate = slo.rate_start
    while len(levels) < slo.max_levels:
        lv = run(rate)
        assert lv is not None
        if lv.meets is None:
            return Search(levels=tuple(levels), best=lo, next_rate=hi, inconclusive=lv)
        if not lv.meets:
            hi = lv.rate
            break
        lo = lv
        if rate >= slo.rate_max:
            break
        rate = min(rate * 2, slo.rate_max)
    while lo is not None and hi is not None and (hi - lo.rate) / lo.rate > slo.resolution \
            and len(levels) < slo.max_levels:
        mid = _round(math.sqrt(lo.rate * hi))  # the geometric middle: the log of the bracket halves
        if mid <= lo.rate or mid >= hi:
            break
        lv = run(mid)
        assert lv is not None
        if lv.meets is None:
            return Search(levels=tuple(levels), best=lo, next_rate=hi, inconclusive=lv)
        if lv.meets:
            lo = lv
        else:
            hi = lv.rate
    return Search(levels=tuple(levels), best=lo, next_rate=hi, inconclusive=None)


def _round(rate: float) -> float:
    """Rates to 3 significant digits (a level's name in the record)."""
    if rate <= 0:
        return rate
    d = 3 - int(math.floor(math.log10(rate))) - 1
    return round(rate, max(0, d))
