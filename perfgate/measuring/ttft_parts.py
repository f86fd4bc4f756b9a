"""Where a TTFT probe's time goes, pure: its first-token latency split at the server's own timestamps.

A real H200 serves batch-1 TTFT at two levels (~28 and ~45 ms) and the level belongs to the server process, not the
moment: two servers side by side on one GPU, their probes interleaved, sat on different levels in the same minute
(docs/gate.md, the latency runs of 2026-12-05). Which leg of the request carries the extra time decides what can be
done about it (and whether a stack change can be told from it), so with SGLang's ``--enable-metrics`` every probe is
split at the timestamps its response's ``meta_info`` carries (SGLang's ``RequestTimeStats`` /
``SchedulerReqTimeStats``, realtime seconds from SGLang's processes, one clock), into :data:`PARTS`:

- ``dispatch``: ``request_received_ts`` -> ``api_server_dispatch_finish_ts`` (the tokenizer manager takes the request
  and hands it to the scheduler);
- ``to_forward``: ``api_server_dispatch_finish_ts`` -> ``forward_entry_time`` (the scheduler receives it, queues it and
  starts the prefill batch; ``queue_time`` of it is the wait in the queue);
- ``prefill``: ``forward_entry_time`` -> ``prefill_finished_time`` (the prefill forward and its
  sampling: the GPU's part);
- ``rest``: the client's TTFT less ``request_received_ts`` -> ``prefill_finished_time`` (the HTTP request in, the first
  token's way back through the detokenizer and the tokenizer manager, the HTTP response out).

The four add up to the probe's TTFT. Where the start also traced a few prefills with SGLang's profiler
(perfgate.measuring.prefill_gpu), its ``prefill`` leg splits into :data:`SPLIT`: ``prefill_gpu`` (the GPU's busy time
of the forward's kernels) and ``prefill_host`` (the rest of the leg); both are parts of :data:`ALL_PARTS` and judged
as legs. A probe whose response lacks a timestamp (no ``--enable-metrics``, another
server) has no parts; a start's record carries each part's median over its probes and its spread (p90 - p10), and
names the part with the widest spread (:func:`part_properties`): where the levels live; with several starts, each
start's median of each part (:func:`start_medians`): which leg moves between starts.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from perfgate.measuring.prefill_gpu import SPLIT, split_medians
from perfgate.record import PREFILL_TRACES, TTFT_PART_PREFIX, TTFT_SPREAD_IN

__all__ = ["PARTS", "SPLIT", "ALL_PARTS", "LEG_METRICS", "STAMPS", "leg_metric", "part_of", "said", "parts_ms",
           "part_properties",
           "start_medians", "spread"]

#: the legs of a probe's TTFT, in the request's order
PARTS = ("dispatch", "to_forward", "prefill", "rest")
#: the legs and the prefill leg's two parts (:data:`SPLIT`, from the start's traced prefills): every part judged
ALL_PARTS = (*PARTS, *SPLIT)


def leg_metric(part: str) -> str:
    """The record's name of a part's value: ``ttft_part.<part>_ms`` (its median over a start's probes; per start in
    ``start_values.ttft_part.<part>_ms``; a stack pair's judgement of it in ``pair.ttft_part.<part>_ms.*``)."""
    return f"{TTFT_PART_PREFIX}{part}_ms"


#: every part's record name, in the request's order, the prefill's split last (what a stack pair judges beside TTFT)
LEG_METRICS = tuple(leg_metric(part) for part in ALL_PARTS)

_SAID = {"prefill_gpu": "TTFT's prefill GPU time", "prefill_host": "TTFT's prefill host time"}


def part_of(metric: str) -> str:
    """The part a record name of :data:`LEG_METRICS` is of ("" for any other name)."""
    return ALL_PARTS[LEG_METRICS.index(metric)] if metric in LEG_METRICS else ""


def said(metric: str) -> str:
    """A metric as a verdict says it to a person: a leg of :data:`LEG_METRICS` as ``TTFT's <leg> leg`` (the prefill's
    split as its GPU or host time), any other name as it is (the stack pair's failure message, the terminal's line)."""
    part = part_of(metric)
    return _SAID.get(part) or (f"TTFT's {part} leg" if part else metric)

#: the meta_info timestamps they are cut at (SGLang with --enable-metrics), in the request's order
STAMPS = ("request_received_ts", "api_server_dispatch_finish_ts", "forward_entry_time", "prefill_finished_time")


def parts_ms(ttft_s: float | None, meta: Mapping[str, Any]) -> dict[str, float] | None:
    """One probe's TTFT in :data:`PARTS` (ms), from its TTFT as the client measured it and its response's
    ``meta_info``; None where a timestamp is missing or not a number, or the stamps run backwards."""
    if ttft_s is None:
        return None
    try:
        t = [float(meta[k]) for k in STAMPS]
    except (KeyError, TypeError, ValueError):
        return None
    if any(b < a for a, b in zip(t, t[1:])):
        return None
    legs = [(b - a) * 1000.0 for a, b in zip(t, t[1:])]
    return dict(zip(PARTS, [*legs, ttft_s * 1000.0 - sum(legs)]))


def start_medians(per_start: Sequence[Sequence[Mapping[str, float]]],
                  gpu_per_start: Sequence[Sequence[float]] = ()) -> dict[str, list[float]]:
    """Per part, each start's median over its probes' parts (the record's ``start_values.ttft_part.<part>_ms``: which
    leg moves between starts); empty unless every start has parts. With ``gpu_per_start`` (each start's traced
    prefills' GPU ms) the prefill leg's split too, where every start has some (perfgate.measuring.prefill_gpu)."""
    if not per_start or not all(per_start):
        return {}
    out = {name: [statistics.median(p[name] for p in start) for start in per_start] for name in PARTS}
    return out | split_medians(out["prefill"], gpu_per_start)


def spread(values: Sequence[float]) -> float:
    """p90 - p10 of ``values`` (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=10, method="inclusive")
    return q[-1] - q[0]


def part_properties(parts: Sequence[Mapping[str, float]], gpu_ms: Sequence[float] = ()) -> dict[str, object]:
    """The record's properties of the probes' parts (none without any): ``ttft_part.<part>_ms`` (the median over
    the probes), ``ttft_part.<part>_spread_ms`` (p90 - p10), and ``ttft_spread_in``, the probe leg with the widest.
    With ``gpu_ms`` (the start's traced prefills' GPU time, perfgate.measuring.prefill_gpu) the prefill leg's split:
    ``ttft_part.prefill_gpu_ms`` (their median) and its spread, ``ttft_part.prefill_host_ms`` (the prefill leg's
    median less it), and ``prefill_traces`` (how many prefills were traced)."""
    out = _leg_properties(parts)
    if out and gpu_ms:
        split = split_medians([float(out[leg_metric("prefill")])], [gpu_ms])  # type: ignore[arg-type]
        out[leg_metric(SPLIT[0])] = split[SPLIT[0]][0]
        out[f"{TTFT_PART_PREFIX}{SPLIT[0]}_spread_ms"] = spread(gpu_ms)
        out[leg_metric(SPLIT[1])] = split[SPLIT[1]][0]
        out[PREFILL_TRACES] = len(gpu_ms)
    return out


def _leg_properties(parts: Sequence[Mapping[str, float]]) -> dict[str, object]:
    if not parts:
        return {}
    out: dict[str, object] = {}
    widest = ("", -1.0)
    for name in PARTS:
        vals = [p[name] for p in parts]
        s = spread(vals)
        out[leg_metric(name)] = statistics.median(vals)
        out[f"{TTFT_PART_PREFIX}{name}_spread_ms"] = s
        if s > widest[1]:
            widest = (name, s)
    out[TTFT_SPREAD_IN] = widest[0]
    return out
