"""The fast tier (marker ``micro``): all-reduce micro-benchmarks, no server.

One record per backend × world size × message size × timing (eager; CUDA graph on GPUs).
Sizes are the model's decode and verify shapes (tokens × hidden × 2 bytes of bf16, from the
profile's ``[model]`` and ``[micro]``), plus a sweep. Each backend × world size is measured
in one launch of ranks (:func:`perfgate.allreduce.harness.run_allreduce_bench`), shared by its records.

Outcomes: a measured size passes (its numbers are properties: ``backend``, ``world_size``,
``bytes``, ``latency_us``, ``latency_p99_us``, ``busbw_gbps``); a backend or size that cannot
run here (no GPU, not importable, arch, capture, SGLang's own fallback to NCCL) is an xfail
with its category; a wrong sum, a crashed rank or a hang is a failure. Where the profile has a
floor for the record (``[micro.floors]`` "<backend>.<eager|graph>.<bytes>", at its world size),
the median latency must be <= ``latency_us × (1 + tolerance)`` (properties ``floor_latency_us``,
``tolerance``), or the record fails as ``slower-than-baseline``; without one it is a measurement.

Settings, first found wins: env ``PERFGATE_MICRO_WORLD_SIZES`` ("2,4"), the profile's
``[micro]`` (``world_sizes``, ``tokens``, ``sweep_bytes``, ``iters``, ``warmup``), defaults
(world size min(GPUs, 8), or 2 with gloo where there is no GPU; hidden 7168; tokens 1, 4, 8).
``PERFGATE_MICRO_ITERS`` overrides the iteration count.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from typing import Any

import pytest

pytestmark = [
    pytest.mark.micro,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="torch is not installed (the all-reduce micro-benchmarks need torch.distributed)"),
]

XFAIL_CATEGORIES = frozenset({"missing-dependency", "unsupported-arch", "cuda-graph-capture", "fallback",
                              "config-error"})
"""A backend or size that cannot run here: xfail. Anything else (wrong-output, crash, nccl-error,
oom, startup-timeout) is a failure."""

DEFAULT_HIDDEN = 7168  # Kimi-K2.5
DEFAULT_TOKENS = (1, 4, 8)
DEFAULT_SWEEP_CPU = (4096, 1 << 20)
DEFAULT_SWEEP_GPU = tuple(1 << k for k in range(10, 27, 2))  # 1 KiB .. 64 MiB, ×4
DEFAULT_ITERS = {"cpu": 50, "cuda": 200}
DEFAULT_WARMUP = {"cpu": 5, "cuda": 20}


@dataclass(frozen=True, kw_only=True)
class MicroPlan:
    """What the fast tier measures in this session."""

    profile: str
    world_sizes: tuple[int, ...]
    shapes: tuple[tuple[str, int], ...]  # (label, bytes)
    iters: int | None
    warmup: int | None
    gpus: int
    micro: Any = None  # the profile's MicroSpec (its floors), or None
    profile_path: str = ""


@dataclass(frozen=True, kw_only=True)
class MicroCase:
    """One record: backend × world size × size × timing."""

    backend: str
    world_size: int
    label: str
    nbytes: int
    graph: bool

    @property
    def id(self) -> str:
        # the part after ':' names the launch, so xdist's per-config grouping keeps a launch on one worker
        return f"{self.label}-{'graph' if self.graph else 'eager'}:{self.backend}-ws{self.world_size}"


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise pytest.UsageError(f"perfgate: {what}={text!r}: expected comma-separated integers, e.g. 2,4") from None
    if not vals or any(v < 1 for v in vals):
        raise pytest.UsageError(f"perfgate: {what}={text!r}: expected integers ≥ 1, e.g. 2,4")
    return vals


def _profile(config: pytest.Config) -> Any | None:
    """The session's profile through the plugin, or None where it is absent or cannot load one."""
    try:
        from perfgate.plugin import state_of

        return state_of(config).profile
    except Exception:
        return None


def _plan(config: pytest.Config) -> MicroPlan:
    from perfgate.gpu import visible_count

    prof = _profile(config)
    model = getattr(prof, "model", None)
    micro = getattr(prof, "micro", None)
    gpus = visible_count()
    env_ws = os.environ.get("PERFGATE_MICRO_WORLD_SIZES", "")
    if env_ws:
        world_sizes = _ints(env_ws, "PERFGATE_MICRO_WORLD_SIZES")
    elif getattr(micro, "world_sizes", None):
        world_sizes = tuple(int(w) for w in micro.world_sizes)  # type: ignore[union-attr]
    else:
        world_sizes = (min(gpus, 8),) if gpus else (2,)
    hidden = int(getattr(model, "hidden", None) or DEFAULT_HIDDEN)
    tokens = tuple(int(t) for t in (getattr(micro, "tokens", None) or DEFAULT_TOKENS))
    sweep = tuple(getattr(micro, "sweep_bytes", None) or getattr(micro, "sweep", None)
                  or (DEFAULT_SWEEP_GPU if gpus else DEFAULT_SWEEP_CPU))
    shapes: list[tuple[str, int]] = []
    for t in tokens:
        shapes.append((f"{'decode' if t == 1 else 'verify'}-{t}x{hidden}", t * hidden * 2))
    shapes += [(f"sweep-{int(b)}B", int(b)) for b in sweep]
    env_iters = os.environ.get("PERFGATE_MICRO_ITERS", "")
    iters = _ints(env_iters, "PERFGATE_MICRO_ITERS")[0] if env_iters else getattr(micro, "iters", None)
    return MicroPlan(profile=str(getattr(prof, "name", "") or "none"), world_sizes=world_sizes,
                     shapes=tuple(shapes), iters=iters, warmup=getattr(micro, "warmup", None), gpus=gpus,
                     micro=micro, profile_path=str(getattr(prof, "path", "") or ""))


_PLAN = pytest.StashKey[MicroPlan]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "micro_case" not in metafunc.fixturenames:
        return
    from perfgate.allreduce import BACKENDS

    config = metafunc.config
    if _PLAN not in config.stash:
        config.stash[_PLAN] = _plan(config)
    plan = config.stash[_PLAN]
    cases = []
    for name, b in BACKENDS.items():
        modes = (False, True) if b.device == "cuda" and plan.gpus else (False,)
        for n in plan.world_sizes:
            for graph in modes:
                for label, nbytes in plan.shapes:
                    cases.append(MicroCase(backend=name, world_size=n, label=label, nbytes=nbytes, graph=graph))
    metafunc.parametrize("micro_case", cases, ids=[c.id for c in cases])


@dataclass
class _Run:
    results: list[Any] | None = None
    error: Exception | None = None
    log: str = ""
    config: str = ""


@pytest.fixture(scope="session")
def micro_runs() -> dict[tuple[str, int], _Run]:
    """Launches already made in this session, by (backend, world size)."""
    return {}


def _log_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    try:
        from perfgate.plugin import state_of

        return state_of(request.config).log_dir / "allreduce"
    except Exception:
        return tmp_path_factory.getbasetemp() / "allreduce"


def _recorder(request: pytest.FixtureRequest) -> Any:
    try:
        return request.getfixturevalue("perfgate_record")
    except pytest.FixtureLookupError:
        return lambda name, value: request.node.user_properties.append((name, str(value)))


def _measure(case: MicroCase, plan: MicroPlan, runs: dict[tuple[str, int], _Run], request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> _Run:
    from perfgate.allreduce import BACKENDS, rank_environment
    from perfgate.allreduce.harness import run_allreduce_bench
    from perfgate.errors import PerfgateError

    key = (case.backend, case.world_size)
    if key in runs:
        return runs[key]
    b = BACKENDS[case.backend]
    iters = plan.iters or DEFAULT_ITERS[b.device]
    warmup = plan.warmup if plan.warmup is not None else DEFAULT_WARMUP[b.device]
    sizes = sorted({nbytes for _, nbytes in plan.shapes})
    graph = b.device == "cuda" and plan.gpus > 0
    log_dir = _log_root(request, tmp_path_factory) / f"{case.backend}-ws{case.world_size}"
    blob = json.dumps([case.backend, sorted(rank_environment(case.backend, base={}).items()), case.world_size,
                       iters, warmup], sort_keys=True)
    run = _Run(log=str(log_dir / "rank0.log"), config=hashlib.sha1(blob.encode()).hexdigest()[:10])
    try:
        run.results = run_allreduce_bench(world_size=case.world_size, sizes_bytes=sizes, backend=case.backend,
                                             warmup=warmup, iters=iters, graph=graph, timeout_s=600,
                                             log_dir=log_dir)
    except PerfgateError as e:
        run.error = e
    runs[key] = run
    return run


def test_allreduce(micro_case: MicroCase, micro_runs: dict[tuple[str, int], _Run], request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Time one all-reduce backend at one size; the numbers travel as JUnit properties."""
    from perfgate.errors import BackendUnavailable, MicrobenchError

    case = micro_case
    plan = request.config.stash[_PLAN]
    record = _recorder(request)
    for k, v in (("kind", "allreduce"), ("profile", plan.profile), ("mode", "graph" if case.graph else "eager"),
                 ("variant", case.backend), ("backend", case.backend), ("world_size", case.world_size)):
        record(k, v)
    run = _measure(case, plan, micro_runs, request, tmp_path_factory)
    record("config", run.config)
    if os.path.exists(run.log):
        record("log", run.log)

    def conclude(outcome: str, category: str, reason: str) -> None:
        record("outcome", outcome)
        record("category", category)
        record("reason", reason)

    if run.error is not None:
        e = run.error
        cat = getattr(e, "category", None) or "crash"
        short = getattr(e, "short", str(e))
        if isinstance(e, BackendUnavailable) and cat in XFAIL_CATEGORIES:
            conclude("xfail", cat, short)
            pytest.xfail(f"{cat}: {short}")
        conclude("fail", cat, short)
        assert isinstance(e, MicrobenchError)
        pytest.fail(f"{cat}: {e}", pytrace=False)

    assert run.results is not None
    want_numel = max(1, case.nbytes // 2)
    match = [r for r in run.results if r.numel == want_numel and r.graph == case.graph]
    assert match, f"no result for {case.nbytes} B (graph={case.graph}) in {run.results}"
    r = match[0]
    for k, v in r.as_properties().items():
        if k not in ("backend", "world_size"):
            record(k, v)
    if not r.ok:
        cat = r.category or "crash"
        if cat in XFAIL_CATEGORIES:
            conclude("xfail", cat, r.reason)
            pytest.xfail(f"{cat}: {r.reason}")
        conclude("fail", cat, r.reason)
        pytest.fail(f"{case.backend} at world size {case.world_size}, {r.bytes} B ({r.dtype}): {cat}: {r.reason} "
                    f"[rank logs: {os.path.dirname(run.log)}]", pytrace=False)
    timing = "graph" if case.graph else "eager"
    floor = plan.micro.floor(case.backend, timing, r.bytes, case.world_size) if hasattr(plan.micro, "floor") else None
    if floor is not None:  # a ceiling on the median latency measured on this box (the profile's [micro.floors])
        record("floor_latency_us", floor.latency_us)
        record("tolerance", floor.tolerance)
        if r.latency_us is not None and r.latency_us > floor.ceiling_us:
            msg = (f"all-reduce latency {r.latency_us:.2f} µs > floor {floor.latency_us:g} µs × "
                   f"(1 + {floor.tolerance:g}) = {floor.ceiling_us:.2f} µs [{case.backend}, {timing}, {r.bytes} B "
                   f"{r.dtype}, world size {case.world_size}, p99 {r.latency_p99_us or 0:.2f} µs; "
                   f"{plan.profile_path}, {floor.key}]; if intended "
                   "(new stack or box), refresh the floors: `pytest perftests/ -m micro --junitxml=run.xml`, then "
                   f"`python scripts/micro_floors.py run.xml --update {plan.profile_path or 'PROFILE'}`")
            conclude("fail", "slower-than-baseline", msg)
            pytest.fail(msg, pytrace=False)
    conclude("pass", "", r.note)
    assert r.latency_us is not None and r.latency_us > 0
    assert r.latency_p99_us is not None and r.latency_p99_us >= r.latency_us
    assert r.busbw_gbps is not None and r.busbw_gbps >= 0
