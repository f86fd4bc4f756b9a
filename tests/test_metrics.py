"""Statistics: medians, bootstrap CIs, CV, token match (hypothesis properties)."""

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.client import RequestOutput
from perfgate.measuring.metrics import (
    bootstrap_median_ci,
    bootstrap_ratio_ci,
    compute_trial,
    cv,
    percentile,
    stat,
    summarize,
    token_match,
    trials_to_resolve,
)

samples = st.lists(st.floats(1.0, 1000.0, allow_nan=False), min_size=3, max_size=12)


@given(samples)
def test_ratio_ci_of_identical_samples_contains_one(xs):
    lo, hi = bootstrap_ratio_ci(xs, xs, resamples=300)
    # medians of two independent resamples of the same data: 1 is inside the interval
    assert lo <= 1.0 <= hi


@given(samples, st.floats(0.1, 100.0))
def test_scaling_samples_scales_median_and_ci(xs, k):
    a, b = stat(xs), stat([x * k for x in xs])
    assert a is not None and b is not None
    assert math.isclose(b.median, a.median * k, rel_tol=1e-9)
    assert a.ci_low is not None and a.ci_high is not None and b.ci_low is not None and b.ci_high is not None
    assert math.isclose(b.ci_low, a.ci_low * k, rel_tol=1e-9)
    assert math.isclose(b.ci_high, a.ci_high * k, rel_tol=1e-9)
    if a.cv is not None:
        assert b.cv is not None
        assert math.isclose(b.cv, a.cv, rel_tol=1e-6, abs_tol=1e-12)


@given(samples)
def test_ci_brackets_the_median_within_the_range(xs):
    lo, hi = bootstrap_median_ci(xs, resamples=300)
    assert min(xs) <= lo <= statistics.median(xs) <= hi <= max(xs)


def test_more_trials_never_widen_the_ci_in_expectation():
    import random

    rng = random.Random(7)
    widths = {}
    for n in (4, 16, 64):
        ws = []
        for rep in range(40):
            xs = [rng.gauss(100, 5) for _ in range(n)]
            lo, hi = bootstrap_median_ci(xs, seed=rep, resamples=300)
            ws.append(hi - lo)
        widths[n] = statistics.fmean(ws)
    assert widths[64] < widths[16] < widths[4]


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(xs, q1, q2):
    lo, hi = sorted((q1, q2))
    assert min(xs) <= percentile(xs, lo) <= percentile(xs, hi) <= max(xs)


def test_cv_needs_two_values():
    assert cv([5.0]) is None
    assert cv([1.0, 1.0]) == 0.0


def test_token_match_prefix_share():
    assert token_match([(1, 2, 3, 4)], [(1, 2, 3, 4)]) == 1.0
    assert token_match([(1, 2, 9, 4)], [(1, 2, 3, 4)]) == 0.5
    assert token_match([(1, 2), (7,)], [(1, 2), (8,)]) == pytest.approx(2 / 3)
    assert token_match([], []) is None


def test_trials_to_resolve():
    assert trials_to_resolve(5, 1.02, 0.98, 1.06) == math.ceil(5 * (0.04 / 0.02) ** 2)
    assert trials_to_resolve(5, 1.0, 0.9, 1.1) is None


def _out(tokens, ttft, latency, verify=None):
    return RequestOutput(success=True, ttft_s=ttft, latency_s=latency, completion_tokens=tokens, first_chunk_tokens=1,
                         itl_s=tuple([(latency - ttft) / (tokens - 1)] * (tokens - 1)), spec_verify_ct=verify)


def test_trial_and_measurement():
    outs = [_out(65, 0.05, 0.05 + 64 / 80), _out(65, 0.05, 0.05 + 64 / 80, verify=33),
            RequestOutput(success=False, error="boom")]
    t = compute_trial(outs, wall_s=2.0)
    assert t.tok_s == pytest.approx(80.0)
    assert t.failures == 1 and t.errors == ("boom",)
    assert t.accept_len == pytest.approx(65 / 33)
    m = summarize(config_key="k", config_name="baseline", trials=[t, t, t])
    assert m.tok_s is not None
    assert m.tok_s.median == pytest.approx(80.0) and m.tok_s.n == 3 and m.failures == 3
