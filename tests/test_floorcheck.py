"""A record judged on one metric against its limit (perfgate.measuring.floorcheck): which limit applies, and the
verdict with the record's properties; pure."""

from __future__ import annotations

from perfgate.categories import Category, Outcome
from perfgate.measuring.floorcheck import limit_at, limit_check
from perfgate.measuring.metrics import Measurement, Trial, summarize
from perfgate.profiles import Floor

FLOORS = Floor(mode="baseline", tok_s=89.5, tolerance=0.03, limits={"ttft_ms": 50.0},
               by_concurrency={4: Floor(mode="baseline", limits={"ttft_ms": 80.0}, tolerance=0.1,
                                        tolerance_shared=True)})


def _m(tok: float, *, concurrency: int = 1) -> Measurement:
    return summarize(config_key="k", config_name="n", concurrency=concurrency, trials=[
        Trial(tok_s=tok + d, output_tok_s=None, ttft_ms=40.0 + d, itl_ms=None, accept_len=None, completion_tokens=64,
              failures=0) for d in (-0.2, 0.0, 0.2)])


def _at(metric: str, *, concurrency: int = 1, limit: float | None = None, floors: Floor | None = FLOORS):
    return limit_at(floors, metric, mode="baseline", concurrency=concurrency, workload_concurrency=1, limit=limit,
                    tolerance=None, profile_path="p.toml")


def test_the_limit_is_the_modes_at_its_concurrency_else_the_concurrency_table():
    at = _at("tok_s")
    assert (at.table, at.stored, at.limit, at.tolerance, at.where) == ("baseline", 89.5, 89.5, 0.03, "p.toml, mode baseline")
    assert at.stored_floor == "the baseline floor (89.5 tok/s)"
    c4 = _at("ttft_ms", concurrency=4)
    assert (c4.table, c4.limit, c4.tolerance, c4.where) == ("baseline.c4", 80.0, 0.1, "p.toml, [floors.baseline.c4]")
    assert c4.stored_floor == "the baseline.c4 ceiling (80 ms)"
    own = _at("tok_s", limit=70.0)
    assert own.stored == 89.5 and own.limit == 70.0  # a test's own limit= is judged; the stored one is kept
    none = _at("tok_s", floors=None)
    assert none.limit is None and none.tolerance == 0.03 and none.stored_floor is None
    assert _at("tok_s", concurrency=8).floor is None  # no [floors.baseline.c8]


def test_the_verdict_carries_the_records_properties_in_their_order():
    v = limit_check(_m(100.0), _at("tok_s"), confidence=0.95, max_cv=0.05, update_hint="`pytest --update`")
    assert v.outcome is Outcome.PASS
    assert list(v.properties)[:3] == ["metric", "direction", "tok_s"] and list(v.properties)[-2:] == ["limit",
                                                                                                      "tolerance"]
    assert v.properties["metric"] == "tok_s" and v.properties["direction"] == "higher"
    assert v.properties["tok_s"] == 100.0 and v.properties["limit"] == 89.5 and "tok_s_ci_low" in v.properties
    slow = limit_check(_m(80.0), _at("tok_s"), confidence=0.95, max_cv=0.05, update_hint="`pytest --update`")
    assert (slow.outcome, slow.category) == (Outcome.FAIL, Category.SLOWER_THAN_BASELINE)
    assert "p.toml, mode baseline" in slow.message and "`pytest --update`" in slow.message
    unset = limit_check(_m(100.0), _at("tok_s", floors=None), confidence=0.95, max_cv=0.05, update_hint="x")
    assert unset.outcome is Outcome.SKIP and "limit" not in unset.properties
