"""Metrics: pure functions from request outputs to measurements with statistics.

Nothing here touches a clock, a socket or a file. A *trial* is one batch of requests at the
workload's concurrency; a :class:`Measurement` is the trials of one config with, per metric,
the median, a percentile-bootstrap confidence interval of the median, and the coefficient
of variation across trials.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import get_type_hints

from perfgate.client import RequestOutput
from perfgate.host.placement import Placement
from perfgate.measuring.probes import PROBED_METRIC, Probes

# the metrics a record can be judged on (their names, directions and units) are the record's vocabulary:
# perfgate.record is their one home, below both the profile (its limits) and the measuring code
from perfgate.record import METRICS as METRICS
from perfgate.record import RECORD_METRICS as RECORD_METRICS
from perfgate.record import Metric as Metric
from perfgate.record import unit_of as unit_of

BOOTSTRAP_RESAMPLES = 2000


#: fewer trials than this and the noise is unknown: no confidence interval, no CV, no verdict on speed
#: (one trial gives a zero-width "interval"; two, an interval that is just the two values)
MIN_TRIALS = 3


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One batch of requests: decode rate per request, throughput, latencies, acceptance."""

    tok_s: float | None  # mean per-request decode tok/s (the seed's metric at concurrency 1)
    output_tok_s: float | None  # completion tokens of the batch / wall time
    ttft_ms: float | None  # median
    itl_ms: float | None  # median
    accept_len: float | None  # sum(completion) / sum(verify passes)
    ttft_ms_p99: float | None = None
    itl_ms_p99: float | None = None
    completion_tokens: int
    failures: int
    errors: tuple[str, ...] = ()
    wall_s: float = 0.0
    cache_hits: int = 0  # requests SGLang served partly from its prefix cache (a warm-cache number)
    cached_tokens: int = 0


def compute_trial(outputs: Sequence[RequestOutput], wall_s: float) -> Trial:
    """Turn one batch's outputs into a Trial (failed requests are counted, not measured)."""
    ok = [o for o in outputs if o.success]
    rates = [r for r in (o.decode_tok_s for o in ok) if r is not None]
    ttfts = [o.ttft_s * 1000 for o in ok if o.ttft_s is not None]
    itls = [x * 1000 for o in ok for x in o.itl_s]
    verify = sum(o.spec_verify_ct or 0 for o in ok)
    toks = sum(o.completion_tokens for o in ok)
    spec_toks = sum(o.completion_tokens for o in ok if o.spec_verify_ct)
    return Trial(
        tok_s=statistics.fmean(rates) if rates else None,
        output_tok_s=toks / wall_s if wall_s > 0 and ok else None,
        ttft_ms=statistics.median(ttfts) if ttfts else None,
        itl_ms=statistics.median(itls) if itls else None,
        accept_len=spec_toks / verify if verify else None,
        ttft_ms_p99=percentile(ttfts, 99) if ttfts else None,
        itl_ms_p99=percentile(itls, 99) if itls else None,
        completion_tokens=toks,
        failures=len(outputs) - len(ok),
        errors=tuple(o.error for o in outputs if not o.success),
        wall_s=wall_s,
        cache_hits=sum(1 for o in ok if o.cached_tokens),
        cached_tokens=sum(o.cached_tokens for o in ok),
    )


def percentile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    s = sorted(xs)
    if not s:
        raise ValueError("percentile of no data")
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def cv(xs: Sequence[float]) -> float | None:
    """Coefficient of variation (sample stdev / mean); None for fewer than 2 values."""
    if len(xs) < 2:
        return None
    m = statistics.fmean(xs)
    if m == 0:
        return None
    return statistics.stdev(xs) / abs(m)


def bootstrap_median_ci(xs: Sequence[float], confidence: float = 0.95, *, seed: int = 0,
                        resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile-bootstrap CI of the median (deterministic for a given seed)."""
    if not xs:
        raise ValueError("CI of no data")
    if len(xs) == 1:
        return xs[0], xs[0]
    rng = random.Random(seed)
    n = len(xs)
    meds = sorted(statistics.median(rng.choices(xs, k=n)) for _ in range(resamples))
    a = (1 - confidence) / 2 * 100
    return percentile(meds, a), percentile(meds, 100 - a)


def bootstrap_ratio_ci(num: Sequence[float], den: Sequence[float], confidence: float = 0.95, *, seed: int = 0,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile-bootstrap CI of median(num) / median(den), resampling each side independently."""
    if not num or not den:
        raise ValueError("CI of no data")
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        d = statistics.median(rng.choices(den, k=len(den)))
        n = statistics.median(rng.choices(num, k=len(num)))
        ratios.append(n / d if d else math.inf)
    ratios.sort()
    a = (1 - confidence) / 2 * 100
    return percentile(ratios, a), percentile(ratios, 100 - a)


@dataclass(frozen=True, kw_only=True)
class Stat:
    """Median, confidence interval and CV of one metric across trials."""

    samples: tuple[float, ...]
    median: float
    ci_low: float | None  # None: fewer than MIN_TRIALS samples, noise unknown
    ci_high: float | None
    cv: float | None

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def noise_known(self) -> bool:
        return self.n >= MIN_TRIALS


def stat(samples: Sequence[float], confidence: float = 0.95) -> Stat | None:
    xs = [float(x) for x in samples if x is not None]
    if not xs:
        return None
    if len(xs) < MIN_TRIALS:
        return Stat(samples=tuple(xs), median=statistics.median(xs), ci_low=None, ci_high=None, cv=None)
    lo, hi = bootstrap_median_ci(xs, confidence)
    return Stat(samples=tuple(xs), median=statistics.median(xs), ci_low=lo, ci_high=hi, cv=cv(xs))


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """Trials of one server config, with statistics per metric and every output's tokens."""

    config_key: str
    config_name: str
    trials: tuple[Trial, ...]
    tok_s: Stat | None
    output_tok_s: Stat | None
    ttft_ms: Stat | None
    itl_ms: Stat | None
    accept_len: float | None  # over every measured request of this measurement
    failures: int
    errors: tuple[str, ...]
    outputs: tuple[tuple[int, ...], ...] = ()  # output ids per prompt index (first trial that saw it)
    startup_s: float | None = None
    log_path: str = ""
    sweep: tuple[SweepPoint, ...] = field(default=())
    ttft_ms_p99: Stat | None = None
    itl_ms_p99: Stat | None = None
    concurrency: int = 1  # requests in flight while it was measured
    #: the session's server start it was measured on (1, 2, ...; 0: unknown, an attached server, or a pool of
    #: several starts, whose own are in ``starts``): what tells the order of a pair's arms (perfgate.measuring.order)
    start_no: int = 0
    #: with --perfgate-starts N > 1: one measurement per server start, in start order (this one pools their
    #: trials, its medians are the medians over starts: perfgate.serving.starts.combine); () for one start
    starts: tuple[Measurement, ...] = ()
    #: the host's and the GPUs' state while this start was measured (perfgate.host.conditions: ``quiet`` or
    #: ``disturbed: <why>``; "" not watched, or a pool of starts, whose own are in ``starts``)
    host_state: str = ""
    #: the CPU cores other processes used while this start was measured (perfgate.host.conditions; None: not
    #: watched): per start in the record (``start_values.host.others_cpu``), so a metric's move can be read against it
    others_cpu: float | None = None
    #: where this start's processes ran (perfgate.host.placement; None: not watched, not Linux, or a pool of starts):
    #: per start in the record (``server.placement``, ``start_values.server.scheduler_shared``)
    placement: Placement | None = None
    #: co-resident arms (perfgate.serving.coresident): the config key of the server this start ran beside, its
    #: trials and probes interleaved with its own ("" measured alone, or a pool of starts)
    beside: str = ""

    #: the start's TTFT probes (perfgate.measuring.probes; over starts, every start's pooled); None: none were sent
    probes: Probes | None = None
    #: the trials' inter-token latencies in ms, in time order, thinned to at most 2000 a start (their modes:
    #: perfgate.measuring.probes.mode_properties); over starts, every start's
    itl_sample: tuple[float, ...] = ()

    def start_values(self, metric: str) -> tuple[float, ...]:
        """The per-start medians of ``metric`` (one value, this measurement's median, for a single start)."""
        if not self.starts:
            s = self.stat(metric)
            return () if s is None else (s.median,)
        out = []
        for m in self.starts:
            s = m.stat(metric)
            if s is not None:
                out.append(s.median)
        return tuple(out)

    def probed(self, metric: str) -> bool:
        """Whether ``metric``'s per-start values come from the probes in a paired comparison: TTFT
        (:data:`perfgate.measuring.probes.PROBED_METRIC`) where every start has probes."""
        return metric == PROBED_METRIC and all(m.probes is not None and m.probes.n for m in self.starts or (self,))

    def judged_values(self, metric: str) -> tuple[float, ...]:
        """The per-start values a paired comparison (the stack pair) judges: :meth:`start_values`, except TTFT's
        where :meth:`probed`, each start's probe estimate (:attr:`perfgate.measuring.probes.Probes.estimate`)."""
        if not self.probed(metric):
            return self.start_values(metric)
        return tuple(e for m in self.starts or (self,) if m.probes is not None and (e := m.probes.estimate) is not None)

    def stat(self, metric: str) -> Stat | None:
        """The statistics of one of :data:`METRICS` (``None`` when nothing was measured)."""
        if metric not in METRICS:
            raise KeyError(f"unknown metric '{metric}'; known: {', '.join(METRICS)}")
        value: Stat | None = getattr(self, metric)
        return value

    @property
    def cache_hits(self) -> int:
        """Measured requests (trials and sweep) that SGLang served partly from its prefix cache."""
        return sum(t.cache_hits for t in self.trials) + sum(p.cache_hits for p in self.sweep)

    @property
    def cached_tokens(self) -> int:
        return sum(t.cached_tokens for t in self.trials) + sum(p.cached_tokens for p in self.sweep)


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One concurrency level of an optional sweep."""

    concurrency: int
    output_tok_s: float | None
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    itl_ms_p50: float | None
    itl_ms_p99: float | None
    failures: int
    cache_hits: int = 0
    cached_tokens: int = 0


def check_metric_fields() -> None:
    """That :data:`METRICS` (perfgate.record) names exactly the Measurement's per-metric statistics (its ``Stat | None``
    fields, what :meth:`Measurement.stat` reads) and that each is a per-trial number of :class:`Trial` (what
    :func:`summarize` takes the statistics of); run at import, so that a metric added on one side only fails there,
    not in a run. TypeError names the names on one side only."""
    stats = {name for name, hint in get_type_hints(Measurement).items() if hint == Stat | None}
    per_trial = {name for name, hint in get_type_hints(Trial).items() if hint == float | None}
    wrong = sorted((set(METRICS) ^ stats) | (set(METRICS) - per_trial))
    if wrong:
        raise TypeError(f"perfgate.record.METRICS and the Stat fields of Measurement (each a float | None field of "
                        f"Trial) differ in {', '.join(wrong)}; fix: add the metric to both, or to neither")


check_metric_fields()


def summarize(*, config_key: str, config_name: str, trials: Sequence[Trial], confidence: float = 0.95,
              outputs: Sequence[tuple[int, ...]] = (), startup_s: float | None = None, log_path: str = "",
              sweep: Sequence[SweepPoint] = (), concurrency: int = 1) -> Measurement:
    """Trials -> Measurement."""
    spec_tokens = [t for t in trials if t.accept_len is not None]
    acc = None
    if spec_tokens:
        # weight each trial's acceptance by its tokens: sum(completion) / sum(verify)
        tot = sum(t.completion_tokens for t in spec_tokens)
        ver = sum(t.completion_tokens / t.accept_len for t in spec_tokens if t.accept_len)
        acc = tot / ver if ver else None
    return Measurement(
        config_key=config_key,
        config_name=config_name,
        trials=tuple(trials),
        # each of METRICS, the statistics of its trials' values: a float | None field of Trial and a Stat | None field
        # of Measurement (check_metric_fields, at import); mypy cannot see a dict's keys as those fields
        **{name: stat([getattr(t, name) for t in trials], confidence) for name in METRICS},  # type: ignore[arg-type]
        concurrency=concurrency,
        accept_len=acc,
        failures=sum(t.failures for t in trials),
        errors=tuple(e for t in trials for e in t.errors),
        outputs=tuple(outputs),
        startup_s=startup_s,
        log_path=log_path,
        sweep=tuple(sweep),
    )


def sweep_point(concurrency: int, outputs: Sequence[RequestOutput], wall_s: float) -> SweepPoint:
    ok = [o for o in outputs if o.success]
    ttfts = [o.ttft_s * 1000 for o in ok if o.ttft_s is not None]
    itls = [x * 1000 for o in ok for x in o.itl_s]
    return SweepPoint(
        concurrency=concurrency,
        output_tok_s=sum(o.completion_tokens for o in ok) / wall_s if ok and wall_s > 0 else None,
        ttft_ms_p50=percentile(ttfts, 50) if ttfts else None,
        ttft_ms_p99=percentile(ttfts, 99) if ttfts else None,
        itl_ms_p50=percentile(itls, 50) if itls else None,
        itl_ms_p99=percentile(itls, 99) if itls else None,
        failures=len(outputs) - len(ok),
        cache_hits=sum(1 for o in ok if o.cached_tokens),
        cached_tokens=sum(o.cached_tokens for o in ok),
    )


def token_match(candidate: Sequence[Sequence[int]], reference: Sequence[Sequence[int]]) -> float | None:
    """Share of reference tokens matched by the candidate's common prefix, over all prompts."""
    total = matched = 0
    for c, r in zip(candidate, reference):
        if not r:
            continue
        k = 0
        for a, b in zip(c, r):
            if a != b:
                break
            k += 1
        matched += k
        total += len(r)
    return matched / total if total else None


def trials_to_resolve(n: int, ratio: float, ci_low: float, ci_high: float) -> int | None:
    """Trials that would shrink a ratio CI straddling 1 enough to exclude 1 (CI width ~ 1/sqrt(n))."""
    gap = abs(ratio - 1.0)
    half = (ci_high - ci_low) / 2
    if gap <= 1e-9 or half <= 0:
        return None
    return max(n + 1, math.ceil(n * (half / gap) ** 2))


def paired_ratios(candidate: Measurement, baseline: Measurement, metric: str = "tok_s") -> list[float] | None:
    """candidate/baseline of start i with start i (both measured interleaved); None unless both have >= 2 starts."""
    if len(candidate.starts) < 2 or len(baseline.starts) < 2:
        return None
    out = []
    for c, b in zip(candidate.starts, baseline.starts):
        cs, bs = c.stat(metric), b.stat(metric)
        if cs is not None and bs is not None and bs.median > 0 and cs.median > 0:
            out.append(cs.median / bs.median)
    return out if len(out) >= 2 else None
