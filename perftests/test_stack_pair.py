"""The paired stack comparison (marker ``stack_pair``): one record per mode, the current stack against the
candidate stack (``--perfgate-candidate``) on this box.

Both arms are measured in this session, their server starts interleaved (``--perfgate-starts N``: current 1,
candidate 1, current 2, candidate 2, ...), and the record concludes from the candidate/current ratio of each
start pair (``perfgate.measuring.judge.paired``): pass when the same or faster, fail (slower-than-baseline) when slower
beyond noise and the profile's min_effect, inconclusive when undecided. Without a candidate each record skips.
"""

import pytest

from perfgate.plugin.stackpair import DECIDES, stack_pair_verdict

pytestmark = pytest.mark.stack_pair


@pytest.mark.perfgate(kind="stack-pair")
def test_stack_pair(perf, perf_case):
    """The candidate stack is not slower than the current one on this box, judged on interleaved start pairs."""
    perf.conclude(perf_case, stack_pair_verdict(perf, perf_case), decides=DECIDES)
