"""The simulated server's profiler: the trace files SGLang writes on ``/start_profile``, from the cost model.

Same contract as SGLang (see :mod:`perfgate.serving.capture`): ``profile_by_stage`` with ``num_steps`` records
the next prefill into ``<id>-TP-<rank>-EXTEND.trace.json.gz`` and then ``num_steps`` decode batches into
``<id>-TP-<rank>-DECODE.trace.json.gz``; without it, ``num_steps`` steps of any kind into
``<id>-TP-<rank>.trace.json.gz``; without ``num_steps``, until ``/stop_profile``. One file per
tensor-parallel rank, in torch's Chrome-trace format, with SGLang's spans (``step[DECODE bs=N]``,
``draft``, ``step[TARGET_VERIFY bs=N]``, ``draft_extend``) on the CPU and the GPU timeline.

The kernels are the cost model's forward pass cut into the kernels a real trace shows (names from real
H200 traces for GEMMs, attention and norms; the all-reduce kernel of the backend the launch ended up
with): per layer QKV GEMM, attention, O GEMM, an all-reduce, a fused add+RMSNorm, the MLP (or MoE), the
second all-reduce, another norm. Their durations add up to the step the simulator sleeps (divided by
the simulated machine's speed, :mod:`perfgate.sim.variation`, as the engine's steps are), so a trace's
step time is the model's, whatever ``--sim-speedup`` does to the wall clock. The rank that reaches an
all-reduce first waits inside it for the others (``[cost] rank_skew_us``, default 0: rank 0 waits that
long per all-reduce, the last rank not at all), the kernels before it shorter by as much.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfgate.sim.behavior import LaunchPlan

__all__ = ["TraceRecorder", "step_kernels"]

# kernel names as real traces spell them (fixtures/traces/h200-x1), and each backend's all-reduce kernel
GEMM_QKV = "nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT"
GEMM_O = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"
GEMM_UP = "nvjet_sm90_tst_128x8_64x12_2x1_v_bz_splitK_TNT"
GEMM_DOWN = "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_TNT"
MOE = "fused_moe_kernel"
ATTN_DECODE = ("_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2")
ATTN_EXTEND = ("_fwd_kernel",)
NORM = "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, " \
       "__nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)"
ACT = "void (anonymous namespace)::act_and_mul_kernel<__nv_bfloat16, ((anonymous namespace)::ActivationKind)0, " \
      "true, false, false, false>((anonymous namespace)::ActivationParams)"
A2A = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)"
SPEC_OVERHEAD = "_draft_topk1_partial_argmax_kernel"
ALLREDUCE = {
    "custom_ar": "void sglang::cross_device_reduce_1stage<__nv_bfloat16, {n}>(sglang::RankData*, "
                 "sglang::RankSignals, sglang::Signal*, __nv_bfloat16*, int, int)",
    "pcie_ipc": "void flashinfer::comm::oneshot_pcie_ipc_allreduce_kernel<__nv_bfloat16, {n}>(void**, void*, int)",
    "mscclpp": "void mscclpp_allreduce_kernel<__nv_bfloat16>(mscclpp::DeviceHandle<mscclpp::MemoryChannel>*, int)",
    "torch_symm_mem": "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, {n}>(c10::BFloat16**, "
                      "c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
    "flashinfer_ar_fusion": "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport"
                            "<__nv_bfloat16, {n}, true, true>"
                            "(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams)",
}
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_{algo}_{proto}(ncclDevKernelArgsStorage<4096ul>)"
NCCL_ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
STEP_GAP_US = 40.0  # the host's turn between two steps (a real H200 decode step: ~45 us)
#: the share of an eager prefill's modelled time the host spends launching its kernels (gaps on the GPU's timeline,
#: no kernel): a prefill's GPU time is the rest (perfgate.measuring.prefill_gpu); the host's TTFT levels
#: (PERFGATE_SIM_TTFT_MODES) and PERFGATE_SIM_PREFILL_HOST_MS add to the gaps, PERFGATE_SIM_PREFILL_GPU_MS a kernel
PREFILL_HOST_SHARE = 0.4
#: the kernel torch.cuda._sleep launches (ci/device/inject's GPU-side slowdowns)
SPIN = "spin_kernel(long)"

Kernel = tuple[str, float]  # (name, microseconds)


def _allreduce(plan: LaunchPlan, tokens: int) -> tuple[str, float]:
    """(kernel name, microseconds) of one target all-reduce of ``tokens`` tokens, fusion included."""
    assert plan.comm is not None
    nbytes = tokens * plan.hardware.model.hidden * 2
    us, backend = plan.comm.allreduce(nbytes)
    n = plan.comm.world
    fused = plan.comm.fused_allreduce_us(nbytes, tokens)
    if fused < us:  # FlashInfer's fused all-reduce + RMSNorm took it
        return ALLREDUCE["flashinfer_ar_fusion"].format(n=n), fused
    if backend.startswith("nccl:"):
        algo, _, proto = backend[5:].partition("/")
        return NCCL_ALLREDUCE.format(algo=algo.upper(), proto=proto.upper() or "SIMPLE"), us
    return ALLREDUCE.get(backend, ALLREDUCE["custom_ar"]).format(n=n), us


def _forward(plan: LaunchPlan, tokens: int, *, graph: bool, verify: bool, wait_us: float) -> list[Kernel]:
    """The target model's forward over ``tokens`` tokens as kernels (sum = ``plan.forward_ms``)."""
    m = plan.hardware.model
    total = plan.forward_ms(tokens, graph=graph) * 1000.0
    tp = int(plan.args["tp_size"])
    ar_per_layer = m.allreduces_per_layer if tp > 1 else 0
    a2a_us = 0.0
    if tp > 1 and plan.a2a_backend != "none" and m.experts > 0:
        ar_per_layer = max(0, ar_per_layer - 1)
    ar_name, ar_us = _allreduce(plan, tokens) if ar_per_layer else ("", 0.0)
    if tp > 1:
        a2a_us = max(0.0, plan.comm_ms(tokens) * 1000.0 - m.layers * ar_per_layer * ar_us) / m.layers
    layer = total / m.layers - ar_per_layer * ar_us - a2a_us  # compute and the rest, per layer
    attn = ATTN_EXTEND if verify else ATTN_DECODE
    mlp: list[Kernel] = ([(MOE, 0.46)] if m.experts > 0 else [(GEMM_UP, 0.30), (ACT, 0.03), (GEMM_DOWN, 0.13)])
    parts: list[tuple[str, float]] = [(GEMM_QKV, 0.30), *((a, 0.09 / len(attn)) for a in attn), (GEMM_O, 0.12),
                                      ("AR", 0.0), (NORM, 0.02), *mlp, ("AR", 0.0), (NORM, 0.02)]
    scale = sum(f for _, f in parts)
    out: list[Kernel] = []
    since = 0  # index of the first kernel after the last all-reduce
    for _ in range(m.layers):
        ars = ar_per_layer
        for name, f in parts:
            if name == "AR":
                if ars > 0:
                    ars -= 1
                    # this rank arrived early: the kernels before the all-reduce were shorter by the wait (at
                    # most 90 % of them), which it spends inside the all-reduce; the step's time is unchanged
                    pending = sum(d for _, d in out[since:])
                    take = min(wait_us, 0.9 * pending)
                    if take > 0:
                        out[since:] = [(k, d * (1.0 - take / pending)) for k, d in out[since:]]
                    out.append((ar_name, ar_us + take))
                    since = len(out)
                continue
            out.append((name, layer * f / scale))
        for _ in range(ars):  # more all-reduces per layer than the two slots
            out.append((ar_name, ar_us))
        if a2a_us:
            out.append((A2A, a2a_us))
    return out


def _draft(plan: LaunchPlan, tokens: int, *, graph: bool) -> list[Kernel]:
    """One drafter forward over ``tokens`` tokens (sum = ``plan.draft_forward_ms``)."""
    d = plan.hardware.drafter
    total = plan.draft_forward_ms(tokens, graph=graph) * 1000.0
    comm: list[Kernel] = []
    if int(plan.args["tp_size"]) > 1 and plan.comm is not None:
        nbytes = tokens * plan.hardware.model.hidden * 2
        us = plan.comm.allreduce_us(nbytes)
        name, _ = _allreduce(plan, tokens)
        n_ar = min(2, d.allreduces_per_forward)
        comm = [(name, us)] * n_ar + [(NCCL_ALLGATHER, us)] * (d.allreduces_per_forward - n_ar)
    rest = max(0.0, total - sum(us for _, us in comm))
    return [(GEMM_QKV, rest * 0.35), (ATTN_EXTEND[0], rest * 0.15), *comm[:1], (NORM, rest * 0.05),
            (GEMM_UP, rest * 0.35), *comm[1:], (NORM, rest * 0.10)]


def step_kernels(plan: LaunchPlan, stage: str, batch: int, tokens: int = 0, *,
                 rank: int = 0) -> list[tuple[str, list[Kernel]]]:
    """One engine step as (span name, kernels) in time order: a prefill, a decode step, or a speculative
    cycle (``draft``, ``step[TARGET_VERIFY ...]``, ``draft_extend``)."""
    tp = int(plan.args["tp_size"])
    skew = float(plan._cost.get("rank_skew_us", 0.0))
    wait = skew * (tp - 1 - rank) / (tp - 1) if tp > 1 else 0.0
    if stage == "prefill":
        graph = plan.args.get("cuda_graph_backend_prefill") != "disabled"
        return [(f"step[EXTEND bs={batch} toks={tokens}]",
                 _forward(plan, max(1, tokens), graph=graph, verify=True, wait_us=wait))]
    b, graph = plan._padded(batch)
    s = plan.spec
    if s is None:
        return [(f"step[DECODE bs={batch}]", _forward(plan, b, graph=graph, verify=False, wait_us=wait))]
    out: list[tuple[str, list[Kernel]]] = []
    if s.algorithm == "NGRAM":
        out.append(("draft", [("", float(plan._cost["ngram_lookup_ms"]) * 1000.0)]))  # host work: a GPU gap
    else:
        draft: list[Kernel] = []
        for _ in range(s.num_steps):
            draft += _draft(plan, b * s.topk, graph=graph)
        out.append(("draft", draft))
    out.append((f"step[TARGET_VERIFY bs={batch}]",
                _forward(plan, b * s.num_draft_tokens, graph=graph, verify=True, wait_us=wait)))
    if s.algorithm != "NGRAM":
        extend = _draft(plan, b * s.num_draft_tokens, graph=graph)
        extend.append((SPEC_OVERHEAD, float(plan._cost["spec_overhead_ms"]) * 1000.0))
        out.append(("draft_extend", extend))
    return out


class TraceRecorder:
    """``/start_profile`` and ``/stop_profile`` of the simulated server; fed every engine step."""

    def __init__(self, plan: LaunchPlan, log: Callable[[str], None], clock_us: Callable[[], float], *,
                 speed: float = 1.0) -> None:
        self.plan = plan
        self.speed = max(1e-6, speed)  # the start's machine speed (perfgate.sim.variation): kernels take 1/speed
        self._log = log
        self._clock_us = clock_us
        self._lock = threading.Lock()
        self._cfg: dict[str, Any] | None = None
        self._stage: str | None = None  # the stage being recorded ("EXTEND", "DECODE", "" when not by stage)
        self._count = 0
        self._events: list[list[dict[str, Any]]] = []
        self._t = 0.0
        self.tp = int(plan.args["tp_size"])

    def start(self, body: dict[str, Any]) -> str | None:
        """Configure a profile like SGLang's ``/start_profile``; returns an error text, or None."""
        with self._lock:
            if self._cfg is not None:
                return "Profiling is already in progress. Call /stop_profile first."
            acts = body.get("activities") or ["CPU", "GPU"]
            if not isinstance(acts, list) or not all(a in ("CPU", "GPU", "MEM", "RPD", "CUDA_PROFILER") for a in acts):
                return f"activities must be a list of CPU, GPU, MEM, RPD; got {acts!r}"
            steps = body.get("num_steps")
            if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
                return f"num_steps must be a positive integer, got {steps!r}"
            out = body.get("output_dir") or "/tmp"
            self._cfg = {"output_dir": str(out), "num_steps": steps, "by_stage": bool(body.get("profile_by_stage")),
                         "id": str(body.get("profile_id") or f"{self._clock_us() / 1e6:.6f}"),
                         "prefix": str(body.get("profile_prefix") or "")}
            if not self._cfg["by_stage"]:
                self._begin("")
            return None

    def stop(self) -> str | None:
        with self._lock:
            if self._cfg is None:
                return "Profiling is not in progress. Call /start_profile first."
            self._flush()
            self._cfg = None
            return None

    def on_step(self, stage: str, batch: int, tokens: int = 0, *, step_us: float | None = None,
                spin_us: float = 0.0) -> None:
        """Called by the engine after each step (``prefill`` or ``decode``) it ran; for a prefill, ``step_us`` is the
        step's time at this start's speed (host included) and ``spin_us`` a GPU-side delay in it."""
        if self._cfg is None:
            return
        with self._lock:
            cfg = self._cfg
            if cfg is None:
                return
            n = cfg["num_steps"]
            if cfg["by_stage"]:
                want = "EXTEND" if stage == "prefill" else "DECODE"
                if self._stage == "EXTEND" and want == "DECODE":  # the first decode batch flushes the prefill part
                    self._flush()
                if self._stage is None:
                    if want in cfg.get("done", ()):
                        return
                    self._begin(want)
                elif self._stage != want:  # a prefill while decoding is profiled: not part of the decode trace
                    return
            self._record(stage, batch, tokens, step_us=step_us, spin_us=spin_us)
            if n is not None and self._count >= n:
                stage_was = self._stage
                self._flush()
                if not cfg["by_stage"] or stage_was == "DECODE":
                    self._cfg = None

    # ------------------------------------------------------------------ internals
    def _begin(self, stage: str) -> None:
        assert self._cfg is not None
        self._stage, self._count = stage, 0
        self._events = [[] for _ in range(self.tp)]
        self._t = self._clock_us()
        self._log(f"Profiling starts{f' for {stage}' if stage else ''}. Traces will be saved to: "
                  f"{self._cfg['output_dir']} (with profile id: {self._cfg['id']})")

    def _record(self, stage: str, batch: int, tokens: int, *, step_us: float | None = None,
                spin_us: float = 0.0) -> None:
        t0 = self._t
        for rank in range(self.tp):
            ev = self._events[rank]
            t = t0
            for span, kernels in step_kernels(self.plan, stage, batch, tokens, rank=rank):
                start = t
                gap = 0.0
                if stage == "prefill" and step_us is not None:  # the host's part: gaps before each kernel
                    kernels = [(k, d * (1.0 - PREFILL_HOST_SHARE)) for k, d in kernels] + [(SPIN, spin_us * self.speed)]
                    busy = sum(d for _, d in kernels) / self.speed
                    gap = max(0.0, step_us - busy) / len(kernels)
                for name, model_us in kernels:
                    t += gap
                    us = model_us / self.speed
                    if name == SPIN and us <= 0:
                        continue
                    if name:
                        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": rank, "tid": 7, "ts": t,
                                   "dur": us, "args": {"device": rank, "stream": 7}})
                    t += us
                for cat in ("user_annotation", "gpu_user_annotation"):
                    ev.append({"ph": "X", "cat": cat, "name": span, "pid": rank if cat != "user_annotation" else 100,
                               "tid": 7, "ts": start, "dur": t - start})
            if rank == 0:
                self._t = t + STEP_GAP_US
        self._count += 1

    def _flush(self) -> None:
        """Write the stage recorded so far, one file per rank (as SGLang's profiler stop does)."""
        cfg = self._cfg
        if cfg is None or self._stage is None:
            return
        out = Path(cfg["output_dir"])
        out.mkdir(parents=True, exist_ok=True)
        hw = self.plan.hardware
        suffix = f"-{self._stage}" if self._stage else ""
        prefix = f"{cfg['prefix']}-" if cfg["prefix"] else ""
        self._log(f"Stop profiling{suffix}...")
        for rank in range(self.tp):
            doc = {"schemaVersion": 1, "deviceProperties": [{"id": rank, "name": hw.gpu}],
                   "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": self.tp},
                   "traceName": "perfgate-sim", "traceEvents": self._events[rank]}
            path = out / f"{prefix}{cfg['id']}-TP-{rank}{suffix}.trace.json.gz"
            tmp = path.with_name(path.name + ".tmp")
            with gzip.open(tmp, "wt", compresslevel=1) as f:
                json.dump(doc, f)
            tmp.replace(path)
        cfg.setdefault("done", []).append(self._stage)
        self._log(f"Profiling done. Traces are saved to: {out}")
        self._stage = None
        self._events = []
