"""Blocking HTTP for one request at a time (``requests``): a single streamed ``/generate``, JSON GETs,
``/flush_cache``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import requests

from perfgate.client.stream import SPEEDUP_HEADER, GenRequest, RequestOutput, StreamState, _speedup, _stalled

Clock = Callable[[], float]


def stream_generate(
    url: str,
    request: GenRequest,
    *,
    session: requests.Session | None = None,
    timeout_s: float = 300.0,
    clock: Clock = time.perf_counter,
    chunks: Iterable[bytes] | None = None,
) -> RequestOutput:
    """POST one streaming ``/generate`` and time it (one request, blocking); never raises.

    ``chunks`` replaces the HTTP response body (tests script the stream and the clock). Batches go
    through :func:`run_batch`, which streams every request on one event loop.
    """
    state = StreamState(clock())
    resp = None
    try:
        if chunks is None:
            sess = session or requests.Session()
            resp = sess.post(f"{url}/generate", json=request.payload(stream=True), stream=True,
                             timeout=(10.0, timeout_s))
            if resp.status_code != 200:
                return state.failed(f"HTTP {resp.status_code}: {resp.text[:500]}")
            state.scale = _speedup(resp.headers.get(SPEEDUP_HEADER))
            source: Iterator[bytes] = resp.iter_content(chunk_size=None)
        else:
            source = iter(chunks)
        deadline = state.start + timeout_s
        for raw in source:
            now = clock()
            if not state.feed(raw, now):
                return state.failed(state.error)
            if now > deadline:
                return state.failed(f"timed out after {timeout_s:.0f} s ({state.last_tokens} tokens received)")
    except requests.RequestException as e:
        if isinstance(e, requests.Timeout) or "Read timed out" in str(e):  # a hung server: say so plainly
            return state.failed(_stalled(timeout_s, state.last_tokens))
        return state.failed(f"{type(e).__name__}: {e}"[:500])
    except Exception as e:  # never raise: a failure is a counted output
        return state.failed(f"{type(e).__name__}: {e}"[:500])
    finally:
        if resp is not None:
            resp.close()
    return state.finish(clock())


def get_json(url: str, path: str, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """GET a JSON endpoint; None on any failure."""
    try:
        r = requests.get(f"{url}{path}", timeout=timeout_s)
        if r.status_code != 200:
            return None
        obj = r.json()
        return obj if isinstance(obj, dict) else None
    except (requests.RequestException, ValueError):
        return None


def flush_cache(url: str) -> bool:
    try:
        return requests.post(f"{url}/flush_cache", timeout=30).status_code == 200
    except requests.RequestException:
        return False
