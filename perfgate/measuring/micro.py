"""The micro tier's judgement (record kind ``allreduce``), pure: one all-reduce result, its ceiling from the
profile's ``[micro.floors]``, a verdict with its properties out; and the built-in expectation of a backend or size
that cannot run here. perfgate.plugin.microcheck launches the ranks, records the result and concludes the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from perfgate.allreduce.results import AllReduceResult
from perfgate.categories import Category, Outcome
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.profiles import Expectation, MicroFloor

__all__ = ["CANNOT_RUN", "allreduce_verdict", "cannot_run_expectation", "implausible"]

CANNOT_RUN: Mapping[str, str] = {
    "missing-dependency": "cannot run here",
    "unsupported-arch": "not supported on this GPU",
    "cuda-graph-capture": "cannot be captured in a CUDA graph here",
    "fallback": "declines this size (falls back to NCCL)",
    "config-error": "cannot run this request here",
}
"""The built-in expectations of the micro tier, as data: a record that fails with one of these categories
is an xfail (with that category) unless the profile has an ``[expectations."allreduce:<backend>"]``
entry for its mode, which then decides alone. Not strict: a backend that runs here passes. Only a
backend that says it cannot run (``BackendUnavailable``) or a size it declines gets this default; a rank
that crashed is a failure whatever its category."""


def cannot_run_expectation(v: Verdict) -> Expectation | None:
    """The built-in expectation for a record that cannot run here (:data:`CANNOT_RUN`), else None."""
    if v.outcome != "fail" or v.category is None or v.category not in CANNOT_RUN:
        return None
    return Expectation(expect=Outcome.XFAIL, category=v.category, reason=CANNOT_RUN[v.category],
                       key=f"perfgate.plugin.microcheck.CANNOT_RUN[{v.category!r}]")


def allreduce_verdict(r: AllReduceResult, *, backend: str, timing: str, world_size: int, floor: MicroFloor | None,
                      profile_path: str, log_dir: str) -> Verdict:
    """One measured (or declined) size of ``backend`` at ``world_size`` (``timing``: eager or graph): its own
    failure, its ceiling (``floor``: the profile's ``[micro.floors]`` entry, judged by
    :func:`perfgate.measuring.verdict.judge_limit`), an implausible measurement (a crash), or a pass; the ceiling
    and its tolerance are its properties."""
    if not r.ok:
        cat = r.category or "crash"
        if cat in CANNOT_RUN:
            return Verdict(outcome=Outcome.FAIL, category=Category(cat), message=r.reason)
        return Verdict(outcome=Outcome.FAIL, category=Category(cat),
                       message=(f"{backend} at world size {world_size}, {r.bytes} B ({r.dtype}): {r.reason} "
                                f"[rank logs: {log_dir}]"))
    props: dict[str, object] = {}
    if floor is not None:  # a ceiling on the median latency measured on this box (the profile's [micro.floors])
        props = {"floor_latency_us": floor.latency_us, "tolerance": floor.tolerance}
        if r.latency_us is not None:  # the one judge of a limit, as every record's
            v = judge_limit(
                "latency_us", r.latency_us, floor.latency_us, floor.tolerance, noise=None, max_cv=None,
                what=(f"all-reduce latency {r.latency_us:.2f} µs ({backend}, {timing}, {r.bytes} B "
                      f"{r.dtype}, world size {world_size}, p99 {r.latency_p99_us or 0:.2f} µs)"),
                where=f"{profile_path}, {floor.key}",
                update_hint=("`pytest perftests/ -m micro --junitxml=run.xml`, then `python scripts/micro_floors.py "
                             f"run.xml --update {profile_path or 'PROFILE'}` (a new stack or box)"))
            if v.outcome is Outcome.FAIL:
                return replace(v, properties=props)
    bad = implausible(r)
    if bad:
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH, properties=props,
                       message=f"{backend}, {r.bytes} B: implausible measurement: {bad}")
    msg = (f"{backend}, {timing}, {r.bytes} B {r.dtype}, world size {world_size}: median "
           f"{r.latency_us:.2f} µs, p99 {r.latency_p99_us:.2f} µs, busbw {r.busbw_gbps:.3g} GB/s")
    if floor is not None:
        msg += f" (<= ceiling {floor.latency_us:g} µs × (1 + {floor.tolerance:g}))"
    return Verdict(outcome=Outcome.PASS, message=msg + (f"; {r.note}" if r.note else ""), properties=props)


def implausible(r: AllReduceResult) -> str:
    """Why a measured result cannot be right (a latency not above zero, a p99 below the median, a negative busbw),
    else ``""``."""
    if r.latency_us is None or r.latency_us <= 0:
        return f"median latency {r.latency_us} µs"
    if r.latency_p99_us is None or r.latency_p99_us < r.latency_us:
        return f"p99 {r.latency_p99_us} µs below the median {r.latency_us} µs"
    if r.busbw_gbps is None or r.busbw_gbps < 0:
        return f"busbw {r.busbw_gbps} GB/s"
    return ""
