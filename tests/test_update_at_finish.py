"""--perfgate-update-baselines writes the floors at session finish, whatever plugins are active: not from the
terminal summary (a run with -p no:terminal passed and wrote nothing); under xdist the workers ship theirs to
the controller, which writes them once."""

from __future__ import annotations

import pytest

from perfgate.profiles.load import load_profile
from tests.test_measurement import make_project


def _run(pytester: pytest.Pytester, prof: object, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("perftests/test_baseline.py", f"--perfgate-profile={prof}", "-m", "baseline",
                                         "--perfgate-update-baselines", "-p", "no:cacheprovider",
                                         "-p", "no:hypothesispytest", *args)


@pytest.mark.parametrize("plugins", [(), ("-p", "no:terminal")], ids=["terminal", "no-terminal"])
def test_the_floor_is_written_with_or_without_the_terminal_summary(pytester: pytest.Pytester,
                                                                   plugins: tuple[str, ...]) -> None:
    prof = make_project(pytester)
    r = _run(pytester, prof, *plugins)
    assert r.ret == pytest.ExitCode.OK, r.stdout.str() + r.stderr.str()
    floor = load_profile(prof).floors["baseline"]
    assert floor.tok_s != 80.0 and 80 < floor.tok_s < 100 and floor.measured["n"] == 3
    said = r.stderr.str() if plugins else r.stdout.str()  # no terminal summary: the lines go to stderr
    assert f"perfgate: updated {prof} [floors.baseline] tok_s: 80.0 -> {floor.tok_s}" in said


def test_under_xdist_the_controller_writes_the_workers_updates_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    prof = make_project(pytester)
    r = _run(pytester, prof, "-n", "2")
    assert r.ret == pytest.ExitCode.OK, r.stdout.str() + r.stderr.str()
    text = prof.read_text()
    assert text.count("[floors.baseline.measured]") == 1 and load_profile(prof).floors["baseline"].tok_s != 80.0
    assert r.stdout.str().count("perfgate: updated") == 1


def test_under_xdist_the_controller_lists_every_workers_refusal_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    prof = make_project(pytester, max_cv=0.0001)  # every record too noisy to write: a refusal each
    before = prof.read_text()
    r = pytester.runpytest_subprocess("perftests/test_baseline.py", "perftests/test_speculative.py",
                                      f"--perfgate-profile={prof}", "-m", "baseline or speculative",
                                      "--perfgate-update-baselines", "-p", "no:cacheprovider",
                                      "-p", "no:hypothesispytest", "-n", "2")
    out = r.stdout.str()
    assert prof.read_text() == before, out
    assert out.count(f"perfgate: NOT updated {prof} [floors.baseline] tok_s: too noisy") == 1, out
    assert out.count(f"perfgate: NOT updated {prof} [floors.eagle3] accept_len: too noisy") == 1, out
    assert out.count("nothing measured to write") == 1, out
