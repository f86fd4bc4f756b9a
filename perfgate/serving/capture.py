"""Capturing SGLang's own profiler trace of a few decode steps (``POST /start_profile``).

SGLang's profiler by stage (perfgate.client.profiler) starts at the next prefill, flushes that part when the
first decode batch comes (``<id>-TP-<rank>-EXTEND.trace.json.gz``), then records ``num_steps`` decode
batches and stops by itself (``<id>-TP-<rank>-DECODE.trace.json.gz``), one Chrome-trace file per
tensor-parallel rank, in ``output_dir`` on the server's file system. Each forward is wrapped in a
``step[<MODE> bs=<n>]`` span (a draft+verify cycle is one decode batch), so the trace says where every
step begins and ends. The simulated server writes the same files from its cost model.

One request is sent while it records; it runs slower than an unprofiled one, so nothing here is ever
a throughput measurement. :func:`capture` never leaves a profile running on success; on failure it
says what the server answered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from perfgate.client import GenRequest, RequestOutput, stream_generate
from perfgate.client.profiler import start_body, start_profile, trace_complete, trace_files

__all__ = ["Capture", "CaptureError", "capture", "start_body", "trace_files"]


class CaptureError(RuntimeError):
    """The server did not produce a trace (refused ``/start_profile``, or no file in time)."""


@dataclass(frozen=True)
class Capture:
    """The trace files of one capture: per rank, the decode part (and the prefill part if written)."""

    profile_id: str
    decode: tuple[Path, ...]  # index = tensor-parallel rank
    extend: tuple[Path, ...]
    num_steps: int
    request: RequestOutput
    wall_s: float


def capture(url: str, output_dir: str | Path, request: GenRequest, *, profile_id: str, num_steps: int = 16,
            tp: int = 1, timeout_s: float = 300.0, poll_s: float = 0.5) -> Capture:
    """Profile ``num_steps`` decode steps of ``request`` on the server at ``url``; returns the trace files.

    ``request`` must decode more than ``num_steps`` steps (the profile stops at the step after the last
    one recorded). Raises :class:`CaptureError` naming what failed.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    refused = start_profile(url, start_body(out.resolve(), profile_id, num_steps))
    if refused is not None:
        raise CaptureError(refused)
    res = stream_generate(url, request, timeout_s=timeout_s)
    if not res.success:
        raise CaptureError(f"the profiled request failed: {res.error}")
    decode = trace_files(out, profile_id, "DECODE", tp)
    deadline = time.monotonic() + timeout_s
    while not all(trace_complete(p) for p in decode):
        if time.monotonic() > deadline:
            missing = [p.name for p in decode if not trace_complete(p)]
            raise CaptureError(
                f"no complete trace after {timeout_s:g} s: missing {', '.join(missing)} in {out} (the request decoded "
                f"{res.completion_tokens} tokens; the profile stops after {num_steps} decode steps)")
        time.sleep(poll_s)
    extend = tuple(p for p in trace_files(out, profile_id, "EXTEND", tp) if p.exists())
    return Capture(profile_id=profile_id, decode=tuple(decode), extend=extend, num_steps=num_steps, request=res,
                   wall_s=time.monotonic() - t0)
