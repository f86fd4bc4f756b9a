"""What a launch does on the simulated box: resolve the flags like SGLang, decide whether and
where start-up fails, which all-reduce backend ends up in force, and how long every step takes.

Everything here is a pure function of (hardware file, flags, environment): no sockets, no
clocks, no globals. :func:`simulate_launch` is the entry point other code calls (the rules
themselves are :mod:`perfgate.sim.launch`, the plan and its cost model :mod:`perfgate.sim.plan`)::

    plan = simulate_launch("fixtures/sim/rtxpro6000-x8-pcie.toml",
                           {"tp-size": 8, "cuda-graph-max-bs-decode": 128}, {})
    plan.failure            # None, or Failure(category=..., message=..., exit_code=...)
    plan.warnings           # SGLang warning texts, in log order
    plan.decode_tok_s(1)    # per-request decode tok/s at concurrency 1 (the true rate)

Rules are generic over SM, interconnect, installed packages, stack versions, flags and env
(never over variant names); the numbers come from the hardware file's ``[cost]`` table.

Cost model (per forward pass of the target over ``T`` tokens; ms)::

    compute  = (dense_ms + expert_ms * distinct_experts(T) + token_ms * T) * count / tp
    comm     = layers * allreduces_per_layer * allreduce(T * hidden * 2 bytes)   [backend in force]
    penalty  = graph_pool_us_per_bs * decode_max_bs / 1000 + mem_pressure_ms * mem_fraction_static
    eager    = layers * eager_ms_per_layer      (only without a decode cuda graph)

``distinct_experts(T) = E (1 - (1 - k/E)^T)`` (weight reads of a MoE grow with the experts the
batch touches). A decode step of B requests is one forward over B tokens (padded to the
captured graph batch size); a speculative cycle is ``num_steps`` draft forwards plus one draft
extend plus a target verify over ``B * num_draft_tokens`` tokens; a request advances by the
accepted tokens of the cycle (mean: the acceptance length, capped at the draft tree).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from perfgate.sim.allreduce import CommSetup, NcclConfigError, nccl_model
from perfgate.sim.args import ParsedArgs, SglangArgError, flags_to_argv, parse_argv
from perfgate.sim.hardware import Hardware, load_hardware
from perfgate.sim.launch import LaunchState, allreduce, flags, memory, speculative
from perfgate.sim.launch.flags import A2A_MODULES
from perfgate.sim.launch.memory import graph_bs_list
from perfgate.sim.launch.tracebacks import CAPTURE_FRAMES, SGL, capture_fail, capture_failed_hint, sched_fail
from perfgate.sim.plan import PHASES, Failure, LaunchPlan, LogLine, MemoryPlan, SpecSetup, distinct_experts

__all__ = [
    "Failure", "LaunchPlan", "LogLine", "MemoryPlan", "SpecSetup", "simulate_launch", "plan_from_args",
    "graph_bs_list", "capture_failed_hint", "distinct_experts", "PHASES",
]


def resolve(b: LaunchState) -> Failure | None:
    """The main process's argument resolution, in SGLang's order (the first failure ends it)."""
    failure = flags.resolve_basics(b) or speculative.resolve_flags(b)
    if failure is not None:
        return failure
    memory.resolve_defaults(b)
    flags.resolve_backends(b)
    allreduce.resolve_fusion(b)
    memory.resolve_fraction(b)
    return None


def launch(b: LaunchState) -> LaunchPlan:
    """Resolve the arguments, then start the scheduler: distributed init, weights, model init, KV cache, graphs."""
    failure = resolve(b)
    if failure is not None:
        return b.plan(failure)
    a, hw, env = b.a, b.hw, b.env
    tp = int(a["tp_size"])
    attn_dp = int(a.get("attn_dp_size") or 1) > 1 or bool(a.get("enable_dp_attention"))
    dp_mult = 1 if attn_dp else int(a["dp_size"] or 1)
    needed = tp * int(a.get("pp_size") or 1) * dp_mult + int(a.get("base_gpu_id") or 0)
    algo = a.get("speculative_algorithm")
    spec = speculative.setup(b) if algo else None
    a2a = a.get("moe_a2a_backend") or "none"
    b.known.update(spec=spec, a2a_backend=a2a)

    # distributed init -------------------------------------------------------------
    if needed > hw.count:
        return b.plan(sched_fail(
            "config-error", "distributed",
            [(f"{SGL}/distributed/bootstrap.py", 214, "init_parallel_runtime", "torch.cuda.set_device(b.gpu_id)")],
            "torch.AcceleratorError: CUDA error: invalid device ordinal",
            f"GPU {needed - 1} requested, but the box has {hw.count} GPUs (tp_size={tp}, "
            f"base_gpu_id={a.get('base_gpu_id') or 0}).",
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."))
    try:
        nccl = nccl_model(hw.cost, interconnect=hw.interconnect, nvswitch=hw.nvswitch, env=env,
                          symm_mem=bool(a.get("enable_symm_mem")))
    except NcclConfigError as e:
        return b.plan(sched_fail(
            "nccl-error", "distributed",
            [(f"{SGL}/distributed/parallel_state.py", 1530, "init_distributed_environment",
              "torch.distributed.barrier(device_ids=[local_rank])")],
            f"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            f"ProcessGroupNCCL.cpp:3356, invalid usage (run with NCCL_DEBUG=WARN for details), "
            f"NCCL version {hw.version('nccl') or 'unknown'}",
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
            f"Last error:\n{e}"))
    if a.get("enable_symm_mem") and env.get("SGLANG_SYMM_MEM_PREALLOC_GB_SIZE") is None:
        b.env["SGLANG_SYMM_MEM_PREALLOC_GB_SIZE"] = "4"
    backends = allreduce.backends(b, tp) if tp > 1 else []

    # load weights -------------------------------------------------------------------
    mem = memory.memory_plan(b, spec)
    b.known["memory"] = mem
    if mem.weights_gb + mem.draft_weights_gb > hw.memory_gb - 1.0:
        need = mem.weights_gb + mem.draft_weights_gb - (hw.memory_gb - 1.0)
        return b.plan(sched_fail(
            "oom", "load",
            [(f"{SGL}/model_executor/model_runner.py", 1012, "load_model", "b.model = b.loader.load_model("),
             (f"{SGL}/model_loader/loader.py", 640, "load_weights_and_postprocess", "model.load_weights(weights)")],
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {max(0.5, need):.2f} GiB. "
            f"GPU 0 has a total capacity of {hw.memory_gb:.2f} GiB of which 0 bytes is free. "
            f"Including non-PyTorch memory, this process has {hw.memory_gb - 0.5:.2f} GiB memory in use."))
    if a2a in A2A_MODULES and A2A_MODULES[a2a] not in hw.installed:
        mod = A2A_MODULES[a2a]
        return b.plan(sched_fail(
            "missing-dependency", "load",
            [(f"{SGL}/layers/moe/token_dispatcher/{a2a}.py", 31, "<module>", f"import {mod}")],
            f"ModuleNotFoundError: No module named '{mod}'"))

    # model init (after weights) -----------------------------------------------------
    fusion = allreduce.fusion(b, tp)
    if isinstance(fusion, Failure):
        return b.plan(fusion)
    if a2a in ("deepep", "deepep_v2") and (hw.interconnect != "nvlink" or not hw.p2p):
        return b.plan(sched_fail(
            "assertion", "model_init",
            [(f"{SGL}/layers/moe/token_dispatcher/deepep.py", 118, "get_deepep_buffer",
              "cls._buffer = Buffer(group, num_nvl_bytes, num_rdma_bytes, low_latency_mode=low_latency_mode,"),
             ("/usr/local/lib/python3.12/dist-packages/deep_ep/buffer.py", 94, "__init__",
              "b.runtime.sync(device_ids, ipc_handles, root_unique_id)")],
            "AssertionError: DeepEP intranode buffer requires NVLink peer access between all "
            f"{tp} ranks (found a {hw.interconnect.upper()}-only topology)"))

    # KV cache -------------------------------------------------------------------------
    if mem.kv_gb < float(hw.cost["min_kv_gb"]):
        return b.plan(sched_fail(
            "oom", "kv_cache",
            [(f"{SGL}/model_executor/model_runner.py", 1633, "init_memory_pool", "b.pool_config = MemoryPoolConfig("),
             (f"{SGL}/model_executor/pool_configurator.py", 77, "__post_init__", "raise RuntimeError(")],
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: mem_fraction_static={a['mem_fraction_static']}"))
    if a.get("max_running_requests") is None:
        a["max_running_requests"] = max(1, min(4096, mem.kv_tokens // 2))

    graph_bs: tuple[int, ...] = ()
    if a["cuda_graph_backend_decode"] != "disabled":
        graph_bs = graph_bs_list(int(a["cuda_graph_max_bs_decode"]), speculative=spec is not None,
                                 explicit=a.get("cuda_graph_bs_decode"))
    comm = CommSetup(world=tp, backends=tuple(backends), nccl=nccl,
                     fusion_saving_us=float(hw.cost["fusion_saving_us"]) if fusion else 0.0)
    ar_name = comm.allreduce(hw.model.hidden * 2)[1]
    b.known.update(comm=comm, decode_graph_bs=graph_bs, fusion_backend=fusion or None,
                      allreduce_backend_name=ar_name)

    # memory too tight outside the static pool: CUDA OOM while capturing / warming up
    if mem.headroom_gb < float(hw.cost["activation_gb"]):
        free_mib = max(0.0, mem.headroom_gb) * 1024
        oom = (f"CUDA out of memory. Tried to allocate {float(hw.cost['activation_gb']) / 2:.2f} GiB. "
               f"GPU 0 has a total capacity of {hw.memory_gb:.2f} GiB of which {free_mib:.2f} MiB is free.")
        if a["cuda_graph_backend_decode"] != "disabled":
            return b.plan(capture_fail(b.version, CAPTURE_FRAMES, oom, "oom"))
        return b.plan(sched_fail(
            "oom", "cuda_graph",
            [(f"{SGL}/model_executor/model_runner.py", 2190, "kernel_warmup", "b._dummy_run(batch_size=bs)")],
            f"torch.OutOfMemoryError: {oom}"))

    # NCCL Tree captured into a full cuda graph on a PCIe-only box with > 2 GPUs
    if (a["cuda_graph_backend_decode"] == "full" and tp > 2 and hw.interconnect == "pcie"
            and "tree" in nccl.algos and ar_name.startswith("nccl")):
        return b.plan(capture_fail(
            b.version, CAPTURE_FRAMES,
            "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error "
            f"(run with NCCL_DEBUG=INFO for details), NCCL version {hw.version('nccl') or 'unknown'}\n"
            "ncclUnhandledCudaError: Call to CUDA function failed.\n"
            "Last error:\n"
            "Cuda failure 'operation not permitted when stream is capturing'",
            "cuda-graph-capture"))

    return b.plan(None)


def plan_from_args(hardware: Hardware, parsed: ParsedArgs, env: Mapping[str, str]) -> LaunchPlan:
    """The plan of an already-parsed command line (what ``python -m perfgate.sim`` uses)."""
    b = LaunchState(hardware, hardware.sglang_version, parsed.fields, env)
    for text in parsed.deprecations:
        b.warn("args", text)
    return launch(b)


def simulate_launch(hardware: Hardware | str | Path, flags: Mapping[str, object],
                    env: Mapping[str, str] | None = None, *,
                    stack_overrides: Mapping[str, str] | None = None) -> LaunchPlan:
    """What launching SGLang with ``flags`` and ``env`` on ``hardware`` does (pure; no I/O but the file).

    ``flags`` use ServerConfig's convention (``{"tp-size": 8, "disable-custom-all-reduce": True}``;
    leading dashes and underscores are accepted). Without ``model-path`` the hardware file's
    model name is used. An unknown or (for this SGLang version) removed flag gives a plan whose
    failure has category ``bad-flag`` and exit code 2.
    """
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    if stack_overrides:
        hw = hw.with_stack(stack_overrides)
    f = dict(flags)
    if not any(k.lstrip("-").replace("_", "-") in ("model-path", "model") for k in f):
        f["model-path"] = hw.model.name
    try:
        parsed = parse_argv(flags_to_argv(f), hw.sglang_version, sim_options=False)
    except SglangArgError as e:
        failure = Failure(category="bad-flag", message=f"sglang serve: error: {e.message}", exit_code=2, phase="args")
        return LaunchPlan(hardware=hw, version=hw.sglang_version, args={}, env=dict(env or {}),
                          failure=failure, log=(), _cost=hw.cost)
    return plan_from_args(hw, parsed, dict(env or {}))
