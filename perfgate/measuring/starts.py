"""A measurement over N server starts, pure: the starts pooled into one measurement (:func:`combine`), the spread
between them (:func:`start_stats`) and the properties a record carries for it (:func:`start_properties`).
perfgate.serving.starts starts the servers and interleaves them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from perfgate.host.conditions import PairKind, is_quiet, one_sided, pair_kind
from perfgate.measuring.metrics import METRICS, Measurement, Stat, summarize
from perfgate.measuring.probes import PROBED_METRIC, pool
from perfgate.measuring.ttft_parts import leg_metric, start_medians
from perfgate.record import (
    CO_RESIDENT_STARTS,
    N_STARTS,
    PLACEMENT,
    SCHEDULER_SHARED,
    START_CI_HIGH,
    START_CI_LOW,
    START_CV,
    START_VALUES,
    TTFT_PROBE_MS,
)

if TYPE_CHECKING:
    from perfgate.measuring.judge import Level

__all__ = ["combine", "Trusted", "trusted_pairs", "one_sided_single", "pairs_level", "start_stats", "start_properties",
           "part_values", "placement_properties"]


def combine(per_start: Sequence[Measurement], *, confidence: float = 0.95) -> Measurement:
    """One measurement of N starts: the trials pooled (CI and CV over all of them), each metric's median the
    median over the starts' medians, ``starts`` the per-start measurements (their outputs: the first's)."""
    if not per_start:
        raise ValueError("combine() needs at least one start")
    if len(per_start) == 1:
        return per_start[0]
    first, last = per_start[0], per_start[-1]
    pooled = summarize(config_key=first.config_key, config_name=first.config_name,
                       trials=[t for m in per_start for t in m.trials], confidence=confidence,
                       outputs=first.outputs, startup_s=first.startup_s, log_path=last.log_path,
                       concurrency=first.concurrency)
    over: dict[str, Stat | None] = {}
    for name in METRICS:
        s = pooled.stat(name)
        meds = [st.median for x in per_start if (st := x.stat(name)) is not None]
        over[name] = replace(s, median=statistics.median(meds)) if s is not None and meds else s
    pooled = replace(pooled, probes=pool([x.probes for x in per_start]),
                     itl_sample=tuple(v for x in per_start for v in x.itl_sample))
    # METRICS names exactly Measurement's Stat | None fields; mypy cannot see a dict's keys as those fields
    return replace(pooled, starts=tuple(per_start), **over)  # type: ignore[arg-type]  # (see above)


@dataclass(frozen=True)
class Trusted:
    """Two arms' interleaved starts as a paired judge takes them (:func:`trusted_pairs`)."""

    a: Measurement
    b: Measurement
    #: the pairs left out (1-based): one arm measured disturbed, the other quiet
    left_out: tuple[int, ...] = ()
    #: the pairs kept though both arms were measured disturbed: a load both saw, which cancels in their ratio
    shared: tuple[int, ...] = ()

    def said(self, total: int) -> str:
        """The pairs left out and kept on a shared load, in words ("" when every pair was quiet)."""
        out = []
        if self.left_out:
            out.append(f"pair{'s' if len(self.left_out) > 1 else ''} {', '.join(map(str, self.left_out))} of {total} "
                       f"left out: one arm measured on a busy host or a throttled GPU, the other quiet")
        if self.shared:
            out.append(f"pair{'s' if len(self.shared) > 1 else ''} {', '.join(map(str, self.shared))} kept: both arms "
                       f"measured on a busy host, a load they shared")
        return "; ".join(out)


def trusted_pairs(a: Measurement, b: Measurement) -> Trusted:
    """Two measurements of interleaved starts without the start pairs a paired judge cannot trust
    (:func:`perfgate.host.conditions.pair_kind`): a pair with one arm disturbed and the other quiet is left out (the
    load landed on one arm only); a pair both of whose arms were disturbed is kept (the load both saw cancels in
    their ratio, and the pairs' spread, which the judge measures, widens honestly). Where every pair was left out, no
    start is left. One start per arm: never left out (:func:`one_sided_single` says whether it is trusted)."""
    if len(a.starts) < 2 or len(b.starts) < 2:
        return Trusted(a, b)
    pairs = list(zip(a.starts, b.starts))
    states = [(x.host_state, y.host_state) for x, y in pairs]
    bad = one_sided(states)
    shared = tuple(i + 1 for i, (x, y) in enumerate(states) if pair_kind(x, y) is PairKind.SHARED)
    if not bad:
        return Trusted(a, b, shared=shared)
    keep = [p for i, p in enumerate(pairs) if i + 1 not in bad]
    return Trusted(replace(a, starts=tuple(x for x, _ in keep)), replace(b, starts=tuple(y for _, y in keep)),
                   left_out=bad, shared=shared)


def one_sided_single(a: Measurement, b: Measurement, names: tuple[str, str] | None = None) -> list[str]:
    """For one start per arm: what disturbed the one arm measured disturbed while the other was quiet (the judge's
    change is then undecided: perfgate.measuring.judge.discounted), each arm named by ``names`` (default: its
    config's name); empty when both were quiet or both disturbed."""
    if a.starts or b.starts or pair_kind(a.host_state, b.host_state) is not PairKind.ONE_SIDED:
        return []
    said = names or (a.config_name, b.config_name)
    return [f"{n} {m.host_state}" for n, m in zip(said, (a, b)) if not is_quiet(m.host_state)]


def pairs_level(a: Measurement, b: Measurement) -> Level:
    """The level two arms' start pairs are judged at (perfgate.measuring.judge.Level): ``side-by-side`` where every
    start of both ran beside the other arm's (co-resident arms, :attr:`Measurement.beside`), else ``starts``."""
    from perfgate.measuring.judge import Level

    starts = [*(a.starts or (a,)), *(b.starts or (b,))]
    return Level.SIDE_BY_SIDE if all(s.beside for s in starts) else Level.STARTS


def start_stats(values: Sequence[float], confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """(between-start CV, CI low, CI high) of the mean across starts (a t-interval); Nones below 2 starts."""
    if len(values) < 2:
        return None, None, None
    from perfgate.measuring.special import t_two_sided

    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = t_two_sided(confidence, len(values) - 1) * sd / math.sqrt(len(values))
    return (sd / mean if mean else None), mean - half, mean + half


def start_properties(m: Measurement, metric: str = "tok_s", *, confidence: float = 0.95) -> dict[str, object]:
    """The record's between-start properties (for a single start none but ``co_resident_starts``, where it ran side by
    side with the other arm's: perfgate.serving.coresident): for the record's ``metric`` its per-start
    values (``start_values``), their spread and the mean's interval; for every metric measured its per-start values
    as ``start_values.<metric>``, so each metric's noise between starts can be read from the record
    (:func:`perfgate.report.noise.start_values`), not only the one it is judged on."""
    beside = sum(1 for s in (m.starts or (m,)) if s.beside)
    out: dict[str, object] = {CO_RESIDENT_STARTS: beside} if beside else {}
    if len(m.starts) < 2:
        return out | placement_properties(m)
    values = m.start_values(metric)
    cv, lo, hi = start_stats(values, confidence)
    out |= {N_STARTS: len(m.starts), START_VALUES: _joined(values)}
    if cv is not None:
        out[START_CV] = cv
    if lo is not None and hi is not None:
        out[START_CI_LOW], out[START_CI_HIGH] = lo, hi
    for name in METRICS:
        per_start = m.start_values(name)
        if len(per_start) >= 2:
            out[f"{START_VALUES}.{name}"] = _joined(per_start)
    if m.probed(PROBED_METRIC):  # each start's TTFT from its probes (perfgate.measuring.probes)
        out[f"{START_VALUES}.{TTFT_PROBE_MS}"] = _joined(m.judged_values(PROBED_METRIC))
    # and each start's TTFT in parts, where the server stamped its probes (perfgate.measuring.ttft_parts)
    for part, vals in part_values(m).items():
        out[f"{START_VALUES}.{leg_metric(part)}"] = _joined(vals)
    # and the load each start was measured under: a metric's move read against it (issue 52)
    loads = [s.others_cpu for s in m.starts]
    if all(x is not None for x in loads):
        out[f"{START_VALUES}.host.others_cpu"] = _joined([float(x) for x in loads if x is not None])
    return out | placement_properties(m)


def placement_properties(m: Measurement) -> dict[str, object]:
    """Where each start's processes ran (perfgate.host.placement), in start order: ``server.placement`` (each start's
    ``scheduler@4 tokenizer@1 ...``, `` | `` between starts; a start not watched reads ``-``) and, where every start
    saw SGLang's scheduler, ``start_values.server.scheduler_shared`` (1: it shared a physical core with another of
    the session's processes, 0: it ran alone), so a level can be read against it."""
    starts = m.starts or (m,)
    if all(s.placement is None for s in starts):
        return {}
    out: dict[str, object] = {PLACEMENT: " | ".join(s.placement.text() if s.placement else "-" for s in starts)}
    shared = [s.placement.scheduler_shared() if s.placement else None for s in starts]
    if len(starts) >= 2 and all(x is not None for x in shared):
        out[f"{START_VALUES}.{SCHEDULER_SHARED}"] = _joined([float(bool(x)) for x in shared])
    return out


def part_values(m: Measurement) -> dict[str, list[float]]:
    """Per TTFT part, each start's median over its probes (perfgate.measuring.ttft_parts.start_medians); empty unless
    every start's probes were stamped; the prefill leg's split where every start also traced its prefills."""
    starts = m.starts or (m,)
    return start_medians([s.probes.parts if s.probes else () for s in starts],
                         [s.probes.prefill_gpu_ms if s.probes else () for s in starts])


def _joined(values: Sequence[float]) -> str:
    return ",".join(f"{v:.6g}" for v in values)
