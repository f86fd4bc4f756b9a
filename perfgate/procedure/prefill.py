"""A start's prefills traced with SGLang's own profiler: the GPU time of each, apart from the host's.

After a start's last TTFT probe block, ``n`` more prefill-only requests (1 token out, unseen prompts, one at a time)
run under SGLang's profiler by stage (perfgate.client.profiler: ``/start_profile`` with ``profile_by_stage`` and
``num_steps`` n): it records the n prefills and flushes them when the next prefill comes
(``<id>-TP-0-EXTEND.trace.json.gz``). That next request decodes n + 3 tokens, so the profile's decode part (n decode
steps) is written too and no profile is left running on the server. perfgate.measuring.prefill_gpu reads each
prefill's GPU busy time from the prefill part. Nothing here is a latency: the profiled requests run slower than
unprofiled ones and are never counted among the probes.

Works unchanged on SGLang 0.5.16 and 0.5.17 (both wrap every forward in a ``step[EXTEND ...]`` span and count
prefills by stage) and on the simulated server. A server that refuses the profile, a trace that does not come in
time or cannot be read: no GPU times, and the reason (never raises).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from perfgate.client import GenRequest, stream_generate
from perfgate.client.profiler import start_body, start_profile, trace_complete, trace_files
from perfgate.measuring.prefill_gpu import prefill_busy_ms
from perfgate.measuring.trace import TraceError

__all__ = ["PrefillTrace", "trace_prefills"]

#: how many decode tokens past the profile's steps the last request asks for (the profile stops at the step after)
DECODE_MARGIN = 3


@dataclass(frozen=True, kw_only=True)
class PrefillTrace:
    """What one start's traced prefills gave: each one's GPU ms (empty on failure), the trace, and why not."""

    gpu_ms: tuple[float, ...] = ()
    trace: str = ""
    note: str = ""


def trace_prefills(url: str, prefills: Sequence[GenRequest], out_dir: str | Path, *, profile_id: str,
                   timeout_s: float = 120.0, poll_s: float = 0.2) -> PrefillTrace:
    """Trace ``prefills`` (sent one at a time, each with 1 token out) with SGLang's profiler on the server at ``url``,
    its files in ``out_dir`` (on the server's file system: a server perfgate launched); the last request of
    ``prefills`` is sent a second time decoding, to end the profile. Returns each traced prefill's GPU ms, or why
    there are none."""
    n = len(prefills)
    if n < 1:
        return PrefillTrace(note="no prefill to trace")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    refused = start_profile(url, start_body(out.resolve(), profile_id, n))
    if refused is not None:
        return PrefillTrace(note=refused)
    for req in prefills:
        res = stream_generate(url, replace(req, max_new_tokens=1), timeout_s=timeout_s)
        if not res.success:  # the profile may be left waiting for prefills: the next request's ends it all the same
            return PrefillTrace(note=f"a traced prefill failed: {res.error}")
    # the (n+1)-th prefill flushes the prefill part; its n + 1 decode steps record and end the decode part
    ender = stream_generate(url, replace(prefills[-1], max_new_tokens=n + DECODE_MARGIN), timeout_s=timeout_s)
    if not ender.success:
        return PrefillTrace(note=f"the request ending the profile failed: {ender.error}")
    extend, decode = trace_files(out, profile_id, "EXTEND", 1)[0], trace_files(out, profile_id, "DECODE", 1)[0]
    deadline = time.monotonic() + timeout_s
    while not (trace_complete(extend) and trace_complete(decode)):
        if time.monotonic() > deadline:
            missing = [p.name for p in (extend, decode) if not trace_complete(p)]
            return PrefillTrace(note=f"no complete trace after {timeout_s:g} s: missing {', '.join(missing)} in {out}")
        time.sleep(poll_s)
    try:
        gpu = prefill_busy_ms(extend)
    except TraceError as e:
        return PrefillTrace(trace=str(extend), note=str(e))
    if not gpu:
        return PrefillTrace(trace=str(extend), note=f"{extend.name}: no prefill in the trace")
    return PrefillTrace(gpu_ms=tuple(gpu), trace=str(extend))
