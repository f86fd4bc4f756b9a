"""Limits written from their noise (issue: verdicts with power): --perfgate-update-baselines writes every limit
other than decode tok/s and acceptance with its own tolerance (``<metric>_tolerance``, from
perfgate.profiles.noise.limit_tolerance), and an identical re-run passes every limit it just wrote (A/A, per
metric), as users run it (pytester, real subprocesses, the simulated server)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.profiles import Floor
from perfgate.profiles.noise import PRIOR_DF, MetricClass, limit_tolerance, metric_class, noise_for, prior_cv
from tests.test_starts import _project, _records

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

METRICS = ("ttft_ms", "itl_ms", "ttft_ms_p99", "itl_ms_p99", "output_tok_s")

USER = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="latency", modes=["baseline"])


@pytest.mark.parametrize("metric", METRICS)
def test_limit(perf_server, measure, perf_check, metric):
    perf_check(measure(perf_server, concurrency=2, requests_per_trial=4, max_new_tokens=16), metric)
'''.replace("METRICS", repr(list(METRICS)))


@pytest.mark.timing
def test_an_identical_rerun_passes_every_limit_just_written(pytester):
    prof = _project(pytester, trials=3)
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_mine.py").write_text(USER)
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--perfgate-update-baselines",
                                      "-p", "no:cacheprovider")
    assert r.ret == 0, r.stdout.str()
    floors = tomllib.loads(prof.read_text())["floors"]["baseline"]["c2"]
    for metric in METRICS:
        assert metric in floors, floors
        # its own tolerance, never the decode floor's 5 % (the profile's [floors.baseline] tolerance)
        assert floors[f"{metric}_tolerance"] == limit_tolerance(metric, simulated=True) or \
            floors[f"{metric}_tolerance"] > limit_tolerance(metric, simulated=True)  # measured starts wider
        assert floors[f"{metric}_tolerance"] != 0.05
    for run in range(3):  # A/A: identical re-runs never fail a limit just written
        r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", f"--junitxml=aa{run}.xml",
                                          "-p", "no:cacheprovider")
        assert r.ret == 0, r.stdout.str()
        recs = _records(pytester, f"aa{run}.xml")
        for metric in METRICS:
            (p,) = [v for k, v in recs.items() if v.get("metric") == metric]
            assert p["outcome"] == "pass", (metric, p.get("reason"))
            assert float(p["tolerance"]) == floors[f"{metric}_tolerance"]


@given(st.sampled_from(METRICS + ("tok_s", "goodput_rps", "accept_len", "my_own_ms")), st.booleans())
def test_no_metric_borrows_decode_tok_s_noise(metric, simulated):
    klass = metric_class(metric)
    assert (klass is MetricClass.THROUGHPUT) == (metric == "tok_s")
    assert (klass is MetricClass.OUTPUT) == (metric == "output_tok_s")  # it carries each request's TTFT
    f = Floor(mode="baseline", tolerance=0.03, simulated=simulated)
    tol = f.tolerance_for(metric)
    if metric == "tok_s":
        assert tol == 0.03
    elif metric == "accept_len":
        assert tol == f.accept_len_tolerance
    else:
        assert tol == limit_tolerance(metric, simulated=simulated)
    assert Floor(mode="b", tolerance=0.07, tolerance_shared=True).tolerance_for("itl_ms_p99") == 0.07


@given(st.floats(0.0, 0.5), st.sampled_from(("tok_s", "itl_ms_p99", "ttft_ms")), st.booleans())
def test_a_measured_noise_wider_than_the_prior_always_wins(measured, metric, simulated):
    prior = prior_cv(metric, "starts", simulated=simulated)
    n = noise_for(metric, "starts", measured=measured, measured_df=4, simulated=simulated)
    assert n.cv == max(prior, measured)
    assert n.source == ("measured" if measured > prior else "prior")
    assert n.df == (4 if measured > prior else PRIOR_DF)  # a prior is worth what the paired judge pools it at
    assert limit_tolerance(metric, simulated=simulated, start_cv=measured) >= limit_tolerance(metric,
                                                                                               simulated=simulated)
