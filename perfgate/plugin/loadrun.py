"""Measuring under load on a record's server: one open-loop rate with the workload's trials, the goodput
search over rates, and the closed-loop levels of the crossover record (both modes).

What is sent, and in which order, is the procedure's (perfgate.procedure.openloop.OpenLoop: each trial of a rate on
its own seeded schedule after a warm-up at that rate, the prefix cache flushed before it, the simulator at speed-up
1 while it runs); this module finds the record's server and its SLOs, says what a server that died under load
means for the record, and runs the search once per server start. The trials of every path are the workload's
as the session resolves them (perfgate.profiles.settings): a test's own ``trials=`` > ``--perfgate-trials`` >
``[slo] trials`` > ``[workload] trials``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome
from perfgate.measuring.crossover import Levels
from perfgate.measuring.goodput import LoadLevel, Search, Slo, search
from perfgate.measuring.goodputrecord import AcrossStarts, Goodput
from perfgate.procedure import OpenLoop

if TYPE_CHECKING:
    from perfgate.client import RequestOutput
    from perfgate.plugin.runner import PerfRun
    from perfgate.profiles import Workload
    from perfgate.profiles.config import ServerConfig
    from perfgate.record import Case


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


def _open_loop(perf: PerfRun, case: Case, slo: Slo, workload: Workload) -> tuple[ServerConfig, OpenLoop]:
    """The open loop on the case's server (started if it is not; a failed start concludes the record): a request
    that failed on a server that is no longer alive concludes the record as the server's death."""
    config, url = _endpoint(perf, case)

    def on_failures(outs: Sequence[RequestOutput]) -> None:
        if not perf.servers.alive(config):
            _died(perf, case, config, outs)

    return config, OpenLoop(url, workload, slo, on_failures=on_failures)


def _died(perf: PerfRun, case: Case, config: ServerConfig, outs: Sequence[RequestOutput]) -> None:
    from perfgate.measuring.verdict import Verdict
    from perfgate.plugin.pool import ServerFailed

    servers = perf.servers
    err = servers.exit_error(config)
    msg = str(err) if err is not None else "; ".join(dict.fromkeys(o.error for o in outs if not o.success))
    v = Verdict(outcome=Outcome.FAIL,
                category=Category((err.category if err is not None else None) or Category.CRASH),
                message=f"the server of {config.name} died under load: {msg}")
    servers.fail(config, ServerFailed(v, servers.log_of(config)))
    perf.conclude(case, v)


def _resolved(perf: PerfRun, case: Case, workload: Workload | None) -> Workload:
    """The workload a load path measures: ``workload`` as the caller resolved it, else the mode's with the
    session's options (perfgate.profiles.settings)."""
    st = perf.state
    return workload or st.settings.workload(st.profile.workload_for(case.mode))


def measure_rate(perf: PerfRun, case: Case, rate: float, *, slo: Slo | None = None,
                 workload: Workload | None = None) -> LoadLevel:
    """One open-loop rate on the case's server, with the workload's trials (more while unresolved, up to
    ``[slo] max_requests``), judged against the SLOs."""
    slo = slo or slo_of(perf, case.mode)
    w = _resolved(perf, case, workload)
    return _open_loop(perf, case, slo, w)[1].level(rate, w.trials)


def measure_goodput(perf: PerfRun, case: Case, *, slo: Slo | None = None,
                    workload: Workload | None = None) -> Goodput:
    """Goodput as an interval on the case's server (:func:`perfgate.measuring.goodput.search`); with
    ``--perfgate-starts N`` (N >= 2) on a launched server, the search on each of N server starts, each a new
    process with its own warm-up (:class:`~perfgate.measuring.goodputrecord.AcrossStarts`); a start whose sender fell
    behind ends them (its answer rests on the client)."""
    from perfgate.plugin.pool import ServerFailed
    from perfgate.plugin.say import say
    from perfgate.serving.starts import ServerStarts

    slo = slo or slo_of(perf, case.mode)
    w = _resolved(perf, case, workload)
    st = perf.state
    n = 1 if perf.servers.attached else max(1, st.settings.starts)
    searches: list[Search] = []
    config = st.config_for(case)
    starts = ServerStarts(st)
    scale = 1.0
    for k in range(n):
        def one(cfg: ServerConfig) -> Search:  # a start: its own warm-up, the same seeds per rate
            nonlocal scale
            _, rates = _open_loop(perf, case, slo, w)
            scale = rates.scale
            return search(rates, slo, trials=w.trials)

        # the first search on the server running (the record's own), each further one on a new start; a failed start
        # concludes the record (_open_loop)
        found = starts.measure(config, one, note=n > 1, restart=k > 0)
        assert not isinstance(found, ServerFailed)
        searches.append(found)
        if n > 1:
            from perfgate.measuring.goodputrecord import interval_text

            say(perf.item.config, f"perfgate: {perf.item.name}: start {k + 1} of {n}: goodput {interval_text(found)}")
        if found.inconclusive is not None:
            break
    return Goodput(mode=case.mode, slo=slo, search=searches[0], trials=w.trials, time_scale=scale,
                   across=AcrossStarts(searches=tuple(searches)) if n > 1 else None)


def measure_levels(perf: PerfRun, case: Case, loads: tuple[int, ...]) -> Levels:
    """Closed-loop measurements of the case's config at each of ``loads`` streams (2 x streams requests a
    trial, at least 4), each cached per workload like any ``measure(...)``, with the profile's tokens and trials
    under load (``[slo]``; ``--perfgate-trials`` beats its trials, perfgate.profiles.settings). A speculative mode's
    levels are followed by the baseline mode's at the same loads (``Levels.base``: cached when the baseline's record
    measured them), the crossover's other side."""
    st = perf.state
    p = st.profile
    w0 = p.workload_for(case.mode)
    tokens, trials = p.load_tokens(), p.load_trials() or w0.trials
    ms = []
    for c in loads:
        w = st.settings.workload(replace(w0, concurrency=c, requests_per_trial=max(4, 2 * c), max_new_tokens=tokens,
                                         trials=trials))
        ms.append(perf.measure(case, primary=False, workload=w))
    base_mode = p.baseline_mode()
    base = (measure_levels(perf, case.baseline(base_mode), loads)
            if case.mode != base_mode and p.modes[case.mode].speculative else None)
    return Levels(mode=case.mode, loads=tuple(loads), measurements=tuple(ms), base=base)
