"""A usage error met at collection, from a test directory of the user's own (perfgate switches on there when
a collected test uses its fixtures), ends the run as a usage error (exit 4) with one message, as it does
when the profile is named up front; not as a collection error of that module (exit 2, a traceback)."""

from __future__ import annotations

import pytest

USER_TEST = """
def test_decode(perf_server, measure, perf_check):
    perf_check(measure(perf_server), "tok_s")

def test_other(perf_server, measure, perf_check):
    perf_check(measure(perf_server), "tok_s")
"""


def _broken_default_profile(pytester: pytest.Pytester) -> None:
    prof = pytester.path / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
    prof.parent.mkdir(parents=True)
    prof.write_text('schema_version = 1\n[hardware]\ngpu = "RTX PRO 6000 Blackwell"\ncount = 8\n')


@pytest.mark.parametrize("where", ["mytests", "perftests"])
def test_a_bad_profile_found_at_collection_is_a_usage_error(pytester: pytest.Pytester, where: str) -> None:
    _broken_default_profile(pytester)
    (pytester.path / where).mkdir()
    (pytester.path / where / "test_mine.py").write_text(USER_TEST)
    r = pytester.runpytest_subprocess(where, "-p", "no:cacheprovider")
    out, err = r.stdout.str(), r.stderr.str()
    assert r.ret == pytest.ExitCode.USAGE_ERROR, out + err
    assert err.count("perfgate:") == 1 and "kimi-k2.5.toml: key 'hardware.sm'" in err
    assert "Traceback" not in out + err and "during collection" not in out and "UsageError" not in out


def test_a_perf_case_test_without_its_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_x(perf_case):\n    pass\n")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "uses perf_case without @pytest.mark.perfgate(kind=...)" in r.stderr.str()
    assert "during collection" not in r.stdout.str()


SWEEPS = """
import pytest

@pytest.mark.perfgate(kind="sweep")
def test_sweep_a(perf_server, measure, perf_check):
    perf_check(measure.sweep(perf_server), "sweep")

@pytest.mark.perfgate(kind="sweep")
def test_sweep_b(perf_server, measure, perf_check):
    perf_check(measure.sweep(perf_server), "sweep")

@pytest.mark.perfgate(kind="mine", modes=["baseline"])
def test_my_sweep(perf_server, measure, perf_check):
    perf_check(measure.sweep(perf_server), "sweep")
"""


def test_a_kind_the_profile_has_no_record_of_is_deselected_saying_why_once(pytester: pytest.Pytester) -> None:
    """The default profile has no [workload] concurrency_sweep: the sweep kind's tests are deselected with one
    summary line naming them and the fix; measure.sweep() in a test of another kind is a config-error record,
    concluded before anything is measured (no server start), not a crash."""
    pytester.makepyfile(test_mine=SWEEPS)
    r = pytester.runpytest("-p", "no:cacheprovider", "-rf")
    r.assert_outcomes(failed=1, deselected=2)
    out = r.stdout.str()
    why = [x for x in r.stdout.lines if "deselected (" in x]
    assert len(why) == 1, out
    assert why[0].startswith("perfgate: 2 test(s) of kind 'sweep' deselected (test_mine.py::test_sweep_a, "
                             "test_mine.py::test_sweep_b): ") and why[0].endswith(
        "kimi-k2.5.toml has no [workload] concurrency_sweep; fix: add the levels there, e.g. "
        "concurrency_sweep = [1, 4, 16]"), why[0]
    r.stdout.fnmatch_lines(["*test_my_sweep*", "[[]config-error[]] measure.sweep(): *kimi-k2.5.toml has no "
                            "[[]workload[]] concurrency_sweep, so there is no level to measure; fix: add the levels "
                            "there*"])
    assert "crash" not in out
    assert "0 server start(s)" in out
