"""perfgate's decode tok/s checked against SGLang's own benchmark on the same live server, written only with
perfgate's public fixtures.

Runs only with the real engine by default (``--perfgate-crosscheck auto``; ``on`` also against the simulated
server, where SGLang's benchmark client must import); one record per mode, marked ``baseline`` or
``speculative`` like the mode it checks.
"""

import pytest


@pytest.mark.perfgate(kind="crosscheck")
def test_crosscheck_with_sglang_bench(perf_server, perf_crosscheck):
    """SGLang's bench_one_batch_server agrees with perfgate within 1 % (after the token-count correction)."""
    perf_crosscheck(perf_server)
