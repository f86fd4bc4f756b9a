"""Speculative decoding (marker ``speculative``): acceptance length, and speculation vs the baseline.

The baseline is measured in the same run, on the same box, with the same workload; the
comparison uses the confidence interval of the ratio of medians, after checking that the
greedy tokens match the baseline's (speculation must be lossless).
"""

import pytest

pytestmark = pytest.mark.speculative


@pytest.mark.perfgate(kind="acceptance")
def test_acceptance_length(perf_server, measure, perf_check):
    """Acceptance length from this test's own requests (completion tokens / verify passes)."""
    perf_check(measure(perf_server), "accept_len")


@pytest.mark.perfgate(kind="speculation-vs-baseline")
def test_speculation_beats_baseline(perf, perf_case):
    """Speculative decode tok/s is above the baseline's, beyond noise."""
    base = perf.measure(perf_case.baseline(perf.profile.baseline_mode()), primary=False)
    spec = perf.measure(perf_case)
    verdict = perf.compare(perf_case, spec, base, what=f"{perf_case.mode} vs {base.config_name}")
    perf.conclude(perf_case, perf.explain_speculation(perf_case, spec, base, verdict))
