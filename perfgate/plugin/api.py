"""Writing your own perf tests: what the ``perf_server``, ``measure`` and ``perf_check`` fixtures hand out.

A user test gets the same lifecycle (one server start per config, tests ordered by config), the same
JUnit record (an ``outcome``, the numbers, the stack), the same terminal matrix and the same gate as
perfgate's built-in tests::

    import pytest

    pytestmark = pytest.mark.perfgate(kind="ttft", modes=["baseline", "eagle3"])

    def test_ttft_at_concurrency_4(perf_server, measure, perf_check):
        m = measure(perf_server, concurrency=4, max_new_tokens=64)
        perf_check(m, "ttft_ms")          # against [floors.<mode>.c4] ttft_ms (a ceiling), or skip

``docs/writing-tests.md`` has the whole guide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from perfgate.measuring.metrics import METRICS, Measurement
from perfgate.profiles.settings import checked_overrides

if TYPE_CHECKING:
    from perfgate.measuring.crossover import Levels
    from perfgate.measuring.goodput import LoadLevel
    from perfgate.measuring.goodputrecord import Goodput
    from perfgate.plugin.compare import BaselineServer
    from perfgate.plugin.pool import Endpoint
    from perfgate.plugin.runner import PerfRun
    from perfgate.plugin.stackpair import CandidateServer
    from perfgate.profiles.config import ServerConfig
    from perfgate.record import Case

__all__ = ["PerfServer", "Measure", "PerfCheck"]

#: what ``perf_check`` judges a speculative mode's acceptance length on, and concludes a concurrency sweep on
ACCEPT_LEN = "accept_len"
SWEEP = "sweep"
#: the metrics of a load measurement, and the measurement each is judged on
LOAD_METRICS = {"goodput_rps": "measure.goodput(perf_server)", "crossover": "measure.levels(perf_server)"}



@dataclass(frozen=True)
class PerfServer:
    """The server of one config: a profile's mode, optionally with a variant.

    ``url`` serves SGLang's HTTP API (or the simulated server's); ``log_path`` is its log. With
    ``--perfgate-url`` it is the attached server and ``log_path`` is empty. The server is started when first
    used (``url``, ``measure``), once per session: a record whose measurement this session already took (a
    variant that changes nothing, a second record of the config) starts nothing; a failed start is the record.
    """

    mode: str
    variant: str | None
    config: ServerConfig
    case: Case
    _connect: Callable[[], Endpoint] = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.config.name

    @cached_property
    def _endpoint(self) -> Endpoint:
        return self._connect()

    @property
    def url(self) -> str:
        return self._endpoint.url

    @property
    def log_path(self) -> str:
        return self._endpoint.log_path

    @property
    def startup_s(self) -> float | None:
        return self._endpoint.startup_s


def start(perf: PerfRun, case: Case) -> PerfServer:
    """The server of ``case``'s config, started when first used (a failed start, or a config whose start failed
    before, concludes the test then); a launch it refuses or an attached server of another config concludes the
    test here."""
    st = perf.state
    config = st.config_for(case)
    perf._identity(case, config)
    perf.preflight(case)
    if case.variant:
        perf.controlled(case)
    st.check_hardware()
    perf.admit(config, case)
    return PerfServer(mode=case.mode, variant=case.variant, config=config, case=case,
                      _connect=lambda: _endpoint(perf, case, config))


def _endpoint(perf: PerfRun, case: Case, config: ServerConfig) -> Endpoint:
    """The config's running server (started if it is not); a failed start concludes the record."""
    from perfgate.measuring.ledger import refuse_update
    from perfgate.plugin.pool import ServerFailed

    known = perf.servers.failure(config)  # an earlier record's start failed: no second launch
    failed: ServerFailed | None = None
    try:
        return perf.servers.endpoint(config, on_log=lambda path: perf.record("log", path))
    except ServerFailed as e:
        failed = e  # the pool knows it now: the config's other records fail without a launch
    # concluded outside the except block: no "during handling" chain in the report
    log = failed.log or perf.servers.log_of(config)
    if log:
        perf.record("log", log)
    why = "the measurement failed" if known is None else f"the {config.name} server failed"
    refuse_update(perf.state, case, f"{why} ({failed.verdict.category})")
    perf.conclude(case, failed.verdict)
    raise AssertionError("unreachable: conclude() ends the test")


class Measure:
    """``measure(server, *, concurrency=, max_new_tokens=, prompts=, trials=, warmup=, requests_per_trial=,
    request_timeout_s=) -> Measurement``.

    The mode's workload with the given keys replaced, measured as the built-in tests measure: warm-up,
    SGLang's prefix cache flushed before every trial and no prompt repeated, median, bootstrap CI and CV
    per metric. Each distinct workload of a config is measured once per session. The numbers are
    recorded on the test (JUnit properties) at once, so a failing test still carries them.
    ``measure(perf_baseline)`` measures the compared config the same way without recording it on the test;
    ``measure(perf_candidate)`` measures the record's own config, then the candidate arm, and records the
    candidate's numbers under ``candidate.``.
    """

    def __init__(self, perf: PerfRun) -> None:
        self._perf = perf

    def __call__(self, server: PerfServer | BaselineServer | CandidateServer, **overrides: Any) -> Measurement:
        given = checked_overrides("measure()", overrides)
        perf = self._perf
        w = perf.state.profile.workload_for(server.mode)
        # a test's own keys beat --perfgate-trials, which beats the profile (perfgate.profiles.settings)
        w = perf.state.settings.workload(w, **given)
        from perfgate.plugin.compare import BaselineServer
        from perfgate.plugin.stackpair import CandidateServer, measure_candidate

        if isinstance(server, CandidateServer):  # the record's own config first, then the candidate arm
            return measure_candidate(perf, server, None if not given else w)
        if isinstance(server, BaselineServer):  # the compared config's numbers are not this record's
            return perf.measure(server.case, primary=False, workload=None if not given else w)
        m = perf.measure(server.case, workload=None if not given else w)
        perf.record("concurrency", m.concurrency)
        for name in METRICS:
            st = m.stat(name)
            if st is not None and name not in ("tok_s",):  # tok_s and its CI/CV are recorded by measure()
                perf.record(name, st.median)
        return m

    def sweep(self, server: PerfServer) -> Measurement:
        """The mode's workload (as ``measure(server)``), then one level per ``[workload] concurrency_sweep`` entry on
        the same server, 2 x c requests each, the prefix cache flushed before each: the points are ``m.sweep``
        (output tok/s, TTFT and inter-token latency p50/p99 per level); ``perf_check(m, "sweep")`` concludes on them."""
        perf = self._perf
        p = perf.state.profile
        if not p.workload.concurrency_sweep:  # a profile's gap, said before anything is measured: not a crash
            from perfgate.categories import Category, Outcome
            from perfgate.measuring.verdict import Verdict

            perf.conclude(_case_of_test(perf), Verdict(
                outcome=Outcome.FAIL, category=Category.CONFIG_ERROR,
                message=f"measure.sweep(): {p.path} has no [workload] concurrency_sweep, so there is no level to "
                        f"measure; fix: add the levels there, e.g. concurrency_sweep = [1, 4, 16], or measure one "
                        f"concurrency with measure(perf_server, concurrency=N)"))
        m = self(server)
        if not m.sweep:
            m = perf.sweep(server.case, server.config, m)
        return m

    def rate(self, server: PerfServer, rate: float, **overrides: Any) -> LoadLevel:
        """One open-loop ``rate`` (requests per second) on the server, on the schedule of the mode's ``[slo]``,
        with the workload's trials (one more at a time while unresolved, up to ``[slo] max_requests``): a
        :class:`perfgate.measuring.goodput.LoadLevel` decided on its pooled requests."""
        from perfgate.plugin.loadrun import measure_rate

        return measure_rate(self._perf, server.case, rate, workload=self._workload(server, overrides))

    def goodput(self, server: PerfServer, **overrides: Any) -> Goodput:
        """Goodput under the mode's ``[slo]`` as an interval (the highest level passed, the lowest failed): bracketed
        by doubling from ``rate_start``, bisected to ``resolution``, its two ends topped up while unresolved;
        ``perf_check(g, "goodput_rps")`` concludes the record on it. Every mode
        is measured with the same tokens per request (the most any mode's workload asks) unless overridden."""
        from perfgate.plugin.loadrun import measure_goodput

        return measure_goodput(self._perf, server.case, workload=self._workload(server, overrides))

    def levels(self, server: PerfServer, loads: tuple[int, ...] | None = None) -> Levels:
        """Closed-loop measurements at each of ``loads`` streams (default: the mode's ``[slo]``
        ``crossover_levels``), every mode with the same tokens per request (the most any mode's workload asks); a
        speculative mode's carry the baseline's at the same loads (``Levels.base``, cached where the baseline's
        record measured them): ``perf_check(levels, "crossover")`` compares the two."""
        from perfgate.plugin.loadrun import measure_levels, slo_of

        perf = self._perf
        loads = tuple(loads) if loads else slo_of(perf, server.mode).crossover_levels
        return measure_levels(perf, server.case, loads)

    def _workload(self, server: PerfServer, overrides: dict[str, Any]) -> Any:
        given = checked_overrides("measure.rate()/goodput()", overrides)
        perf = self._perf
        st = perf.state
        slo = st.profile.slo.get(server.mode)
        # the profile's workload under load: every mode with the same tokens (comparable), [slo] trials if given
        w = replace(st.profile.workload_for(server.mode), max_new_tokens=perf.state.profile.load_tokens(),
                    **({"trials": slo.trials} if slo and slo.trials else {}))
        # a test's own keys beat --perfgate-trials, which beats the profile (perfgate.profiles.settings)
        return st.settings.workload(w, **given)


class PerfCheck:
    """``perf_check(m, metric, *, limit=None, tolerance=None)``: conclude this test's record on one metric.

    ``metric`` is one of ``perfgate.measuring.metrics.METRICS`` (``tok_s``, ``output_tok_s`` and ``*_ms`` latencies,
    ``_p99`` too) or ``accept_len`` (a speculative mode's acceptance length: completion tokens per verify pass); its
    direction decides what passes (throughput: at or above ``limit x (1 - tolerance)``; latency: at or below
    ``limit x (1 + tolerance)``). Without ``limit`` the profile's ``[floors.<mode>]`` (at the profile's
    concurrency) or ``[floors.<mode>.c<N>]`` (at concurrency N) is used (``accept_len`` with its
    ``accept_len_tolerance``); none there: the number is recorded and the test skips, saying how to record one.
    ``perf_check(m, "sweep")`` concludes a ``measure.sweep`` on its levels (recorded; a level that lost requests
    fails). The record goes through the profile's expectations (``[expectations.<kind>]``), so it can be a strict
    xfail. This ends the test (pass, fail, xfail, skip): call it last.
    """

    def __init__(self, perf: PerfRun) -> None:
        self._perf = perf

    def __call__(self, m: Measurement | Goodput | Levels, metric: str, *, limit: float | None = None,
                 tolerance: float | None = None) -> None:
        from perfgate.measuring.crossover import Levels
        from perfgate.measuring.goodputrecord import Goodput

        _check_limits(metric, limit, tolerance)
        if isinstance(m, (Goodput, Levels)):
            return self._load(m, metric)
        if metric in LOAD_METRICS:
            raise ValueError(f"perf_check(): '{metric}' is judged on {LOAD_METRICS[metric]}, not on a plain "
                             f"measurement (measure(perf_server)); fix: perf_check({LOAD_METRICS[metric]}, "
                             f"\"{metric}\")")
        if metric == SWEEP:
            return self._perf.conclude(_case_of_test(self._perf), self._perf.sweep_verdict(m))
        if metric not in METRICS and metric != ACCEPT_LEN:
            raise ValueError(f"perf_check(): unknown metric '{metric}'; known: {', '.join(METRICS)}, {ACCEPT_LEN}, "
                             f"{SWEEP}")
        from perfgate.measuring.floorcheck import floor_record, limit_at
        from perfgate.plugin.loadcheck import conclude

        perf = self._perf
        case = _case_of_test(perf)
        p = perf.state.profile
        w = p.workload_for(case.mode)
        at = limit_at(p.floors.get(case.mode), metric, mode=case.mode, concurrency=m.concurrency,
                      workload_concurrency=w.concurrency, limit=limit, tolerance=tolerance, profile_path=str(p.path))
        c = floor_record(m, at, confidence=w.confidence, max_cv=p.max_cv_for(case.mode, at.floor),
                         update_hint=perf.update_command())
        conclude(perf, case, c, at, note=limit is None, stored_floor=at.stored_floor)  # own limit=: not written

    def _load(self, m: Goodput | Levels, metric: str) -> None:
        """A goodput search (``goodput_rps``) or a mode's load levels (``crossover``): their own records."""
        from perfgate.measuring.goodputrecord import Goodput
        from perfgate.plugin.loadcheck import conclude_crossover, conclude_goodput

        perf = self._perf
        case = _case_of_test(perf)
        want = "goodput_rps" if isinstance(m, Goodput) else "crossover"
        if metric != want:
            raise ValueError(f"perf_check(): a {type(m).__name__} is judged on '{want}', not '{metric}'")
        if isinstance(m, Goodput):
            return conclude_goodput(perf, case, m)
        return conclude_crossover(perf, case, m)


def _check_limits(metric: str, limit: float | None, tolerance: float | None) -> None:
    """A test's own ``limit`` and ``tolerance``, refused with the fix before anything is concluded."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit >= 0):
        raise ValueError(f"perf_check(): limit must be a number >= 0 in the metric's unit, got {limit!r}; fix: the "
                         f"{metric} floor (throughput) or ceiling (latency) itself, e.g. limit=80.0, or leave it out "
                         f"for the profile's [floors.<mode>]")
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not 0 <= tolerance <= 1):
        raise ValueError(f"perf_check(): tolerance is a fraction of the limit from 0 to 1, got {tolerance!r}; fix: "
                         f"tolerance=0.03 for 3 %, or leave it out for the profile's tolerance")


def _case_of_test(perf: PerfRun) -> Case:
    from perfgate.record import case_of

    case = case_of(perf.item)
    if case is None:
        raise RuntimeError("perf_check() needs the test to use perf_server (it names the mode and variant)")
    return case
