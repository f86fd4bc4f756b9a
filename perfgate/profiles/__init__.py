"""Profiles: ``baselines/<hardware>/<model>.toml`` loaded, validated and turned into configs.

A profile holds the hardware it is valid for, the engine, the controlled server settings
shared by every run, the modes and their flags, the workload, the floors with tolerances and
the expectations per variant × mode. Loading validates everything and fails with
:class:`~perfgate.errors.ProfileSchemaError` naming the file, the key, what was expected and
what was found. See ``docs/profiles.md`` for the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from perfgate.categories import EXPECTABLE, Category, Outcome
from perfgate.errors import ProfileSchemaError
from perfgate.profiles.config import ServerConfig
from perfgate.profiles.reader import _close

if TYPE_CHECKING:  # for the annotations only: a variant is read after the profile, a stack detected after loading
    from perfgate.profiles.variants import Variant
    from perfgate.stack import Stack

SCHEMA_VERSION = 1
ENGINES = ("sglang", "sim")
CATEGORIES = tuple(c.value for c in EXPECTABLE)
EXPECTS = ("pass", "xfail")
SPEC_FLAG = "speculative-algorithm"
MICRO_TIMINGS = ("eager", "graph")


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """The hardware a profile is valid for."""

    gpu: str
    count: int
    sm: str
    interconnect: str  # "pcie" | "nvlink"


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    """Which engine serves the model and how it is started."""

    name: str  # "sglang" | "sim"
    launcher: str = "launch_server"  # sglang: "launch_server" (python -m) | "serve"
    python: str = ""  # interpreter for the engine; "" = the one running pytest
    startup_timeout_s: float = 1200.0
    teardown_timeout_s: float = 30.0
    sglang_version: str = ""  # "" = detect; used to choose flag spellings
    sim_hardware: Path | None = None
    sim_startup_s: float = 2.0


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """The served model as perfgate's cost model and micro-benchmarks see it."""

    path: str
    name: str
    layers: int | None = None
    hidden: int | None = None
    allreduces_per_layer: int = 2
    #: measured all-reduce latency on this box, (bytes, µs) points (from ``pytest -m micro``)
    allreduce_latency_us: tuple[tuple[int, float], ...] = ()


class WorkloadOverrides(TypedDict, total=False):
    """The [workload] keys a mode may override (``[modes.<name>.workload]``), as :class:`Workload` types them."""

    max_new_tokens: int
    requests_per_trial: int
    warmup: int
    trials: int
    request_timeout_s: float


@dataclass(frozen=True, kw_only=True)
class Mode:
    """A serving mode (baseline, eagle3, ngram, ...): flags and environment on top of the server."""

    name: str
    description: str = ""
    flags: Mapping[str, object] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    #: workload keys this mode overrides (e.g. longer outputs so a drafter's acceptance averages out)
    workload: WorkloadOverrides = field(default_factory=WorkloadOverrides)

    @property
    def speculative(self) -> bool:
        return bool(self.flags.get(SPEC_FLAG))


#: TTFT probes per server start when the profile names none: 36 in 6 blocks at the default 5 trials, enough that a
#: start's probe TTFT moves about 1 % on one level (benchmarks/ttft_modes.py) and that two levels are found with their
#: locations (perfgate.measuring.modes needs 20 values; a level of 10 % is 4 probes)
DEFAULT_TTFT_PROBES = 36
#: prefills each server start traces with SGLang's profiler after its probes (perfgate.procedure.prefill)
DEFAULT_PREFILL_TRACES = 8


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What is sent to the server and how often."""

    prompts: Path
    max_new_tokens: int
    concurrency: int = 1
    requests_per_trial: int = 0  # 0 = concurrency
    warmup: int = 1
    trials: int = 5
    request_timeout_s: float = 300.0
    max_cv: float = 0.05
    token_match_min: float = 1.0
    concurrency_sweep: tuple[int, ...] = ()
    confidence: float = 0.95
    #: smallest ratio difference from 1 that counts as faster or slower (beyond statistical noise)
    min_effect: float = 0.02
    #: server starts per config (--perfgate-starts overrides): the trials are measured on each start
    starts: int = 1
    #: the most starts per config a paired comparison may take while it is undecided (--perfgate-max-starts
    #: overrides; 0: the default, perfgate.profiles.settings.DEFAULT_MAX_STARTS)
    max_starts: int = 0
    #: seconds the starts added to undecided comparisons may take in one session (--perfgate-max-time overrides;
    #: 0: no limit but max_starts)
    max_time_s: float = 0.0
    #: TTFT probes per server start: prefill-only requests (a prompt of the set, 1 token out) sent one at a time in
    #: blocks before each trial and after the last (perfgate.procedure.closed); the start's TTFT comes from them
    #: (perfgate.measuring.probes; 0: none, the trials' TTFT as before). docs/measurement.md "TTFT probes and modes"
    ttft_probes: int = DEFAULT_TTFT_PROBES
    #: prefill-only requests per server start traced with SGLang's own profiler after the probes
    #: (perfgate.procedure.prefill): each one's GPU time splits the probes' prefill leg into ``prefill_gpu`` and
    #: ``prefill_host`` (perfgate.measuring.prefill_gpu); 0: none. Only on a server perfgate launched, with probes
    prefill_traces: int = DEFAULT_PREFILL_TRACES

    @property
    def per_trial(self) -> int:
        return self.requests_per_trial or self.concurrency


#: the tolerance of a limit that names none (a floor at ``limit x (1 - t)``, a ceiling at ``limit x (1 + t)``)
DEFAULT_TOLERANCE = 0.03


@dataclass(frozen=True, kw_only=True)
class Floor:
    """Floors of one mode, with the tolerance stored next to the value they guard."""

    mode: str
    tok_s: float | None = None
    tolerance: float = DEFAULT_TOLERANCE
    accept_len: float | None = None
    accept_len_tolerance: float = 0.05
    measured: Mapping[str, object] = field(default_factory=dict)
    # limits on the other metrics (perfgate.measuring.metrics.METRICS): a floor for higher-is-better ones, a
    # ceiling for latencies; the same tolerance applies (floor x (1 - t), ceiling x (1 + t))
    limits: Mapping[str, float] = field(default_factory=dict)
    # [floors.<mode>.c<N>]: the limits at concurrency N (a user test measuring at another concurrency)
    by_concurrency: Mapping[int, Floor] = field(default_factory=dict)
    # the CV above which these limits get no verdict (None: the workload's max_cv); latencies under load
    # are noisier than decode throughput
    max_cv: float | None = None
    # ``<metric>_tolerance``: a limit's own tolerance (--perfgate-update-baselines writes one from the metric's
    # noise, perfgate.profiles.noise.limit_tolerance)
    tolerances: Mapping[str, float] = field(default_factory=dict)
    # whether ``tolerance`` is the table's other limits' too: written in a table with no decode floor (a latency
    # table, ``[floors.<mode>.c4]``); beside ``tok_s`` it is the decode floor's alone (a profile that extends
    # another merges its load floors into the parent's decode table: goodput must not take tok/s's 3 %)
    tolerance_shared: bool = False
    # whether the profile runs the simulator (the priors of a limit's noise are the simulator's)
    simulated: bool = False
    # the GPU the profile is for (``hardware.gpu``): a real limit's noise takes its kind's priors
    gpu: str = ""

    def limit(self, metric: str) -> float | None:
        if metric == "tok_s":
            return self.tok_s
        return self.accept_len if metric == "accept_len" else self.limits.get(metric)

    def tolerance_for(self, metric: str) -> float:
        """The tolerance of ``metric``'s limit: its own ``<metric>_tolerance``; ``tolerance`` for decode tok/s,
        ``accept_len_tolerance`` for the acceptance length; for any other metric the table's ``tolerance`` where
        it is written in a table of no decode floor (:attr:`tolerance_shared`), else the one its own noise gives
        (:func:`perfgate.profiles.noise.limit_tolerance`): no limit silently inherits the decode floor's."""
        if metric in self.tolerances:
            return self.tolerances[metric]
        if metric == "accept_len":
            return self.accept_len_tolerance
        if metric == "tok_s" or self.tolerance_shared:
            return self.tolerance
        from perfgate.profiles.noise import limit_tolerance

        return limit_tolerance(metric, simulated=self.simulated, gpu=self.gpu)

    def at(self, concurrency: int | None) -> Floor | None:
        """The floors that apply at ``concurrency`` (``None``: the mode's own, for its workload)."""
        return self if concurrency is None else self.by_concurrency.get(concurrency)


@dataclass(frozen=True, kw_only=True)
class Expectation:
    """What a check or variant is expected to do in one mode."""

    expect: Outcome  # PASS | XFAIL
    category: Category | None = None
    reason: str = ""
    when: str = ""  # stack condition; "" = always
    key: str = ""  # "expectations.<name>.<mode>" for messages
    line: int | None = None


@dataclass(frozen=True, kw_only=True)
class MicroFloor:
    """A ceiling on one all-reduce record: its median latency must be <= ``latency_us × (1 + tolerance)``."""

    backend: str
    timing: str  # "eager" | "graph"
    bytes: int
    world_size: int
    latency_us: float
    tolerance: float
    key: str = ""  # 'micro.floors."<backend>.<timing>.<bytes>"' for messages

    @property
    def ceiling_us(self) -> float:
        return self.latency_us * (1 + self.tolerance)


@dataclass(frozen=True, kw_only=True)
class MicroSpec:
    """All-reduce micro-benchmark shapes, and the floors (latency ceilings) measured on this box."""

    tokens: tuple[int, ...] = (1, 2, 4, 8)
    sweep_bytes: tuple[int, ...] = ()
    world_sizes: tuple[int, ...] = ()
    iters: int = 200
    warmup: int = 20
    #: by "<backend>.<eager|graph>.<bytes>"
    floors: Mapping[str, MicroFloor] = field(default_factory=dict)

    def floor(self, backend: str, timing: str, nbytes: int, world_size: int) -> MicroFloor | None:
        """The floor for one record, or None (then the record is a measurement only)."""
        f = self.floors.get(f"{backend}.{timing}.{nbytes}")
        return f if f is not None and f.world_size == world_size else None


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One validated profile file."""

    path: Path
    name: str
    root: Path
    description: str
    hardware: Hardware
    engine: EngineSpec
    model: ModelSpec
    server_flags: Mapping[str, object]
    server_env: Mapping[str, str]
    modes: Mapping[str, Mode]
    workload: Workload
    floors: Mapping[str, Floor]
    expectations: Mapping[str, Mapping[str, tuple[Expectation, ...]]]
    variant_modes: tuple[str, ...]
    variant_include: tuple[str, ...] | None
    variant_overrides: Mapping[str, Mapping[str, object]]
    micro: MicroSpec
    slo: Mapping[str, Any] = field(default_factory=dict)  # mode -> measuring.goodput.Slo ([slo]; none without)
    warnings: tuple[str, ...] = ()  # loud but not fatal: e.g. an NCCL_* name newer than perfgate's list

    @property
    def simulated(self) -> bool:
        return self.engine.name == "sim"

    def mode(self, name: str) -> Mode:
        try:
            return self.modes[name]
        except KeyError:
            raise ProfileSchemaError(
                self.path, f"modes.{name}", f"one of {sorted(self.modes)}", name, fix=_close(name, self.modes)
            ) from None

    def workload_for(self, mode: str) -> Workload:
        """The workload with the mode's overrides applied."""
        from dataclasses import replace

        over = self.mode(mode).workload
        return replace(self.workload, **over) if over else self.workload

    def max_cv_for(self, mode: str, floor: Floor | None = None) -> float:
        """The noise bar of a limit: the CV above which it gets no verdict. The floor table's own ``max_cv`` (latencies
        under load are noisier than decode), else the mode's workload's. Every limit is judged against this one."""
        if floor is not None and floor.max_cv is not None:
            return floor.max_cv
        return self.workload_for(mode).max_cv

    def load_tokens(self) -> int:
        """Tokens per request under load, the same in every mode (comparable): the baseline's ``[slo]
        max_new_tokens``, else the most any mode's workload asks."""
        slo = self.slo.get(self.baseline_mode())
        if slo is not None and slo.max_new_tokens:
            return int(slo.max_new_tokens)
        return max(self.workload_for(m).max_new_tokens for m in self.modes)

    def load_trials(self) -> int | None:
        """Trials per level under load: the baseline's ``[slo] trials`` (None: the workload's)."""
        slo = self.slo.get(self.baseline_mode())
        return slo.trials if slo is not None else None

    def baseline_mode(self) -> str:
        """The mode speculative modes and variants are compared against."""
        if "baseline" in self.modes:
            return "baseline"
        for m in self.modes.values():
            if not m.speculative:
                return m.name
        raise ProfileSchemaError(self.path, "modes", "at least one non-speculative mode")

    def config(
        self,
        mode: str,
        *,
        variant: Variant | None = None,
    ) -> ServerConfig:
        """The ServerConfig for a mode, optionally with a variant (from ``variants.toml``)."""
        m = self.mode(mode)
        flags: dict[str, object] = dict(self.server_flags)
        flags.update(m.flags)
        env: dict[str, str] = dict(self.server_env)
        env.update(m.env)
        declared: set[str] = set()
        vname = None
        if variant is not None:
            vname = variant.name
            flags.update(variant.flags)
            env.update(variant.env)
            declared = set(variant.declared_keys())
            # what the profile overrides for this variant (e.g. the seed's mem-fraction mistake)
            for k, v in self.variant_overrides.get(vname, {}).items():
                if k.startswith("env:"):
                    env[k[4:]] = str(v)
                else:
                    flags[k] = v
        opts: dict[str, object] = {}
        if self.engine.sim_hardware is not None:
            opts["sim_hardware"] = str(self.engine.sim_hardware)
            opts["sim_startup_s"] = self.engine.sim_startup_s
        return ServerConfig.build(
            profile=self.name,
            mode=mode,
            variant=vname,
            engine=self.engine.name,
            model_path=self.model.path,
            flags=flags,
            env=env,
            declared_keys=frozenset(declared),
            speculative=m.speculative,
            engine_options=opts,
            root=str(self.root),
        )

    def expectation(self, name: str, mode: str, stack: Stack | None = None) -> Expectation | None:
        """The expectation for ``name`` (a variant or a check) in ``mode``, given the stack."""
        table = self.expectations.get(name, {})
        cands = tuple(table.get(mode, ())) + tuple(table.get("*", ()))
        for e in cands:
            if not e.when:
                return e
            if stack is None:
                continue
            from perfgate.stack.conditions import condition_holds  # the stack is detected after loading

            if condition_holds(e.when, stack):
                return e
        return None


