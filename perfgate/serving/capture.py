"""Capturing SGLang's own profiler trace of a few decode steps (``POST /start_profile``).

SGLang (0.5.17 and 0.5.23 alike) profiles with torch's profiler when it receives ``/start_profile``.
With ``profile_by_stage`` and ``num_steps`` it starts at the next prefill, flushes that part when the
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

import gzip
import json
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from perfgate.client import GenRequest, RequestOutput, stream_generate

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


def start_body(output_dir: str | Path, profile_id: str, num_steps: int) -> dict[str, Any]:
    """The JSON body of ``POST /start_profile`` (fields of SGLang's ``ProfileReq``)."""
    return {
        "output_dir": str(output_dir),
        "num_steps": int(num_steps),
        "activities": ["CPU", "GPU"],  # CPU: the step spans and the launches; GPU: the kernels
        "profile_by_stage": True,  # the decode steps in a file of their own
        "with_stack": False,  # Python stacks make the trace ~10x larger and say nothing we read
        "record_shapes": False,
        "profile_id": profile_id,
    }


def trace_files(output_dir: str | Path, profile_id: str, stage: str, tp: int) -> list[Path]:
    """Where SGLang writes rank ``r``'s trace of ``stage`` (``DECODE`` or ``EXTEND``), for r < tp."""
    return [Path(output_dir) / f"{profile_id}-TP-{r}-{stage}.trace.json.gz" for r in range(tp)]


def _complete(path: Path) -> bool:
    """A trace file exists and is whole (torch writes it in pieces; a half-written gzip does not parse)."""
    try:
        with gzip.open(path, "rb") as f:
            json.loads(f.read())
        return True
    except (OSError, EOFError, ValueError, zlib.error):
        return False


def capture(url: str, output_dir: str | Path, request: GenRequest, *, profile_id: str, num_steps: int = 16,
            tp: int = 1, timeout_s: float = 300.0, poll_s: float = 0.5) -> Capture:
    """Profile ``num_steps`` decode steps of ``request`` on the server at ``url``; returns the trace files.

    ``request`` must decode more than ``num_steps`` steps (the profile stops at the step after the last
    one recorded). Raises :class:`CaptureError` naming what failed.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        r = requests.post(f"{url}/start_profile", json=start_body(out.resolve(), profile_id, num_steps), timeout=60)
    except requests.RequestException as e:
        raise CaptureError(f"POST {url}/start_profile failed: {type(e).__name__}: {e}") from e
    if r.status_code != 200:
        raise CaptureError(f"POST {url}/start_profile answered HTTP {r.status_code}: {r.text[:300].strip()}")
    res = stream_generate(url, request, timeout_s=timeout_s)
    if not res.success:
        raise CaptureError(f"the profiled request failed: {res.error}")
    decode = trace_files(out, profile_id, "DECODE", tp)
    deadline = time.monotonic() + timeout_s
    while not all(_complete(p) for p in decode):
        if time.monotonic() > deadline:
            missing = [p.name for p in decode if not _complete(p)]
            raise CaptureError(
                f"no complete trace after {timeout_s:g} s: missing {', '.join(missing)} in {out} (the request decoded "
                f"{res.completion_tokens} tokens; the profile stops after {num_steps} decode steps)")
        time.sleep(poll_s)
    extend = tuple(p for p in trace_files(out, profile_id, "EXTEND", tp) if p.exists())
    return Capture(profile_id=profile_id, decode=tuple(decode), extend=extend, num_steps=num_steps, request=res,
                   wall_s=time.monotonic() - t0)
