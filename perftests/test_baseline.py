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
def test_concurrency_sweep(perf, perf_case, perfgate_record):
    """Output tok/s, TTFT and inter-token latency percentiles per concurrency level (optional workload)."""
    m = perf.measure(perf_case)
    for p in m.sweep:
        for name in ("output_tok_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99"):
            value = getattr(p, name)
            if value is not None:
                perfgate_record(f"c{p.concurrency}_{name}", value)
    failed = [p.concurrency for p in m.sweep if p.failures]
    assert m.sweep, "the sweep produced no points"
    assert not failed, f"requests failed at concurrency {failed}"
