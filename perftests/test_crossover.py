"""The speculation crossover (marker ``load``), written only with perfgate's public fixtures (docs/load.md).

Every mode is measured closed-loop at the ``[slo] crossover_levels`` stream counts, all with the same
tokens per request. The baseline's record keeps its levels; each speculative mode's compares its output
tok/s with the baseline's at every level and records the load at which it stops beating it (interpolated,
with a bootstrap CI over the trials; ``never`` and ``always`` within the range are answers), beside the
cost model's prediction from the decode step times. ``[floors.<mode>] crossover = 16`` asks that
speculation pay up to 16 streams.
"""

import pytest

pytestmark = [pytest.mark.load, pytest.mark.perfgate(kind="crossover")]


def test_speculation_crossover(perf_server, measure, perf_check):
    """Output tok/s of this mode at each load; for a speculative mode, where it stops beating the baseline."""
    levels = measure.levels(perf_server)
    perf_check(levels, "crossover")
