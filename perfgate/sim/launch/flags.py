"""Arguments: SGLang's defaults, its launch-time package checks, the CUDA-graph, attention and MoE
all-to-all backends it picks."""

from __future__ import annotations

from perfgate.sim.launch import LaunchState, sm_probe, truthy
from perfgate.sim.launch.tracebacks import SGL, main_fail
from perfgate.sim.plan import Failure
from perfgate.versions import version_at_least

A2A_DISPLAY = {"deepep": "DeepEP", "deepep_v2": "DeepEP", "flashinfer": "FlashInfer", "mooncake": "Mooncake",
               "nixl": "NIXL", "mori": "MORI", "megamoe": "MegaMoE", "pplx": "PPLX",
               "flashinfer_megamoe": "FlashInfer MegaMoE", "ascend_fuseep": "Ascend FuseEP"}
A2A_MODULES = {"deepep": "deep_ep", "deepep_v2": "deep_ep", "mooncake": "mooncake", "nixl": "nixl",
               "mori": "mori", "pplx": "pplx_kernels"}
# launch-time package checks (assert_pkg_version in sglang/srt/entrypoints/engine.py), by SGLang version
MIN_PKG_VERSIONS: tuple[tuple[str, str, str, str], ...] = (
    # (from sglang version, stack key, package name, minimum)
    ("0.5.23", "flashinfer", "flashinfer_python", "0.7.2"),
    ("0.5.23", "sgl_kernel", "sglang-kernel", "0.4.9"),
)


def resolve_basics(b: LaunchState) -> Failure | None:
    """Paths and defaults, the minimum package versions of this SGLang, ``--mem-fraction-static``'s range."""
    a, hw = b.a, b.hw
    a.setdefault("model_path", hw.model.name)
    a["tokenizer_path"] = a.get("tokenizer_path") or a["model_path"]
    a["served_model_name"] = a.get("served_model_name") or a["model_path"]
    a["context_length"] = a.get("context_length") or hw.model.context_length
    if a.get("cuda_graph_max_bs") is not None and a.get("cuda_graph_max_bs_decode") is None:
        a["cuda_graph_max_bs_decode"] = a["cuda_graph_max_bs"]
    a.pop("cuda_graph_max_bs", None)
    a["disable_cuda_graph"] = bool(a.get("disable_cuda_graph"))
    if a.get("enable_flashinfer_allreduce_fusion") and not a.get("flashinfer_allreduce_fusion_backend"):
        a["flashinfer_allreduce_fusion_backend"] = "auto"

    for key, stack_key, pkg, minimum in MIN_PKG_VERSIONS:
        if not version_at_least(b.version, key) or truthy(b.env.get("SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK")):
            continue
        have = hw.version(stack_key)
        if have is not None and not version_at_least(have, minimum):
            return main_fail(
                "missing-dependency",
                [(f"{SGL}/entrypoints/engine.py", 905, "_set_envs_and_config",
                  f'assert_pkg_version("{pkg}", "{minimum}", "Please reinstall the latest version with "'),
                 (f"{SGL}/utils/common.py", 1032, "assert_pkg_version", "raise Exception(")],
                f"Exception: {pkg} is installed with version {have}, which is less than the minimum required "
                f"version {minimum}. Please reinstall the latest version with `pip install {pkg} --force-reinstall`",
            )

    mf = a.get("mem_fraction_static")
    if mf is not None and not (0.0 < float(mf) < 1.0):
        return main_fail("config-error", [(f"{SGL}/arg_groups/memory_hook.py", 88, "handle_gpu_memory_settings",
                                            "raise ValueError(")],
                          f"ValueError: mem_fraction_static must be in (0, 1), got {mf}")
    return None


def resolve_backends(b: LaunchState) -> None:
    """CUDA-graph backends (parse_cuda_graph_config), the attention backend, MoE all-to-all (ep = tp)."""
    a, hw = b.a, b.hw
    tp = int(a.get("tp_size") or 1)
    algo = a.get("speculative_algorithm")
    dec = a.get("cuda_graph_backend_decode") or "full"
    pre = a.get("cuda_graph_backend_prefill") or "breakable"
    if a["disable_cuda_graph"]:
        dec = pre = "disabled"
    if a.get("disable_decode_cuda_graph"):
        dec = "disabled"
    if a.get("disable_prefill_cuda_graph"):
        pre = "disabled"

    # --- attention backend
    probe = sm_probe(hw)
    if not a.get("attention_backend"):
        spec_ok = not algo or int(a.get("speculative_eagle_topk") or 1) == 1
        if hw.model.attention == "mla":
            ab = "fa3" if probe["sm90"] else ("flashinfer" if probe["sm100"] else "triton")
        elif probe["sm90"] and spec_ok:
            ab = "fa3"
        elif probe["sm100"] and spec_ok:
            ab = "trtllm_mha"
        else:
            ab = "flashinfer"
        a["attention_backend"] = ab
        b.info("validate", f"Attention backend not specified. Use {ab} backend by default.")
    if a["attention_backend"] in ("torch_native", "flex_attention"):
        dec = pre = "disabled"
    a["sampling_backend"] = a.get("sampling_backend") or "flashinfer"

    # --- MoE all-to-all backends force ep = tp
    a2a = a.get("moe_a2a_backend") or "none"
    if a2a not in ("none", "ascend_tp"):
        old = int(a.get("ep_size") or 1)
        a["ep_size"] = tp
        b.info("validate", f"{A2A_DISPLAY.get(a2a, a2a)} MoE is enabled. The expert parallel size is "
                              f"adjusted from {old} to the tensor parallel size [{tp}].")
        if a2a in ("deepep", "deepep_v2") and a.get("deepep_mode") == "normal":
            dec = "disabled"
    a["cuda_graph_backend_decode"], a["cuda_graph_backend_prefill"] = dec, pre

