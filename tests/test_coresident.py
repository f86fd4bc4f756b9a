"""Co-resident arms (``--perfgate-co-resident FRACTION``, perfgate.serving.coresident), as a user runs them: a stack
pair on the simulator whose two servers run side by side, each start pair started in the alternated order and kept
up together, every server launched with the fraction asked for; the usage errors that name the fix."""

from __future__ import annotations

import json
import re

import pytest

from tests.simproject import SIM_SEED_BOX
from tests.simproject import make_project as _make
from tests.test_starts import PROFILE, VARIANTS, _records

#: the project's conftest: the plugin, and per server start how many servers were running once it served
CONFTEST = '''
import json

from perfgate.serving import manager

pytest_plugins = ["perfgate.plugin"]
RUNNING = []
_ensure = manager.ServerManager.ensure


def ensure(self, config):
    server = _ensure(self, config)
    if self.number(config.key) == self.starts and len(RUNNING) < self.starts:
        RUNNING.append([config.key, len(self.running())])
    return server


manager.ServerManager.ensure = ensure


def pytest_sessionfinish(session):
    (session.config.rootpath / "running.json").write_text(json.dumps(RUNNING))
'''


def _project(pytester: pytest.Pytester, weights_gb: int = 20) -> str:
    """The seed box with a model small enough for two servers at --mem-fraction-static 0.4 (the seed's Kimi-K2.5,
    74 GB a GPU, fits one server only: see test_a_model_that_does_not_fit_twice_fails_to_start)."""
    box = pytester.path / "box.toml"
    box.write_text(SIM_SEED_BOX.read_text().replace("weights_gb = 590", f"weights_gb = {weights_gb}"))
    prof = _make(pytester.path, PROFILE.replace("TRIALS", "3").replace(str(SIM_SEED_BOX), str(box)),
                 variants_text=VARIANTS)
    (pytester.path / "conftest.py").write_text(CONFTEST)
    return str(prof)


def _run(pytester: pytest.Pytester, prof: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("perftests/test_stack_pair.py", "-k", "baseline", f"--perfgate-profile={prof}",
                                         "--perfgate-candidate", "sim-stack=torch=2.10.0", "--junitxml=r.xml",
                                         "--perfgate-log-dir=logs", "-p", "no:cacheprovider", *args)


def test_a_stack_pair_runs_its_arms_side_by_side(pytester: pytest.Pytester) -> None:
    prof = _project(pytester)
    r = _run(pytester, prof, "--perfgate-starts", "2", "--perfgate-max-starts", "2", "--perfgate-co-resident", "0.4")
    assert r.ret in (0, 1), r.stdout.str()
    running = json.loads((pytester.path / "running.json").read_text())
    # four starts: each pair's first server alone, its second beside it; the pair order alternated (A B, B A)
    assert [n for _, n in running] == [1, 2, 1, 2]
    keys = [k for k, _ in running]
    assert keys[0] == keys[3] and keys[1] == keys[2] and keys[0] != keys[1]
    rec = _records(pytester)["test_stack_pair[m:baseline]"]
    assert rec["co_resident_starts"] == "2" and rec["pair_n"] == "2" and rec["pair_order"] == "AB,BA"
    assert rec["pair_decision"] in ("same", "improved", "undecided", "regressed")
    assert int(rec["ttft_probes"]) > 0 and float(rec["candidate.tok_s"]) > 0
    # every server ran with the fraction asked for, in place of the profile's 0.88
    logs = sorted((pytester.path / "logs").rglob("*.log"))
    commands = [ln for p in logs for ln in p.read_text().splitlines() if ln.startswith("# command:")]
    assert len(commands) == 4 and all(re.search(r"--mem-fraction-static 0\.4( |$)", c) for c in commands), commands
    assert not any("0.88" in c for c in commands)


def test_without_the_option_one_server_runs_at_a_time(pytester: pytest.Pytester) -> None:
    prof = _project(pytester)
    r = _run(pytester, prof, "--perfgate-starts", "2", "--perfgate-max-starts", "2")
    assert r.ret in (0, 1), r.stdout.str()
    assert [n for _, n in json.loads((pytester.path / "running.json").read_text())] == [1, 1, 1, 1]
    assert "co_resident_starts" not in _records(pytester)["test_stack_pair[m:baseline]"]


def test_a_model_that_does_not_fit_twice_fails_to_start(pytester: pytest.Pytester) -> None:
    """The seed's Kimi-K2.5 (74 GB a GPU) at --mem-fraction-static 0.4 of a 96 GB GPU: the simulator's SGLang
    refuses as a real one would, and the record names it."""
    prof = _project(pytester, weights_gb=590)
    r = _run(pytester, prof, "--perfgate-co-resident", "0.4")
    assert r.ret == 1, r.stdout.str()
    rec = _records(pytester)["test_stack_pair[m:baseline]"]
    assert rec["outcome"] == "fail" and rec["category"] == "oom"
    r.stdout.fnmatch_lines(["*Not enough memory*mem-fraction-static*"])


@pytest.mark.parametrize(("args", "message"), [
    (("--perfgate-co-resident", "0.9"), "must be 0.05-0.5 (two share one GPU); fix: e.g. --perfgate-co-resident 0.4"),
    (("--perfgate-co-resident", "x"), "must be 0.05-0.5"),
    (("--perfgate-co-resident", "0.4", "--perfgate-url", "http://127.0.0.1:9"),
     "an attached server (--perfgate-url) is not perfgate's to start; fix: drop one of the two options"),
])
def test_bad_use_is_a_usage_error_naming_the_fix(pytester: pytest.Pytester, args: tuple[str, ...],
                                                 message: str) -> None:
    prof = _project(pytester)
    r = pytester.runpytest_subprocess("perftests/test_stack_pair.py", f"--perfgate-profile={prof}", *args,
                                      "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert message in r.stderr.str(), r.stderr.str()
