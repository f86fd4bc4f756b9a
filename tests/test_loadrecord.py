"""The load records' figures and words (goodput, crossover) (perfgate.measuring.goodputrecord, perfgate.measuring.crossover), from scripted measurements: pure."""

from __future__ import annotations

import json

from perfgate.measuring.crossover import baseline_levels, crossover_of, crossover_properties, crossover_text
from perfgate.measuring.goodput import LoadLevel, Search
from perfgate.measuring.goodputrecord import (
    AcrossStarts,
    search_properties,
    search_text,
    starts_properties,
    starts_spread,
    starts_text,
)
from perfgate.measuring.metrics import Measurement, Trial, summarize

LOADS = (1, 4, 16)


def _at(tok: float) -> Measurement:
    return summarize(config_key="k", config_name="n", trials=[
        Trial(tok_s=tok / 2, output_tok_s=tok + d, ttft_ms=40.0, itl_ms=5.0, accept_len=None, completion_tokens=64,
              failures=0) for d in (-1.0, 0.0, 1.0, 0.5, -0.5)])


def _levels(*toks: float) -> tuple[Measurement, ...]:
    return tuple(_at(t) for t in toks)


def test_a_crossing_is_recorded_with_its_interval_and_said_with_the_prediction():
    x, pred = crossover_of(LOADS, _levels(100, 300, 900), _levels(200, 330, 600))
    assert x.result == "at" and x.load is not None and 4 < x.load < 16
    props = crossover_properties(x, pred, base_mode="baseline")
    assert list(props)[:3] == ["crossover_baseline", "crossover_result", "crossover"]
    assert props["crossover_baseline"] == "baseline" and props["crossover"] == x.value
    assert props["crossover_wins"] == "1,4" and props["crossover_predicted_result"] == pred[0]
    levels = json.loads(str(props["crossover_levels"]))
    assert [lv["load"] for lv in levels] == [1, 4, 16] and levels[0]["ratio"] == 2.0
    assert list(props)[-1] == "crossover_levels"
    text = crossover_text(x, pred, mode="eagle3", base_mode="baseline", loads=LOADS)
    assert text.startswith(f"eagle3 stops beating baseline at {x.load:.3g} streams (CI ")
    assert text.endswith("; it wins at 1, 4 streams")


def test_never_and_always_say_the_loads_measured():
    never, pred = crossover_of(LOADS, _levels(100, 300, 900), _levels(50, 150, 450))
    assert crossover_text(never, pred, mode="eagle3", base_mode="baseline", loads=LOADS).startswith(
        "eagle3 beats baseline at no load from 1 to 16 streams (the cost model predicts ")
    always, pred = crossover_of(LOADS, _levels(100, 300, 900), _levels(200, 600, 1800))
    assert crossover_text(always, pred, mode="eagle3", base_mode="baseline", loads=LOADS).startswith(
        "eagle3 still beats baseline at 16 streams, the highest load measured")


def test_the_baselines_levels_are_its_medians_per_load():
    assert json.loads(baseline_levels((1, 4), _levels(100, 300))) == [
        {"load": 1, "output_tok_s": 100.0, "itl_ms": 5.0, "ttft_ms": 40.0},
        {"load": 4, "output_tok_s": 300.0, "itl_ms": 5.0, "ttft_ms": 40.0}]


def _level(rate: float, meets: bool | None, why: str = "") -> LoadLevel:
    return LoadLevel(rate=rate, trials=(), meets=meets, limiting="" if meets else "ttft_ms_p90", why=why,
                     attainment=1.0 if meets else 0.5, goodput_rps=rate if meets else None, send_lag_ms_p99=1.0,
                     achieved_rps=rate, requests=300, attainment_low=0.95 if meets else 0.4)


def _search(low: float | None, high: float | None) -> Search:
    best = _level(low, True) if low is not None else None
    failed = _level(high, False, why="ttft_ms_p90 shown above 2000") if high is not None else None
    return Search(levels=tuple(x for x in (best, failed) if x is not None), best=best, failed=failed)


def test_a_goodput_search_says_where_the_slos_hold_and_break():
    s = _search(4, 8)
    assert search_properties(s) == {"goodput_rate_next": 8, "limiting_metric": "ttft_ms_p90",
                                    "goodput_resolution": 1.0, "goodput_rate": 4, "attainment": 1.0,
                                    "attainment_low": 0.95, "level_requests": 300}
    assert search_text(s) == "goodput [4, 8) req/s (the SLOs hold at 4 and break at 8 req/s)"
    assert search_text(_search(4, None)).endswith("(the SLOs hold up to 4 req/s, and no level above failed)")
    assert search_text(_search(None, 8)).endswith(
        "(no level passed (ttft_ms_p90 shown above 2000; lower [slo] rate_start to find one that does))")


def test_a_goodput_over_starts_records_each_start_and_their_spread():
    a = AcrossStarts(searches=(_search(4, 8), _search(6, 8), _search(5, None)))
    p = starts_properties(a)
    assert p["n_starts"] == 3 and p["start_values"] == "4,6,5" and p["start_values.goodput_rps"] == "4,6,5"
    assert p["start_values.goodput_rps_high"] == "8,8,-"
    assert [x["start"] for x in json.loads(str(p["goodput_starts"]))] == [1, 2, 3]
    cv, spread = starts_spread(a)
    assert cv == 0.2 and set(spread) == {"start_cv", "start_ci_low", "start_ci_high"}
    assert starts_text(a, cv, what_slo="ttft_ms_p90 <= 2000").startswith(
        "goodput [5, -) req/s (the mean of 3 server starts' intervals: [4, 8) req/s; ")
    assert starts_text(a, cv, what_slo="x").endswith(", between-start CV 20.0%; SLOs x)")
