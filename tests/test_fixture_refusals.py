"""What a new user gets wrong in a test's own arguments is refused before anything is measured or concluded, with
the fix in the message (issue 41 item 5): a negative warm-up, a negative limit, a tolerance above 1, a load metric
on a plain measurement."""

from __future__ import annotations

from typing import Any

import pytest

from perfgate.plugin.api import Measure, PerfCheck


class _Unreachable:
    """Stands for the session: refusing must not touch it (nothing is measured or recorded)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the refusal read perf.{name}")


SERVER: Any = object()
MEASUREMENT: Any = object()


@pytest.mark.parametrize(("key", "value", "least"), [("warmup", -1, 0), ("concurrency", 0, 1), ("trials", 2.5, 1),
                                                     ("requests_per_trial", True, 1)])
def test_measure_refuses_a_count_below_its_least_naming_the_fix(key: str, value: object, least: int) -> None:
    with pytest.raises(ValueError, match=rf"measure\(\): {key} must be a whole number >= {least}, got "
                                         rf"{value!r}; fix: {key}={least} or more, or leave it out for the "
                                         rf"profile's \[workload\] {key}"):
        Measure(_Unreachable())(SERVER, **{key: value})  # type: ignore[arg-type]


def test_measure_rate_refuses_a_negative_warmup_too() -> None:
    with pytest.raises(ValueError, match=r"measure.rate\(\)/goodput\(\): warmup must be a whole number >= 0"):
        Measure(_Unreachable())._workload(SERVER, {"warmup": -1})  # type: ignore[arg-type]


def test_measure_refuses_a_timeout_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match=r"request_timeout_s must be seconds > 0, got 0; fix: a positive number"):
        Measure(_Unreachable())(SERVER, request_timeout_s=0)  # type: ignore[arg-type]


def test_measure_keeps_refusing_an_unknown_keyword() -> None:
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) \['warmups'\]; known: .*warmup"):
        Measure(_Unreachable())(SERVER, warmups=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [-1.0, float("nan")])
def test_perf_check_refuses_a_negative_limit_naming_the_fix(limit: float) -> None:
    with pytest.raises(ValueError, match=r"perf_check\(\): limit must be a number >= 0 in the metric's unit, got "
                                         r".*; fix: the tok_s floor \(throughput\) or ceiling \(latency\) itself"):
        PerfCheck(_Unreachable())(MEASUREMENT, "tok_s", limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("tolerance", [1.5, -0.01])
def test_perf_check_refuses_a_tolerance_outside_0_to_1_naming_the_fix(tolerance: float) -> None:
    with pytest.raises(ValueError, match=rf"perf_check\(\): tolerance is a fraction of the limit from 0 to 1, got "
                                         rf"{tolerance}; fix: tolerance=0.03 for 3 %"):
        PerfCheck(_Unreachable())(MEASUREMENT, "tok_s", tolerance=tolerance)  # type: ignore[arg-type]


@pytest.mark.parametrize(("metric", "where"), [("goodput_rps", "measure.goodput(perf_server)"),
                                               ("crossover", "measure.levels(perf_server)")])
def test_a_load_metric_on_a_plain_measurement_says_where_it_belongs(metric: str, where: str) -> None:
    import re

    with pytest.raises(ValueError, match=re.escape(f"perf_check(): '{metric}' is judged on {where}, not on a plain "
                                                   f"measurement (measure(perf_server)); fix: perf_check({where}, "
                                                   f"\"{metric}\")")):
        PerfCheck(_Unreachable())(MEASUREMENT, metric)  # type: ignore[arg-type]
