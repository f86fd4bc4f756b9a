"""Step profiles (marker ``profile``): where each decode step's GPU time goes, from SGLang's own trace.

One record per config (every mode, and every variant in the profile's variant modes): all-reduces per
decode step (per verify pass in speculative modes), their time and share of the step, the backend that
ran them, GEMM / attention / other time, the rank skew, and what halving the all-reduce time would buy.
A variant whose trace shows another all-reduce backend than the one it asks for is a ``fallback``.
"""

import pytest

pytestmark = pytest.mark.profile


@pytest.mark.perfgate(kind="profile", variants=True)
def test_step_profile(perf_server, step_profile):
    """The config's decode steps, profiled; the all-reduce backend in the trace is the one asked for."""
    step_profile(perf_server)
