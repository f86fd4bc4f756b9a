"""Memory: SGLang's defaults by GPU memory, the static pool's fraction, the per-GPU budget."""

from __future__ import annotations

from perfgate.sim.launch import LaunchState
from perfgate.sim.plan import MemoryPlan, SpecSetup


def mem_defaults(mem_gb: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda graph max bs) by GPU memory (handle_gpu_memory_settings)."""
    if mem_gb < 20:
        return 2048, 8
    if mem_gb < 35:
        return 4096, 160 if tp >= 4 else 48
    if mem_gb < 60:
        return 4096, 160 if tp >= 4 else 32
    if mem_gb < 160:
        return 8192, 512 if tp >= 4 else 256
    return 16384, 512


def graph_bs_list(max_bs: int, *, speculative: bool, explicit: list[int] | None = None) -> tuple[int, ...]:
    """Decode cuda-graph batch sizes SGLang captures up to ``max_bs``."""
    if explicit:
        return tuple(sorted(set(b for b in explicit if b > 0)))
    if speculative:
        base = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 257, 8)) + list(range(272, 4097, 16))
    else:
        base = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 4097, 16))
    out = [b for b in base if b <= max_bs]
    if max_bs > 0 and (not out or out[-1] != max_bs):
        out.append(max_bs)
    return tuple(out)


def resolve_defaults(b: LaunchState) -> None:
    """Chunked prefill size and decode graph batch size by GPU memory (handle_gpu_memory_settings)."""
    a, hw = b.a, b.hw
    tp = int(a.get("tp_size") or 1)
    chunk, max_bs = mem_defaults(hw.memory_gb, tp)
    if a.get("chunked_prefill_size") is None:
        a["chunked_prefill_size"] = chunk
    if a.get("cuda_graph_max_bs_decode") is None:
        if a.get("max_running_requests") is not None:
            max_bs = min(max_bs, int(a["max_running_requests"]))
        a["cuda_graph_max_bs_decode"] = max_bs


def resolve_fraction(b: LaunchState) -> None:
    """``mem_fraction_static`` when not given: what is left after SGLang's reserve."""
    a, hw = b.a, b.hw
    tp = int(a.get("tp_size") or 1)
    a2a = a.get("moe_a2a_backend") or "none"
    if a.get("mem_fraction_static") is None:
        graph_gb = float(hw.cost["graph_gb_per_bs"]) * int(a["cuda_graph_max_bs_decode"])
        reserved = (0.5 + 1.5 * int(a["chunked_prefill_size"]) / 8192 + tp * int(a.get("pp_size") or 1) / 8
                    + graph_gb)
        if a2a in ("deepep", "deepep_v2"):
            reserved += float(hw.cost["deepep_buffer_gb"])
        if hw.memory_gb > 60:
            reserved = max(reserved, 10.0)
        a["mem_fraction_static"] = round((hw.memory_gb - reserved) / hw.memory_gb, 3)
    a["mem_fraction_static"] = float(a["mem_fraction_static"])
    return None


def memory_plan(b: LaunchState, spec: SpecSetup | None) -> MemoryPlan:
    """The per-GPU memory budget (GB) of the launch."""
    a, hw = b.a, b.hw
    tp = int(a["tp_size"])
    m = hw.model
    weights = m.weights_gb / max(1, tp)
    draft_w = hw.drafter.weights_gb if spec is not None and spec.algorithm != "NGRAM" else 0.0
    mf = float(a["mem_fraction_static"])
    reserved = 0.0
    a2a = a.get("moe_a2a_backend") or "none"
    if a2a in ("flashinfer", "flashinfer_megamoe"):
        reserved += float(hw.cost["flashinfer_a2a_workspace_gb"])
    if a2a in ("deepep", "deepep_v2"):
        reserved += float(hw.cost["deepep_buffer_gb"])
    kv_gb = mf * hw.memory_gb - weights - draft_w - reserved
    kv_bytes = float(m.kv_bytes_per_token)
    if m.attention != "mla":
        kv_bytes = kv_bytes * hw.count / max(1, tp)
    if a.get("kv_cache_dtype", "auto") not in ("auto", "bf16", "bfloat16"):
        kv_bytes /= 2
    if spec is not None and spec.algorithm != "NGRAM":
        kv_bytes *= 1.0 + hw.drafter.layers / max(1, m.layers)
    kv_tokens = int(max(0.0, kv_gb) * 1e9 / max(1.0, kv_bytes))
    if a.get("max_total_tokens"):
        kv_tokens = min(kv_tokens, int(a["max_total_tokens"]))
    graph_gb = 0.0
    if a["cuda_graph_backend_decode"] != "disabled":
        graph_gb = float(hw.cost["graph_gb_per_bs"]) * int(a["cuda_graph_max_bs_decode"])
        if spec is not None:
            graph_gb *= 2.5  # verify + draft decode + draft extend graphs
    headroom = hw.memory_gb * (1.0 - mf) - graph_gb
    return MemoryPlan(total_gb=hw.memory_gb, mem_fraction_static=mf, weights_gb=weights,
                      draft_weights_gb=draft_w, reserved_gb=reserved, kv_gb=kv_gb, kv_tokens=kv_tokens,
                      graph_gb=graph_gb, headroom_gb=headroom)

