"""One precedence per knob (perfgate.plugin.settings).

    a test's explicit argument  >  command-line option (or its environment variable)  >  profile

Trials on the load paths (``measure.rate``, ``measure.goodput``, ``measure.levels``) as users run them (pytester,
the simulated seed box, a tiny ``[slo]`` whose levels are never topped up, so the trials counted are the
precedence's).
"""

from __future__ import annotations

import pytest

from tests.test_starts import PROFILE as STARTS_PROFILE
from tests.test_starts import _project, _records

# ----------------------------------------------------------------------------- trials on the load paths

#: a tiny [slo]: 5 requests a trial at 8 req/s, a level's budget of 5 (never topped up: every trial counted is one
#: the precedence asked for), one goodput level (rate_start = rate_max)
SLO = """
[slo]
ttft_ms_p50 = 60000
attainment = 0.5
requests = 5
warmup_requests = 0
max_requests = 5
rate_start = 8
rate_max = 8
max_levels = 2
max_new_tokens = 8
SLO_TRIALS
"""

LOAD_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="trials-under-load", modes=["baseline"])


def test_rate(perf_server, measure, perfgate_record):
    perfgate_record("trials", len(measure.rate(perf_server, 8.0).trials))


def test_rate_explicit(perf_server, measure, perfgate_record):
    perfgate_record("trials", len(measure.rate(perf_server, 8.0, trials=4).trials))


def test_goodput(perf_server, measure, perfgate_record):
    g = measure.goodput(perf_server)
    perfgate_record("trials", g.trials)
    perfgate_record("level_trials", len(g.search.levels[0].trials))


def test_goodput_explicit(perf_server, measure, perfgate_record):
    g = measure.goodput(perf_server, trials=4)
    perfgate_record("trials", g.trials)
    perfgate_record("level_trials", len(g.search.levels[0].trials))


def test_levels(perf_server, measure, perfgate_record):
    perfgate_record("trials", measure.levels(perf_server, (1,)).measurements[0].tok_s.n)
'''


@pytest.mark.parametrize(("slo_trials", "option", "default"), [
    (2, None, 2),  # [slo] trials beats [workload] trials (1)
    (2, "3", 3),  # --perfgate-trials beats [slo] trials
    (None, None, 1),  # no [slo] trials: [workload] trials
])
def test_trials_under_load_a_tests_own_beat_the_option_which_beats_the_profile(pytester, slo_trials, option,
                                                                                 default):
    assert "trials = TRIALS" in STARTS_PROFILE
    prof = _project(pytester, trials=1,
                    extra=SLO.replace("SLO_TRIALS", f"trials = {slo_trials}" if slo_trials else ""))
    (pytester.path / "test_load_trials.py").write_text(LOAD_TEST)
    r = pytester.runpytest_subprocess("test_load_trials.py", f"--perfgate-profile={prof}", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", *(["--perfgate-trials", option] if option else []))
    r.assert_outcomes(passed=5)
    recs = {name.split("[")[0]: p for name, p in _records(pytester).items()}
    # rate and goodput: the test's trials= > the option > [slo] trials > [workload] trials
    assert recs["test_rate"]["trials"] == str(default)
    assert recs["test_rate_explicit"]["trials"] == "4"
    assert recs["test_goodput"]["trials"] == recs["test_goodput"]["level_trials"] == str(default)
    assert recs["test_goodput_explicit"]["trials"] == recs["test_goodput_explicit"]["level_trials"] == "4"
    # the crossover's closed-loop levels take no trials= of their own: the option > [slo] trials > [workload] trials
    assert recs["test_levels"]["trials"] == str(default)
