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



def test_under_xdist_one_workers_floor_is_written_and_the_others_refusal_listed(pytester: pytest.Pytester) -> None:
    """The baseline's worker writes its floor; the eagle3 server (on the other worker) fails to start (CUDA OOM
    at graph capture: no memory left outside the static pool), so its floor is refused; the controller says
    both, once each."""
    pytest.importorskip("xdist")
    prof = make_project(pytester)
    spec = "speculative-num-draft-tokens = 4 }"
    prof.write_text(prof.read_text().replace(spec, spec[:-1] + ", mem-fraction-static = 0.99 }"))
    r = pytester.runpytest_subprocess("perftests/test_baseline.py", "perftests/test_speculative.py",
                                      f"--perfgate-profile={prof}", "-m", "baseline or speculative",
                                      "--perfgate-update-baselines", "-p", "no:cacheprovider",
                                      "-p", "no:hypothesispytest", "-n", "2")
    out = r.stdout.str()
    floors = load_profile(prof).floors
    assert floors["baseline"].tok_s != 80.0 and floors["eagle3"].accept_len == 1.5, out
    assert out.count(f"perfgate: updated {prof} [floors.baseline] tok_s: 80.0 -> {floors['baseline'].tok_s}") == 1
    assert out.count(f"perfgate: NOT updated {prof} [floors.eagle3] accept_len: the measurement failed (oom)") == 1
    assert out.count("perfgate: updated") == 1 and out.count("perfgate: NOT updated") == 1, out
