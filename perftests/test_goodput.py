"""Goodput under SLOs (marker ``load``), written only with perfgate's public fixtures (docs/load.md).

One record per mode: open-loop arrivals on the schedule of the profile's ``[slo]`` (Poisson by default,
seeded, the same schedule every trial), the rate bracketed by doubling from ``rate_start`` then bisected to
``resolution``, each level measured with the workload's trials. The record is the highest rate meeting every
SLO: its goodput (good requests per second) with its CI, the attainment at each level, the metric that
broke the SLOs first; ``[floors.<mode>] goodput_rps`` is its floor (higher is better). A sender that fell
behind its schedule makes the record inconclusive, never a number.
"""

import pytest

pytestmark = [pytest.mark.load, pytest.mark.perfgate(kind="goodput")]


def test_goodput_under_slo(perf_server, measure, perf_check):
    """The highest request rate the mode serves within its SLOs."""
    g = measure.goodput(perf_server)
    perf_check(g, "goodput_rps")
