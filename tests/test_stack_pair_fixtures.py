"""The stack-pair comparison written with the public fixtures in a user's own test (perf_candidate, measure,
perf_compare), as users run it (pytester, real subprocesses, the simulated server): the same measurements give the
same verdict as the built-in record, and its arms start interleaved on their own, their order alternated."""

import re

import pytest

from tests.test_starts import _project, _records, _starts

#: a user's own kind (not the registry's stack-pair), measuring the candidate first (the arms still start current
#: first: measure(perf_candidate) measures the record's own config before the candidate arm)
USER_PAIR = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="my-stack-gate", modes=["baseline"])


def test_my_stack_gate(perf_server, perf_candidate, measure, perf_compare):
    assert perf_candidate.mode == perf_server.mode and perf_candidate.config.key != perf_server.config.key
    perf_compare(measure(perf_candidate), measure(perf_server))
'''

#: what the paired judgement and the candidate arm put on a record
VERDICT = ("outcome", "category", "pair_ratio", "pair_ci_low", "pair_ci_high", "pair_n", "pair_decision", "candidate",
           "candidate.tok_s", "candidate.tok_s_ci_low", "candidate.tok_s_ci_high", "candidate.n", "token_match",
           "tok_s", "n_starts", "start_values", "pair_order")


def _stack(record):
    return {k: v for k, v in record.items() if k.startswith("candidate.stack.")}


def _user_project(pytester):
    prof = _project(pytester)
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_pair.py").write_text(USER_PAIR)
    return prof


@pytest.mark.parametrize(("spec", "outcomes"), [
    # identical arms: any outcome but a crash (on a loaded runner another metric than decode tok/s can read
    # regressed; the A/A verdict is the timing tier's): what is checked is that both records share one verdict
    ("sim-stack=torch=2.10.0;nccl=2.28.3", ("pass", "inconclusive", "fail")),
    # a setting the simulator models as slower: SGLang's PCIe IPC all-reduce (less than half the speed)
    ("env.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1", ("fail",)),
])
def test_a_users_stack_pair_gets_the_built_in_records_verdict(pytester, spec, outcomes):
    prof = _user_project(pytester)
    r = pytester.runpytest_subprocess("perftests/test_stack_pair.py", "mytests", f"--perfgate-profile={prof}",
                                      "--perfgate-starts", "2", "--perfgate-max-starts", "2", "--perfgate-candidate", spec,
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    assert r.ret in (0, 1), r.stdout.str()
    # the built-in record measured both arms, interleaved; the user's record reused them and started nothing
    # (--perfgate-max-starts 2: no pairs added while undecided, so both judge the same two pairs)
    assert _starts(pytester) == ["baseline", "baseline@candidate", "baseline@candidate", "baseline"]  # A B, B A
    recs = _records(pytester)
    built_in, mine = recs["test_stack_pair[m:baseline]"], recs["test_my_stack_gate[m:baseline]"]
    assert built_in["kind"] == "stack-pair" and mine["kind"] == "my-stack-gate"
    assert built_in["outcome"] in outcomes and built_in["pair_n"] == "2"
    assert {k: built_in.get(k) for k in VERDICT} == {k: mine.get(k) for k in VERDICT}
    assert _stack(built_in) == _stack(mine) and _stack(mine) == ({"candidate.stack.torch": "2.10.0",
                                                                 "candidate.stack.nccl": "2.28.3"}
                                                                if spec.startswith("sim-stack") else {})
    assert built_in["reason"] == mine["reason"] and f"candidate ({spec})" in mine["reason"]


def test_a_users_stack_pair_alone_starts_its_arms_interleaved_and_skips_without_a_candidate(pytester):
    prof = _user_project(pytester)
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--perfgate-starts", "2",
                                      "--perfgate-max-starts", "2", "--perfgate-candidate",
                                      "sim-stack=torch=2.10.0;nccl=2.28.3",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    # passed, skipped as inconclusive, or (a loaded runner's tail latency of identical arms: the A/A verdict is the
    # timing tier's) failed on a metric other than decode tok/s, whose decision is checked below
    assert r.ret in (0, 1), r.stdout.str()
    assert _starts(pytester) == ["baseline", "baseline@candidate", "baseline@candidate", "baseline"]  # A B, B A
    p = _records(pytester)["test_my_stack_gate[m:baseline]"]
    assert p["pair_n"] == "2" and p["pair_decision"] in ("same", "improved", "undecided")
    assert p["pair_order"] == "AB,BA"
    assert p["candidate.stack.torch"] == "2.10.0" and float(p["candidate.tok_s"]) > 0 and p["n_starts"] == "2"
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "-rs", "--junitxml=none.xml",
                                      "-p", "no:cacheprovider")
    r.assert_outcomes(skipped=1)
    r.stdout.fnmatch_lines(["*no candidate stack to compare with; pass --perfgate-candidate SPEC*"])
    assert _records(pytester, "none.xml")["test_my_stack_gate[m:baseline]"]["outcome"] == "skip"


MISUSED = '''
import pytest


@pytest.mark.perfgate(kind="stack-pair")
def test_pair_against_itself(perf_candidate, perf_server, measure, perf_compare):
    m = measure(perf_server)
    perf_compare(m, m)
'''


def test_perf_compare_on_a_stack_pair_record_without_the_candidate_arm_says_the_fix(pytester):
    prof = _project(pytester)
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_bad.py").write_text(MISUSED)
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "-k", "baseline",
                                      "--perfgate-candidate", "env.PERFGATE_AA=1", "-p", "no:cacheprovider")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*perf_compare(): a stack-pair record compares its config on the candidate stack*"
                            "perf_compare(measure(perf_candidate), measure(perf_server))*"])


def test_attached_the_stack_pair_records_skip_saying_one_server_has_one_stack(pytester, tmp_path):
    """perf_candidate (listed before perf_server) skips each record with the stack-pair's own reason, also where the
    attached server runs another config than the record's (eagle3 here), before perf_server compares configs."""
    from perfgate.serving.simprocess import SimProcess
    from tests.test_measurement import BASE_FLAGS, MODEL, make_project

    prof = make_project(pytester)
    with SimProcess.start(BASE_FLAGS, log_path=tmp_path / "sim.log", model_path=MODEL) as sim:
        sim.wait_ready()
        r = pytester.runpytest_subprocess("perftests", "-m", "stack_pair", f"--perfgate-profile={prof}",
                                          f"--perfgate-url=http://127.0.0.1:{sim.port}", "--perfgate-candidate",
                                          "env.PERFGATE_AA=1", "--junitxml=r.xml", "-p", "no:cacheprovider")
    r.assert_outcomes(skipped=2)
    for mode in ("baseline", "eagle3"):
        p = _records(pytester)[f"test_stack_pair[m:{mode}]"]
        assert p["outcome"] == "skip" and p["kind"] == "stack-pair" and "attached" not in p
        assert p["reason"] == ("stack-pair: an attached server (--perfgate-url) has one stack; launch the servers to "
                               "compare two")


def test_noise_measured_by_an_earlier_paired_run_stands_in_for_the_prior(pytester):
    """--perfgate-noise-from: an A/A paired run's report measures this machine's noise; the next run of the same config
    is judged against it (``pair.<metric>.noise_source`` says ``history``, pooled with its own pairs) and says so on
    the terminal, with the measured figures; a run without the option stays on the prior; a path that names nothing
    is a usage error.

    The earlier report is the A/A run's own, its candidate's decode tok/s set 2 % apart between its two pairs (a
    noisier day: one start's sd 0.99 %), so that the next run's pairs, on a loaded 2-core runner or not, cannot
    reject it (the judge drops a measured noise that a run's own pairs spread far wider than): what is judged is
    structure, not how calm the runner was in either session."""
    import xml.etree.ElementTree as ET

    prof = _project(pytester)
    args = ["perftests/test_stack_pair.py", f"--perfgate-profile={prof}", "--perfgate-starts", "2",
            "--perfgate-max-starts", "2", "--perfgate-candidate", "env.PERFGATE_AA=1", "-p", "no:cacheprovider"]
    r = pytester.runpytest_subprocess(*args, "--junitxml=aa.xml")
    assert r.ret in (0, 1), r.stdout.str()
    aa = _records(pytester, "aa.xml")["test_stack_pair[m:baseline]"]
    assert aa["pair_n"] == "2" and "history" not in aa["pair.tok_s.noise_source"]
    tree = ET.parse(pytester.path / "aa.xml")
    current = [float(v) for v in aa["start_values.tok_s"].split(",")]
    for prop in tree.iter("property"):
        if prop.get("name") in ("candidate.start_values.tok_s", "candidate.start_values"):
            prop.set("value", f"{current[0] * 1.02:.4f},{current[1]:.4f}")
    tree.write(pytester.path / "aa.xml")
    r = pytester.runpytest_subprocess(*args, "--junitxml=r.xml", "--perfgate-noise-from", "aa.xml")
    assert r.ret in (0, 1), r.stdout.str()
    r.stdout.fnmatch_lines(["*noise measured on this machine (starts, --perfgate-noise-from): *tok_s 0.99% a start "
                            "(1 df: 2 pairs of 1 records)*"])
    rec = _records(pytester)["test_stack_pair[m:baseline]"]
    assert rec["pair.tok_s.noise_source"] == "starts+history", rec["pair.tok_s.noise_source"]
    r = pytester.runpytest_subprocess(*args, "--perfgate-noise-from", "nothing-here/*.xml")
    assert r.ret == 4  # pytest's usage error
    r.stderr.fnmatch_lines(["*--perfgate-noise-from 'nothing-here/*.xml': no report file, directory or glob that "
                            "matches anything; fix the path*"])


#: a user's latency pair: its record is about TTFT (perf_compare(..., metric=)), every judged metric still decides it
LATENCY_PAIR = USER_PAIR.replace("my-stack-gate", "my-ttft-gate").replace("test_my_stack_gate", "test_my_ttft_gate") \
    .replace("perf_compare(measure(perf_candidate), measure(perf_server))",
             "perf_compare(measure(perf_candidate), measure(perf_server), metric=\"ttft_ms\")")


def test_a_users_pair_leads_with_the_metric_it_is_about(pytester):
    """Issue 55: perf_compare(..., metric="ttft_ms"): the record names its metric and its line leads with TTFT's
    figure and its paired ratio and decision, not decode tok/s; an unknown metric is refused naming the known."""
    prof = _project(pytester)
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_pair.py").write_text(LATENCY_PAIR)
    (pytester.path / "mytests" / "test_bad.py").write_text(LATENCY_PAIR.replace('metric=\"ttft_ms\"', 'metric=\"ttft\"')
                                                           .replace("test_my_ttft_gate", "test_bad_metric"))
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--perfgate-starts", "1",
                                      "--perfgate-max-starts", "2", "--perfgate-candidate", "env.PERFGATE_AA=1",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    out = r.stdout.str()
    rec = _records(pytester)["test_my_ttft_gate[m:baseline]"]
    assert rec["metric"] == "ttft_ms" and rec["pair.ttft_ms.decision"], rec
    line = next(x for x in out.splitlines() if x.startswith("  baseline my-ttft-gate"))
    lead = line.split(None, 3)[3]
    assert lead.startswith(f"ttft_ms {rec['pair.ttft_ms.decision']} x"), line  # TTFT's ratio and decision first
    assert lead.index("ttft_ms ") < lead.index("candidate/current"), line
    assert "perf_compare(): unknown metric 'ttft'; known: tok_s" in out, out
    assert "FAILED mytests/test_bad.py::test_bad_metric[m:baseline] - ValueError" in out


def test_a_box_judges_on_its_own_earlier_paired_runs_without_an_option(pytester, monkeypatch):
    """Issue 52 item 5: a paired session with --junitxml keeps its report under the log folder (perfgate-logs/pairs/),
    and the next paired session of the same config on this machine is judged against the noise those pairs measured
    without --perfgate-noise-from, saying where it came from; PERFGATE_NOISE_AUTO=off keeps nothing and reads
    nothing (the priors alone); an explicit --perfgate-noise-from still wins."""
    import xml.etree.ElementTree as ET

    monkeypatch.setenv("PERFGATE_NOISE_AUTO", "on")
    prof = _project(pytester)
    args = ["perftests/test_stack_pair.py", f"--perfgate-profile={prof}", "--perfgate-starts", "2",
            "--perfgate-max-starts", "2", "--perfgate-candidate", "env.PERFGATE_AA=1", "-p", "no:cacheprovider"]
    r = pytester.runpytest_subprocess(*args, "--junitxml=first.xml")
    assert r.ret in (0, 1), r.stdout.str()
    assert "noise measured on this machine" not in r.stdout.str()  # nothing kept yet: the priors
    kept = sorted((pytester.path / "perfgate-logs" / "pairs").glob("run-*.xml"))
    assert len(kept) == 1 and kept[0].read_bytes() == (pytester.path / "first.xml").read_bytes()
    # the kept run made a noisier day's (its candidate's decode 2 % apart between its two pairs: one start's sd
    # 0.99 %), so that the next run's pairs, on a loaded runner or not, cannot reject it (as the test above does)
    tree = ET.parse(kept[0])
    first = _records(pytester, "first.xml")["test_stack_pair[m:baseline]"]
    current = [float(v) for v in first["start_values.tok_s"].split(",")]
    for prop in tree.iter("property"):
        if prop.get("name") in ("candidate.start_values.tok_s", "candidate.start_values"):
            prop.set("value", f"{current[0] * 1.02:.4f},{current[1]:.4f}")
    tree.write(kept[0])
    r = pytester.runpytest_subprocess(*args, "--junitxml=second.xml")
    assert r.ret in (0, 1), r.stdout.str()
    r.stdout.fnmatch_lines(["*noise measured on this machine (starts, this box's earlier paired runs, 1 report(s) kept "
                            "in *pairs; PERFGATE_NOISE_AUTO=off judges on the priors): *tok_s 0.99% a start (1 df: 2 "
                            "pairs of 1 records)*"])
    rec = _records(pytester, "second.xml")["test_stack_pair[m:baseline]"]
    assert "history" in rec["pair.tok_s.noise_source"], rec["pair.tok_s.noise_source"]
    assert len(list((pytester.path / "perfgate-logs" / "pairs").glob("run-*.xml"))) == 2
    r = pytester.runpytest_subprocess(*args, "--junitxml=third.xml", "--perfgate-noise-from", "first.xml")
    r.stdout.fnmatch_lines(["*noise measured on this machine (starts, --perfgate-noise-from): *"])
    monkeypatch.setenv("PERFGATE_NOISE_AUTO", "off")
    r = pytester.runpytest_subprocess(*args, "--junitxml=off.xml")
    assert r.ret in (0, 1) and "noise measured on this machine" not in r.stdout.str(), r.stdout.str()
    rec = _records(pytester, "off.xml")["test_stack_pair[m:baseline]"]
    assert "history" not in rec["pair.tok_s.noise_source"]
    assert len(list((pytester.path / "perfgate-logs" / "pairs").glob("run-*.xml"))) == 3  # off: this one not kept


def test_a_slower_scheduler_fails_the_pair_naming_ttfts_leg(pytester):
    """The candidate's engine waits 30 ms before every prefill (the simulator's PERFGATE_SIM_PREFILL_DELAY_MS, where the
    H200 runs' injected scheduler sleep lands: the to_forward leg, a fraction of a millisecond on its own), the servers
    stamp their responses (``enable-metrics``): the pair fails, the to_forward leg is regressed, the failure names it in
    ms and in per cent of TTFT, the record carries both arms' per-start values of it; decode is untouched. (30 ms, not
    3: the leg's own noise on a loaded 2-core runner is the runner's wake-up, and the test asserts structure.)"""
    from tests.simproject import make_project as make
    from tests.test_starts import CONFTEST, PROFILE, VARIANTS

    prof = make(pytester.path, PROFILE.replace("TRIALS", "3").replace("random-seed = 1", "random-seed = 1\nenable-metrics = true"),
                variants_text=VARIANTS)
    (pytester.path / "conftest.py").write_text(CONFTEST)
    r = pytester.runpytest_subprocess("perftests/test_stack_pair.py", f"--perfgate-profile={prof}", "--perfgate-starts",
                                      "4", "--perfgate-max-starts", "4", "--perfgate-candidate",
                                      "env.PERFGATE_SIM_PREFILL_DELAY_MS=30", "--junitxml=r.xml", "-p",
                                      "no:cacheprovider")
    assert r.ret == 1, r.stdout.str()
    rec = _records(pytester)["test_stack_pair[m:baseline]"]
    assert rec["outcome"] == "fail" and rec["category"] == "slower-than-baseline"
    assert rec["pair.ttft_part.to_forward_ms.decision"] == "regressed", rec
    assert rec["reason"].startswith("[slower-than-baseline] stack-pair baseline: the candidate stack "
                                    "(env.PERFGATE_SIM_PREFILL_DELAY_MS=30) is worse on "), rec["reason"]
    assert re.search(r"TTFT's to_forward leg by \+\d+\.\d\d ms \(\d+\.\d% of TTFT\)", r.stdout.str())
    assert rec["pair.tok_s.decision"] != "regressed" and rec["pair.ttft_part.prefill_ms.decision"] != "regressed"
    assert len(rec["candidate.start_values.ttft_part.to_forward_ms"].split(",")) == int(rec["pair_n"])


def test_the_projects_gate_floors_decide_its_stack_pairs(pytester):
    # the practical floor per metric lives in one place, the project's [tool.perfgate.gate] min_effect: the stack pair
    # of a session run under that pyproject.toml is decided against it, as `perfgate gate` is, and records it
    prof = _project(pytester)
    (pytester.path / "pyproject.toml").write_text("[tool.perfgate.gate]\nmin_effect = { tok_s = 0.03, default = 0.04 }\n")
    r = pytester.runpytest_subprocess("perftests/test_stack_pair.py", f"--perfgate-profile={prof}",
                                      "--perfgate-starts", "2", "--perfgate-max-starts", "2", "--perfgate-candidate",
                                      "sim-stack=torch=2.10.0", "--junitxml=r.xml", "-p", "no:cacheprovider")
    assert r.ret in (0, 1), r.stdout.str()
    rec = _records(pytester)["test_stack_pair[m:baseline]"]
    assert rec["pair.tok_s.min_effect"] == "0.03" and rec["pair.itl_ms.min_effect"] == "0.04"
    assert "min effect 3.0%" in rec["reason"]
    (pytester.path / "pyproject.toml").write_text("[tool.perfgate.gate]\nmin_effect = { tok_s = 2 }\n")
    bad = pytester.runpytest_subprocess("perftests/test_stack_pair.py", f"--perfgate-profile={prof}",
                                        "--perfgate-starts", "2", "--perfgate-candidate", "sim-stack=torch=2.10.0",
                                        "-p", "no:cacheprovider")
    assert bad.ret == 4 and "gate.min_effect.tok_s must be a fraction in [0, 1)" in bad.stderr.str() + bad.stdout.str()


@pytest.mark.parametrize("planted, lands, spared", [
    ("PERFGATE_SIM_PREFILL_GPU_MS=30", "prefill_gpu", "prefill_host"),
    ("PERFGATE_SIM_PREFILL_HOST_MS=30", "prefill_host", "prefill_gpu"),
])
def test_a_slower_prefill_lands_in_its_own_part(pytester, planted, lands, spared):
    """Issue 53 on the simulator: each start traces its prefills (SGLang's profiler by stage), which splits the prefill
    leg into its GPU time and its host time; a candidate whose every prefill takes 30 ms more on the GPU (a kernel in
    the trace) fails on the GPU part, one whose host waits 30 ms inside the prefill (no kernel) on the host part, and
    neither moves the other part; both arms carry each start's parts and how many prefills were traced."""
    from tests.simproject import make_project as make
    from tests.test_starts import CONFTEST, PROFILE, VARIANTS

    prof = make(pytester.path, PROFILE.replace("TRIALS", "3").replace("random-seed = 1", "random-seed = 1\nenable-metrics = true"),
                variants_text=VARIANTS)
    (pytester.path / "conftest.py").write_text(CONFTEST)
    r = pytester.runpytest_subprocess("perftests/test_stack_pair.py", f"--perfgate-profile={prof}", "--perfgate-starts",
                                      "3", "--perfgate-max-starts", "3", "--perfgate-candidate", f"env.{planted}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    assert r.ret == 1, r.stdout.str()
    rec = _records(pytester)["test_stack_pair[m:baseline]"]
    assert rec[f"pair.ttft_part.{lands}_ms.decision"] == "regressed", rec
    assert rec[f"pair.ttft_part.{spared}_ms.decision"] != "regressed", rec
    assert rec["pair.tok_s.decision"] != "regressed"
    n = int(rec["pair_n"])
    for arm in ("", "candidate."):
        assert len(rec[f"{arm}start_values.ttft_part.{lands}_ms"].split(",")) == n
        assert int(rec[f"{arm}prefill_traces"]) == 8 * n and f"{arm}prefill_trace_note" not in rec
    said = "prefill GPU time" if lands == "prefill_gpu" else "prefill host time"
    assert f"TTFT's {said} by +" in rec["reason"], rec["reason"]
