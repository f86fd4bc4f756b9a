"""Speculative decoding (marker ``speculative``): acceptance length, and speculation vs the baseline, written only
with perfgate's public fixtures.

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
def test_speculation_beats_baseline(perf_server, perf_baseline, measure, perf_compare):
    """Speculative decode tok/s is above the baseline's, beyond noise."""
    base = measure(perf_baseline)
    perf_compare(measure(perf_server), base)
