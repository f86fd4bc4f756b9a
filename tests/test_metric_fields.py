"""The metric list (perfgate.record.METRICS) and the Measurement's statistics are one list (issue 54): summarize
computes a Stat for each metric from its Trial field, Measurement.stat serves each, and a metric on one side only
fails perfgate.measuring.metrics' import (check_metric_fields), not a run."""

from __future__ import annotations

from typing import Any

import pytest

from perfgate.measuring.metrics import METRICS, Metric, Trial, check_metric_fields, stat, summarize


def _trial(value: float) -> Trial:
    values: dict[str, Any] = dict.fromkeys(METRICS, value)
    return Trial(accept_len=None, completion_tokens=10, failures=0, **values)


def test_a_summarized_measurement_serves_every_metric_and_only_those() -> None:
    trials = [_trial(v) for v in (1.0, 3.0, 2.0)]
    m = summarize(config_key="k", config_name="c", trials=trials)
    for name in METRICS:
        s = m.stat(name)
        assert s == stat([getattr(t, name) for t in trials]) and s is not None and s.median == 2.0, name
    with pytest.raises(KeyError, match="unknown metric 'accept_len'"):
        m.stat("accept_len")


def test_a_trial_without_a_metric_gives_no_statistics_for_it() -> None:
    m = summarize(config_key="k", config_name="c", trials=[Trial(tok_s=5.0, output_tok_s=None, ttft_ms=None,
                                                                 itl_ms=None, accept_len=None, completion_tokens=1,
                                                                 failures=0)])
    assert {name for name in METRICS if m.stat(name) is not None} == {"tok_s"}


def test_a_metric_only_in_the_list_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    check_metric_fields()
    monkeypatch.setitem(METRICS, "tpot_ms", Metric("tpot_ms", False, "ms", "time per output token"))
    with pytest.raises(TypeError, match="differ in tpot_ms; fix"):
        check_metric_fields()


def test_a_statistic_with_no_metric_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(METRICS, "itl_ms_p99")
    with pytest.raises(TypeError, match="differ in itl_ms_p99; fix"):
        check_metric_fields()
