"""A start's prefills traced with SGLang's own profiler: the GPU time of each, apart from the host's.

After a start's last TTFT probe block, ``n`` more prefill-only requests (1 token out, unseen prompts, one at a time)
run under SGLang's profiler, started by ``/start_profile`` with no step count and stopped by ``/stop_profile``
(perfgate.client.profiler), which writes everything between into ``<id>-TP-0.trace.json.gz``. Not by stage: SGLang's
overlap scheduler runs one decode batch after a prefill-only request before it sees the request finished, and a
profile by stage flushes its prefill part at that first decode batch (one prefill traced) and then counts prefills
across the decode part, whose file it writes under the prefill part's name (seen on an H100, SGLang 0.5.17,
2026-12-07). perfgate.measuring.prefill_gpu reads each
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
from perfgate.client.profiler import manual_body, start_profile, stop_profile, trace_complete, trace_files
from perfgate.measuring.prefill_gpu import prefill_busy_ms
from perfgate.measuring.trace import TraceError

__all__ = ["PrefillTrace", "trace_prefills"]

@dataclass(frozen=True, kw_only=True)
class PrefillTrace:
    """What one start's traced prefills gave: each one's GPU ms (empty on failure), the trace, and why not."""

    gpu_ms: tuple[float, ...] = ()
    trace: str = ""
    note: str = ""


def trace_prefills(url: str, prefills: Sequence[GenRequest], out_dir: str | Path, *, profile_id: str,
                   timeout_s: float = 120.0, poll_s: float = 0.2) -> PrefillTrace:
    """Trace ``prefills`` (sent one at a time, each with 1 token out) with SGLang's profiler on the server at ``url``,
    its file in ``out_dir`` (on the server's file system: a server perfgate launched). Returns each traced prefill's
    GPU ms, or why there are none."""
    if not prefills:
        return PrefillTrace(note="no prefill to trace")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    refused = start_profile(url, manual_body(out.resolve(), profile_id))
    if refused is not None:
        return PrefillTrace(note=refused)
    failed = ""
    for req in prefills:
        res = stream_generate(url, replace(req, max_new_tokens=1), timeout_s=timeout_s)
        if not res.success:
            failed = f"a traced prefill failed: {res.error}"
            break
    stopped = stop_profile(url, timeout_s=timeout_s)  # always: never leave a profile running on the server
    if failed or stopped is not None:
        return PrefillTrace(note=failed or str(stopped))
    path = trace_files(out, profile_id, "", 1)[0]
    deadline = time.monotonic() + timeout_s
    while not trace_complete(path):
        if time.monotonic() > deadline:
            return PrefillTrace(note=f"no complete trace after {timeout_s:g} s: missing {path.name} in {out}")
        time.sleep(poll_s)
    try:
        gpu = prefill_busy_ms(path)
    except TraceError as e:
        return PrefillTrace(trace=str(path), note=str(e))
    return PrefillTrace(gpu_ms=tuple(gpu), trace=str(path))
