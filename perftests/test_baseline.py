"""Throughput floors for plain decoding (marker ``baseline``).

One record per non-speculative mode of the profile: decode tok/s at the workload's
concurrency, median of the trials, against the floor stored for this hardware.
"""

import pytest

pytestmark = pytest.mark.baseline


@pytest.mark.perfgate(kind="floor")
def test_decode_floor(perf, perf_case):
    """Decode tok/s clears ``floor × (1 − tolerance)`` (too noisy is inconclusive, never pass)."""
    m = perf.measure(perf_case)
    perf.conclude(perf_case, perf.floor(perf_case, m))


@pytest.mark.perfgate(kind="sweep")
def test_concurrency_sweep(perf, perf_case):
    """Output tok/s, TTFT and inter-token latency percentiles per concurrency level (optional workload)."""
    m = perf.measure(perf_case)
    perf.conclude(perf_case, perf.sweep_verdict(perf_case, m))
