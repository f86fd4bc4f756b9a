"""A prefill's GPU time, apart from its host time, read from SGLang's own profiler trace (pure).

Batch-1 TTFT's level belongs to the server process (28-41 ms between processes on one H100, SGLang 0.5.17) and the
whole move is the ``prefill`` leg (perfgate.measuring.ttft_parts: ``forward_entry_time`` -> ``prefill_finished_time``),
which moved 25 % a start over seven H200 pairs: a 10 % slower prefill kernel hides in it. The prefill's kernels run on
the GPU for a time that does not depend on where the scheduler's threads sit, so each start traces a few prefill-only
requests with SGLang's profiler (perfgate.procedure.prefill) and this module reads, per prefill (a
``step[EXTEND bs=<n> toks=<t>]`` GPU span, which SGLang 0.5.16 and 0.5.17 write around every forward), the time the
GPU was busy with the kernels launched inside it (the union of their intervals, so overlapping streams count once).
The prefill leg splits in two (:data:`SPLIT`):

- ``prefill_gpu``: a start's median over its traced prefills of that busy time: the forward's kernels;
- ``prefill_host``: the start's ``prefill`` leg (the median over its probes) less its ``prefill_gpu``: launching the
  kernels one by one (the h200 profiles run prefill without CUDA graphs), the Python between them, sampling, and
  whatever else the host does before the first token is stamped.

Each is judged in a stack pair on its own start-pair ratios against its own noise (perfgate.profiles.noise classes
``prefill-gpu`` and ``ttft-leg``), so a slower kernel lands in ``prefill_gpu`` and a slower launch path in
``prefill_host``, each where the other's noise cannot hide it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from perfgate.measuring.trace import EXTEND_STEP, busy_within, read_trace

__all__ = ["SPLIT", "prefill_busy_ms", "split_medians"]

#: the two parts the prefill leg splits into, GPU first
SPLIT = ("prefill_gpu", "prefill_host")


def prefill_busy_ms(path: str | Path) -> list[float]:
    """Per prefill of one rank's prefill-stage trace (``<id>-TP-<rank>-EXTEND.trace.json.gz``), in order: the ms
    the GPU was busy with the kernels that started inside its ``step[EXTEND ...]`` span. Raises
    :class:`perfgate.measuring.trace.TraceError` for a file that is no prefill-stage trace."""
    t = read_trace(path, step=EXTEND_STEP)
    return [busy_within(t, s) / 1000.0 for s in t.steps]


def split_medians(prefill_ms: Sequence[float], gpu_ms: Sequence[Sequence[float]]) -> dict[str, list[float]]:
    """Per part of :data:`SPLIT`, each start's value: ``prefill_gpu`` the median of the start's traced prefills'
    GPU time, ``prefill_host`` the start's prefill leg (``prefill_ms``, its median over its probes) less it. Empty
    unless every start has both (a start whose trace failed leaves the pair unsplit, never half split)."""
    if not prefill_ms or len(prefill_ms) != len(gpu_ms) or not all(gpu_ms):
        return {}
    gpu = [statistics.median(g) for g in gpu_ms]
    return {SPLIT[0]: gpu, SPLIT[1]: [p - g for p, g in zip(prefill_ms, gpu)]}
