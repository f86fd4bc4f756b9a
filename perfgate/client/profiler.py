"""SGLang's profiler over HTTP: ``POST /start_profile`` and where its trace files land (``requests``).

SGLang (0.5.16, 0.5.17 and 0.5.23 alike) profiles with torch's profiler when it receives ``/start_profile``. With
``profile_by_stage`` and ``num_steps`` N it starts at the next prefill and records prefills until the (N+1)-th prefill
or the first decode batch, whichever comes first, which flushes that part (``<id>-TP-<rank>-EXTEND.trace.json.gz``);
then it records N decode batches and stops by itself (``<id>-TP-<rank>-DECODE.trace.json.gz``): one Chrome-trace file
per tensor-parallel rank, in ``output_dir`` on the server's file system. A profile by stage is over only when its
decode part is written: until then the next decode batch starts one. perfgate.serving.capture traces decode steps
this way, perfgate.procedure.prefill a start's prefills.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import requests

__all__ = ["start_body", "manual_body", "start_profile", "stop_profile", "trace_files", "trace_complete"]


def start_body(output_dir: str | Path, profile_id: str, num_steps: int) -> dict[str, Any]:
    """The JSON body of ``POST /start_profile`` (fields of SGLang's ``ProfileReq``): by stage, ``num_steps`` of each."""
    return {
        "output_dir": str(output_dir),
        "num_steps": int(num_steps),
        "activities": ["CPU", "GPU"],  # CPU: the step spans and the launches; GPU: the kernels
        "profile_by_stage": True,  # the prefills and the decode steps each in a file of their own
        "with_stack": False,  # Python stacks make the trace ~10x larger and say nothing we read
        "record_shapes": False,
        "profile_id": profile_id,
    }


def manual_body(output_dir: str | Path, profile_id: str) -> dict[str, Any]:
    """The body of a ``/start_profile`` that records every step until ``/stop_profile`` (no step count, not by
    stage): one file, ``<id>-TP-<rank>.trace.json.gz``."""
    body = start_body(output_dir, profile_id, 1)
    del body["num_steps"]
    body["profile_by_stage"] = False
    return body


def stop_profile(url: str, *, timeout_s: float = 120.0) -> str | None:
    """``POST {url}/stop_profile`` (SGLang writes the trace before it answers); None when it did, else what it
    answered."""
    try:
        r = requests.post(f"{url}/stop_profile", timeout=timeout_s)
    except requests.RequestException as e:
        return f"POST {url}/stop_profile failed: {type(e).__name__}: {e}"
    if r.status_code != 200:
        return f"POST {url}/stop_profile answered HTTP {r.status_code}: {r.text[:300].strip()}"
    return None


def start_profile(url: str, body: dict[str, Any], *, timeout_s: float = 60.0) -> str | None:
    """``POST {url}/start_profile`` with ``body``; None when the server took it, else what it answered."""
    try:
        r = requests.post(f"{url}/start_profile", json=body, timeout=timeout_s)
    except requests.RequestException as e:
        return f"POST {url}/start_profile failed: {type(e).__name__}: {e}"
    if r.status_code != 200:
        return f"POST {url}/start_profile answered HTTP {r.status_code}: {r.text[:300].strip()}"
    return None


def trace_files(output_dir: str | Path, profile_id: str, stage: str, tp: int) -> list[Path]:
    """Where SGLang writes rank ``r``'s trace of ``stage`` (``DECODE`` or ``EXTEND``; ``""``: a profile not by stage),
    for r < tp."""
    return [Path(output_dir) / f"{profile_id}-TP-{r}{f'-{stage}' if stage else ''}.trace.json.gz" for r in range(tp)]


def trace_complete(path: Path) -> bool:
    """A trace file exists and is whole (torch writes it in pieces; a half-written gzip does not parse)."""
    try:
        with gzip.open(path, "rb") as f:
            json.loads(f.read())
        return True
    except (OSError, EOFError, ValueError, zlib.error):
        return False
