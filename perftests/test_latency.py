"""Latency under load, written only with perfgate's public fixtures (docs/writing-tests.md).

Each mode runs 4 streams at once (16 requests a trial: a median over 4 would be noisy); the record is
concluded on one metric in its direction (a ceiling for latencies) against the profile's
``[floors.<mode>.c4]``, through the profile's expectations, so it has an ``outcome``, appears in the terminal
matrix and is gated by ``perfgate gate`` like the built-in records. Select it with ``-k latency``.
"""

import pytest

pytestmark = pytest.mark.perfgate(kind="latency", modes=["baseline", "eagle3"])


@pytest.mark.parametrize("metric", ["ttft_ms", "output_tok_s"])
def test_under_load_at_concurrency_4(perf_server, measure, perf_check, metric):
    """TTFT (a ceiling) and output throughput (a floor) with 4 streams in flight, 16 requests a trial."""
    m = measure(perf_server, concurrency=4, requests_per_trial=16, max_new_tokens=64)
    perf_check(m, metric)
