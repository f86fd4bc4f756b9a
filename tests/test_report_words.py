"""The report's words say what its numbers say (issue 41 item 4): an undecided change in words with its interval
and floor; blocking *records* counted and listed once; no "moved" for a change within its noise; advice only where
a run can follow it."""

from __future__ import annotations

from perfgate.errors import ExitCode
from perfgate.measuring.judge import Decision, Judgement, Level
from perfgate.report.diff import MetricChange
from perfgate.report.gate import Finding, GateResult
from perfgate.report.policy import GatePolicy
from perfgate.report.render import by_record
from perfgate.report.words import MAX_STARTS_ADVICE, interval_words, judged_words, moved, needs_words


def _change(ci: tuple[float, float], *, needs: str = "", detail: str = "of 6 paired start(s), tok_s ...",
            higher_is_better: bool = True, metric: str = "tok_s", pairs: int | None = None) -> MetricChange:
    ratio = (ci[0] + ci[1]) / 2
    j = Judgement(decision=Decision.UNDECIDED, ratio=ratio, ci=ci, level=Level.STARTS, noise_cv=0.004,
                  noise_source="starts", min_effect=0.005, n=6, detail=detail, needs=needs, pairs_needed=pairs)
    return MetricChange(old=100.0, new=100.0 * ratio, verdict="undecided", judgement=j, metric=metric,
                        higher_is_better=higher_is_better, why=detail)


def test_an_undecided_change_whose_interval_excludes_1_moved_and_says_by_how_much() -> None:
    tp = _change((0.9942, 0.9968), needs="the two arms are indistinguishable at this min effect")
    assert moved(tp)
    assert interval_words(tp) == "tok_s slower by 0.3-0.6 %; the 0.5 % floor is not decided"
    words = judged_words(tp)
    assert "indistinguishable" not in words
    # the interval [0.9942, 0.9968] straddles the floor 0.995 at 0.0005 from its middle, half-width 0.0013:
    # 6 pairs x (0.0013 / 0.0005)^2 = 40.6
    assert words.endswith("tok_s slower by 0.3-0.6 %; the 0.5 % floor is not decided; about 41 start pairs in all "
                          "would decide it at this noise, more than a run takes (advised up to 20)")
    on_floor = _change((0.990, 1.000), needs="the two arms are indistinguishable at this min effect")
    assert needs_words(on_floor) == "it sits on the 0.5 % floor: no number of start pairs decides it"


def test_a_latency_interval_reads_in_its_own_direction() -> None:
    tp = _change((1.004, 1.012), higher_is_better=False, metric="ttft_ms")
    assert interval_words(tp).startswith("ttft_ms slower by 0.4-1.2 %")
    assert interval_words(_change((0.98, 0.99), higher_is_better=False, metric="ttft_ms")).startswith(
        "ttft_ms faster by 1.0-2.0 %")


def test_a_change_within_its_noise_is_not_moved() -> None:
    tp = _change((0.997, 1.003))
    assert not moved(tp)
    assert interval_words(tp) == ("tok_s between 0.3 % faster and 0.3 % slower: not moved beyond its noise; the "
                                  "0.5 % floor is not decided")


def test_advice_a_run_cannot_follow_is_replaced_by_what_it_can_do() -> None:
    far = _change((0.99, 1.01), detail="of 1 vs 1 start(s)",
                  needs="about 740 starts per side (--perfgate-starts 740) or a paired run would decide it")
    words = needs_words(far)
    assert "--perfgate-starts 740" not in words
    assert words.startswith(f"about 740 starts per side would decide it, more than a run takes (advised up to "
                            f"{MAX_STARTS_ADVICE}); a paired run")
    near = _change((0.99, 1.01), detail="of 1 vs 1 start(s)",
                   needs="about 4 starts per side (--perfgate-starts 4) or a paired run would decide it")
    assert needs_words(near) == near.needs
    pairs = _change((0.99, 1.01), pairs=9, needs="about 9 interleaved start pairs in all would decide it")
    assert needs_words(pairs) == "about 9 interleaved start pairs in all would decide it"


def _gate(findings: list[Finding]) -> GateResult:
    return GateResult(exit_code=ExitCode.BLOCKED, blocking=tuple(findings), expectation_updates=(), ignored=(),
                      policy=GatePolicy(), message="")


def test_blocking_records_are_counted_and_listed_once() -> None:
    fs = [Finding(key="a", rule="newly-broken", detail="pass → fail"),
          Finding(key="a", rule="regressed", detail="tok/s 90 → 80: ..."),
          Finding(key="b", rule="regressed", detail="tok/s 50 → 40: ..."),
          Finding(key="c", rule="lost-verdict", detail="pass → inconclusive: noisy"),
          Finding(key="c", rule="regressed", detail="tok/s 9 → 8: ...")]
    g = _gate(fs)
    assert g.blocking_records == ("a", "b", "c")
    assert by_record(fs) == [("a", "newly-broken, regressed", "pass → fail; tok/s 90 → 80: ..."),
                             ("b", "regressed", "tok/s 50 → 40: ..."),
                             ("c", "lost-verdict, regressed", "pass → inconclusive: noisy; tok/s 9 → 8: ...")]


def test_the_gate_counts_records_and_identical_reports_list_nothing_as_moved(tmp_path) -> None:
    from perfgate.report.gate import run_gate
    from perfgate.report.junit_read import read_report
    from perfgate.report.render import render_diff_md, render_diff_text
    from tests.report_factory import perf_case, write_report

    def report(name: str, tok: float, outcome: str) -> object:
        cases = [perf_case("baseline", "nccl-tree", tok_s=tok, spread=0.5, cv=0.01, n=5, outcome=outcome,
                           category="slower-than-baseline" if outcome == "fail" else ""),
                 perf_case("eagle3", "nccl-tree", tok_s=200.0, spread=1.0, cv=0.01, n=5)]
        return read_report(write_report(tmp_path / name, cases))

    old, new = report("old.xml", 100.0, "pass"), report("new.xml", 80.0, "fail")
    d, g = run_gate(old, new, GatePolicy())  # type: ignore[arg-type]
    rules = [f.rule for f in g.blocking]
    assert rules.count("regressed") == 1 and "newly-broken" in rules and len(g.blocking) == 2
    assert g.message.startswith("BLOCKED: 1 blocking record(s): ")
    md = render_diff_md(d, g)
    findings = md.split("#### Gate findings", 1)[1].split("<details>", 1)[0]
    assert findings.count("test_variant[kimi-k2.5-sim:baseline+nccl-tree]") == 1, findings
    assert "Blocking: 1 record(s)" in render_diff_text(d, g)
    # the same figure, to rounding: within its noise, so not "moved"; no advice of hundreds of starts
    same, same2 = report("a.xml", 100.0, "pass"), report("b.xml", 99.99, "pass")
    d, g = run_gate(same, same2, GatePolicy())  # type: ignore[arg-type]
    text = render_diff_text(d, g) + render_diff_md(d, g)
    (r,) = [r for r in d.records if r.throughput is not None and r.throughput.verdict == "undecided"]
    assert r.throughput is not None
    assert not moved(r.throughput) and "Moved, undecided" not in text and "Undecided, not moved" in text
    for n in __import__("re").findall(r"--perfgate-starts (\d+)", text):
        assert int(n) <= MAX_STARTS_ADVICE, text


def test_an_interval_at_the_cap_reads_as_unbounded_in_the_report_not_as_its_numbers() -> None:
    # one pair at the first look of a 4-pair plan: the judge's interval is the cap (the bisect's real first step,
    # 2026-12-05, read "[0.0000, 485165195.4098]"); the report's row and words said "[-100.0, +48516519440.9] %" and
    # "between 100.0 % faster and 48516519440.9 % slower"
    from perfgate.measuring.judge import Sequential, paired
    from perfgate.measuring.notation import bounds, change_interval_text
    from perfgate.report.verdicts import RecordVerdict

    j = paired([1.0614], higher_is_better=False, min_effect=0.1, prior_cv=0.25, prior_df=2,
               plan=Sequential(first_pairs=1, max_pairs=4), metric="ttft_ms")
    assert j.ci is not None and j.ratio is not None and bounds(j.ci) == (False, False)
    tp = MetricChange(old=30.0, new=30.0 * j.ratio, verdict="undecided", judgement=j, metric="ttft_ms",
                      higher_is_better=False, why=j.detail)
    assert interval_words(tp) == ("ttft_ms changed by (-100, +∞) %: not bounded on either side yet; the 10 % floor "
                                  "is not decided")
    one_side = _change((1e-30, 1.02), metric="ttft_ms", higher_is_better=False)
    assert interval_words(one_side).startswith("ttft_ms changed by (-100, +2.0] %: not bounded on one side yet")
    assert change_interval_text((1.012, 1.049)) == "[+1.2, +4.9] %"
    assert change_interval_text((0.5, 1e30)) == "[-50.0, +∞) %"
    row = RecordVerdict(
        key="k", sections=(), old_outcome="passed", new_outcome="passed", kind="stack-pair", metric="ttft_ms",
        unit="ms", higher_is_better=False, old=30.0, new=31.8, old_ci=None, new_ci=None, delta_pct=6.14,
        interval_pct=((j.ci[0] - 1) * 100, (j.ci[1] - 1) * 100), decision="undecided", noise_level="same machine",
        noise_source="prior", noise_cv=0.25, min_effect=0.1, blocks=(), updates=False, why="")
    assert row.interval == "(-100, +∞) %"
    assert moved(tp) is False
