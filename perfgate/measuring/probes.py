"""TTFT probes, pure: a server start's first-token latency measured where its noise lives.

A start's TTFT used to be the median of its trials' (at batch 1, five requests at five moments of the start). A real
H200 serves batch-1 TTFT at two levels inside one start (~28 and ~45 ms, issue 40), so five requests read either
level by chance and an identical candidate read TTFT x1.415 [0.60, 3.34]. Probes are short prefill-only requests
(a prompt of the workload's set, 1 token out) sent one at a time in blocks spread through the start, one block before
each trial and one after the last (perfgate.procedure.closed): ``[workload] ttft_probes`` of them (default
:data:`perfgate.profiles.DEFAULT_TTFT_PROBES`, 36: 6 blocks of 6 at 5 trials). The start's TTFT is
:func:`perfgate.measuring.modes.start_estimate` of them (the lower mode's location where they are multi-modal, else
their median); the record says whether they were multi-modal and names the modes (:func:`mode_properties`), and so
for the trials' pooled inter-token latencies, whose tail the ITL p99 is. Where the server stamps its responses
(SGLang's ``--enable-metrics``) each probe is also split into its legs (perfgate.measuring.ttft_parts), and the record
names the leg that carries the spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from perfgate.measuring.modes import Modes, find_modes, start_estimate, thin
from perfgate.measuring.ttft_parts import part_properties
from perfgate.record import (
    ITL_MODES,
    ITL_MULTIMODAL,
    PREFILL_TRACE_NOTE,
    TTFT_MODES,
    TTFT_MULTIMODAL,
    TTFT_PROBE_FAILURES,
    TTFT_PROBE_MS,
    TTFT_PROBES,
)


class Probed(Protocol):
    """What :func:`mode_properties` reads of a measurement (perfgate.measuring.metrics.Measurement is one; a
    protocol, so that this module, which the measurement's module imports, imports nothing of it)."""

    @property
    def probes(self) -> Probes | None: ...

    @property
    def itl_sample(self) -> tuple[float, ...]: ...


__all__ = ["ITL_SAMPLE_MAX", "PROBED_METRIC", "Probed", "Probes", "block_sizes", "mode_properties", "pool",
           "itl_sample"]

#: the metric whose per-start value comes from the probes where a start has them (Measurement.start_values)
PROBED_METRIC = "ttft_ms"
#: the most inter-token latencies a start keeps for their modes (thinned evenly in time: perfgate.measuring.modes.thin)
ITL_SAMPLE_MAX = 2000


@dataclass(frozen=True, kw_only=True)
class Probes:
    """One start's TTFT probes (or several starts' pooled, :func:`pool`): their TTFTs in ms in the order sent, the
    blocks they were sent in, the probes that failed, and per start the start's estimate (pooled: the starts')."""

    ttft_ms: tuple[float, ...]
    blocks: int
    failures: int = 0
    #: the per-start estimates of a pool of starts (empty for one start: :attr:`estimate` is its own)
    per_start: tuple[float, ...] = field(default=())
    #: the probes' TTFTs in parts (perfgate.measuring.ttft_parts.parts_ms), for those whose response was stamped
    parts: tuple[dict[str, float], ...] = field(default=())
    #: the GPU time of each prefill the start traced with SGLang's profiler after its probes (perfgate.procedure
    #: .prefill, perfgate.measuring.prefill_gpu); empty where none was traced, and why in ``prefill_trace_note``
    prefill_gpu_ms: tuple[float, ...] = field(default=())
    prefill_trace_note: str = ""

    @property
    def n(self) -> int:
        return len(self.ttft_ms)

    @cached_property
    def modes(self) -> Modes:
        return find_modes(self.ttft_ms)

    @property
    def estimate(self) -> float | None:
        """The start's TTFT (:func:`perfgate.measuring.modes.start_estimate`); over a pool of starts the median of
        theirs."""
        if self.per_start:
            return statistics.median(self.per_start)
        return start_estimate(self.ttft_ms, self.modes) if self.ttft_ms else None


def block_sizes(total: int, trials: int) -> list[int]:
    """``total`` probes over ``trials + 1`` blocks (before each trial, after the last), as even as can be, the
    earlier blocks one more where they do not divide."""
    blocks = max(1, trials + 1)
    if total <= 0:
        return [0] * blocks
    q, r = divmod(total, blocks)
    return [q + (1 if b < r else 0) for b in range(blocks)]


def pool(per_start: Sequence[Probes | None]) -> Probes | None:
    """The probes of several starts as one (their TTFTs in start order, each start's estimate kept); None unless
    every start has some."""
    if not per_start or any(p is None or not p.n for p in per_start):
        return None
    ps = [p for p in per_start if p is not None]
    if len(ps) == 1:
        return ps[0]
    ests = tuple(e for p in ps if (e := p.estimate) is not None)
    return Probes(ttft_ms=tuple(x for p in ps for x in p.ttft_ms), blocks=sum(p.blocks for p in ps),
                  failures=sum(p.failures for p in ps), per_start=ests, parts=tuple(x for p in ps for x in p.parts),
                  prefill_gpu_ms=tuple(x for p in ps for x in p.prefill_gpu_ms) if all(p.prefill_gpu_ms for p in ps)
                  else (), prefill_trace_note="; ".join(dict.fromkeys(p.prefill_trace_note for p in ps
                                                                      if p.prefill_trace_note)))


def itl_sample(itls_ms: Sequence[float]) -> tuple[float, ...]:
    """A start's inter-token latencies kept for their modes: at most :data:`ITL_SAMPLE_MAX`, evenly through them."""
    return tuple(thin(itls_ms, ITL_SAMPLE_MAX))


def mode_properties(m: Probed) -> dict[str, object]:
    """The record's probe and mode properties (perfgate.record): ``ttft_probes``, ``ttft_probe_ms``,
    ``ttft_probe_failures`` where some failed, and where there were enough values to judge
    (:data:`perfgate.measuring.modes.MIN_SAMPLES`) ``ttft_modes`` and ``ttft_multimodal``; where the probes were
    stamped, their parts (:func:`perfgate.measuring.ttft_parts.part_properties`); ``itl_modes`` and
    ``itl_multimodal`` of the trials' pooled inter-token latencies. Over several starts the probes and the ITLs of
    every start are judged together (a host at one level for a whole start and the other for the next shows two)."""
    out: dict[str, object] = {}
    p = m.probes
    if p is not None:
        out[TTFT_PROBES] = p.n
        est = p.estimate
        if est is not None:
            out[TTFT_PROBE_MS] = est
        if p.failures:
            out[TTFT_PROBE_FAILURES] = p.failures
        if p.modes.judged:
            out[TTFT_MODES] = p.modes.text("ms")
            out[TTFT_MULTIMODAL] = p.modes.multimodal
        out.update(part_properties(p.parts, p.prefill_gpu_ms))
        if p.prefill_trace_note:
            out[PREFILL_TRACE_NOTE] = p.prefill_trace_note
    if m.itl_sample:
        im = find_modes(m.itl_sample)
        if im.judged:
            out[ITL_MODES] = im.text("ms")
            out[ITL_MULTIMODAL] = im.multimodal
    return out
