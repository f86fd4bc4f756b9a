"""Open-loop load: requests sent on a schedule (constant rate, or Poisson arrivals at a rate), not when the
previous one ends; each request's intended and actual send time are recorded in its output.

The schedule is pure (:func:`arrival_offsets`: seeded, bounded by a number of requests and a duration). The
sender (:func:`run_open_loop`) streams each request on the closed-loop client's connections and stream code
(:mod:`perfgate.client.batch`): a request takes an idle keep-alive connection or opens one, so as many are
open as requests are in flight.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfgate.client.batch import _connect, _request_bytes, _stream, _target, _watchdog, run_on_loop
from perfgate.client.connection import _Connection
from perfgate.client.stream import GenRequest, RequestOutput, StreamState

#: the arrival processes a schedule can follow
ARRIVALS = ("constant", "poisson")


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """When an open-loop run sends its requests: ``rate`` per second, ``arrival`` constant or Poisson
    (exponential gaps drawn from ``seed``), at most ``requests`` of them and none at or after ``duration_s``."""

    rate: float
    requests: int
    arrival: str = "poisson"
    duration_s: float | None = None
    seed: int = 0

    def offsets(self) -> tuple[float, ...]:
        return arrival_offsets(self.arrival, self.rate, self.requests, duration_s=self.duration_s, seed=self.seed)


def arrival_offsets(arrival: str, rate: float, requests: int, *, duration_s: float | None = None,
                    seed: int = 0) -> tuple[float, ...]:
    """Send times in seconds from the run's start: the first at 0, then gaps of ``1 / rate`` (constant) or
    exponential gaps of mean ``1 / rate`` (Poisson, the same for the same seed); at most ``requests`` of them,
    each before ``duration_s`` when given."""
    if arrival not in ARRIVALS:
        raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    if not rate > 0 or rate == float("inf"):
        raise ValueError(f"rate must be a number of requests per second > 0, got {rate!r}")
    if requests < 0:
        raise ValueError(f"requests must be >= 0, got {requests!r}")
    rng = random.Random(seed)
    out: list[float] = []
    t = 0.0
    for i in range(requests):
        if i:
            t += 1.0 / rate if arrival == "constant" else rng.expovariate(rate)
        if duration_s is not None and t >= duration_s:
            break
        out.append(t)
    return tuple(out)


def run_open_loop(url: str, requests_: Sequence[GenRequest], offsets: Sequence[float], *,
                  timeout_s: float = 300.0, time_scale: float = 1.0) -> tuple[list[RequestOutput], float]:
    """Send request ``i`` at ``offsets[i]`` seconds after the start, whatever is still in flight; returns the
    outputs (in order, each with ``intended_s`` and ``sent_s``) and the wall time, from the first send to the
    last response.

    ``time_scale``: a simulated server run with ``--sim-speedup s`` serves ``s`` times faster than its
    simulated time, so the offsets (in the server's time) are sent ``s`` times sooner, and the send times and
    the wall time are reported back in the server's time, as each stream's durations are. Never raises for
    a request.
    """
    if len(offsets) < len(requests_):
        raise ValueError(f"{len(requests_)} requests but only {len(offsets)} send times")
    scale = time_scale if time_scale > 0 else 1.0
    outs, wall = run_on_loop(_run_open(url, list(requests_), [float(x) for x in offsets], timeout_s, scale))
    return outs, wall * scale


async def _run_open(url: str, reqs: list[GenRequest], offsets: list[float], timeout_s: float,
                    scale: float) -> tuple[list[RequestOutput], float]:
    results: list[RequestOutput | None] = [None] * len(reqs)
    try:
        target = _target(url)
    except ValueError as e:
        return [RequestOutput(success=False, error=str(e)) for _ in reqs], 0.0
    idle: list[_Connection] = []
    live: dict[asyncio.Task[Any], StreamState] = {}
    t0 = time.perf_counter()

    async def one(i: int, r: GenRequest, state: StreamState) -> None:
        intended, sent = offsets[i], (state.start - t0) * scale
        conn: _Connection | None = None
        while idle and conn is None:
            c = idle.pop()
            if c.reusable():
                conn = c
            else:
                c.close()
        if conn is None:
            conn, err = await _connect(target)
        if conn is None:
            out = state.failed(err)
        else:
            out = await _stream(conn, state, _request_bytes(target, r), timeout_s, live)
            if conn.reusable():
                idle.append(conn)
            else:
                conn.close()
        results[i] = replace(out, intended_s=intended, sent_s=sent)

    dog = asyncio.ensure_future(_watchdog(live, timeout_s))
    tasks: list[asyncio.Task[None]] = []
    try:
        for i, r in enumerate(reqs):
            due = t0 + offsets[i] / scale
            while (delay := due - time.perf_counter()) > 0:  # uvloop's timers round to 1 ms: never send early
                await asyncio.sleep(delay)
            # the request's clock starts here, when the sender issues it: the loop's turn before its task runs,
            # and opening its connection, count in its latencies (as in run_batch), not in the send lag
            tasks.append(asyncio.ensure_future(one(i, r, StreamState(time.perf_counter()))))
        await asyncio.gather(*tasks)
    finally:
        dog.cancel()
        for c in idle:
            c.close()
    wall = time.perf_counter() - t0
    return [o if o is not None else RequestOutput(success=False, error="request not sent") for o in results], wall
