"""The backend compatibility matrix (marker ``backends``): one record per variant × mode, written only with
perfgate's public fixtures.

Each record says whether the attempt starts, whether its output matches the baseline's,
how fast it is against the baseline measured in the same run, and, when it fails, why
(the category classified from the server's log and exit status).
"""

import pytest

pytestmark = pytest.mark.backends


@pytest.mark.perfgate(kind="variant")
def test_variant(perf_server, perf_baseline, measure, perf_compare):
    """A variant runs, is lossless, and is not slower than the baseline beyond noise."""
    base = measure(perf_baseline)
    perf_compare(measure(perf_server), base)
