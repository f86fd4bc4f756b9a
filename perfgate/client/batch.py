"""A batch of streaming requests, at most ``concurrency`` in flight, on one event loop (uvloop's where
installed): each worker keeps one HTTP/1.1 connection (:mod:`perfgate.client.connection`)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from perfgate.client.connection import CONNECT_TIMEOUT_S, DRAIN_S, _Connection
from perfgate.client.stream import GenRequest, RequestOutput, StreamState, _stalled


def run_batch(
    url: str,
    requests_: Sequence[GenRequest],
    *,
    concurrency: int = 1,
    timeout_s: float = 300.0,
) -> tuple[list[RequestOutput], float]:
    """Send requests with at most ``concurrency`` in flight; returns outputs (in order) and wall time.

    Every in-flight request streams on one event loop (uvloop where installed), each over its own
    keep-alive connection read by :class:`_Connection`: the bytes are timed as they arrive, framed in
    place and never queued. Never raises for a request; a Ctrl-C or SIGTERM ends the batch at once (the
    loop's tasks are cancelled, nothing waits out a timeout).
    """
    t0 = time.perf_counter()
    leads: list[tuple[float, float]] = []
    outs = run_on_loop(_run_batch(url, list(requests_), max(1, concurrency), timeout_s, leads))
    wall = time.perf_counter() - t0
    if leads:  # perfgate's sped-up simulator: the lead its clock gained over the batch, as each request's durations
        wall += max(end for _, end in leads) - min(start for start, _ in leads)
    return outs, wall


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop where it is installed (a cheaper wake-up per chunk), unless PERFGATE_CLIENT_LOOP=asyncio."""
    if os.environ.get("PERFGATE_CLIENT_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    ssl: bool
    path: str  # the URL's path prefix + /generate
    host_header: str


def _target(url: str) -> _Target:
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    tls = u.scheme == "https"
    port = u.port or (443 if tls else 80)
    host = u.hostname
    netloc = f"[{host}]" if ":" in host else host
    if u.port:
        netloc += f":{u.port}"
    return _Target(host=host, port=port, ssl=tls, path=(u.path.rstrip("/") or "") + "/generate", host_header=netloc)


def _request_bytes(target: _Target, request: GenRequest) -> bytes:
    body = json.dumps(request.payload(stream=True)).encode()
    head = (f"POST {target.path} HTTP/1.1\r\nHost: {target.host_header}\r\nUser-Agent: perfgate\r\n"
            f"Accept: */*\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


async def _run_batch(url: str, reqs: list[GenRequest], concurrency: int, timeout_s: float,
                     leads: list[tuple[float, float]]) -> list[RequestOutput]:
    results: list[RequestOutput | None] = [None] * len(reqs)
    try:
        target = _target(url)
    except ValueError as e:
        return [RequestOutput(success=False, error=str(e)) for _ in reqs]
    todo = iter(enumerate(reqs))  # shared by the workers: one loop, one thread, no lock needed
    # no per-read timer (one armed and cancelled for every chunk costs more than reading it): one watchdog per
    # batch ends any stream that has received nothing for timeout_s
    live: dict[asyncio.Task[Any], StreamState] = {}

    async def worker() -> None:
        conn: _Connection | None = None
        try:
            for i, r in todo:
                state = StreamState(time.perf_counter())  # a request's time includes opening its connection
                if conn is not None and not conn.reusable():
                    conn.close()
                    conn = None
                if conn is None:
                    conn, err = await _connect(target)
                    if conn is None:
                        results[i] = state.failed(err)
                        continue
                results[i] = await _stream(conn, state, _request_bytes(target, r), timeout_s, live)
                if state.ahead0 is not None:  # the simulator's clock lead at the request's arrival and last tokens
                    leads.append((state.ahead0, state.ahead0 + state.shift))
        finally:
            if conn is not None:
                conn.close()

    dog = asyncio.ensure_future(_watchdog(live, timeout_s))
    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(reqs)))))
    finally:
        dog.cancel()
    return [o if o is not None else RequestOutput(success=False, error="request not sent") for o in results]


async def _watchdog(live: dict[asyncio.Task[Any], StreamState], timeout_s: float) -> None:
    """Ends any stream of ``live`` that has received nothing for ``timeout_s`` (one timer per batch)."""
    while True:
        await asyncio.sleep(min(1.0, timeout_s / 4))
        now = time.perf_counter()
        for task, state in list(live.items()):
            if now - state.last_rx > timeout_s and not state.stalled:
                state.stalled = True
                task.cancel()


def run_on_loop(coro: Any) -> Any:
    """Run ``coro`` to its end on a fresh event loop (uvloop's where installed)."""
    factory = _loop_factory()
    if factory is not None and hasattr(asyncio, "Runner"):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(coro)
    return asyncio.run(coro)


async def _connect(target: _Target) -> tuple[_Connection | None, str]:
    loop = asyncio.get_running_loop()
    ctx = None
    if target.ssl:
        import ssl

        ctx = ssl.create_default_context()
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(_Connection, target.host, target.port, ssl=ctx), CONNECT_TIMEOUT_S)
    except asyncio.TimeoutError:
        return None, f"cannot connect to {target.host}:{target.port}: no answer within {CONNECT_TIMEOUT_S:g} s"
    except OSError as e:
        return None, f"cannot connect to {target.host}:{target.port}: {type(e).__name__}: {e}"[:500]
    return conn, ""


async def _stream(conn: _Connection, state: StreamState, data: bytes, timeout_s: float,
                  live: dict[asyncio.Task[Any], StreamState]) -> RequestOutput:
    task = asyncio.current_task()
    assert task is not None
    live[task] = state
    try:
        out = await conn.send(data, state, state.start + timeout_s, timeout_s)
        if conn.busy():
            if out.success:  # [DONE] came: the response's end (its last chunk) is normally right behind it
                await conn.wait_idle(DRAIN_S)
            else:  # a failed stream is not read to its end
                conn.close()
        return out
    except asyncio.CancelledError:
        conn.close()
        if not state.stalled:
            raise  # the batch itself is being cancelled (Ctrl-C, SIGTERM)
        task.uncancel() if hasattr(task, "uncancel") else None
        return state.failed(_stalled(timeout_s, state.last_tokens))
    except Exception as e:  # never raise: a failure is a counted output
        conn.close()
        return state.failed(f"{type(e).__name__}: {e}"[:500])
    finally:
        live.pop(task, None)


