"""The built-in checks' judgements (perfgate.measuring.checks): pure, numbers in, a verdict with its properties out."""

from perfgate.categories import Category, Outcome
from perfgate.measuring.checks import confounded_verdict, not_exercised_verdict, sweep_verdict, token_match_failure
from perfgate.measuring.metrics import SweepPoint, summarize
from perfgate.measuring.verdict import Verdict


def _swept(*points: SweepPoint):
    return summarize(config_key="k", config_name="n", trials=[], sweep=points)


def _pt(c: int, tok: float | None, failures: int = 0) -> SweepPoint:
    return SweepPoint(concurrency=c, output_tok_s=tok, ttft_ms_p50=10.0 * c, ttft_ms_p99=None, itl_ms_p50=2.0,
                      itl_ms_p99=3.0, failures=failures)


def test_a_sweep_passes_with_each_level_in_its_properties():
    v = sweep_verdict(_swept(_pt(1, 90.0), _pt(8, 500.0)))
    assert v.outcome is Outcome.PASS and v.message == "output tok/s by concurrency 1: 90.0, 8: 500.0"
    assert v.properties == {"c1_output_tok_s": 90.0, "c1_ttft_ms_p50": 10.0, "c1_itl_ms_p50": 2.0,
                            "c1_itl_ms_p99": 3.0, "c8_output_tok_s": 500.0, "c8_ttft_ms_p50": 80.0,
                            "c8_itl_ms_p50": 2.0, "c8_itl_ms_p99": 3.0}


def test_a_sweep_without_points_or_with_lost_requests_is_a_crash():
    v = sweep_verdict(_swept())
    assert (v.outcome, v.category, v.message) == (Outcome.FAIL, Category.CRASH,
                                                  "the concurrency sweep produced no points")
    v = sweep_verdict(_swept(_pt(1, 90.0), _pt(8, None, failures=3)))
    assert (v.outcome, v.category) == (Outcome.FAIL, Category.CRASH)
    assert v.message == "requests failed in the concurrency sweep: 3 at concurrency 8"
    assert v.properties["c1_output_tok_s"] == 90.0 and "c8_output_tok_s" not in v.properties


def test_token_match_below_its_threshold_is_wrong_output():
    assert token_match_failure(0.99, 0.99, what="eagle3 vs baseline") is None
    v = token_match_failure(0.5, 0.99, what="eagle3 vs baseline")
    assert v is not None and (v.outcome, v.category) == (Outcome.FAIL, Category.WRONG_OUTPUT)
    assert v.properties == {"token_match": 0.5}
    assert v.message == ("eagle3 vs baseline: only 50.0% of the baseline's greedy tokens matched (threshold 99%): "
                         "the output changed")


def test_a_variant_not_exercised_keeps_what_was_measured():
    measured = Verdict(outcome=Outcome.PASS, message="1.02x faster", properties={"vs_baseline": 1.02})
    v = not_exercised_verdict(measured, variant="custom-ar", backend="nccl", why="NCCL logged no all-reduce")
    assert (v.outcome, v.category) == (Outcome.INCONCLUSIVE, Category.NOT_EXERCISED)
    assert v.properties == {"vs_baseline": 1.02}
    assert v.message == ("inconclusive: not exercised: custom-ar is meant for nccl, but NCCL logged no all-reduce; "
                         "measured: 1.02x faster")


def test_a_confounded_variant_names_each_key_and_its_values():
    v = confounded_verdict("custom-ar", "eagle3", {"tp": 8, "env:X": "1"}, {"tp": 4}, {"tp", "env:X"})
    assert (v.outcome, v.category) == (Outcome.INCONCLUSIVE, Category.CONFOUNDED)
    assert v.message == ("inconclusive: confounded: custom-ar differs from the eagle3 baseline in env:X, tp, which "
                         "the variant does not declare (env:X: None -> '1', tp: 4 -> 8); make the runs differ only "
                         "in the variant's keys")
    assert "from the baseline in" in confounded_verdict("v", "baseline", {"a": 1}, {"a": 2}, {"a"}).message
