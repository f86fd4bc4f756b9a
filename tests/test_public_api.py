"""Writing your own perf test with the public API, as a user in another directory would (pytester)."""

from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml

import perfgate
from perfgate.measuring.judge import Decision, decide
from tests.simproject import SIM_PROFILE
from tests.simproject import make_project as _make

#: the simulated test profile (tests.simproject) with a TTFT ceiling (TTFT) at concurrency 4
PROFILE = SIM_PROFILE + """[floors.baseline.c4]
ttft_ms = TTFT
output_tok_s = 1.0
"""

USER_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="load", modes=["baseline"])


@pytest.mark.parametrize("metric", ["ttft_ms", "output_tok_s"])
def test_under_load(perf_server, measure, perf_check, metric):
    m = measure(perf_server, concurrency=4, requests_per_trial=8)
    assert m.concurrency == 4 and m.stat(metric).n == 3
    perf_check(m, metric)


def test_explicit_limit_in_eagle3(perf_server, measure, perf_check):
    m = measure(perf_server, concurrency=2)
    perf_check(m, "itl_ms", limit=0.001)  # 1 µs: cannot hold
test_explicit_limit_in_eagle3 = pytest.mark.perfgate(kind="strict", modes=["eagle3"])(test_explicit_limit_in_eagle3)
'''


def _project(pytester, ttft):
    prof = _make(pytester.path, PROFILE.replace("TTFT", str(ttft)))
    # the user's own directory (not perftests/): perfgate switches on because the tests use its fixtures
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_load.py").write_text(USER_TEST)
    return prof


def _records(path):
    return {c.name: {p.name: p.value for p in c.properties()} for s in JUnitXml.fromfile(str(path)) for c in s}  # type: ignore[attr-defined]  # junitparser types xunit2 cases as its core TestCase


def test_a_user_test_gets_the_lifecycle_the_record_the_matrix_and_the_gate(pytester):
    prof = _project(pytester, ttft=100000.0)  # a ceiling no simulated TTFT reaches
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(passed=2, failed=1)
    out = r.stdout.str()
    assert "2 server start(s) for 2 distinct config(s)" in out  # one per config, two tests on one server
    r.stdout.fnmatch_lines(["*(load ttft_ms)*pass*", "*(load output_tok_s)*pass*", "*(strict itl_ms)*fail*"])
    recs = _records(pytester.path / "r.xml")
    ttft = recs["test_under_load[m:baseline-ttft_ms]"]
    assert ttft["outcome"] == "pass" and ttft["kind"] == "load" and ttft["metric"] == "ttft_ms"
    assert ttft["direction"] == "lower" and float(ttft["limit"]) == 100000.0 and float(ttft["ttft_ms"]) > 0
    assert float(ttft["ttft_ms_ci_low"]) <= float(ttft["ttft_ms"]) <= float(ttft["ttft_ms_ci_high"])
    assert ttft["concurrency"] == "4" and ttft["mode"] == "baseline" and ttft["stack.simulated"] == "true"
    strict = recs["test_explicit_limit_in_eagle3[m:eagle3]"]
    assert strict["outcome"] == "fail" and strict["category"] == "slower-than-baseline"
    assert "ceiling" in strict["reason"]

    # the same records against a profile whose ceiling the new TTFT exceeds: the gate blocks on the latency
    import xml.etree.ElementTree as ET

    tree = ET.parse(pytester.path / "r.xml")
    for case in tree.iter("testcase"):
        if case.get("name") == "test_under_load[m:baseline-ttft_ms]":
            for prop in case.iter("property"):
                new_value = {"ttft_ms": "1", "ttft_ms_ci_low": "0.5", "ttft_ms_ci_high": "1.5"}.get(prop.get("name", ""))
                if new_value:
                    prop.set("value", new_value)
    old = pytester.path / "old.xml"
    tree.write(old)
    from perfgate.cli import main

    assert main(["gate", str(old), str(pytester.path / "r.xml"), "-o", str(pytester.path / "g.txt")]) == 1
    assert "ttft_ms 1 →" in (pytester.path / "g.txt").read_text()


def test_a_latency_over_its_ceiling_fails_with_the_profile_key(pytester):
    prof = _project(pytester, ttft=0.001)
    r = pytester.runpytest_subprocess("mytests", "-k", "ttft_ms", f"--perfgate-profile={prof}",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*ttft_ms * ms > ceiling 0.001 *[[]floors.baseline.c4[]]*"])


def test_the_fixtures_are_listed_with_their_documentation(pytester):
    _project(pytester, ttft=1.0)
    r = pytester.runpytest_subprocess("--fixtures", "mytests", "-p", "no:cacheprovider")
    out = r.stdout.str()
    for name in ("perf_server", "measure", "perf_check", "perf_baseline", "perf_candidate", "perf_compare",
                 "step_profile", "perf_case", "perf_crosscheck", "micro_check", "perfgate_profile"):
        assert f"{name} -- " in out or f"{name}\n" in out or f"{name} [" in out, name
    assert "measured cold" in out and "Ends the test" in out and "--perfgate-candidate stack" in out


def test_measure_refuses_unknown_keys_and_bad_numbers(pytester):
    _project(pytester, ttft=1.0)
    (pytester.path / "mytests" / "test_load.py").write_text('''
def test_typo(perf_server, measure):
    measure(perf_server, concurency=4)
''')
    r = pytester.runpytest_subprocess("mytests", "-p", "no:cacheprovider", "--perfgate-profile=t/m")
    r.stdout.fnmatch_lines(["*unknown keyword(s) [[]'concurency'[]]*known: concurrency*"])


def test_the_public_names_are_importable_and_listed():
    assert set(perfgate.__all__) >= {"PerfServer", "BaselineServer", "CandidateServer", "MicroCase", "Measurement",
                                     "METRICS", "load_profile", "PerfgateError"}
    for name in perfgate.__all__:
        assert getattr(perfgate, name) is not None, name
    assert perfgate.__version__


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", ["perftests/test_latency.py", "perftests/test_goodput.py",
                                  "perftests/test_crossover.py", "perftests/test_profile.py",
                                  "perftests/test_baseline.py", "perftests/test_speculative.py",
                                  "perftests/test_backends.py", "perftests/test_stack_pair.py",
                                  "perftests/test_crosscheck.py", "perftests/test_allreduce.py"])
def test_the_example_uses_only_public_names(path):
    text = (ROOT / path).read_text()
    assert "perfgate." not in text.replace("pytest.mark.perfgate", "")  # fixtures and the marker only


def test_update_baselines_writes_a_user_tests_limit_at_its_concurrency(pytester):
    """--perfgate-update-baselines writes what perf_check compared against: [floors.<mode>.c<N>] <metric>, with
    its measured table; the next run checks the written limit."""
    import tomllib

    prof = _make(pytester.path, PROFILE.replace("[floors.baseline.c4]\nttft_ms = TTFT\noutput_tok_s = 1.0\n", ""))
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_load.py").write_text(USER_TEST.split("\n\ndef test_explicit")[0] + "\n")
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--perfgate-update-baselines",
                                      "-p", "no:cacheprovider")
    r.assert_outcomes(skipped=2)  # no limit yet: recorded, and skipped saying where one goes
    r.stdout.fnmatch_lines([f"*updated {prof} [[]floors.baseline.c4[]] ttft_ms: (none) -> *",
                            f"*updated {prof} [[]floors.baseline.c4[]] output_tok_s: (none) -> *"])
    c4 = tomllib.loads(prof.read_text())["floors"]["baseline"]["c4"]
    assert c4["ttft_ms"] > 0 and c4["output_tok_s"] > 0
    assert c4["measured"]["concurrency"] == 4 and c4["measured"]["n"] == 3
    pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--junitxml=again.xml",
                                  "-p", "no:cacheprovider")
    again = _records(pytester.path / "again.xml")
    for metric in ("ttft_ms", "output_tok_s"):  # judged against the written limit (pass or fail: a shared CPU)
        rec = again[f"test_under_load[m:baseline-{metric}]"]
        assert float(rec["limit"]) == c4[metric] and rec["outcome"] in ("pass", "fail")


COMPARE_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="mine", modes=["eagle3"])


def test_eagle3_against_the_baseline(perf_server, perf_baseline, measure, perf_compare):
    assert perf_baseline.mode == "baseline" and perf_baseline.config.key != perf_server.config.key
    base = measure(perf_baseline)
    perf_compare(measure(perf_server), base)
'''


def test_a_user_test_compares_a_config_with_its_baseline_measured_in_the_same_run(pytester):
    """perf_baseline / perf_compare: the speculation record's comparison in a user's test: the baseline measured in
    this session (not recorded on the test), the ratio of medians and the cost model's breakdown on the record."""
    prof = _make(pytester.path, PROFILE.replace("TTFT", "1.0"))
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_cmp.py").write_text(COMPARE_TEST)
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    assert "2 server start(s) for 2 distinct config(s)" in r.stdout.str()
    rec = _records(pytester.path / "r.xml")["test_eagle3_against_the_baseline[m:eagle3]"]
    assert rec["kind"] == "mine" and rec["mode"] == "eagle3" and rec["outcome"] in ("pass", "fail", "inconclusive")
    assert float(rec["vs_baseline_ci_low"]) <= float(rec["vs_baseline"]) <= float(rec["vs_baseline_ci_high"])
    assert float(rec["token_match"]) == 1.0 and "cycle_ms" in rec  # lossless; the cost model's breakdown
    assert "eagle3 vs baseline" in rec["reason"]


# ----------------------------------------------------------------------------- perf_crosscheck and micro_check

CROSSCHECK_TEST = '''
import pytest


@pytest.mark.perfgate(kind="agreement", modes=["baseline"])
def test_agrees_with_sglang(perf_server, perf_crosscheck):
    perf_crosscheck(perf_server)


@pytest.mark.perfgate(kind="crosscheck")
def test_the_builtin_kind(perf_server, perf_crosscheck):
    perf_crosscheck(perf_server)
'''

#: a stand-in for SGLang's one-batch benchmark (not installed here): a second client, perfgate's own, measuring the
#: same live server once per repeat, each request's figure written back as SGLang counts it (all O tokens)
STAND_IN_BENCH = '''

def pytest_configure(config):
    from pathlib import Path

    import perfgate.plugin.crosscheck as cc
    from perfgate.client import GenRequest, run_batch
    from perfgate.procedure.sglang_bench import BenchResult, BenchRow

    def run_bench(*, python, url, tokenizer, input_len, output_len, log_path, repeats=1, module="", timeout_s=0):
        Path(log_path).write_text("stand-in\\n")
        rows = []
        for i in range(repeats):
            req = GenRequest(input_ids=tuple(range(1000 + i, 1000 + i + input_len)), max_new_tokens=output_len)
            out = run_batch(url, [req])[0][0]
            rows.append(BenchRow(output_throughput=out.decode_tok_s * output_len / (output_len - 1),
                                 latency_s=1.0, last_ttft_s=0.1, acc_length=None, output_len=output_len, raw={}))
        return BenchResult(rows=tuple(rows))

    cc.sglang_bench_module = lambda python: ("stand.in", None)
    cc.make_tokenizer = lambda python, model, workdir: Path(workdir) / "tok"
    cc.run_bench = run_bench
'''


def _crosscheck_project(pytester):
    prof = _make(pytester.path, PROFILE.replace("TTFT", "1.0"))
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_agreement.py").write_text(CROSSCHECK_TEST)
    return prof


def test_a_user_crosscheck_skips_where_sglangs_benchmark_does_not_import(pytester):
    """As perfgate's own cross-check on the simulated server: the built-in kind is not collected (auto: the real
    engine only); a user's kind runs and skips, at the user's test, saying why, before anything is measured."""
    import importlib.util

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("SGLang imports here: its benchmark would run")
    prof = _crosscheck_project(pytester)
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--junitxml=r.xml", "-rs",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(skipped=1, deselected=1)
    r.stdout.fnmatch_lines(["*mytests/test_agreement.py:* SGLang's one-batch benchmark does not import in *"])
    assert "0 server start(s)" in r.stdout.str()
    rec = _records(pytester.path / "r.xml")["test_agrees_with_sglang[m:baseline]"]
    assert rec["kind"] == "agreement" and "outcome" not in rec and "tok_s" not in rec  # nothing measured
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--perfgate-crosscheck", "on",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(skipped=3)  # and the built-in kind's records, one per mode, with the option on


def test_a_user_crosscheck_concludes_on_the_agreement(pytester):
    """With a benchmark that imports (a stand-in measuring the same server): the record carries both figures and
    its verdict is the one they imply."""
    prof = _crosscheck_project(pytester)
    (pytester.path / "conftest.py").write_text((pytester.path / "conftest.py").read_text() + STAND_IN_BENCH)
    r = pytester.runpytest_subprocess("mytests", "-k", "agrees", f"--perfgate-profile={prof}", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    assert r.ret in (0, 1) and "Traceback" not in r.stdout.str(), r.stdout.str()
    rec = _records(pytester.path / "r.xml")["test_agrees_with_sglang[m:baseline]"]
    assert rec["kind"] == "agreement" and rec["sglang_bench_module"] == "stand.in" and rec["sglang_bench_n"] == "3"
    ratio = float(rec["tok_s"]) / float(rec["sglang_bench_tok_s_comparable"])
    assert float(rec["vs_sglang_bench"]) == pytest.approx(ratio, rel=1e-4)
    lo, hi = float(rec["vs_sglang_bench_judged_ci_low"]), float(rec["vs_sglang_bench_judged_ci_high"])
    judged = float(rec["vs_sglang_bench"])
    assert lo <= judged <= hi and "vs_sglang_bench_per_cycle" not in rec  # no acceptance: judged on tok/s
    # the one rule of every comparison (judge.decide, min effect = the 1 % tolerance): pass only where agreement
    # is shown, not on the point estimate alone
    d = decide(judged, (lo, hi), higher_is_better=True, min_effect=0.01)
    assert rec["outcome"] == ("pass" if d is Decision.SAME else "inconclusive" if d is Decision.UNDECIDED else "fail")
    assert "vs SGLang bench_one_batch_server" in rec["reason"]


MICRO_TEST = '''
import pytest

import perfgate

pytestmark = pytest.mark.micro


def test_my_allreduce(micro_case, micro_check):
    assert isinstance(micro_case, perfgate.MicroCase) and micro_case.world_size == 2
    micro_check(micro_case)
'''

MICRO = """
[micro]
tokens = [1]
sweep_bytes = [4096]
world_sizes = [2]
iters = 5
warmup = 1
[micro.floors]
"gloo.eager.4096" = { latency_us = 1.0, tolerance = 0.5 }
"""


def test_a_user_micro_test_gets_the_micro_tiers_records(pytester, monkeypatch):
    """micro_check in a user's test: the plan's records, measured by real gloo ranks (world size 2), their numbers
    and identity recorded, a floor and a backend that cannot run here concluded as perfgate's own tier does."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the gloo ranks need torch.distributed)")
    monkeypatch.delenv("PERFGATE_MICRO_WORLD_SIZES", raising=False)
    monkeypatch.delenv("PERFGATE_MICRO_ITERS", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the same outcomes on a GPU box
    prof = _make(pytester.path, PROFILE.replace("TTFT", "1.0") + MICRO)
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_mine.py").write_text(MICRO_TEST)
    r = pytester.runpytest_subprocess("mytests", "-k", "gloo or :nccl-ws2", f"--perfgate-profile={prof}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(passed=1, failed=1, xfailed=2)  # gloo under / over its floor; nccl cannot run without a GPU
    assert "server start" not in r.stdout.str()
    recs = _records(pytester.path / "r.xml")
    ok = recs["test_my_allreduce[decode-1x7168-eager:gloo-ws2]"]
    assert (ok["outcome"], ok["kind"], ok["mode"], ok["variant"], ok["world_size"]) == \
        ("pass", "allreduce", "eager", "gloo", "2")
    assert float(ok["latency_us"]) > 0 and ok["engine"] == "sim" and len(ok["config"]) == 10
    slow = recs["test_my_allreduce[sweep-4096B-eager:gloo-ws2]"]
    assert (slow["outcome"], slow["category"], slow["floor_latency_us"]) == ("fail", "slower-than-baseline", "1")
    nccl = recs["test_my_allreduce[decode-1x7168-eager:nccl-ws2]"]
    assert (nccl["outcome"], nccl["category"]) == ("xfail", "missing-dependency")


def test_the_record_fixtures_refuse_what_is_not_their_record():
    from perfgate.plugin.crosscheck import Crosscheck
    from perfgate.plugin.microcheck import MicroCheck

    with pytest.raises(TypeError, match=r"expected the test's perf_server, got Measurement; call "
                                        r"perf_crosscheck\(perf_server\)"):
        Crosscheck(None)(perfgate.Measurement.__new__(perfgate.Measurement))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"expected the test's micro_case .*got str; call micro_check\(micro_case\)"):
        MicroCheck(item=None, state=None)("gloo")  # type: ignore[arg-type]


def _doc_expectations_example() -> str:
    """The ``[expectations.latency]`` example of docs/writing-tests.md, as the user copies it."""
    text = (ROOT / "docs" / "writing-tests.md").read_text()
    section = text.split("## Expectations", 1)[1]
    return section.split("```toml\n", 1)[1].split("```", 1)[0]


LATENCY_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="latency", modes=["eagle3"])


def test_itl(perf_server, measure, perf_check):
    perf_check(measure(perf_server, concurrency=2), "itl_ms", limit=0.001)  # 1 us: cannot hold
'''


def _kind_project(pytester, extra: str):
    prof = _make(pytester.path, PROFILE.replace("TTFT", "1.0") + extra)
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_latency.py").write_text(LATENCY_TEST)
    return prof


def test_the_docs_expectation_on_a_users_own_kind_holds_its_record(pytester):
    example = _doc_expectations_example()
    assert "[expectations.latency]" in example
    prof = _kind_project(pytester, example)
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(xfailed=1)
    rec = _records(pytester.path / "r.xml")["test_itl[m:eagle3]"]
    assert rec["outcome"] == "xfail" and rec["category"] == "slower-than-baseline" and rec["kind"] == "latency"


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["no-xdist", "xdist"])
def test_an_expectation_naming_no_kind_is_refused_at_collection_with_the_file_key_and_fix(pytester, workers):
    """Under xdist the workers find it while collecting; the controller says it once, exit 4 (not a crash)."""
    if workers:
        pytest.importorskip("xdist")
    prof = _kind_project(pytester, '[expectations.latncy]\neagle3 = { expect = "pass" }\n')
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", *workers,
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    assert "INTERNALERROR" not in r.stdout.str() + r.stderr.str()
    assert r.stderr.str().count("[expectations.latncy]") == 1
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert str(prof) in err and "[expectations.latncy] (line " in err
    assert "fix: did you mean 'latency'?" in err and "kind of a collected test (latency)" in err


def test_an_expectation_for_a_kind_this_run_did_not_collect_is_said_not_refused(pytester):
    prof = _kind_project(pytester, '[expectations.warm-restart]\nbaseline = { expect = "pass" }\n')
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*[[]expectations.warm-restart[]] (line *)*no record of this run used it*"])


def test_a_builtin_kind_without_expectations_is_refused_at_load(pytester):
    prof = _kind_project(pytester, '[expectations.stack-pair]\nbaseline = { expect = "pass" }\n')
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "the built-in kind 'stack-pair' takes no expectations" in r.stderr.str()
    assert "fix: remove the table" in r.stderr.str()
