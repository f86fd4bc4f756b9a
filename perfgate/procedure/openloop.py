"""The open loop: trials of one request rate on a running server, and one level judged as the goodput search
decides a bracket's end.

Each trial of a rate follows its own seeded schedule (seed + 2i for the rate's i-th trial) on fresh prompts, with
SGLang's prefix cache flushed before it, as the closed-loop trials are. Each trial's measured window follows
``[slo] warmup_requests`` sent at the rate on the same open loop (the first trial after a server start included),
so the window starts on a server already at that load; the warm-up's requests are not counted. A top-up trial (a
level given more requests) is sized by request count instead of ``[slo] requests`` and ``duration_s``
(:func:`perfgate.measuring.goodput.top_up_size`). The open-loop client sends in the server's time: a simulated
server run with ``--sim-speedup s`` (its ``/server_info`` says so) gets the schedule ``s`` times sooner, and every
duration comes back in simulated time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from perfgate.measuring.goodput import LoadLevel, LoadTrial, judge_level, load_trial, top_up_size
from perfgate.measuring.workload import load_prompts, requests_for

if TYPE_CHECKING:
    from perfgate.client import RequestOutput
    from perfgate.profiles import Workload
    from perfgate.profiles.slo import Slo

__all__ = ["PROMPT_BASE", "OpenLoop", "real_time", "time_scale", "warmed_offsets"]

#: where the load records' prompts start in the endless prompt sequence (past the closed-loop records')
PROMPT_BASE = 100_000


@contextlib.contextmanager
def real_time(url: str, scale: float) -> Iterator[None]:
    """Run perfgate's simulator at speed-up 1 for the block, then at ``scale`` again (nothing for a real SGLang,
    ``scale`` 1). An open loop cannot be kept in simulated time at a higher speed-up: the simulator sleeps 1/s
    of each step and its clock gains the rest at the step's end, so a request sent at a random moment lands in
    the first 1/s of a simulated step and waits the rest of it (at 4x, a 40-request Poisson check read TTFT
    +29 % against speed-up 1, the same server otherwise)."""
    import requests

    def put(s: float) -> None:
        try:
            r = requests.post(f"{url}/perfgate/sim_speedup", json={"speedup": s}, timeout=30)
        except requests.RequestException as e:
            raise RuntimeError(f"the simulator at {url} did not take speed-up {s:g}: {e}") from None
        if r.status_code != 200:
            raise RuntimeError(f"the simulator at {url} did not take speed-up {s:g}: HTTP {r.status_code} {r.text}")

    if scale == 1.0:
        yield
        return
    put(1.0)
    try:
        yield
    finally:
        put(scale)


def time_scale(url: str) -> float:
    """The simulator's ``--sim-speedup`` from its ``/server_info`` (1 for a real SGLang)."""
    from perfgate.client import get_json

    info = get_json(url, "/server_info") or {}
    try:
        s = float(info.get("perfgate_sim_speedup") or 1.0)
    except (TypeError, ValueError):
        return 1.0
    return s if s > 0 else 1.0


def warmed_offsets(warmup: tuple[float, ...], measured: tuple[float, ...], rate: float) -> tuple[tuple[float, ...],
                                                                                              float]:
    """One open loop of a trial: the warm-up's send times, then the measured schedule shifted to start one mean
    gap (``1 / rate``) after the warm-up's last send; and that shift (the measured window's start)."""
    if not warmup:
        return measured, 0.0
    shift = warmup[-1] + 1.0 / rate
    return warmup + tuple(shift + x for x in measured), shift


#: called with a trial's outputs when some of its requests failed (the caller asks whether the server died, and
#: may end the run by raising)
OnFailures = Callable[[Sequence["RequestOutput"]], None]


class OpenLoop:
    """Open-loop trials of rates on the server at ``url``, on workload ``w`` (its prompts, tokens, timeout and
    closed-loop warm-up) under the SLOs ``slo`` (the schedule: arrival, requests, duration, warm-up, seed): the
    closed-loop warm-up once, then each trial of a rate on unseen prompts from ``offset`` on, its measured window
    after a warm-up at that rate. An instance is one server start: the same rate's trials follow the same seeds
    on every start. Calling it is a goodput search's ``measure`` (:data:`perfgate.measuring.goodput.Measure`)."""

    def __init__(self, url: str, w: Workload, slo: Slo, *, offset: int = PROMPT_BASE,
                 on_failures: OnFailures | None = None) -> None:
        self.url, self.w, self.slo = url, w, slo
        self.scale = time_scale(url)  # the simulator's speed-up (1 for SGLang)
        self.prompts = load_prompts(w.prompts)
        self.offset = offset
        self.on_failures = on_failures
        self.done: dict[float, int] = {}  # trials measured per rate on this server
        self._warm = False

    def __call__(self, rate: float, trials: int, requests: int | None = None) -> list[LoadTrial]:
        """``trials`` more trials of ``rate`` (requests per second): on the SLOs' schedule, or of ``requests``
        requests each where given (a top-up)."""
        from perfgate.client import Schedule, flush_cache, run_batch, run_open_loop
        from perfgate.client.schedule import arrival_offsets

        w, slo = self.w, self.slo
        if not self._warm and w.warmup:
            run_batch(self.url, requests_for(w, self.prompts, w.warmup, offset=self.offset), concurrency=w.warmup,
                      timeout_s=w.request_timeout_s)
            self.offset += w.warmup
        self._warm = True
        out: list[LoadTrial] = []
        for _ in range(trials):
            # trial i of a rate follows schedule seed + 2i (its warm-up seed + 2i + 1): the level's requests sample
            # the arrival process, not one draw of it, and the same rate's trials follow the same seeds every start
            i = self.done.get(rate, 0)
            self.done[rate] = i + 1
            sched = Schedule(rate=rate, requests=requests or slo.requests, arrival=slo.arrival,
                             duration_s=slo.duration_s if requests is None else None, seed=slo.seed + 2 * i)
            warm = arrival_offsets(slo.arrival, rate, slo.warmup_requests, seed=slo.seed + 2 * i + 1)
            offsets, shift = warmed_offsets(warm, sched.offsets(), rate)
            nw = len(warm)
            flush_cache(self.url)
            reqs = requests_for(w, self.prompts, len(offsets), offset=self.offset)
            self.offset += len(offsets)
            with real_time(self.url, self.scale):  # the simulator at speed-up 1 while the schedule runs
                outs, wall = run_open_loop(self.url, reqs, offsets, timeout_s=w.request_timeout_s)
            out.append(load_trial(outs[nw:], max(wall - shift, 0.0), slo, rate))
            if self.on_failures is not None and any(not o.success for o in outs):
                self.on_failures(outs)
        return out

    def level(self, rate: float, trials: int) -> LoadLevel:
        """One rate judged as the search decides a bracket's end: ``trials`` trials, then one more at a time
        while it is unresolved, up to ``[slo] max_requests``."""
        done = self(rate, trials)
        lv = judge_level(rate, done, self.slo)
        while lv.meets is None and not lv.behind and lv.requests < self.slo.budget:
            more = self(rate, 1, top_up_size(self.slo, lv.requests, len(done)))
            if not any(t.requests for t in more):
                break
            done += more
            lv = judge_level(rate, done, self.slo)
        return lv
