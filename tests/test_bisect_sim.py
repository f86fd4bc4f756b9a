"""``perfgate bisect`` on the simulator, as users run it (real subprocesses: each step a pytest session of the
stack-pair records, simulated servers): a slowdown planted in one package's version (PERFGATE_SIM_PACKAGE_COST,
perfgate.sim.packages) is found among six changed packages in about log2(6) steps; two packages that regress
only together are found as a pair; a combination that does not import is a finding with its category; an upgrade
with no regression ends at the first step. The planted slowdowns (10 %) are 20 times the judge's practical floor,
and the steps are decided on decode tok/s (``--metric tok_s``) so that a loaded runner's tail latency cannot
decide a step.

Which steps are taken follows from each step's decision, and a step whose packages change nothing is ``same``
only as long as the runner's load leaves the simulated servers' timing alone: on a loaded runner such a step
came out ``undecided`` and the search took more steps. So the tests that assert decisions and step counts are
the ``timing`` tier (serially, .ci/nightly); the PR gate keeps what no load can change: a combination that does
not import fails its step with its category, and the usage errors."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

import pytest

from perfgate.sim.packages import PACKAGE_COST_ENV
from tests.test_starts import _project

SIX = "cuda=13.0,torch=2.10.0,nccl=2.28.3,sglang=0.5.24,sgl_kernel=0.4.10,flashinfer=0.7.3"
SIX_KEYS = [x.split("=")[0] for x in SIX.split(",")]


def _bisect(pytester, monkeypatch, candidate, *extra):
    # the simulated servers at real time: a loaded runner's scheduling delays are a smaller share of each step
    monkeypatch.setenv("PERFGATE_SIM_SPEEDUP", "1")
    prof = _project(pytester)
    r = pytester.run(sys.executable, "-m", "perfgate.cli", "bisect", "--profile", str(prof), "--candidate-sim-stack",
                     candidate, "--metric", "tok_s", "--out", "out", *extra)
    out = pytester.path / "out"
    summary = json.loads((out / "bisect.json").read_text()) if (out / "bisect.json").is_file() else None
    return r, summary, out


def _bisect_record(out):
    cases = {c.get("name"): c for c in ET.parse(out / "bisect.xml").getroot().iter("testcase")}
    return cases, {p.get("name"): p.get("value") for p in cases["bisect"].iter("property")}


@pytest.mark.timing
def test_a_culprit_planted_among_six_changed_packages_is_found_in_about_log2_steps(pytester, monkeypatch):
    monkeypatch.setenv(PACKAGE_COST_ENV, "flashinfer=0.7.3:0.9")
    r, b, out = _bisect(pytester, monkeypatch, SIX, "--max-starts", "4")
    assert r.ret == 0, r.stdout.str() + r.stderr.str()
    # the cost is said before the first step runs
    r.stderr.fnmatch_lines(["perfgate bisect: 6 changed package(s), current -> candidate:", "  cuda 12.9 -> 13.0",
                            "*cost: a step is one stack-pair session of 1 mode(s), 2x2 to 2x4 server starts each; a "
                            "single culprit takes 1 to 5 step(s)*budget 80 server starts (--budget-starts)*",
                            "perfgate bisect: step 1 (whole set): *"])
    assert b["status"] == "found" and b["culprit"] == ["flashinfer"]
    assert len(b["steps"]) <= 5  # the whole set, ceil(log2 6) = 3 halvings, 1 confirmation
    first, last = b["steps"][0], b["steps"][b["culprit_step"] - 1]
    assert first["packages"] == ["cuda", "torch", "nccl", "sglang", "sgl_kernel", "flashinfer"]
    assert first["decision"] == "regressed" and last["packages"] == ["flashinfer"] and last["decision"] == "regressed"
    assert last["ci"][1] < 0.995 and last["pairs"] >= 2
    assert all(s["decision"] != "regressed" for s in b["steps"] if "flashinfer" not in s["packages"])
    r.stdout.fnmatch_lines(["step  packages layered over the current stack*role*decision*ratio*interval*pairs*starts",
                            "1 *cuda, torch, nccl, sglang, sgl_kernel, flashinfer *whole set *regressed *×0.*",
                            "bisect: found after * step(s), * server start(s)",
                            "culprit: flashinfer 0.7.2 -> 0.7.3: regressed ×0.* over * start pair(s) (step *)"])
    # JUnit like every other run: each step's stack-pair record, and the bisection's own record
    cases, rec = _bisect_record(out)
    assert rec["kind"] == "bisect" and rec["outcome"] == "fail" and rec["category"] == "slower-than-baseline"
    assert rec["bisect.culprit"] == "flashinfer" and int(rec["bisect.steps"]) == len(b["steps"])
    assert float(rec["pair_ci_high"]) < 1 and sum(s["starts"] for s in b["steps"]) == int(rec["bisect.starts"])
    assert "test_stack_pair[m:baseline][bisect step 1]" in cases
    assert all((out / f"step-{s['step']}.xml").is_file() for s in b["steps"])


@pytest.mark.timing
def test_two_packages_that_regress_only_together_are_found_as_a_pair(pytester, monkeypatch):
    monkeypatch.setenv(PACKAGE_COST_ENV, "torch=2.10.0+nccl=2.28.3:0.9")
    # every half measured (--no-infer): the whole, each half alone, then the combinations
    r, b, out = _bisect(pytester, monkeypatch, "cuda=13.0,torch=2.10.0,nccl=2.28.3,flashinfer=0.7.3", "--no-infer",
                        "--max-starts", "4")
    assert r.ret == 0, r.stdout.str() + r.stderr.str()
    assert b["status"] == "found" and b["culprit"] == ["torch", "nccl"]
    alone = {tuple(s["packages"]): s["decision"] for s in b["steps"]}
    assert alone[("cuda", "torch")] == "same" and alone[("nccl", "flashinfer")] == "same"  # each half alone
    assert alone[("torch", "nccl")] == "regressed"
    assert any("an interaction" in n for n in b["notes"]), b["notes"]
    r.stdout.fnmatch_lines(["culprit: torch 2.9.1 -> 2.10.0; nccl 2.27.7 -> 2.28.3: regressed ×0.*",
                            "note: halving is not sound at cuda, torch, nccl, flashinfer: *an interaction*"])


def test_a_combination_that_does_not_import_is_a_finding_with_its_category(pytester, monkeypatch):
    # the candidate's sgl_kernel was built against its torch: layered over the current torch, SGLang does not import
    monkeypatch.setenv(PACKAGE_COST_ENV, "flashinfer=0.7.3:0.9;sgl_kernel=0.4.10+torch=2.9.1:incompatible")
    r, b, out = _bisect(pytester, monkeypatch, SIX, "--max-starts", "4")
    # whichever way the halves are decided, a step holds sgl_kernel without torch (the second half, or a part of it)
    assert r.ret in (0, 3), r.stdout.str() + r.stderr.str()
    failed = [s for s in b["steps"] if s["decision"].startswith("fails")]
    assert failed and all("sgl_kernel" in s["packages"] and "torch" not in s["packages"] for s in failed)
    assert failed[0]["decision"] == "fails: missing-dependency"
    assert any("fails (missing-dependency): a finding" in n for n in b["notes"])
    step = ET.parse(out / f"step-{failed[0]['step']}.xml").getroot()
    props = {p.get("name"): p.get("value") for p in step.iter("property")}
    assert props["category"] == "missing-dependency" and "undefined symbol" in str(props["reason"])


@pytest.mark.timing
def test_an_upgrade_with_no_regression_ends_at_the_first_step(pytester, monkeypatch):
    r, b, out = _bisect(pytester, monkeypatch, SIX)
    assert r.ret == 0, r.stdout.str() + r.stderr.str()
    assert b["status"] == "no regression" and len(b["steps"]) == 1 and b["culprit"] == [], r.stdout.str()
    assert b["steps"][0]["decision"] in ("same", "improved")
    assert _bisect_record(out)[1]["outcome"] == "pass"


@pytest.mark.timing
def test_the_budget_stops_the_search_and_says_what_is_known(pytester, monkeypatch):
    monkeypatch.setenv(PACKAGE_COST_ENV, "flashinfer=0.7.3:0.9")
    # a step takes up to 8 starts: after two steps the budget cannot hold a third
    r, b, out = _bisect(pytester, monkeypatch, SIX, "--budget-starts", "12", "--max-starts", "4")
    assert r.ret == 3, r.stdout.str() + r.stderr.str()
    assert b["status"] == "budget spent" and sum(s["starts"] for s in b["steps"]) <= 12 and len(b["steps"]) == 2
    # known: the whole set regressed, and its first half is the same: likely within the second
    assert b["culprit"] == SIX_KEYS and b["likely"] == ["sglang", "sgl_kernel", "flashinfer"]
    r.stdout.fnmatch_lines(["bisect: budget spent after 2 step(s), * server start(s)",
                            "known so far to carry it: cuda 12.9 -> 13.0; *: regressed ×0.* (step 1)",
                            "likely within: sglang, sgl_kernel, flashinfer *", "note: the budget of 12 server starts "
                            "is spent (* taken; a step takes up to 8): sglang, sgl_kernel (half) not tested"])
    r.stderr.fnmatch_lines(["*the budget of 12 server starts ran out; what is known is above"])
    assert _bisect_record(out)[1]["outcome"] == "inconclusive"


@pytest.mark.parametrize(("args", "message"), [
    (["--candidate-sim-stack", "flashinfer"], "*--candidate-sim-stack 'flashinfer': *fix: KEY=VERSION*"),
    ([], "*bisect: no candidate; fix: --candidate-sim-stack*"),
    (["--candidate-sim-stack", "flashinfer=0.7.3", "--mode", "nope"], "*modes.nope*"),
])
def test_usage_errors_name_the_fix(pytester, args, message):
    prof = _project(pytester)
    r = pytester.run(sys.executable, "-m", "perfgate.cli", "bisect", "--profile", str(prof), *args)
    assert r.ret == 2
    r.stderr.fnmatch_lines([message])
