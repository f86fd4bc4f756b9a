"""perfgate gate: documented exit codes and the [tool.perfgate.gate] policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.errors import ConfigError, ExitCode
from perfgate.report.junit_read import read_report
from perfgate.report.policy import DEFAULT_BLOCK_ON, GatePolicy, load_policy
from tests.report_factory import DEFAULT_STACK, Case, perf_case, seed_cases, write_report

FLOOR = dict(kind="floor", classname="perftests.test_baseline", test="test_floor")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory as cwd, so the gate reads no pyproject.toml but ours."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _pair(workdir: Path, new_cases: list, **new_kw: object) -> tuple[str, str]:  # type: ignore[type-arg]
    old = write_report(workdir / "old.xml", seed_cases())
    kw: dict[str, object] = {
        "stack": dict(DEFAULT_STACK, **{"stack.cuda": "13.1"}),
        "started_at": "2026-01-06T10:00:00+00:00",
    }
    kw.update(new_kw)
    new = write_report(workdir / "new.xml", new_cases, **kw)
    return str(old), str(new)


def _replace(cases: list, index: int, case: object) -> list:  # type: ignore[type-arg]
    out = list(cases)
    out[index] = case
    return out


def test_exit_0_when_nothing_changed(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _pair(workdir, seed_cases())
    assert main(["gate", old, new]) == ExitCode.OK == 0  # type: ignore[comparison-overlap]  # an IntEnum member equals its int; mypy's strict equality says never
    assert "perfgate gate: exit 0: OK" in capsys.readouterr().err


def test_exit_1_on_newly_broken(workdir: Path) -> None:
    broken = perf_case("baseline", outcome="fail", category="crash", **FLOOR)  # type: ignore[arg-type]
    old, new = _pair(workdir, _replace(seed_cases(), 0, broken))
    assert main(["gate", old, new]) == 1


def test_exit_1_on_regression_beyond_noise_but_not_within(workdir: Path) -> None:
    # unidentified machines: judged between machines (prior 1.6 % on 3 degrees of freedom), so -10 % blocks and
    # -0.6 % does not
    slower = perf_case("baseline", tok_s=80.0, spread=0.8, cv=0.01, **FLOOR)
    old, new = _pair(workdir, _replace(seed_cases(), 0, slower))
    assert main(["gate", old, new]) == 1
    noisy = perf_case("baseline", tok_s=89.0, spread=0.8, cv=0.01, **FLOOR)
    old, new = _pair(workdir, _replace(seed_cases(), 0, noisy))
    assert main(["gate", old, new]) == 0


def test_unknown_noise_never_blocks(workdir: Path) -> None:
    old = write_report(workdir / "old.xml", [perf_case("baseline", tok_s=90.0, **FLOOR)])  # type: ignore[arg-type]
    new = write_report(workdir / "new.xml", [perf_case("baseline", tok_s=40.0, **FLOOR)])  # type: ignore[arg-type]
    assert main(["gate", str(old), str(new)]) == 0


def test_exit_3_when_only_unblocked(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xpass = perf_case(
        "baseline", "flashinfer-ar-fusion", outcome="xpass", tok_s=95.0, spread=1.0, expected="xfail:unsupported-arch"
    )
    newer = dict(DEFAULT_STACK, **{"stack.flashinfer": "0.8.0"})
    old, new = _pair(workdir, _replace(seed_cases(), 3, xpass), stack=newer)
    assert main(["gate", old, new, "--format", "json"]) == ExitCode.UNBLOCKED == 3  # type: ignore[comparison-overlap]  # an IntEnum member equals its int; mypy's strict equality says never
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["gate"]["exit_code"] == 3
    assert [f["key"] for f in data["gate"]["expectation_updates"]] == [
        "perftests.test_backends::test_variant[kimi-k2.5-sim:baseline+flashinfer-ar-fusion]"
    ]
    assert "update their expectations" in captured.err


def test_unblocked_with_lapsed_expectation_needs_no_update(workdir: Path) -> None:
    """xfail -> pass with expected=pass: a stack condition (flashinfer < 0.8) no longer applies."""
    passing = perf_case("baseline", "flashinfer-ar-fusion", outcome="pass", tok_s=95.0, spread=1.0, expected="pass")
    old, new = _pair(workdir, _replace(seed_cases(), 3, passing))
    assert main(["gate", old, new]) == 0


def test_regression_wins_over_unblocked(workdir: Path) -> None:
    xpass = perf_case("baseline", "flashinfer-ar-fusion", outcome="xpass", expected="xfail:x")
    cases = _replace(seed_cases(), 3, xpass)
    cases = _replace(cases, 0, perf_case("baseline", tok_s=70.0, spread=0.8, **FLOOR))  # type: ignore[arg-type]
    old, new = _pair(workdir, cases)
    assert main(["gate", old, new]) == 1


def test_gone_records_block_by_default(workdir: Path) -> None:
    old, new = _pair(workdir, seed_cases()[:-1])
    assert main(["gate", old, new]) == 1
    assert main(["gate", old, new, "--block-on", "newly-broken,regressed"]) == 0


@pytest.mark.parametrize(
    "argv_tail",
    [
        ["missing.xml"],
        ["garbage.xml"],
        ["empty.xml"],
        ["new.xml", "--block-on", "newly-broken,typo"],
        ["new.xml", "--min-ratio", "1.5"],
        ["new.xml", "--no-such-option"],
    ],
)
def test_exit_2_on_usage_or_unreadable_input(workdir: Path, argv_tail: list[str]) -> None:
    old, _ = _pair(workdir, seed_cases())
    (workdir / "garbage.xml").write_text("not xml at all")
    write_report(workdir / "empty.xml", [])
    assert main(["gate", old, *argv_tail]) == ExitCode.USAGE == 2  # type: ignore[comparison-overlap]  # an IntEnum member equals its int; mypy's strict equality says never


def test_exit_2_on_mixed_engines_unless_allowed(workdir: Path) -> None:
    old, new = _pair(workdir, seed_cases(), engine="sglang")
    assert main(["gate", old, new]) == 2
    assert main(["gate", old, new, "--allow-mixed-engines"]) == 0


def test_policy_from_pyproject_in_cwd(workdir: Path) -> None:
    (workdir / "pyproject.toml").write_text(
        "[tool.perfgate]\n"
        'gate.block_on = ["newly-broken", "regressed"]\n'
        "gate.allow_inconclusive = false\n"
        "gate.min_ratio = 0.9\n"
        'gate.ignore = ["*+mscclpp]"]\n'
    )
    sub = workdir / "sub"
    sub.mkdir()
    policy = load_policy(start=sub)  # found upwards
    assert policy.block_on == {"newly-broken", "regressed"}
    assert policy.allow_inconclusive is False and policy.min_ratio == 0.9

    # a 9.5% drop beyond noise (between unidentified machines) passes min_ratio 0.9; a 20% drop does not
    small = perf_case("baseline", tok_s=81.0, spread=0.5, **FLOOR)  # type: ignore[arg-type]
    old, new = _pair(workdir, _replace(seed_cases(), 0, small))
    assert main(["gate", old, new]) == 0
    assert main(["gate", old, new, "--min-ratio", "1.0"]) == 1
    big = perf_case("baseline", tok_s=70.0, spread=0.5, **FLOOR)  # type: ignore[arg-type]
    old, new = _pair(workdir, _replace(seed_cases(), 0, big))
    assert main(["gate", old, new]) == 1

    # pass -> inconclusive blocks with allow_inconclusive = false, unless overridden
    inc = perf_case("baseline", "custom-ar-on", outcome="inconclusive", reason="confounded")
    old, new = _pair(workdir, _replace(seed_cases(), 4, inc))
    assert main(["gate", old, new]) == 1
    assert main(["gate", old, new, "--allow-inconclusive"]) == 0

    # ignored records never block ("gone" is not in block_on here anyway: use newly-broken)
    broken = perf_case("baseline", "mscclpp", outcome="error", category="crash")
    cases = _replace(seed_cases(), 6, broken)
    old = str(write_report(workdir / "old2.xml", _replace(seed_cases(), 6, perf_case("baseline", "mscclpp"))))
    new = str(write_report(workdir / "new2.xml", cases))
    assert main(["gate", old, new]) == 0
    assert main(["gate", old, new, "--pyproject", str(workdir / "nothing.toml")]) == 2


def test_policy_defaults_and_validation(tmp_path: Path) -> None:
    assert GatePolicy().block_on == frozenset(DEFAULT_BLOCK_ON)
    (tmp_path / "pyproject.toml").write_text("[tool.perfgate.gate]\nblock_on = 'regressed'\n")
    with pytest.raises(ConfigError, match="block_on must be a list"):
        load_policy(tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.perfgate.gate]\nblock_in = []\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_policy(tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.perfgate]\n")
    assert load_policy(tmp_path / "pyproject.toml").block_on == frozenset(DEFAULT_BLOCK_ON)


def test_gate_markdown_shows_the_verdict(workdir: Path) -> None:
    broken = perf_case("baseline", outcome="fail", category="crash", **FLOOR)  # type: ignore[arg-type]
    old, new = _pair(workdir, _replace(seed_cases(), 0, broken))
    assert main(["gate", old, new, "--format", "md", "-o", "gate.md"]) == 1
    md = (workdir / "gate.md").read_text()
    assert "**gate: exit 1**" in md and "newly-broken" in md


def test_console_entry_point_exit_codes_in_a_real_process(workdir: Path) -> None:
    xpass = perf_case("baseline", "flashinfer-ar-fusion", outcome="xpass", expected="xfail:unsupported-arch")
    old, new = _pair(workdir, _replace(seed_cases(), 3, xpass))
    cmd = [sys.executable, "-m", "perfgate.cli", "gate", old, new]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "Unblocked" in proc.stdout
    proc = subprocess.run([*cmd[:-2], old, "missing.xml"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no such report file" in proc.stderr


def test_cli_registry_help_and_missing_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    from perfgate.cli.registry import SUBCOMMANDS

    assert {"diff", "gate", "history", "plot", "report", "merge"} <= set(SUBCOMMANDS)
    assert main(["--help"]) == 0
    assert "gate" in capsys.readouterr().out
    assert main([]) == 2
    assert main(["gate", "--help"]) == 0
    assert "--block-on" in capsys.readouterr().out


def test_a_pass_that_lost_its_verdict_blocks_by_default(workdir: Path) -> None:
    """A floor that passed and is inconclusive (noisy) now is news: exit 1 by default, saying what resolves it."""
    noisy = perf_case("baseline", tok_s=88.0, cv=0.09, outcome="inconclusive", category="noisy",
                      reason="inconclusive: too noisy, CV 9.0% of 5 trials; raise [workload] trials", **FLOOR)  # type: ignore[arg-type]
    old, new = _pair(workdir, _replace(seed_cases(), 0, noisy))
    assert main(["gate", old, new, "-o", "gate.txt"]) == 1
    out = (workdir / "gate.txt").read_text()
    assert "lost-verdict" in out and "raise [workload] trials" in out
    # the policy can say otherwise, on purpose
    assert main(["gate", old, new, "--block-on", "newly-broken,regressed"]) == 0
    # an xfail that became inconclusive had no pass to lose: only allow_inconclusive = false blocks it
    inc = perf_case("baseline", "custom-ar-on", outcome="inconclusive", reason="confounded")
    old, new = _pair(workdir, _replace(seed_cases(), 4, inc))
    assert main(["gate", old, new]) == 0


def test_a_junit_error_is_a_failure_whatever_the_outcome_property_says(workdir: Path) -> None:
    """An error in teardown after the record was written: the property says pass, every CI says error."""
    torn = perf_case("baseline", tok_s=89.5, spread=0.8, cv=0.01, outcome="error", with_outcome_property=False,
                     extra={"outcome": "pass", "category": "", "expected": "pass"}, **FLOOR)
    old, new = _pair(workdir, _replace(seed_cases(), 0, torn))
    rep = read_report(new)
    rec = next(r for r in rep.records if r.prop("kind") == "floor")
    assert rec.outcome == "error" and rec.outcome_source == "xml"
    assert any("the outcome property says pass but the JUnit element says error" in n for n in rep.notes)
    assert main(["gate", old, new, "-o", "gate.txt"]) == 1
    out = (workdir / "gate.txt").read_text()
    assert "newly-broken" in out and "counted as error, the worse of the two" in out


def test_diff_and_gate_agree_on_a_lapsed_xfail(workdir: Path) -> None:
    """xfail → pass where the new report already expects a pass: no update to ask for, in diff or gate."""
    lapsed = perf_case("baseline", "flashinfer-ar-fusion", outcome="pass", expected="pass")
    old, new = _pair(workdir, _replace(seed_cases(), 3, lapsed))
    assert main(["gate", old, new, "-o", "gate.txt"]) == 0
    assert main(["diff", old, new, "-o", "diff.txt"]) == 0
    for name in ("gate.txt", "diff.txt"):
        text = (workdir / name).read_text()
        assert "Unblocked, already expected to pass (nothing to update): 1" in text, name
        assert "update the expectations:" not in text, name
    # still expecting the failure: both ask for the update (gate exit 3)
    stale = perf_case("baseline", "flashinfer-ar-fusion", outcome="pass", expected="xfail:unsupported-arch")
    old, new = _pair(workdir, _replace(seed_cases(), 3, stale))
    assert main(["gate", old, new, "-o", "gate.txt"]) == 3
    assert main(["diff", old, new, "-o", "diff.txt"]) == 0
    for name in ("gate.txt", "diff.txt"):
        assert "Unblocked (xfail → pass/xpass): update the expectations: 1" in (workdir / name).read_text(), name


def test_the_docs_name_only_test_modules_that_exist() -> None:
    """docs/gate.md's ignore example once named perftests.test_micro, which matches nothing."""
    import re

    root = Path(__file__).resolve().parent.parent
    texts = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    named = {m for t in texts for m in re.findall(r"perftests[./](test_[a-z_]+)", t.read_text())}
    assert named and all((root / "perftests" / f"{m}.py").is_file() for m in named), named


def test_reports_of_different_hardware_are_not_compared_unless_told(workdir: Path) -> None:
    old, new = _pair(workdir, seed_cases(), stack=dict(DEFAULT_STACK, **{"stack.gpu_count": "4"}))
    assert main(["gate", old, new, "-o", "g.txt"]) == 2
    assert main(["gate", old, new, "--allow-hardware-mismatch"]) == 0


def test_a_record_without_a_baseline_is_never_a_silent_pass(workdir: Path) -> None:
    extra = perf_case("baseline", "nccl-allreduce-tree", tok_s=80.0, spread=0.5)
    old, new = _pair(workdir, [*seed_cases(), extra])
    assert main(["gate", old, new, "-o", "g.txt"]) == 1
    assert "unjudged" in (workdir / "g.txt").read_text() and "no baseline record" in (workdir / "g.txt").read_text()
    assert main(["gate", old, new, "--block-on", "newly-broken,regressed,gone"]) == 0


def test_reports_of_two_profiles_are_refused_saying_the_profiles_differ(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llama = [perf_case(m, tok_s=200.0, spread=1.0, cv=0.01, profile="llama-3.1-8b", kind="floor") for m in
             ("baseline", "eagle3", "ngram")]
    old, new = _pair(workdir, llama, profile="h200-x1/llama-3.1-8b")
    assert main(["gate", old, new]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"the reports come from different profiles (kimi-k2.5-sim in {old}, h200-x1/llama-3.1-8b in {new}" in err
    assert "7 would be gone, 3 unjudged" in err and "gate reports of one profile" in err
    assert "different hardware" not in err


def test_an_empty_old_report_is_said_to_be_empty_not_other_hardware(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write_report(workdir / "old.xml", [], perfgate_properties=False)
    new = write_report(workdir / "new.xml", seed_cases())
    assert main(["gate", str(old), str(new)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"{old}: the OLD report has no test cases, so there is nothing to gate {new} against" in err
    assert "hardware" not in err


def test_the_gates_table_names_each_metrics_unit(workdir: Path) -> None:
    def rec(metric: str, value: float, kind: str) -> Case:
        return perf_case("baseline", kind=kind, classname=f"mytests.test_{kind}", test=f"test_{kind}",
                         extra={"metric": metric, metric: str(value), "n": "5", "direction": "lower"
                                if metric.endswith("_ms") else "higher"})

    old = write_report(workdir / "old.xml", [rec("ttft_ms", 270.0, "latency"), rec("goodput_rps", 4.0, "goodput"),
                                             rec("tok_s", 89.5, "floor")])
    new = write_report(workdir / "new.xml", [rec("ttft_ms", 271.0, "latency"), rec("goodput_rps", 4.1, "goodput"),
                                             rec("tok_s", 89.4, "floor")])
    assert main(["gate", str(old), str(new), "-o", "g.txt"]) == 0
    text = (workdir / "g.txt").read_text()
    assert "tok/s old" not in text and "tok/s new" not in text
    assert "ttft_ms 270.0 ms" in text and "ttft_ms 271.0 ms" in text
    assert "goodput_rps 4.00 req/s" in text and "goodput_rps 4.10 req/s" in text
    assert "89.50 tok/s" in text and "89.40 tok/s" in text


def test_a_junit_file_from_another_tool_is_named_as_such(tmp_path, capsys):
    """Issue 55: a plain pytest JUnit file (no perfgate properties) is refused as what it is, not as "different
    hardware"."""
    from perfgate.cli import main

    plain = tmp_path / "plain.xml"
    plain.write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="1">'
                     '<testcase classname="tests.test_x" name="test_y" time="0.01"/></testsuite></testsuites>')
    code = main(["gate", str(plain), str(plain)])
    err = capsys.readouterr().err
    assert code == 2 and "is no perfgate report" in err and "different hardware" not in err, err
