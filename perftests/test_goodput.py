"""Goodput under SLOs (marker ``load``), written only with perfgate's public fixtures (docs/load.md).

One record per mode: open-loop arrivals on the schedule of the profile's ``[slo]`` (Poisson by default,
seeded, trial i of a rate on seed + 2i, each trial's measured window after a warm-up at its rate), the rate
bracketed by doubling from ``rate_start`` then bisected to ``resolution``. Each level is decided on its
requests pooled over its trials (pass, fail or unresolved: binomial and order-statistic bounds), and the two
levels that decide the interval get more trials while unresolved, up to ``max_requests``. The record is
goodput as an interval: the goodput at the highest level passed and the rate of the lowest failed, with the
unresolved levels between; ``[floors.<mode>] goodput_rps`` is its floor (higher is better: pass when the low
end clears it, fail when the high end is below it). A sender that fell behind its schedule makes the record
inconclusive, never a number.
"""

import pytest

pytestmark = [pytest.mark.load, pytest.mark.perfgate(kind="goodput")]


def test_goodput_under_slo(perf_server, measure, perf_check):
    """The highest request rate the mode serves within its SLOs."""
    g = measure.goodput(perf_server)
    perf_check(g, "goodput_rps")
