"""All-reduce: which backends SGLang ends up with (custom all-reduce, PCIe IPC, MSCCL++, torch
symmetric memory, else NCCL) and the FlashInfer all-reduce fusion in force, with the warnings it logs."""

from __future__ import annotations

from perfgate.sim.allreduce import Backend, backend_from_cost
from perfgate.sim.launch import LaunchState, sm_probe, truthy
from perfgate.sim.launch.tracebacks import SGL, sched_fail
from perfgate.sim.plan import Failure
from perfgate.versions import version_at_least

# _FLASHINFER_ALLREDUCE_FUSION_ARCHS (architecture name prefixes)
FUSION_ARCH_PREFIXES = (
    "DeepseekV3", "DeepseekV32", "DeepseekV4", "GptOss", "GlmMoeDsa", "Glm4Moe", "MistralLarge3",
    "Qwen3Moe", "Qwen3VLMoe", "Qwen3Next", "Qwen4Exp", "KimiK25", "Qwen3_5", "InternS2Preview",
    "NemotronH",
)
SUPPORTED_CA_WORLD = (2, 4, 6, 8)
TORCH_SYMM_MEM_WORLD = {9: (2, 4, 6, 8), 10: (2, 4, 6, 8)}  # TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES keys


def resolve_fusion(b: LaunchState) -> None:
    """FlashInfer all-reduce fusion: auto-enabled for the architectures SGLang lists, or forcibly disabled."""
    a, hw = b.a, b.hw
    tp = int(a.get("tp_size") or 1)
    probe = sm_probe(hw)
    a2a = a.get("moe_a2a_backend") or "none"
    attn_dp = int(a.get("attn_dp_size") or 1) > 1 or bool(a.get("enable_dp_attention"))
    if (not a.get("flashinfer_allreduce_fusion_backend")
            and any(hw.model.architecture.startswith(x) for x in FUSION_ARCH_PREFIXES)
            and (probe["sm90"] or probe["sm100"]) and tp > 1 and not attn_dp
            and (int(a.get("nnodes") or 1) == 1 or probe["sm100"]) and a2a == "none"):
        a["flashinfer_allreduce_fusion_backend"] = "auto"
        b.info("validate", f"Auto-enabling FlashInfer AllReduce Fusion (auto) for {hw.model.architecture}")
    if a.get("enforce_disable_flashinfer_allreduce_fusion") and a.get("flashinfer_allreduce_fusion_backend"):
        a["flashinfer_allreduce_fusion_backend"] = None
        b.info("validate", "FlashInfer allreduce fusion is forcibly disabled via "
                              "--enforce-disable-flashinfer-allreduce-fusion.")
    a["enable_flashinfer_allreduce_fusion"] = bool(a.get("flashinfer_allreduce_fusion_backend"))


def backends(b: LaunchState, tp: int) -> list[Backend]:
    """Which non-NCCL backends SGLang ends up with, logging its warnings (distributed init)."""
    a, hw, env = b.a, b.hw, b.env
    out: list[Backend] = []
    ph = "distributed"
    nvlink = hw.interconnect == "nvlink"
    if not a.get("disable_custom_all_reduce"):
        classes = ["CustomAllReduceV2", "CustomAllreduce"]
        if str(env.get("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", "1")).strip().lower() in ("0", "false", "no"):
            classes = ["CustomAllreduce"]
        for cls in classes:
            if tp not in SUPPORTED_CA_WORLD:
                b.warn(ph, f"{cls} is disabled due to an unsupported world size: {tp}. Supported world "
                              f"sizes: {list(SUPPORTED_CA_WORLD)}. To silence this warning, specify "
                              "disable_custom_all_reduce=True explicitly.")
                continue
            if a.get("enable_p2p_check") and not hw.p2p:
                b.warn(ph, f"{cls} is disabled because your platform lacks GPU P2P capability or P2P test "
                              "failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.")
                continue
            if not nvlink and (tp > 2 or cls == "CustomAllReduceV2"):
                b.warn(ph, f"{cls} is disabled because it's not supported on more than two PCIe-only GPUs. "
                              "To silence this warning, specify disable_custom_all_reduce=True explicitly.")
                continue
            out.append(backend_from_cost("custom_ar", hw.cost))
            break
    if truthy(env.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE")):
        if a.get("dtype", "auto") in ("auto", "bfloat16"):
            out.append(backend_from_cost("pcie_ipc", hw.cost))
            b.info(ph, f"FlashInfer PCIe IPC all-reduce initialized (world_size={tp}, dtype=bfloat16).")
        else:
            b.warn(ph, "FlashInfer PCIe IPC all-reduce only supports bfloat16; falling back.")
    if a.get("enable_mscclpp"):
        if "mscclpp" in hw.installed:
            out.append(backend_from_cost("mscclpp", hw.cost))
        else:
            b.warn(ph, "PyMscclpp is unavailable because its dependencies failed to import: "
                          "No module named 'mscclpp'")
    if a.get("enable_torch_symm_mem"):
        major = hw.sm_major
        if major not in TORCH_SYMM_MEM_WORLD:
            b.warn(ph, f"TorchSymmMemCommunicator: Device capability {major} not supported, "
                          "communicator is not available.")
        elif tp not in TORCH_SYMM_MEM_WORLD[major]:
            b.warn(ph, f"TorchSymmMemCommunicator: World size {tp} not supported, "
                          "communicator is not available.")
        elif not (nvlink and hw.nvswitch):
            b.warn(ph, "TorchSymmMemCommunicator: torch symmetric memory multicast operations are not supported.")
        else:
            out.append(backend_from_cost("torch_symm_mem", hw.cost))
    return out


def fusion(b: LaunchState, tp: int) -> str | Failure | None:
    """The FlashInfer all-reduce fusion backend in force, None, or the init failure."""
    a, hw = b.a, b.hw
    backend = a.get("flashinfer_allreduce_fusion_backend")
    if not backend or tp <= 1:
        return None
    probe = sm_probe(hw)
    fi_sm120 = probe["sm120"] and version_at_least(hw.version("flashinfer"), "0.8.0")
    frames = [(f"{SGL}/model_executor/model_runner.py", 905, "initialize",
               "b.flashinfer_comm_fusion = init_flashinfer_allreduce_fusion(b.server_args)"),
              (f"{SGL}/layers/flashinfer_comm_fusion.py", 141, "_resolve_backend", "raise ValueError(")]
    if not (probe["sm90"] or probe["sm100"] or fi_sm120):
        return sched_fail("unsupported-arch", "model_init", frames,
                           "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.")
    if backend == "auto":
        backend = "mnnvl" if probe["sm100"] else "trtllm"
    if backend == "cutedsl" and not probe["blackwell"]:
        return sched_fail(
            "unsupported-arch", "model_init", frames,
            "ValueError: FlashInfer allreduce fusion with the cutedsl backend requires a Blackwell system.")
    if backend == "trtllm" and int(a.get("nnodes") or 1) > 1:
        return sched_fail("config-error", "model_init", frames,
                           "ValueError: FlashInfer allreduce fusion with the trtllm backend supports single-node only.")
    if backend == "mnnvl" and not (hw.interconnect == "nvlink" and probe["sm100"]):
        b.warn("cuda_graph", "Failed to initialize FlashInfer workspace (backend=mnnvl): MNNVL fabric "
                                "handles are not supported on this system. Disabling flashinfer allreduce "
                                "fusion permanently.")
        return None
    b.info("cuda_graph", f"FlashInfer AllReduce Fusion enabled and workspace initialized: backend={backend}, "
                            f"rank=0, world_size={tp}")
    return backend


