"""The micro tier's judgement (perfgate.measuring.micro): one all-reduce result and its ceiling in, a verdict with
its properties out; pure."""

from __future__ import annotations

from dataclasses import replace

from perfgate.allreduce.results import AllReduceResult
from perfgate.categories import Category, Outcome
from perfgate.measuring.micro import allreduce_verdict, cannot_run_expectation, implausible
from perfgate.profiles import MicroFloor

OK = AllReduceResult(backend="nccl", world_size=2, numel=512, bytes=1024, dtype="bf16", graph=False, iters=50,
                     device="cuda", latency_us=10.0, latency_p99_us=12.0, algbw_gbps=0.1, busbw_gbps=0.1)
FLOOR = MicroFloor(backend="nccl", timing="eager", bytes=1024, world_size=2, latency_us=9.0, tolerance=0.2,
                   key='micro.floors."nccl.eager.1024"')


def _judge(r: AllReduceResult, floor: MicroFloor | None = FLOOR):
    return allreduce_verdict(r, backend="nccl", timing="eager", world_size=2, floor=floor, profile_path="p.toml",
                             log_dir="/logs")


def test_a_result_under_its_ceiling_passes_with_the_ceiling_as_properties():
    v = _judge(OK)
    assert v.outcome is Outcome.PASS and v.properties == {"floor_latency_us": 9.0, "tolerance": 0.2}
    assert v.message == ("nccl, eager, 1024 B bf16, world size 2: median 10.00 µs, p99 12.00 µs, busbw 0.1 GB/s "
                         "(<= ceiling 9 µs × (1 + 0.2))")
    assert _judge(OK, None).properties == {} and "ceiling" not in _judge(OK, None).message


def test_over_the_ceiling_fails_slower_naming_where_it_is_written():
    v = _judge(replace(OK, latency_us=11.5, latency_p99_us=13.0))
    assert (v.outcome, v.category) == (Outcome.FAIL, Category.SLOWER_THAN_BASELINE)
    assert 'p.toml, micro.floors."nccl.eager.1024"' in v.message and v.properties["floor_latency_us"] == 9.0


def test_a_failed_or_implausible_result_and_what_cannot_run_here():
    declined = replace(OK, latency_us=None, latency_p99_us=None, busbw_gbps=None, category="fallback",
                       reason="declines 1024 B")
    v = _judge(declined)
    assert (v.outcome, v.category, v.message) == (Outcome.FAIL, Category.FALLBACK, "declines 1024 B")
    exp = cannot_run_expectation(v)
    assert exp is not None and exp.expect == Outcome.XFAIL and exp.category == "fallback"
    crashed = replace(declined, category=None, reason="rank 1 died")
    v = _judge(crashed)
    assert (v.outcome, v.category) == (Outcome.FAIL, Category.CRASH) and cannot_run_expectation(v) is None
    assert v.message == "nccl at world size 2, 1024 B (bf16): rank 1 died [rank logs: /logs]"
    odd = replace(OK, latency_p99_us=5.0)
    assert implausible(odd) == "p99 5.0 µs below the median 10.0 µs" and implausible(OK) == ""
    v = _judge(odd, None)
    assert (v.outcome, v.category) == (Outcome.FAIL, Category.CRASH)
    assert v.message == "nccl, 1024 B: implausible measurement: p99 5.0 µs below the median 10.0 µs"
