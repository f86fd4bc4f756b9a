"""perfgate's pytest fixtures, the public ones a test uses (``pytest --fixtures`` lists them with these docstrings)
and the private helper behind them. Each is a thin handle: the work lives in the module it imports (plugin.api,
plugin.compare, plugin.stackpair, plugin.profiling, plugin.crosscheck, plugin.microcheck). The plugin module
(perfgate.plugin) imports them, so the entry point and ``pytest_plugins = ["perfgate.plugin"]`` register them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from perfgate.plugin.state import PerfgateState, state_of
from perfgate.record import fmt

if TYPE_CHECKING:
    from perfgate.plugin.api import Measure, PerfCheck
    from perfgate.plugin.compare import PerfCompare
    from perfgate.profiles import Profile

__all__ = ["perfgate_state", "perfgate_profile", "perfgate_record", "perf_case", "perf_server", "measure",
           "perf_check", "perf_baseline", "perf_candidate", "perf_compare", "step_profile", "perf_crosscheck",
           "micro_check"]


@pytest.fixture(scope="session")
def perfgate_state(request: pytest.FixtureRequest) -> PerfgateState:
    """The session's perfgate state (profile, variants, stack, settings, measurements; servers: plugin.pool)."""
    return state_of(request.config)


@pytest.fixture(scope="session")
def perfgate_profile(perfgate_state: PerfgateState) -> Profile:
    """The active, validated profile."""
    return perfgate_state.profile


@pytest.fixture
def perfgate_record(request: pytest.FixtureRequest) -> Any:
    """``record(name, value)``: a JUnit property on this test (no xunit2 warning)."""

    def record(name: str, value: object) -> None:
        request.node.user_properties.append((name, fmt(value)))

    return record


@pytest.fixture
def _perfgate_run(request: pytest.FixtureRequest, perfgate_state: PerfgateState) -> Any:
    """perfgate's per-test helper (perfgate.plugin.runner.PerfRun) behind the public fixtures: measure a case,
    compare, conclude. Private (``pytest --fixtures -v`` lists it): tests use the public fixtures."""
    from perfgate.plugin.runner import PerfRun

    return PerfRun(item=request.node, state=perfgate_state)


@pytest.fixture
def perf_case(request: pytest.FixtureRequest) -> Any:
    """The record a built-in perf test produces (kind, mode, variant), parametrized by perfgate from the
    profile for tests marked @pytest.mark.perfgate(kind=...)."""
    raise pytest.UsageError(f"perfgate: {request.node.nodeid}: perf_case is parametrized by perfgate; mark the "
                            f"test @pytest.mark.perfgate(kind=...)")


@pytest.fixture
def perf_server(request: pytest.FixtureRequest, _perfgate_run: Any) -> Any:
    """A running server of one config (perfgate.plugin.api.PerfServer: mode, variant, url, log_path). The test
    runs once per mode of the profile (or per @pytest.mark.perfgate(modes=[...]), plus each variant with
    variants=True); each config starts once per session, tests ordered by config; a failed start is the
    test's record (classified, with its log)."""
    from perfgate.plugin.api import start

    return start(_perfgate_run, request.param)


@pytest.fixture
def measure(_perfgate_run: Any) -> Measure:
    """measure(perf_server, *, concurrency=, max_new_tokens=, prompts=, trials=, warmup=,
    requests_per_trial=, request_timeout_s=) -> perfgate.Measurement: the mode's workload with those keys
    replaced, measured cold (prefix cache flushed per trial), median/CI/CV per metric, recorded on the test."""
    from perfgate.plugin.api import Measure

    return Measure(_perfgate_run)


@pytest.fixture
def perf_check(_perfgate_run: Any) -> PerfCheck:
    """perf_check(measurement, metric, *, limit=None, tolerance=None): conclude this test's record on one
    metric (tok_s, output_tok_s, ttft_ms, ttft_ms_p99, itl_ms, itl_ms_p99) in its direction, against the
    profile's [floors.<mode>] / [floors.<mode>.c<N>] or the given limit, through the profile's expectations.
    Ends the test: call it last."""
    from perfgate.plugin.api import PerfCheck

    return PerfCheck(_perfgate_run)


@pytest.fixture
def perf_baseline(_perfgate_run: Any, perf_server: Any) -> Any:
    """The config this record is compared with (perfgate.BaselineServer: mode, config): the profile's baseline mode
    for a mode's record, the variant's own mode for a variant's. measure(perf_baseline) is its measurement in this
    session, not recorded on this test (its own record's, when that ran first; else its server is started then);
    a baseline that fails fails this record. perf_compare concludes on the pair."""
    from perfgate.plugin.compare import baseline_of

    return baseline_of(_perfgate_run, perf_server.case)


@pytest.fixture
def perf_candidate(_perfgate_run: Any) -> Any:
    """This record's config on the --perfgate-candidate stack (perfgate.CandidateServer), as perf_baseline gives the
    baseline's. measure(perf_candidate) measures the record's own config, then the candidate arm (starts interleaved
    under --perfgate-starts N, the order alternated: current 1, candidate 1, candidate 2, current 2, ...), recording
    the candidate's numbers as candidate.*;
    perf_compare(measure(perf_candidate), measure(perf_server)) judges the paired candidate/current ratio (beyond
    noise and 0.5 %). No candidate, or an attached server: the record skips, saying why."""
    from perfgate.plugin.stackpair import candidate_of

    return candidate_of(_perfgate_run)


@pytest.fixture
def perf_compare(_perfgate_run: Any) -> PerfCompare:
    """perf_compare(measurement, baseline_measurement): conclude this test's record on the config against its
    baseline measured in the same run: greedy tokens must match (else wrong-output), then decode tok/s by the CI of
    the ratio of medians (paired per start with --perfgate-starts N) beyond the profile's min_effect; a speculative
    mode's record gets the cost model's breakdown, a variant's passes when not slower beyond noise; a candidate arm's
    (measure(perf_candidate)) is judged on the paired ratio, see perf_candidate. Ends the test."""
    from perfgate.plugin.compare import PerfCompare

    return PerfCompare(_perfgate_run)


@pytest.fixture
def step_profile(_perfgate_run: Any) -> Any:
    """step_profile(perf_server, *, num_steps=16) -> perfgate.measuring.trace.StepProfile: capture SGLang's own trace
    of a few decode steps (speculative cycles) on the server, record all-reduces per step, their time and
    share, the backend that ran them, GEMM/attention/other time and rank skew, and conclude the record
    (a variant whose trace shows another all-reduce backend than its own is a `fallback`). Call it last."""
    from perfgate.plugin.profiling import StepProfiler

    return StepProfiler(_perfgate_run)


@pytest.fixture
def perf_crosscheck(_perfgate_run: Any) -> Any:
    """perf_crosscheck(perf_server): conclude this test's record on SGLang's own bench_one_batch_server, run once
    per trial against the same live server: within 1 % of perfgate's measurement (per decode cycle where both
    report an acceptance length) passes, else inconclusive or measurement-mismatch; skips where the benchmark does
    not import in the engine's interpreter. Ends the test: call it last."""
    from perfgate.plugin.crosscheck import Crosscheck

    return Crosscheck(_perfgate_run)


@pytest.fixture
def micro_check(request: pytest.FixtureRequest, perfgate_state: PerfgateState) -> Any:
    """micro_check(micro_case): measure one all-reduce record of the micro tier (micro_case: backend x world size
    x timing x size, parametrized by perfgate; no server), record its numbers and conclude it through the profile's
    [expectations."allreduce:<backend>"] and [micro.floors]. Ends the test: call it last."""
    from perfgate.plugin.microcheck import MicroCheck

    return MicroCheck(item=request.node, state=perfgate_state)

