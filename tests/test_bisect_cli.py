"""``perfgate bisect``'s parts that need no server: a step's result read from its stack-pair records (the worst
record decides; the record's verdict or one metric's decision), the step table, and the cost said by --dry-run."""

from __future__ import annotations

from perfgate.cli import main
from perfgate.cli.bisect import sim_arms, step_result
from perfgate.measuring.bisect import FOUND, Bisection, Step, StepResult
from perfgate.measuring.judge import Decision
from perfgate.report.records import Record
from tests.simproject import SIM_SEED_BOX, make_project
from tests.test_starts import PROFILE, VARIANTS


def rec(outcome: str, **props: str) -> Record:
    return Record(key="k", id="i", classname="c", name="test_stack_pair[m:baseline]", outcome=outcome,
                  outcome_source="property", properties=tuple((k.replace("__", "."), v) for k, v in props.items()))


def test_a_steps_result_is_the_records_verdict_or_one_metrics_decision():
    worse_latency = rec("fail", category="slower-than-baseline", tok_s="89", candidate__tok_s="89", pair_n="3",
                        pair_ratio="0.999", pair_ci_low="0.996", pair_ci_high="1.002", pair_decision="same",
                        pair__itl_ms_p99__decision="regressed", pair__itl_ms_p99__ratio="1.12",
                        pair__itl_ms_p99__ci_low="1.05", pair__itl_ms_p99__ci_high="1.19", pair__tok_s__decision="same",
                        pair__tok_s__ratio="0.999", pair__tok_s__ci_low="0.996", pair__tok_s__ci_high="1.002")
    r = step_result([worse_latency], starts=6, where="s.xml")
    assert r.decision is Decision.REGRESSED and r.pairs == 3 and r.starts == 6
    # the step shows the metric that decided it, with its ratio and interval, not decode tok/s's (issue 55)
    assert (r.metric, r.ratio, r.ci, r.label) == ("itl_ms_p99", 1.12, (1.05, 1.19), "regressed (itl_ms_p99)")
    assert step_result([worse_latency], metric="tok_s").decision is Decision.SAME
    assert step_result([worse_latency], metric="itl_ms_p99").decision is Decision.REGRESSED
    broken = rec("fail", category="missing-dependency", tok_s="89", reason="ImportError: undefined symbol")
    b = step_result([worse_latency, broken])  # the worst record decides: the candidate arm did not start
    assert b.broken and b.category == "missing-dependency" and b.label == "fails: missing-dependency"
    down = rec("error", category="crash")
    assert step_result([broken, down]).current_failed
    undecided = rec("inconclusive", tok_s="89", candidate__tok_s="89", pair_decision="undecided", pair_n="6")
    same = rec("pass", tok_s="89", candidate__tok_s="89", pair_decision="same", pair_n="2")
    assert step_result([same, undecided]).decision is Decision.UNDECIDED


def test_the_dry_run_says_the_changed_packages_and_the_cost(tmp_path, capsys):
    prof = make_project(tmp_path, PROFILE.replace("TRIALS", "3"), variants_text=VARIANTS)
    code = main(["bisect", "--profile", str(prof), "--candidate-sim-stack", "torch=2.10.0,flashinfer=0.7.3,cuda=12.9",
                 "--budget-starts", "30", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 0
    assert "2 changed package(s), current -> candidate:\n  torch 2.9.1 -> 2.10.0\n  flashinfer 0.7.2 -> 0.7.3\n" in err
    assert ("a single culprit takes 1 to 3 step(s) (the whole set, 1 halving(s), 1 confirmation): at most 36 server "
            "starts; interactions take more; budget 30 server starts (--budget-starts)") in err
    assert not (tmp_path / "perfgate-bisect").exists()


def test_the_step_table_names_the_culprit_with_its_interval():
    arms = sim_arms(SIM_SEED_BOX, "", "flashinfer=0.7.3,torch=2.10.0")
    r = StepResult(decision=Decision.REGRESSED, ratio=0.9, ci=(0.89, 0.91), pairs=2, starts=4)
    s1 = Step(number=1, packages=("flashinfer", "torch"), role="whole set", result=r)
    s2 = Step(number=2, packages=("flashinfer",), role="half", result=r)
    b = Bisection(packages=("flashinfer", "torch"), steps=(s1, s2), status=FOUND, culprit=("flashinfer",),
                  culprit_step=s2)
    from perfgate.cli.bisect import render

    text = render(b, arms)
    assert "\n2     flashinfer                               half       regressed  ×0.9000  [0.8900, 0.9100]  2      4\n" \
        in text
    assert "culprit: flashinfer 0.7.2 -> 0.7.3: regressed ×0.9000 [0.8900, 0.9100] over 2 start pair(s) (step 2)" \
        in text
    assert render(b, arms, "md").startswith("| step | packages layered over the current stack |")


def test_each_step_selects_the_stack_pair_record_of_a_real_profile_name(pytester, capsys):
    # the real bisect's first step on 2026-12-05 selected test_stack_pair[m:baseline] (the simulator profile's
    # name) in a project whose profile is h200-x1/llama-3.1-8b-dummy: no test, no record, the step failed
    from perfgate.cli.bisect import step_tests
    from perfgate.profiles.load import load_profile

    prof = make_project(pytester.path, PROFILE.replace("TRIALS", "3"), profile="box/llama-x")
    tests = step_tests("perftests", load_profile(prof).name, ["baseline"])
    assert tests == ["perftests/test_stack_pair.py::test_stack_pair[llama-x:baseline]"]
    r = pytester.runpytest_subprocess("--collect-only", "-q", *tests, "-m", "stack_pair", f"--perfgate-profile={prof}",
                                      "--perfgate-candidate", "sim-stack=flashinfer=0.7.3", "-p", "no:cacheprovider")
    r.stdout.fnmatch_lines([tests[0], "1 test collected*"])
    assert step_tests("perftests", "box/llama-x", []) == ["perftests"]  # no --mode: every stack-pair record
    # and the dry run says what each step will run
    code = main(["bisect", "--profile", str(prof), "--candidate-sim-stack", "flashinfer=0.7.3", "--mode", "baseline",
                 "--dry-run"])
    assert code == 0
    assert f"perfgate bisect: each step runs pytest {tests[0]!r} -m stack_pair" in capsys.readouterr().err


def test_an_undecided_step_says_why():
    """Issue 52: a step undecided because its pairs had one arm on a busy host names that in its row."""
    busy = rec("inconclusive", tok_s="89", candidate__tok_s="89", pair_decision="undecided", pair_n="2",
               why_undecided="one-sided-pair")
    r = step_result([busy])
    assert r.decision is Decision.UNDECIDED and r.why == "one-sided-pair"
    assert r.label == "undecided (one-sided-pair)"
    assert step_result([rec("pass", tok_s="89", candidate__tok_s="89", pair_decision="same")]).label == "same"


def test_bisect_refuses_what_no_step_could_run_before_any_start(tmp_path, capsys):
    """Issue 55: a typo'd package names the closest one; a budget below one step and a project without the
    stack-pair test are usage errors before any server starts, each with its fix; identical stacks have nothing to
    search (exit 0, no step)."""
    prof = make_project(tmp_path, PROFILE.replace("TRIALS", "3"), variants_text=VARIANTS)

    def err(*args: str) -> tuple[int, str]:
        code = main(["bisect", "--profile", str(prof), *args, "--dry-run"])
        return code, capsys.readouterr().err

    code, out = err("--candidate-sim-stack", "flashinfr=0.7.3")
    assert code == 2 and "no package 'flashinfr' (did you mean 'flashinfer'?)" in out, out
    code, out = err("--candidate-sim-stack", "flashinfer=0.7.2")  # the current version: nothing differs, nothing to do
    assert code == 0 and "0 changed package(s)" in out and "nothing to search, no step run" in out, out
    assert "cost:" not in out  # no "1 to 0 step(s)" for a search that has nothing to search
    code, out = err("--candidate-sim-stack", "flashinfer=0.7.3", "--budget-starts", "0")
    assert code == 2 and "--budget-starts 0: below one step's" in out, out
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    code, out = err("--candidate-sim-stack", "flashinfer=0.7.3", "--mode", "baseline", "--root", str(empty))
    assert code == 2 and "perftests/test_stack_pair.py is not in" in out and "perfgate init" in out, out
