"""The paired stack comparison (marker ``stack_pair``): one record per mode, the current stack against the
candidate stack (``--perfgate-candidate``) on this box, written only with perfgate's public fixtures.

Both arms are measured in this session, their server starts interleaved (``--perfgate-starts N``: current 1,
candidate 1, candidate 2, current 2, ...: the order alternated, so that a place in the pair favours neither arm;
``pair_order``), and the record concludes from the candidate/current ratio of each start pair: pass when the
same or faster, fail (slower-than-baseline) when slower beyond noise and the gate's practical floor (0.5 %),
inconclusive when undecided. Without a candidate each record skips.
"""

import pytest

pytestmark = pytest.mark.stack_pair


@pytest.mark.perfgate(kind="stack-pair")
def test_stack_pair(perf_candidate, perf_server, measure, perf_compare):
    """The candidate stack is not slower than the current one on this box, judged on interleaved start pairs."""
    current = measure(perf_server)
    perf_compare(measure(perf_candidate), current)
