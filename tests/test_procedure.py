"""The measuring procedure outside pytest (perfgate.procedure): it imports neither pytest nor the pytest layer,
and on a URL and a resolved workload it sends what the records send: the closed-loop trials, the sweep and an
open-loop rate's trials, on a simulated server (one per module) and on a URL where nothing listens."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace

import pytest

from perfgate.client import RequestOutput
from perfgate.host.procs import free_port
from perfgate.measuring.goodput import Bound, Slo
from perfgate.procedure import OpenLoop, run_sweep, run_trials
from perfgate.profiles import Workload
from perfgate.serving.simprocess import SimProcess
from tests.simproject import PROMPTS
from tests.test_import_cycles import PACKAGE, import_graph

W = Workload(prompts=PROMPTS, max_new_tokens=8, concurrency=2, requests_per_trial=4, warmup=1, trials=3,
             request_timeout_s=30, concurrency_sweep=(1, 2))
SLO = Slo(bounds=(Bound(metric="ttft_ms", percentile=50, limit_ms=60_000.0),), attainment=0.5, requests=5,
          warmup_requests=2, max_requests=5)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with SimProcess.start(["--tp-size", "8", "--cuda-graph-max-bs-decode", "128", "--sim-speedup", "4",
                           "--skip-tokenizer-init"], log_path=tmp_path_factory.mktemp("sim") / "sim.log") as s:
        s.wait_ready()
        yield s


def test_the_procedure_imports_neither_pytest_nor_the_pytest_layer():
    edges = import_graph(PACKAGE)
    mine = {m: e for m, e in edges.items() if m == "perfgate.procedure" or m.startswith("perfgate.procedure.")}
    above = ("perfgate.plugin", "perfgate.report", "perfgate.serving", "perfgate.cli")  # the procedure's callers
    assert mine and not [t for e in mine.values() for t in e if t in above or t.startswith(tuple(a + "." for a in above))]
    code = "import sys, perfgate.procedure; sys.exit(any(m == 'pytest' or m.startswith(('_pytest', " \
           "'perfgate.plugin')) for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_closed_loop_trials_and_the_sweep(sim, tmp_path):
    log = str(tmp_path / "s.log")  # the prefill traces land beside it (s-prefill-trace/), never in the cwd
    run = run_trials(sim.url, W, config_key="k", config_name="baseline", log_path=log)
    m = run.measurement
    assert not run.warmup_failed and m.failures == 0 and (m.config_key, m.config_name, m.log_path) == \
        ("k", "baseline", log)
    assert m.tok_s is not None and m.tok_s.n == 3 and m.concurrency == 2 and len(m.trials) == 3
    assert sum(1 for o in m.outputs if o) == 12  # the trials' 12 prompts, each seen once; the warm-up's not kept
    assert m.cache_hits == 0  # flushed before each trial, no prompt repeated
    points = run_sweep(sim.url, W)
    assert [p.concurrency for p in points] == [1, 2] and all(p.failures == 0 and p.output_tok_s for p in points)


def test_an_open_loop_rates_trials_follow_their_own_seeds_and_a_level_is_judged(sim):
    loop = OpenLoop(sim.url, replace(W, warmup=0), SLO)
    assert loop.scale == 4.0  # the simulator's speed-up, set to 1 only while a schedule runs
    trials = loop(8.0, 2)
    assert len(trials) == 2 and all(t.requests == 5 and t.failures == 0 for t in trials)  # the warm-up not counted
    assert loop.done == {8.0: 2} and loop.offset == 100_000 + 2 * (5 + 2)
    (top_up,) = loop(8.0, 1, 3)  # a top-up: sized by request count
    assert top_up.requests == 3 and loop.done == {8.0: 3}
    lv = OpenLoop(sim.url, W, SLO).level(8.0, 1)  # a budget of 5: one trial decides it, no top-up
    assert len(lv.trials) == 1 and lv.requests == 5


def test_on_a_url_where_nothing_listens_the_failures_are_reported_not_raised():
    url = f"http://127.0.0.1:{free_port()}"
    run = run_trials(url, replace(W, request_timeout_s=5), config_key="k", config_name="baseline")
    assert run.warmup_failed and run.measurement.failures == 1  # the warm-up failed: no trials sent
    run = run_trials(url, replace(W, warmup=0, request_timeout_s=5), config_key="k", config_name="baseline")
    assert not run.warmup_failed and len(run.measurement.trials) == 1  # the first failed trial is the last
    seen: list[Sequence[RequestOutput]] = []
    loop = OpenLoop(url, replace(W, warmup=0, request_timeout_s=5), SLO, on_failures=seen.append)
    assert loop.scale == 1.0  # no /server_info: a real SGLang's time
    (t,) = loop(8.0, 1)
    assert t.failures == 5 and len(seen) == 1 and len(seen[0]) == 7  # the callback gets the warm-up's outputs too
