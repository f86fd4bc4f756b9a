"""The micro tier's records (kind ``allreduce``): made, recorded and concluded like every other record.

One record per backend × world size × message size × timing: a :class:`MicroCase` (a
:class:`~perfgate.record.Case` of kind ``allreduce``, mode ``eager`` or ``graph``, variant = the backend),
built by :func:`micro_cases` (perfgate.plugin.collection, ``micro_case`` tests) from the session's :class:`MicroPlan`
and handed to a test through its ``micro_case`` parameter by perfgate's plugin. :class:`MicroCheck` (the
``micro_check`` fixture: ``micro_check(micro_case)``) measures it (one launch of ranks per backend × world
size, shared by its records, never a server), writes its identity and stack like any record
(``PerfRun._identity``), its numbers, and concludes it through ``PerfRun.conclude``, so the profile's
expectations apply:

- ``[expectations."allreduce:<backend>"]`` with mode ``eager``, ``graph`` or ``"*"`` decides the
  backend's records as it does a variant's: a strict xfail must fail with its category, and an
  XPASS(strict) says UNBLOCKED;
- without one, :data:`CANNOT_RUN` is the built-in default: a backend or size that cannot run here
  (no GPU, not importable, arch, capture, SGLang's own fallback to NCCL, a request the backend
  rejects) is an xfail with its category, and a backend that runs passes. Anything else (wrong sum,
  crashed rank, hang, a latency over its ``[micro.floors]`` ceiling) is a failure.

Settings, first found wins: env ``PERFGATE_MICRO_WORLD_SIZES`` ("2,4"), the profile's ``[micro]``
(``world_sizes``, ``tokens``, ``sweep_bytes``, ``iters``, ``warmup``), defaults (world size
min(GPUs, 8), or 2 with gloo where there is no GPU; hidden 7168; tokens 1, 4, 8).
``PERFGATE_MICRO_ITERS`` overrides the iteration count. docs/allreduce.md describes the tier.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from perfgate.categories import Category, Outcome
from perfgate.measuring.micro import (
    CANNOT_RUN,
    DECIDES,
    KIND,
    MicroCase,
    MicroPlan,
    allreduce_verdict,
    cannot_run_expectation,
    cases_of,
    expectation_key,
    plan_micro,
)
from perfgate.measuring.verdict import Verdict
from perfgate.plugin.runner import PerfRun
from perfgate.record import Case

if TYPE_CHECKING:
    from perfgate.allreduce.results import AllReduceResult
    from perfgate.measuring.metrics import Measurement
    from perfgate.plugin.state import PerfgateState

__all__ = ["CANNOT_RUN", "DECIDES", "KIND", "MicroCase", "MicroPlan", "MicroRun", "expectation_key",
           "MicroCheck", "micro_cases", "micro_plan"]

_PLAN = pytest.StashKey[MicroPlan]()
_RUNS = pytest.StashKey[dict[tuple[str, int], "_Launch"]]()


def micro_plan(state: PerfgateState) -> MicroPlan:
    """The session's plan (computed once, kept in the config's stash); a bad variable is a usage error."""
    from perfgate.host.gpu import visible_count

    stash = state.config.stash
    if _PLAN not in stash:
        try:
            stash[_PLAN] = plan_micro(state.profile, visible_count(), os.environ)
        except ValueError as e:
            raise pytest.UsageError(f"perfgate: {e}") from None
    return stash[_PLAN]


def micro_cases(state: PerfgateState) -> list[Case]:
    """Every record of the session's plan (:func:`perfgate.measuring.micro.cases_of`)."""
    return list(cases_of(micro_plan(state)))


# ----------------------------------------------------------------------------- measuring


@dataclass
class _Launch:
    """One launch of ranks (backend × world size), shared by its records."""

    key: str  # the "config" property: a hash of backend, rank environment, world size, iters, warm-up
    log: str
    results: list[AllReduceResult] | None = None
    error: Exception | None = None
    done: bool = False


@dataclass(frozen=True)
class _LaunchConfig:
    """What ``PerfRun._identity`` reads of a server config, for a record that has none: its key."""

    key: str


def _launch(state: PerfgateState, case: MicroCase) -> _Launch:
    from perfgate.allreduce import BACKENDS, rank_environment

    runs: dict[tuple[str, int], _Launch] = state.config.stash.setdefault(_RUNS, {})
    k = (case.backend, case.world_size)
    if k in runs:
        return runs[k]
    plan = micro_plan(state)
    b = BACKENDS[case.backend]
    iters = plan.iters_for(b.device)
    warmup = plan.warmup_for(b.device)
    blob = json.dumps([case.backend, sorted(rank_environment(case.backend, base={}).items()), case.world_size,
                       iters, warmup], sort_keys=True)
    log_dir = state.log_dir / KIND / f"{case.backend}-ws{case.world_size}"
    runs[k] = _Launch(key=hashlib.sha1(blob.encode()).hexdigest()[:10], log=str(log_dir / "rank0.log"))
    return runs[k]


def _run(state: PerfgateState, case: MicroCase, launch: _Launch) -> None:
    from perfgate.allreduce import BACKENDS
    from perfgate.allreduce.harness import run_allreduce_bench
    from perfgate.errors import PerfgateError

    if launch.done:
        return
    launch.done = True
    plan = micro_plan(state)
    b = BACKENDS[case.backend]
    try:
        launch.results = run_allreduce_bench(
            world_size=case.world_size, sizes_bytes=sorted({nbytes for _, nbytes in plan.shapes}),
            backend=case.backend, warmup=plan.warmup_for(b.device),
            iters=plan.iters_for(b.device), graph=b.device == "cuda" and plan.gpus > 0, timeout_s=600,
            log_dir=os.path.dirname(launch.log))
    except PerfgateError as e:
        launch.error = e


class MicroRun(PerfRun):
    """:class:`~perfgate.plugin.runner.PerfRun` for a record with no server: no prefix cache to suspect, no server
    log to read NCCL's evidence from."""

    def _served(self, case: Case) -> Measurement | None:
        return None

    def _record_evidence(self, case: Case) -> None:
        return None


class MicroCheck:
    """``micro_check(micro_case)``: measure one all-reduce record, record it and conclude it. Ends the test.

    The record's launch of ranks (backend x world size) is shared by its records and run by the first of them,
    never a server; its identity and stack are written like any record's, then ``backend``, ``world_size``, the
    size's numbers (:meth:`AllReduceResult.as_properties`) and, where the profile has one, its
    ``[micro.floors]`` ceiling. Concluded through the profile's ``[expectations."allreduce:<backend>"]``, else
    :data:`CANNOT_RUN`.
    """

    def __init__(self, *, item: pytest.Item, state: PerfgateState) -> None:
        self._item = item
        self._state = state

    def __call__(self, case: MicroCase) -> None:
        if not isinstance(case, MicroCase):
            raise TypeError(f"micro_check(): expected the test's micro_case (a perfgate.MicroCase, parametrized by "
                            f"perfgate), got {type(case).__name__}; call micro_check(micro_case)")
        _check(MicroRun(item=self._item, state=self._state), case)


def _check(run: MicroRun, case: MicroCase) -> None:
    from perfgate.errors import BackendUnavailable

    st = run.state
    launch = _launch(st, case)
    run._identity(case, _LaunchConfig(launch.key))  # type: ignore[arg-type]  # _identity reads only .key
    run.record("backend", case.backend)
    run.record("world_size", case.world_size)
    _run(st, case, launch)
    if os.path.exists(launch.log):
        run.record("log", launch.log)

    if launch.error is not None:
        e = launch.error
        cat = getattr(e, "category", None) or "crash"
        unavailable = isinstance(e, BackendUnavailable)
        v = Verdict(outcome=Outcome.FAIL, category=Category(cat),
                    message=getattr(e, "short", str(e)) if unavailable else str(e))
        run.conclude(case, v, decides=DECIDES, default=cannot_run_expectation(v) if unavailable else None)

    assert launch.results is not None
    want_numel = max(1, case.nbytes // 2)
    match = [r for r in launch.results if r.numel == want_numel and r.graph == case.graph]
    if not match:
        run.conclude(case, Verdict(outcome=Outcome.FAIL, category=Category.CRASH,
                                   message=f"no result for {case.nbytes} B (graph={case.graph}) in the launch's "
                                           f"results"), decides=DECIDES)
    r = match[0]
    for k, val in r.as_properties().items():
        if k not in ("backend", "world_size"):
            run.record(k, val)
    plan = micro_plan(st)
    floor = plan.micro.floor(case.backend, case.mode, r.bytes, case.world_size) if plan.micro is not None else None
    v = allreduce_verdict(r, backend=case.backend, timing=case.mode, world_size=case.world_size, floor=floor,
                          profile_path=plan.profile_path, log_dir=os.path.dirname(launch.log))
    run.conclude(case, v, decides=DECIDES, default=cannot_run_expectation(v))
