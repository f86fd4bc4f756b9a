"""The terminal's record list: every record, of every kind, gets one line with its figure, its interval, its limit,
the comparisons it carries with their intervals and a paired comparison's decision (issue 32 item 6: a passing
paired run printed no ratio and no interval; the user read the JUnit). Units of perfgate.plugin.terminal, and the
lines of a real run (pytester, the simulated server) against the JUnit properties of the same records."""

from __future__ import annotations

from types import SimpleNamespace

from junitparser.xunit2 import JUnitXml

from perfgate.kinds import KINDS, figure_of
from perfgate.report.terminal import COMPARISONS, record_detail, record_lines
from tests.simproject import make_project
from tests.test_starts import PROFILE as STARTS_PROFILE
from tests.test_starts import VARIANTS


def _stats(*records: dict[str, str]) -> dict[str, list[SimpleNamespace]]:
    return {"passed": [SimpleNamespace(nodeid=f"t.py::r{i}", user_properties=list(p.items()))
                       for i, p in enumerate(records)]}


def test_every_kind_and_a_users_has_a_line_with_its_figure_and_interval():
    for kind in (*KINDS, "my-own-kind"):
        fig = figure_of(kind)
        assert fig, kind
        props = {"kind": kind, "mode": "baseline", "outcome": "pass", fig: "12.5", f"{fig}_ci_low": "12.25",
                 f"{fig}_ci_high": "12.75"}
        lines = record_lines(_stats(props))
        assert len(lines) == 2 and lines[1].split()[:3] == ["baseline", kind, "pass"], lines
        assert f"{fig} 12.5" in lines[1] and "[12.25, 12.75]" in lines[1], lines


def test_a_stack_pair_that_failed_on_another_metric_names_it():
    """A stack pair fails on any metric it calls regressed while decode tok/s may read same (the H200's TTFT run of
    2026-12-05: same over 3 pairs, failed on TTFT's to_forward leg): the line names each regressed metric, a leg in
    words, with its ratio and interval, after the decision; metrics not regressed and tok/s itself are not repeated."""
    props = {"kind": "stack-pair", "mode": "baseline", "outcome": "fail", "category": "slower-than-baseline",
             "tok_s": "210.1", "pair_ratio": "1.0000", "pair_ci_low": "0.9976", "pair_ci_high": "1.0024",
             "pair_decision": "same", "pair_n": "3",
             "pair.tok_s.decision": "same", "pair.ttft_ms.decision": "undecided", "pair.ttft_ms.ratio": "0.78",
             "pair.ttft_part.to_forward_ms.decision": "regressed", "pair.ttft_part.to_forward_ms.ratio": "4.36751",
             "pair.ttft_part.to_forward_ms.ci_low": "1.6818", "pair.ttft_part.to_forward_ms.ci_high": "11.3421",
             "pair.itl_ms_p99.decision": "regressed", "pair.itl_ms_p99.ratio": "1.2"}
    d = record_detail(props)
    assert d.endswith("same over 3 start pairs; itl_ms_p99 regressed x1.2000 [no interval]; "
                      "TTFT's to_forward leg regressed x4.3675 [1.6818, 11.3421]"), d
    assert "ttft_ms" not in d.split("start pairs")[1] and d.count("tok_s") == 1
    # an early look's interval that bounds nothing (capped at e^-20 .. e^20 by the judge) is written as such
    capped = {**props, "pair.ttft_part.to_forward_ms.ci_low": "2.06115e-09",
              "pair.ttft_part.to_forward_ms.ci_high": "4.85165e+08"}
    assert record_detail(capped).endswith("TTFT's to_forward leg regressed x4.3675 (0, inf)")
    del props["pair.ttft_part.to_forward_ms.decision"], props["pair.itl_ms_p99.decision"]
    assert record_detail(props).endswith("same over 3 start pairs")


def test_a_record_names_its_metric_limit_comparisons_and_decision():
    latency = {"kind": "mine", "mode": "eagle3", "variant": "nccl-tree", "outcome": "fail",
               "category": "slower-than-baseline", "metric": "ttft_ms", "direction": "lower", "ttft_ms": "312.25",
               "ttft_ms_ci_low": "300.5", "ttft_ms_ci_high": "320", "limit": "271.4", "tolerance": "0.1"}
    line = record_lines(_stats(latency))[1]
    assert line.split()[:4] == ["eagle3+nccl-tree", "mine", "fail", "slower-than-baseline"]
    assert "ttft_ms 312.2 ms [300.5, 320], ceiling 271.4 (tolerance 10%)" in line
    for ratio, low, high, what in COMPARISONS:  # each comparison with its interval, whatever the kind
        d = record_detail({"kind": "mine", ratio: "0.98765", low: "0.97", high: "1.00512", "pair_decision": "same",
                           "pair_n": "3"})
        assert f"{what} x0.9877 [0.9700, 1.0051]" in d and d.endswith("same over 3 start pairs")
    # a comparison without an interval says so rather than hiding it
    assert "vs baseline x0.5000 [no interval]" in record_detail({"kind": "variant", "vs_baseline": "0.5"})
    goodput = record_detail({"kind": "goodput", "metric": "goodput_rps", "goodput_rps": "2.747",
                             "goodput_rps_ci_low": "2.7", "goodput_rps_ci_high": "2.8"})
    assert goodput == "goodput_rps 2.747 req/s [2.7, 2.8]"
    crossover = record_detail({"kind": "crossover", "metric": "crossover", "crossover": "5.4", "crossover_ci_low": "5.1",
                               "crossover_ci_high": "5.9", "crossover_result": "at"})
    assert crossover.startswith("crossover 5.4") and "[5.1, 5.9]" in crossover and crossover.endswith("(at)")
    sweep = record_detail({"kind": "sweep", "tok_s": "89.5", "c4_output_tok_s": "116.5", "c1_output_tok_s": "79.1"})
    assert sweep.endswith("output tok/s by concurrency c1 79.1, c4 116.5")
    # a figure the record carries no interval for says so (a profile's step time, too few trials for a CI)
    assert record_detail({"kind": "profile", "step_us": "11171.1"}) == "step_us 11171 µs [no interval]"
    assert record_detail({"kind": "stack-pair", "outcome": "skip"}) == ""  # skipped before it measured: no figure
    # skipped records that measured nothing are counted, not listed; one that measured is listed
    lines = record_lines(_stats({"kind": "stack-pair", "mode": "baseline", "outcome": "skip"},
                                {"kind": "allreduce", "mode": "eager", "variant": "nccl", "outcome": "skip"},
                                {"kind": "goodput", "mode": "baseline", "outcome": "skip", "metric": "goodput_rps",
                                 "goodput_rps": "2.7"}))
    assert lines[1:] == ["  baseline goodput  skip  goodput_rps 2.7 req/s [no interval]",
                         "  and 2 skipped records that measured nothing (-rs says why)"]


#: the simulated seed box of tests/test_starts.py, three trials (one home for the test project's profile)
PROFILE = STARTS_PROFILE.replace("TRIALS", "3")
USER_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="mine", modes=["baseline"])


def test_mine(perf_server, measure, perf_check):
    perf_check(measure(perf_server), "ttft_ms", limit=100000.0)
'''


def test_a_paired_run_prints_each_records_ratio_interval_and_decision(pytester):
    prof = make_project(pytester.path, PROFILE, variants_text=VARIANTS)
    (pytester.path / "perftests" / "test_mine.py").write_text(USER_TEST)
    r = pytester.runpytest_subprocess("perftests", "-k", "stack_pair or variant or decode_floor or mine",
                                      f"--perfgate-profile={prof}", "--perfgate-starts", "2", "--perfgate-max-starts",
                                      "2", "--perfgate-candidate", "env.PERFGATE_AA=1", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider")
    assert r.ret in (0, 1), r.stdout.str()  # 1: the stack pair's tail latency on a loaded runner (below)
    assert r.ret == 0 or "stack-pair baseline: the candidate stack" in r.stdout.str(), r.stdout.str()
    out = r.stdout.lines
    head = out.index("perfgate: record by record (figure [interval], limit; comparison [interval], decision):")
    lines = [ln for ln in out[head + 1:] if ln.startswith("  ")]
    recs = {c.name: {p.name: p.value for p in c.properties()} for s in JUnitXml.fromfile(str(pytester.path / "r.xml"))  # type: ignore[attr-defined]  # junitparser types xunit2 cases as its core TestCase
            for c in s}
    assert {p["kind"] for p in recs.values()} == {"floor", "variant", "stack-pair", "mine"}

    def line_of(p: dict[str, str]) -> str:
        name = p["mode"] + (f"+{p['variant']}" if p["variant"] else "")
        found: list[str] = [ln for ln in lines if ln.split()[:3] == [name, p["kind"], p["outcome"]]]
        assert len(found) == 1, (p["kind"], lines)
        return found[0]

    def ci(p: dict[str, str], low: str, high: str, spec: str) -> str:
        return f"[{float(p[low]):{spec}}, {float(p[high]):{spec}}]"

    for p in recs.values():
        line = line_of(p)  # every record has its line
        figure = p.get("metric") or "tok_s"
        assert f"{figure} {float(p[figure]):.4g}" in line
        assert ci(p, f"{figure}_ci_low", f"{figure}_ci_high", ".4g") in line
    pair = next(p for p in recs.values() if p["kind"] == "stack-pair")
    line = line_of(pair)
    # identical arms: decode tok/s never regressed; on a loaded runner the simulated server's two start pairs can
    # reject the prior's spread and leave a one-degree-of-freedom interval undecided (inconclusive), the calm answer,
    # or its tail latency read regressed and fail the record (the A/A verdict is the timing tier's)
    assert pair["pair_n"] == "2" and (pair["outcome"], pair["pair_decision"]) in (
        ("pass", "same"), ("pass", "improved"), ("inconclusive", "undecided"), ("fail", "same"), ("fail", "improved"),
        ("fail", "undecided")), pair
    assert f"candidate/current x{float(pair['pair_ratio']):.4f} {ci(pair, 'pair_ci_low', 'pair_ci_high', '.4f')}" in line
    assert line.endswith(f"{pair['pair_decision']} over 2 start pairs")
    variant = next(p for p in recs.values() if p["kind"] == "variant")
    line = line_of(variant)
    ratio = f"vs baseline x{float(variant['vs_baseline']):.4f}"
    assert f"{ratio} {ci(variant, 'vs_baseline_ci_low', 'vs_baseline_ci_high', '.4f')}" in line
    assert line.endswith(f"{variant['pair_decision']} over 2 start pairs")
    floor = next(p for p in recs.values() if p["kind"] == "floor")
    assert "floor 89.5 (tolerance 5%)" in line_of(floor)
    mine = next(p for p in recs.values() if p["kind"] == "mine")
    assert "ceiling 100000" in line_of(mine) and " ms [" in line_of(mine)
