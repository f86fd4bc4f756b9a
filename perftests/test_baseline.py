"""Throughput floors for plain decoding (marker ``baseline``), written only with perfgate's public fixtures.

One record per non-speculative mode of the profile: decode tok/s at the workload's
concurrency, median of the trials, against the floor stored for this hardware.
"""

import pytest

pytestmark = pytest.mark.baseline


@pytest.mark.perfgate(kind="floor")
def test_decode_floor(perf_server, measure, perf_check):
    """Decode tok/s clears ``floor × (1 − tolerance)`` (too noisy is inconclusive, never pass)."""
    perf_check(measure(perf_server), "tok_s")


@pytest.mark.perfgate(kind="sweep")
def test_concurrency_sweep(perf_server, measure, perf_check):
    """Output tok/s, TTFT and inter-token latency percentiles per concurrency level (optional workload)."""
    perf_check(measure.sweep(perf_server), "sweep")
