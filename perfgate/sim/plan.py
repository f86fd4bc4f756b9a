"""The outcome of one simulated launch (:class:`LaunchPlan`) and its cost model.

A plan says whether and where start-up fails (:class:`Failure`), which log lines the launch
prints, and, for a launch that serves, how long every step takes: see the cost model in
:mod:`perfgate.sim.behavior`'s docstring. The numbers come from the hardware file's ``[cost]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfgate.errors import ServerExitedError
from perfgate.sim.allreduce import CommSetup
from perfgate.sim.hardware import Hardware

#: the start-up phases a failure or a log line belongs to, in order
PHASES = ("args", "validate", "distributed", "load", "model_init", "kv_cache", "cuda_graph", "serve")


@dataclass(frozen=True, kw_only=True)
class Failure:
    """How and where a launch dies (exit_code 2: argparse, 1: main process, -9: SIGKILL path)."""

    category: str
    message: str  # the last line of the traceback / argparse message
    exit_code: int
    phase: str
    traceback: tuple[str, ...] = ()  # full traceback text lines (empty for argparse errors)
    in_scheduler: bool = False  # printed as "Scheduler hit an exception: ..." then SIGQUIT path


@dataclass(frozen=True, kw_only=True)
class LogLine:
    """One SGLang log line the launch prints in a phase."""

    phase: str
    text: str
    warning: bool = False


@dataclass(frozen=True, kw_only=True)
class SpecSetup:
    """Resolved speculative decoding."""

    algorithm: str
    num_steps: int
    topk: int
    num_draft_tokens: int
    accept_length: float  # expected tokens per cycle (after the cap)
    max_accept: int  # the draft tree's cap on tokens per cycle


@dataclass(frozen=True, kw_only=True)
class MemoryPlan:
    """Per-GPU memory budget (GB) of the launch."""

    total_gb: float
    mem_fraction_static: float
    weights_gb: float
    draft_weights_gb: float
    reserved_gb: float  # a2a workspaces etc. inside the static pool
    kv_gb: float
    kv_tokens: int
    graph_gb: float
    headroom_gb: float  # outside the static pool, after the graph pool


@dataclass(frozen=True, kw_only=True)
class LaunchPlan:
    """The simulated outcome of one launch: failure or not, log lines, timing model."""

    hardware: Hardware
    version: str
    args: Mapping[str, Any]
    env: Mapping[str, str]
    failure: Failure | None
    log: tuple[LogLine, ...]
    comm: CommSetup | None = None
    spec: SpecSetup | None = None
    memory: MemoryPlan | None = None
    decode_graph_bs: tuple[int, ...] = ()
    fusion_backend: str | None = None
    a2a_backend: str = "none"
    allreduce_backend_name: str = "none"
    _cost: Mapping[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ summary
    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(ln.text for ln in self.log if ln.warning)

    @property
    def speculative(self) -> bool:
        return self.spec is not None

    @property
    def accept_length(self) -> float | None:
        return self.spec.accept_length if self.spec else None

    @property
    def max_running_requests(self) -> int:
        return int(self.args["max_running_requests"])

    def _require(self) -> None:
        if self.failure is not None:
            f = self.failure
            raise ServerExitedError(f"the simulated launch fails ({f.category}): {f.message}",
                                    category=f.category, returncode=f.exit_code)

    # ------------------------------------------------------------------ cost model (ms)
    @property
    def _tp(self) -> int:
        return int(self.args["tp_size"])

    def compute_ms(self, tokens: int) -> float:
        """Target-model compute of one forward over ``tokens`` tokens."""
        m, c = self.hardware.model, self._cost
        distinct = distinct_experts(m.experts, m.experts_per_token, tokens)
        ms = float(c["dense_ms"]) + float(c["expert_ms"]) * distinct + float(c["token_ms"]) * tokens
        return ms * self.hardware.count / max(1, self._tp)

    def comm_ms(self, tokens: int) -> float:
        """Tensor-parallel communication of one target forward over ``tokens`` tokens."""
        self._require()
        assert self.comm is not None
        m = self.hardware.model
        if self._tp <= 1:
            return 0.0
        nbytes = tokens * m.hidden * 2
        per_layer_ar = m.allreduces_per_layer
        a2a = 0.0
        if self.a2a_backend != "none" and m.experts > 0:
            per_layer_ar = max(0, per_layer_ar - 1)
            c = self._cost
            one = float(c["a2a_base_us"]) + tokens * m.experts_per_token * m.hidden * 2 / (float(c["a2a_gbps"]) * 1000)
            a2a = 2 * one
        return m.layers * (per_layer_ar * self.comm.fused_allreduce_us(nbytes, tokens) + a2a) / 1000.0

    def penalty_ms(self) -> float:
        """Per-step memory penalties: the decode graph pool and the static pool's share."""
        c = self._cost
        graph_bs = max(self.decode_graph_bs) if self.decode_graph_bs else 0
        mf = float(self.args["mem_fraction_static"])
        return float(c["graph_pool_us_per_bs"]) * graph_bs / 1000.0 + float(c["mem_pressure_ms"]) * mf

    def forward_ms(self, tokens: int, *, graph: bool) -> float:
        """One target forward pass over ``tokens`` tokens."""
        self._require()
        eager = 0.0 if graph else float(self._cost["eager_ms_per_layer"]) * self.hardware.model.layers
        return self.compute_ms(tokens) + self.comm_ms(tokens) + self.penalty_ms() + eager

    def _padded(self, batch: int) -> tuple[int, bool]:
        if self.args["cuda_graph_backend_decode"] == "disabled" or not self.decode_graph_bs:
            return batch, False
        for bs in self.decode_graph_bs:
            if bs >= batch:
                return bs, True
        return batch, False

    def decode_step_ms(self, batch: int = 1) -> float:
        """One non-speculative decode step advancing ``batch`` running requests by one token."""
        b, graph = self._padded(batch)
        return self.forward_ms(b, graph=graph)

    def draft_forward_ms(self, tokens: int, *, graph: bool = True) -> float:
        """One forward of the drafter over ``tokens`` tokens."""
        self._require()
        assert self.comm is not None
        d = self.hardware.drafter
        comm = 0.0
        if self._tp > 1:
            comm = d.allreduces_per_forward * self.comm.allreduce_us(tokens * self.hardware.model.hidden * 2) / 1000
        eager = 0.0 if graph else float(self._cost["eager_ms_per_layer"]) * d.layers
        return d.forward_ms + comm + eager

    def draft_ms(self, batch: int = 1) -> float:
        """Drafting part of one speculative cycle for ``batch`` requests."""
        self._require()
        s = self.spec
        if s is None:
            return 0.0
        if s.algorithm == "NGRAM":
            return float(self._cost["ngram_lookup_ms"])
        b, graph = self._padded(batch)
        return (s.num_steps * self.draft_forward_ms(b * s.topk, graph=graph)
                + self.draft_forward_ms(b * s.num_draft_tokens, graph=graph)
                + float(self._cost["spec_overhead_ms"]))

    def verify_ms(self, batch: int = 1) -> float:
        """Target verify pass of one speculative cycle for ``batch`` requests."""
        self._require()
        s = self.spec
        if s is None:
            return self.decode_step_ms(batch)
        b, graph = self._padded(batch)
        return self.forward_ms(b * s.num_draft_tokens, graph=graph)

    def cycle_ms(self, batch: int = 1) -> float:
        """One decode iteration: a speculative cycle (draft + verify), or a plain decode step."""
        if self.spec is None:
            return self.decode_step_ms(batch)
        return self.draft_ms(batch) + self.verify_ms(batch)

    def step_s(self, batch: int = 1) -> float:
        """Seconds of one engine decode iteration for ``batch`` running requests."""
        return self.cycle_ms(batch) / 1000.0

    def prefill_ms(self, new_tokens: int) -> float:
        """Prefill of ``new_tokens`` uncached prompt tokens (chunked like SGLang)."""
        self._require()
        chunk = int(self.args.get("chunked_prefill_size") or 8192)
        graph = self.args.get("cuda_graph_backend_prefill") != "disabled"
        total, left = 0.0, max(1, new_tokens)
        while left > 0:
            n = min(chunk, left) if chunk > 0 else left
            total += self.forward_ms(n, graph=graph)
            if self.spec is not None and self.spec.algorithm != "NGRAM":
                total += self.draft_forward_ms(n, graph=graph)
            left -= n
        return total

    def tokens_per_cycle(self) -> float:
        return self.spec.accept_length if self.spec else 1.0

    def decode_tok_s(self, concurrency: int = 1) -> float:
        """Steady-state decode tok/s of ONE request with ``concurrency`` requests running."""
        self._require()
        batch = max(1, min(concurrency, self.max_running_requests))
        return self.tokens_per_cycle() / (self.cycle_ms(batch) / 1000.0)

    def aggregate_tok_s(self, concurrency: int = 1) -> float:
        """Steady-state decode tok/s summed over ``concurrency`` running requests."""
        return self.decode_tok_s(concurrency) * max(1, min(concurrency, self.max_running_requests))


def distinct_experts(experts: int, per_token: int, tokens: int) -> float:
    """Expected number of distinct experts ``tokens`` tokens route to."""
    if experts <= 0 or per_token <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)
