"""The plugin as users run it (pytester, real subprocesses, the simulated server)."""

from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml

from tests.simproject import make_project as _make
from tests.simproject import sim_profile

#: the simulated test profile (tests.simproject), 24 new tokens a request, a decode floor (FLOOR), an acceptance floor
PROFILE = sim_profile(max_new_tokens=24) + """[floors.baseline]
tok_s = FLOOR
tolerance = 0.05
[floors.eagle3]
accept_len = 1.5
"""


def make_project(pytester, floor=89.5, extra=""):
    return _make(pytester.path, PROFILE.replace("FLOOR", str(floor)) + extra)


def props(case):
    return {p.name: p.value for p in case.properties()}


def cases(xml_path):
    return {c.name: c for s in JUnitXml.fromfile(str(xml_path)) for c in s}


def test_baseline_on_the_simulated_profile_passes_with_numbers(pytester):
    prof = make_project(pytester)
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline", f"--perfgate-profile={prof}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["*SIMULATED*", "*1 server start(s) for 1 distinct config(s)*"])
    c = cases(pytester.path / "r.xml")["test_decode_floor[m:baseline]"]
    p = props(c)
    assert p["engine"] == "sim" and p["mode"] == "baseline" and p["outcome"] == "pass"
    assert abs(float(p["tok_s"]) - 89.5) / 89.5 < 0.08
    assert float(p["tok_s_ci_low"]) <= float(p["tok_s"]) <= float(p["tok_s_ci_high"])
    assert p["n"] == "3" and Path(p["log"]).is_file()
    assert p["stack.simulated"] == "true" and p["stack.sm"] == "12.0"
    suite = next(iter(JUnitXml.fromfile(str(pytester.path / "r.xml"))))
    sp = {x.name: x.value for x in suite.properties()}
    assert sp["perfgate.engine"] == "sim" and sp["stack.interconnect"] == "pcie"


def test_a_regression_fails_with_the_numbers_and_keeps_them(pytester):
    prof = make_project(pytester, floor=200)
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline", f"--perfgate-profile={prof}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*tok_s * tok/s < floor 200 * (1 * 0.05) = 190*--perfgate-update-baselines*"])
    p = props(cases(pytester.path / "r.xml")["test_decode_floor[m:baseline]"])
    assert p["outcome"] == "fail" and float(p["tok_s"]) > 50


def test_speculation_is_an_expected_failure_with_its_reason(pytester):
    prof = make_project(pytester, extra="""
[expectations.speculation-vs-baseline]
eagle3 = { expect = "xfail", category = "slower-than-baseline", reason = "verify is all-reduce bound" }
""")
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline or speculative", f"--perfgate-profile={prof}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider", "-rxs")
    r.assert_outcomes(passed=2, xfailed=1)
    r.stdout.fnmatch_lines(["*2 server start(s) for 2 distinct config(s)*"])
    cs = cases(pytester.path / "r.xml")
    p = props(cs["test_speculation_beats_baseline[m:eagle3]"])
    assert p["outcome"] == "xfail" and p["category"] == "slower-than-baseline"
    assert float(p["vs_baseline"]) < 1 and float(p["vs_baseline_ci_high"]) < 1
    assert float(p["token_match"]) == 1.0
    assert "cycle_ms" in p and "breakeven_accept_len" in p
    acc = props(cs["test_acceptance_length[m:eagle3]"])
    assert 1.5 < float(acc["accept_len"]) < 2.6


def test_bad_profile_fails_at_collection_with_file_key_and_fix(pytester):
    prof = make_project(pytester)
    prof.write_text(prof.read_text().replace("max_new_tokens = 24", "max_new_tokens = '24'"))
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline", f"--perfgate-profile={prof}", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"*perfgate: {prof}: key 'workload.max_new_tokens': expected an integer >= 2, found '24'*"])
    assert "Traceback" not in r.stderr.str()


def test_unknown_profile_names_the_known_ones(pytester):
    make_project(pytester)
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline", "--perfgate-profile=t/mm", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*profile 't/mm' not found*did you mean 't/m'*"])


def test_a_selected_variant_outside_the_profile_include_says_so(pytester):
    """--perfgate-variants X where the profile does not include X selected nothing and exited 5, silently."""
    root = Path(__file__).resolve().parent.parent
    prof = root / "baselines" / "h200-x1" / "llama-3.1-8b-dummy.toml"
    _make(pytester.path, prof.read_text().replace('"fixtures/', f'"{root}/fixtures/'), profile="h200-x1/m")
    r = pytester.runpytest_subprocess("perftests", "-m", "backends", "--perfgate-profile", "h200-x1/m",
                                      "--perfgate-variants", "nccl-tree", "--perfgate-allow-hardware-mismatch",
                                      "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--perfgate-variants: 'nccl-tree' is a variant of * but not in * [[]variants[]] include*"])


def test_an_expected_failure_is_one_line_and_its_log_the_tail_only_with_v(pytester):
    prof = make_project(pytester, extra='''
[variants]
modes = ["baseline"]
include = ["nccl-tree"]
[expectations.nccl-tree]
"*" = { expect = "xfail", category = "cuda-graph-capture", reason = "Tree fails in capture on PCIe" }
''')
    args = ["perftests", "-m", "backends", f"--perfgate-profile={prof}", "-rx", "-p", "no:cacheprovider"]
    r = pytester.runpytest_subprocess(*args)
    r.assert_outcomes(xfailed=1)
    xfail = [ln for ln in r.stdout.lines if ln.startswith("XFAIL ")]
    assert len(xfail) == 1 and "[cuda-graph-capture] Tree fails in capture on PCIe" in xfail[0]
    assert "Capture cuda graph failed" in xfail[0] and "(log: " in xfail[0]
    assert "last lines of the log" not in r.stdout.str()
    r = pytester.runpytest_subprocess(*args, "-v")
    assert "last lines of the log" in r.stdout.str()


VARIANTS_SILENT = """schema_version = 1
[variants.claims-symm-mem]
description = "says it exercises torch symmetric memory, but sets nothing that turns it on"
flags = { cuda-graph-max-bs-decode = 64 }
backend = "torch_symm_mem"
[variants.nccl-only]
description = "NCCL carries every all-reduce (the seed box disables custom all-reduce at 8 PCIe GPUs)"
flags = { cuda-graph-max-bs-decode = 32 }
backend = "nccl"
"""


def test_step_profiles_and_a_silent_fallback_proved_by_the_trace(pytester):
    """-m profile: one record per config with the trace's figures; a variant whose trace shows NCCL while it asks
    for torch symmetric memory is a fallback (the log says nothing), and an expectation turns it into an xfail."""
    prof = _make(pytester.path, PROFILE.replace("FLOOR", "89.5") + '\n[variants]\nmodes = ["baseline"]\n',
                 variants_text=VARIANTS_SILENT)
    r = pytester.runpytest_subprocess("perftests", "-m", "profile", f"--perfgate-profile={prof}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=3, failed=1)
    # each simulated start has its own jitter (sd 0.05 %, perfgate.sim.variation): the last digit may move
    r.stdout.fnmatch_lines(["*step profiles (SGLang's own trace*",
                            "*baseline *pass*122*8.5?*7?%*nccl*",
                            "*eagle3 *pass*122*24.9?*30.5?*81%*nccl*",
                            "*baseline+claims-symm-mem*fail fallback*122*nccl*",
                            ])
    r.stdout.fnmatch_lines(["*[[]fallback[]] claims-symm-mem asks for torch_symm_mem, but its trace shows nccl*"])
    got = cases(pytester.path / "r.xml")
    p = props(got["test_step_profile[m:eagle3]"])
    assert p["kind"] == "profile" and p["outcome"] == "pass" and float(p["allreduce_per_step"]) == 122
    assert 0.78 < float(p["allreduce_share"]) < 0.85 and p["allreduce_backend"] == "nccl"
    assert float(p["skew_us_per_step"]) == pytest.approx(2440, rel=0.01)
    assert Path(p["trace"]).is_file() and p["trace"].endswith("perfgate-profile-TP-0-DECODE.trace.json.gz")
    fb = props(got["test_step_profile[m:baseline+claims-symm-mem]"])
    assert (fb["outcome"], fb["category"]) == ("fail", "fallback")
    assert props(got["test_step_profile[m:baseline+nccl-only]"])["outcome"] == "pass"

    # the box is known to fall back: an expectation says so, and the record is a strict xfail
    prof.write_text(prof.read_text() + '\n[expectations.claims-symm-mem]\nbaseline = { expect = "xfail", category = '
                    '"fallback", reason = "no symmetric memory on SM120" }\n')
    r = pytester.runpytest_subprocess("perftests", "-m", "profile", f"--perfgate-profile={prof}", "-k",
                                      "claims", "-p", "no:cacheprovider")
    r.assert_outcomes(xfailed=1)


def test_the_main_job_runs_without_pytest_xdist(pytester):
    """`pip install -e .` has no pytest-xdist: perfgate's xdist_group tags must not need its marker registration."""
    prof = make_project(pytester)
    (pytester.path / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    r = pytester.runpytest_subprocess("perftests", "-m", "baseline", f"--perfgate-profile={prof}", "-p", "no:xdist",
                                      "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
