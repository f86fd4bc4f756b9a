"""Measuring under load on a record's server: one open-loop rate with the workload's trials, the goodput
search over rates, and the closed-loop levels of the crossover record (both modes).

Each trial of a level follows its own seeded schedule (seed + 2i for the rate's i-th trial) on fresh
prompts, with SGLang's prefix cache flushed before it, as the closed-loop trials are. Each trial's measured
window follows ``[slo] warmup_requests`` sent at the level's rate on the same open loop (the first trial after
a server start included), so the window starts on a server already at that load; the warm-up's requests are
not counted. A top-up trial (a level the search gives more requests) is sized by request count instead of
``[slo] requests`` and ``duration_s`` (:func:`perfgate.measuring.goodput.top_up_size`).
The open-loop client sends in the server's time: a simulated server run with ``--sim-speedup s`` (its
``/server_info`` says so) gets the schedule ``s`` times sooner, and every duration comes back in simulated
time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from perfgate.categories import Category, Outcome
from perfgate.measuring.goodput import (
    AcrossStarts,
    LoadLevel,
    LoadTrial,
    Search,
    Slo,
    judge_level,
    load_trial,
    search,
    top_up_size,
)
from perfgate.measuring.metrics import Measurement

if TYPE_CHECKING:
    from perfgate.plugin.runner import PerfRun
    from perfgate.profiles import Workload
    from perfgate.profiles.config import ServerConfig
    from perfgate.record import Case

#: where the load records' prompts start in the endless prompt sequence (past the closed-loop records')
PROMPT_BASE = 100_000


@dataclass(frozen=True, kw_only=True)
class Goodput:
    """A goodput search of one mode against its SLOs (``perf_check(g, "goodput_rps")`` judges it)."""

    mode: str
    slo: Slo
    search: Search  # the first start's (the only one's without --perfgate-starts)
    trials: int
    time_scale: float
    #: with ``--perfgate-starts N`` (N >= 2, a launched server): every start's search, the floor judged on them
    across: AcrossStarts | None = None


@dataclass(frozen=True, kw_only=True)
class Levels:
    """One mode's closed-loop measurements at each of ``loads`` streams (the crossover record's)."""

    mode: str
    loads: tuple[int, ...]
    measurements: tuple[Measurement, ...]


def slo_of(perf: PerfRun, mode: str) -> Slo:
    """The mode's SLOs, or a usage error naming the profile and the table to add."""
    p = perf.state.profile
    slo: Slo | None = p.slo.get(mode)
    if slo is None:
        import pytest

        pytest.fail(f"{p.path}: no [slo] table: a goodput or crossover record needs the SLOs it is held to; add "
                    f"[slo] with e.g. ttft_ms_p99 = 500 and itl_ms_p99 = 50 (docs/profiles.md, [slo])", pytrace=False)
    return slo


def _endpoint(perf: PerfRun, case: Case) -> tuple[ServerConfig, str]:
    from perfgate.plugin.pool import ServerFailed

    config = perf.state.config_for(case)
    failed: ServerFailed | None = None
    try:
        url = perf.servers.endpoint(config).url
    except ServerFailed as e:
        failed = e  # the pool knows it now
    if failed is not None:  # concluded outside the except block: no "during handling" chain
        perf.conclude(case, failed.verdict)
    return config, url


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


class _Rates:
    """Measures rates on one server: the closed-loop warm-up once, then trials of a rate on unseen prompts, each
    measured window after a warm-up at that rate."""

    def __init__(self, perf: PerfRun, case: Case, slo: Slo, workload: Workload) -> None:
        from perfgate.measuring.workload import load_prompts

        self.perf, self.case, self.slo, self.w = perf, case, slo, workload
        self.config, self.url = _endpoint(perf, case)
        self.scale = time_scale(self.url)
        self.prompts = load_prompts(workload.prompts)
        self.offset = PROMPT_BASE
        self.trials = perf.state.opt("perfgate_trials") or workload.trials
        self.done: dict[float, int] = {}  # trials measured per rate on this server
        self._warm = False

    def __call__(self, rate: float, trials: int, requests: int | None = None) -> list[LoadTrial]:
        from perfgate.client import Schedule, flush_cache, run_batch, run_open_loop
        from perfgate.client.schedule import arrival_offsets
        from perfgate.measuring.workload import requests_for

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
            if any(not o.success for o in outs) and not self.perf.servers.alive(self.config):
                self._died(outs)
        return out

    def level(self, rate: float) -> LoadLevel:
        """One rate judged as the search decides a bracket's end: the trials, then one more at a time while it
        is unresolved, up to ``[slo] max_requests``."""
        trials = self(rate, self.trials)
        lv = judge_level(rate, trials, self.slo)
        while lv.meets is None and not lv.behind and lv.requests < self.slo.budget:
            more = self(rate, 1, top_up_size(self.slo, lv.requests, len(trials)))
            if not any(t.requests for t in more):
                break
            trials += more
            lv = judge_level(rate, trials, self.slo)
        return lv

    def _died(self, outs: Any) -> None:
        from perfgate.measuring.verdict import Verdict
        from perfgate.plugin.pool import ServerFailed

        servers = self.perf.servers
        err = servers.exit_error(self.config)
        msg = str(err) if err is not None else "; ".join(dict.fromkeys(o.error for o in outs if not o.success))
        v = Verdict(outcome=Outcome.FAIL,
                    category=Category((err.category if err is not None else None) or Category.CRASH),
                    message=f"the server of {self.config.name} died under load: {msg}")
        servers.fail(self.config, ServerFailed(v, servers.log_of(self.config)))
        self.perf.conclude(self.case, v)


def measure_rate(perf: PerfRun, case: Case, rate: float, *, slo: Slo | None = None,
                 workload: Workload | None = None) -> LoadLevel:
    """One open-loop rate on the case's server, with the workload's trials (more while unresolved, up to
    ``[slo] max_requests``), judged against the SLOs."""
    slo = slo or slo_of(perf, case.mode)
    w = workload or perf.state.profile.workload_for(case.mode)
    return _Rates(perf, case, slo, w).level(rate)


def measure_goodput(perf: PerfRun, case: Case, *, slo: Slo | None = None,
                    workload: Workload | None = None) -> Goodput:
    """Goodput as an interval on the case's server (:func:`perfgate.measuring.goodput.search`); with
    ``--perfgate-starts N`` (N >= 2) on a launched server, the search on each of N server starts, each a new
    process with its own warm-up (:class:`~perfgate.measuring.goodput.AcrossStarts`); a start whose sender fell
    behind ends them (its answer rests on the client)."""
    from perfgate.plugin.say import say
    from perfgate.plugin.starts import fresh_start

    slo = slo or slo_of(perf, case.mode)
    w = workload or perf.state.profile.workload_for(case.mode)
    st = perf.state
    n = 1 if perf.servers.attached else max(1, st.settings.starts)
    searches: list[Search] = []
    rates = _Rates(perf, case, slo, w)
    for k in range(n):
        if k:
            launched = perf.servers.launched
            if launched is not None:  # the start just searched is measured: fresh_start stops it
                st.ledger.note_measured_start(launched.starts)
            fresh_start(st, rates.config)
            rates = _Rates(perf, case, slo, w)  # a new server: its own warm-up, the same seeds per rate
        found = search(rates, slo, trials=rates.trials)
        searches.append(found)
        if n > 1:
            from perfgate.measuring.goodput import interval_text

            say(perf.item.config, f"perfgate: {perf.item.name}: start {k + 1} of {n}: goodput {interval_text(found)}")
        if found.inconclusive is not None:
            break
    launched = perf.servers.launched
    if n > 1 and launched is not None:
        st.ledger.note_measured_start(launched.starts)
    return Goodput(mode=case.mode, slo=slo, search=searches[0], trials=rates.trials, time_scale=rates.scale,
                   across=AcrossStarts(searches=tuple(searches)) if n > 1 else None)


def measure_levels(perf: PerfRun, case: Case, loads: tuple[int, ...], *, max_new_tokens: int | None = None,
                   trials: int | None = None) -> Levels:
    """Closed-loop measurements of the case's config at each of ``loads`` streams (2 x streams requests a
    trial, at least 4), each cached per workload like any ``measure(...)``; ``case`` may be another mode's
    (the crossover record measures the baseline's levels, cached when the baseline's record measured them)."""
    w0 = perf.state.profile.workload_for(case.mode)
    ms = []
    for c in loads:
        w = replace(w0, concurrency=c, requests_per_trial=max(4, 2 * c),
                    max_new_tokens=max_new_tokens or w0.max_new_tokens, trials=trials or w0.trials)
        ms.append(perf.measure(case, primary=False, workload=w))
    return Levels(mode=case.mode, loads=tuple(loads), measurements=tuple(ms))
