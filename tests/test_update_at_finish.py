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


#: a user's own test in an empty directory, as README "Writing your own test" has it (no limit for output_tok_s in
#: the shipped profile: without the update it skips, saying to set up a project first)
USER_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="latency", modes=["baseline"])


def test_mine(perf_server, measure, perf_check):
    perf_check(measure(perf_server), "output_tok_s")
'''


def _installed(pytester: pytest.Pytester) -> str:
    """A copy of what the wheel installs under site-packages/perfgate/data/project (setup.py: the SHIPPED files),
    and a conftest that makes this session's perfgate read it as its installed copy (as from a wheel)."""
    import shutil

    from perfgate.profiles.shipped import SHIPPED
    from tests.simproject import ROOT

    data = pytester.path / "venv" / "site-packages" / "perfgate" / "data" / "project"
    for pattern in SHIPPED:
        for src in ROOT.glob(pattern):
            out = data / src.relative_to(ROOT)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, out)
    work = pytester.mkdir("empty")
    (work / "conftest.py").write_text(f"from pathlib import Path\n\nfrom perfgate.profiles import shipped\n\n"
                                      f"shipped._PACKAGED = Path({str(data)!r})  # the wheel's copy, installed\n")
    (work / "test_mine.py").write_text(USER_TEST)
    return str(data / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml")


@pytest.mark.parametrize("named", [False, True], ids=["default-profile", "named-profile"])
def test_an_update_of_the_installed_profile_is_a_usage_error_before_any_server(pytester: pytest.Pytester,
                                                                                named: bool) -> None:
    """Issue 32 item 7: in an empty directory the skip suggested --perfgate-update-baselines, which measured
    everything and then refused to write the installed (site-packages) profile, exit 0. It is refused before any
    test now: exit 4, naming the file, the option and the fix (perfgate init --from <profile>)."""
    from pathlib import Path

    installed = _installed(pytester)
    before = Path(installed).read_text()
    args = ["empty", "-rs", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    if named:
        args.append(f"--perfgate-profile={installed}")
    skip = pytester.runpytest_subprocess(*args)  # what the user saw first: a skip saying how to set a limit
    assert skip.ret == pytest.ExitCode.OK and "1 skipped" in skip.stdout.str(), skip.stdout.str()
    assert "`perfgate init --from sim-rtxpro6000-x8/kimi-k2.5`" in skip.stdout.str()
    r = pytester.runpytest_subprocess(*args, "--perfgate-update-baselines")
    out = r.stdout.str() + r.stderr.str()
    assert r.ret == pytest.ExitCode.USAGE_ERROR, out
    assert f"--perfgate-update-baselines: {installed} is the copy of the profile that perfgate ships" in out
    assert "fix: `perfgate init --from sim-rtxpro6000-x8/kimi-k2.5`" in out
    assert "launching" not in out and "server start(s)" not in out and "passed" not in out  # nothing measured
    assert Path(installed).read_text() == before


def test_a_profile_that_cannot_be_written_exits_non_zero(pytester: pytest.Pytester) -> None:
    """The floors measured but the profile not written (here: its update's temporary file cannot be made) is
    said in red and exits 1, not 0."""
    prof = make_project(pytester)
    before = prof.read_text()
    (prof.parent / f".{prof.name}.perfgate-update.tmp").mkdir()  # where write_profile writes its new text first
    r = _run(pytester, prof)
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out + r.stderr.str()
    assert "1 passed" in out and f"perfgate: --perfgate-update-baselines: {prof} NOT written" in out
    assert prof.read_text() == before
