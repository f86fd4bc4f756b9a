"""The backend compatibility matrix (marker ``backends``): one record per variant × mode.

Each record says whether the attempt starts, whether its output matches the baseline's,
how fast it is against the baseline measured in the same run, and, when it fails, why
(the category classified from the server's log and exit status).
"""

import pytest

pytestmark = pytest.mark.backends


@pytest.mark.perfgate(kind="variant")
def test_variant(perf, perf_case):
    """A variant runs, is lossless, and is not slower than the baseline beyond noise."""
    perf.preflight(perf_case)
    perf.controlled(perf_case)
    base = perf.measure(perf_case.baseline(perf_case.mode), primary=False)
    m = perf.measure(perf_case)
    perf.conclude(perf_case, perf.variant_verdict(perf_case, m, base))
