"""One open-loop trial under SLOs (pure): each request's values of the per-request metrics, whether it met every
bound, and a trial's rate, attainment and send lag. perfgate.measuring.goodput decides levels from these."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from perfgate.client import RequestOutput
from perfgate.measuring.metrics import percentile
from perfgate.profiles.slo import Bound, Slo

__all__ = ["request_values", "judged_value", "misses", "LoadTrial", "load_trial"]


def request_values(o: RequestOutput) -> dict[str, list[float]]:
    """One successful request's values of :data:`REQUEST_METRICS` (a metric it has none of is absent)."""
    out: dict[str, list[float]] = {}
    if o.ttft_s is not None:
        out["ttft_ms"] = [o.ttft_s * 1000]
    if o.latency_s is not None:
        out["e2e_ms"] = [o.latency_s * 1000]
    if o.itl_s:
        out["itl_ms"] = [x * 1000 for x in o.itl_s]
    if (tpot := o.tpot_ms) is not None:
        out["tpot_ms"] = [tpot]
    return out


def judged_value(o: RequestOutput, b: Bound) -> float:
    """The one value of a request a bound is judged on: its own ``percentile`` of ``b.metric`` (the value itself
    for the per-request metrics; its own p<q> gap for ``itl_ms``); ``inf`` for a failed request or one without
    the metric (it met no bound)."""
    if not o.success:
        return math.inf
    xs = request_values(o).get(b.metric)
    return percentile(xs, b.percentile) if xs else math.inf


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
    """One open-loop trial's measured window: what was offered, what was served, and how well."""

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
    #: per metric, every value of the trial's successful requests (pooled over a level's trials)
    samples: dict[str, tuple[float, ...]] = field(default_factory=dict)
    #: per bound key, each request's :func:`judged_value` (the order-statistic bounds pool these)
    judged: dict[str, tuple[float, ...]] = field(default_factory=dict)


def load_trial(outputs: Sequence[RequestOutput], wall_s: float, slo: Slo, offered_rps: float) -> LoadTrial:
    """Turn one open-loop trial's measured outputs into a :class:`LoadTrial`."""
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
        samples={k: tuple(xs) for k, xs in sorted(pooled.items())},
        judged={b.key: tuple(judged_value(o, b) for o in outputs) for b in slo.bounds},
    )
