"""perfgate's decode tok/s checked against SGLang's own benchmark on the same live server.

Runs only with the real engine (SGLang importable in the engine's interpreter); one record per
mode, marked ``baseline`` or ``speculative`` like the mode it checks.
"""

import pytest

from perfgate.plugin.crosscheck import run_crosscheck


@pytest.mark.perfgate(kind="crosscheck")
def test_crosscheck_with_sglang_bench(perf, perf_case):
    """SGLang's bench_one_batch_server agrees with perfgate within 1 % (after the token-count correction)."""
    run_crosscheck(perf, perf_case)
