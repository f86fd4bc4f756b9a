"""The micro tier's judgement (record kind ``allreduce``), pure: one all-reduce result, its ceiling from the
profile's ``[micro.floors]``, a verdict with its properties out; and the built-in expectation of a backend or size
that cannot run here; the tier's plan (world sizes, shapes, iterations: :func:`plan_micro`) and its records
(:class:`MicroCase`, :func:`cases_of`). perfgate.plugin.microcheck launches the ranks, records the result and
concludes the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from perfgate.allreduce.results import AllReduceResult
from perfgate.categories import Category, Outcome
from perfgate.kinds import ALLREDUCE
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.profiles import Expectation, MicroFloor
from perfgate.record import Case

if TYPE_CHECKING:
    from perfgate.profiles import Profile

__all__ = ["CANNOT_RUN", "DECIDES", "KIND", "MicroCase", "MicroPlan", "allreduce_verdict", "cannot_run_expectation",
           "cases_of", "expectation_key", "implausible", "plan_micro"]

KIND = ALLREDUCE  # perfgate.kinds

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


# ----------------------------------------------------------------------------- the plan and its records

DECIDES: frozenset[str] = frozenset({
    *CANNOT_RUN, "wrong-output", "crash", "nccl-error", "oom", "startup-timeout", "slower-than-baseline",
})
"""The categories an all-reduce record can decide; an expectation naming another does not apply to it."""

DEFAULT_HIDDEN = 7168  # Kimi-K2.5
DEFAULT_TOKENS = (1, 4, 8)
DEFAULT_SWEEP_CPU = (4096, 1 << 20)
DEFAULT_SWEEP_GPU = tuple(1 << k for k in range(10, 27, 2))  # 1 KiB .. 64 MiB, ×4
DEFAULT_ITERS = {"cpu": 50, "cuda": 200}
DEFAULT_WARMUP = {"cpu": 5, "cuda": 20}


def expectation_key(backend: str) -> str:
    """The ``[expectations.<key>]`` name of a backend's micro records (``allreduce:torch-symm-mem``)."""
    return f"{KIND}:{backend}"


@dataclass(frozen=True, kw_only=True)
class MicroCase(Case):
    """One all-reduce record: ``variant`` is the backend, ``mode`` the timing (``eager`` or ``graph``)."""

    world_size: int
    label: str  # "decode-1x7168", "verify-4x7168", "sweep-4096B"
    nbytes: int

    @property
    def backend(self) -> str:
        assert self.variant is not None
        return self.variant

    @property
    def graph(self) -> bool:
        return self.mode == "graph"

    @property
    def id(self) -> str:
        # the part after ':' names the launch, so xdist's per-config grouping keeps a launch on one worker
        return f"{self.label}-{self.mode}:{self.backend}-ws{self.world_size}"

    @property
    def expectation_key(self) -> str:
        return expectation_key(self.backend)


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

    def iters_for(self, device: str) -> int:
        """Timed iterations on ``device`` ("cpu" or "cuda"): the plan's, else the device's default."""
        return self.iters or DEFAULT_ITERS[device]

    def warmup_for(self, device: str) -> int:
        """Warm-up iterations on ``device``: the plan's, else the device's default."""
        return self.warmup if self.warmup is not None else DEFAULT_WARMUP[device]


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"perfgate: {what}={text!r}: expected comma-separated integers, e.g. 2,4") from None
    if not vals or any(v < 1 for v in vals):
        raise ValueError(f"perfgate: {what}={text!r}: expected integers ≥ 1, e.g. 2,4")
    return vals



def plan_micro(prof: Profile, gpus: int, environ: Mapping[str, str]) -> MicroPlan:
    """The micro tier's plan for profile ``prof`` on a box with ``gpus`` GPUs (``environ``: the process's
    environment, for ``PERFGATE_MICRO_WORLD_SIZES`` and ``PERFGATE_MICRO_ITERS``); ValueError names a bad variable
    and the fix."""
    model, micro = prof.model, prof.micro
    env_ws = environ.get("PERFGATE_MICRO_WORLD_SIZES", "")
    if env_ws:
        world_sizes = _ints(env_ws, "PERFGATE_MICRO_WORLD_SIZES")
    elif micro.world_sizes:
        world_sizes = tuple(int(w) for w in micro.world_sizes)
    else:
        world_sizes = (min(gpus, 8),) if gpus else (2,)
    hidden = int(getattr(model, "hidden", None) or DEFAULT_HIDDEN)
    tokens = tuple(int(t) for t in (micro.tokens or DEFAULT_TOKENS))
    sweep = tuple(micro.sweep_bytes or (DEFAULT_SWEEP_GPU if gpus else DEFAULT_SWEEP_CPU))
    shapes: list[tuple[str, int]] = []
    for t in tokens:
        shapes.append((f"{'decode' if t == 1 else 'verify'}-{t}x{hidden}", t * hidden * 2))
    shapes += [(f"sweep-{int(b)}B", int(b)) for b in sweep]
    env_iters = environ.get("PERFGATE_MICRO_ITERS", "")
    iters = _ints(env_iters, "PERFGATE_MICRO_ITERS")[0] if env_iters else micro.iters
    return MicroPlan(profile=prof.name, world_sizes=world_sizes, shapes=tuple(shapes), iters=iters,
                     warmup=micro.warmup, gpus=gpus, micro=micro, profile_path=str(prof.path))


def cases_of(plan: MicroPlan) -> list[MicroCase]:
    """Every record of ``plan``: backend x world size x timing x size (CUDA-graph timing on GPUs only)."""
    from perfgate.allreduce import BACKENDS

    cases: list[MicroCase] = []
    for name, b in BACKENDS.items():
        modes = ("eager", "graph") if b.device == "cuda" and plan.gpus else ("eager",)
        for n in plan.world_sizes:
            for mode in modes:
                for label, nbytes in plan.shapes:
                    cases.append(MicroCase(profile=plan.profile, kind=KIND, mode=mode, variant=name, world_size=n,
                                           label=label, nbytes=nbytes))
    return cases
