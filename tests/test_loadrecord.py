"""The crossover record's figures and words (perfgate.measuring.loadrecord), from scripted measurements: pure."""

from __future__ import annotations

import json

from perfgate.measuring.loadrecord import baseline_levels, crossover_of, crossover_properties, crossover_text
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
