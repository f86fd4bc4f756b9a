"""The simulated box: GPUs, software stack, served model and cost constants, from a TOML file.

The hardware file is the only source of truth the simulator has (see ``fixtures/sim/*.toml``
for documented examples). Sections:

``[hardware]``  gpu, count, sm ("12.0"), memory_gb, interconnect ("pcie" | "nvlink"), driver,
                optional ``nvswitch`` (NVLS multicast, NVLink boxes) and ``p2p`` (default true).
``[stack]``     versions (cuda, torch, nccl, sglang, sgl_kernel, flashinfer, ...) and
                ``installed``: optional packages importable on the box (``deep_ep``, ``mscclpp``).
``[model]``     the served model as the cost model sees it.
``[drafter]``   speculative-decoding drafter: acceptance lengths and draft forward cost.
``[cost]``      calibration constants; anything left out takes the interconnect's default
                from :data:`DEFAULT_COST` (so a new box file can stay short).

Stack overrides (``--sim-stack`` / ``PERFGATE_SIM_STACK``) replace versions; a key that is not
a core stack key names an optional package (``mscclpp=0.7.0`` installs it, ``deep_ep=none``
removes it).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from perfgate.errors import ProfileSchemaError
from perfgate.versions import key_versions, parse_version

CORE_STACK_KEYS = ("cuda", "torch", "nccl", "sglang", "sgl_kernel", "flashinfer")
ABSENT_VALUES = frozenset({"none", "absent", "-", ""})

# Per-interconnect defaults of every cost constant (the box file overrides any of them).
# All-reduce latency of one backend / protocol, in microseconds, for a message of B bytes on
# n ranks:  base_us + per_peer_us * (n - 1) + B * traffic(n) / (gbps * 1000)
# with traffic(n) = 2 (n - 1) / n for ring-style backends (NCCL) and (n - 1) for one-shot
# backends (custom all-reduce, PCIe IPC, torch symmetric memory, MSCCL++ one-shot).
DEFAULT_COST: dict[str, dict[str, Any]] = {
    "pcie": {
        # compute of one forward pass over T tokens (ms, at tp = hardware count):
        #   dense_ms + expert_ms * distinct_experts(T) + token_ms * T
        "dense_ms": 1.0,
        "expert_ms": 0.12,
        "token_ms": 0.02,
        "graph_pool_us_per_bs": 2.5,  # per-step penalty per unit of decode cuda-graph max bs
        "graph_gb_per_bs": 0.004,  # graph pool memory per unit of max bs (GB per GPU)
        "mem_pressure_ms": 0.35,  # per-step penalty x mem_fraction_static
        "eager_ms_per_layer": 0.06,  # launch overhead per layer without a decode cuda graph
        "activation_gb": 4.0,  # activation + workspace memory needed outside the static pool
        "min_kv_gb": 1.0,  # below this KV budget: "Not enough memory"
        "spec_overhead_ms": 0.4,  # per speculative cycle bookkeeping (tree build, sampling)
        "ngram_lookup_ms": 0.5,  # per NGRAM cycle (CPU trie lookup)
        "fusion_saving_us": 6.0,  # FlashInfer all-reduce+RMSNorm fusion, per fused all-reduce
        "flashinfer_a2a_workspace_gb": 24.0,  # FlashInfer MoE A2A workspace (no MNNVL fabric)
        "deepep_buffer_gb": 3.0,
        "a2a_base_us": 40.0,  # one MoE dispatch or combine (DeepEP / FlashInfer A2A)
        "a2a_gbps": 5.0,
        "nccl": {
            "channels": 4,
            "ll": {"base_us": 4.0, "per_peer_us": 3.0, "gbps": 0.55},
            "simple": {"base_us": 15.0, "per_peer_us": 25.0, "gbps": 14.0},
            "tree_base_factor": 0.45,
            "tree_bw_factor": 0.5,
        },
        "custom_ar": {"base_us": 6.0, "per_peer_us": 2.0, "gbps": 10.0, "max_kb": 8192},
        "pcie_ipc": {"base_us": 10.0, "per_peer_us": 18.0, "gbps": 1.73, "max_kb": 4096},
        "mscclpp": {"base_us": 6.0, "per_peer_us": 4.0, "gbps": 1.2, "max_kb": 1024},
        "torch_symm_mem": {"base_us": 6.0, "per_peer_us": 3.0, "gbps": 2.0, "max_kb": 16384},
    },
    "nvlink": {
        "dense_ms": 3.0,
        "expert_ms": 0.09,
        "token_ms": 0.01,
        "graph_pool_us_per_bs": 0.5,
        "graph_gb_per_bs": 0.004,
        "mem_pressure_ms": 0.3,
        "eager_ms_per_layer": 0.04,
        "activation_gb": 4.0,
        "min_kv_gb": 1.0,
        "spec_overhead_ms": 0.3,
        "ngram_lookup_ms": 0.5,
        "fusion_saving_us": 3.0,
        "flashinfer_a2a_workspace_gb": 2.0,
        "deepep_buffer_gb": 2.0,
        "a2a_base_us": 12.0,
        "a2a_gbps": 120.0,
        "nccl": {
            "channels": 16,
            "ll": {"base_us": 4.0, "per_peer_us": 1.5, "gbps": 30.0},
            "ll128": {"base_us": 6.0, "per_peer_us": 2.0, "gbps": 150.0},
            "simple": {"base_us": 10.0, "per_peer_us": 3.0, "gbps": 350.0},
            "nvls": {"base_us": 9.0, "per_peer_us": 0.5, "gbps": 450.0},
            "tree_base_factor": 0.6,
            "tree_bw_factor": 0.7,
        },
        "custom_ar": {"base_us": 5.0, "per_peer_us": 0.5, "gbps": 150.0, "max_kb": 8192},
        "pcie_ipc": {"base_us": 8.0, "per_peer_us": 1.0, "gbps": 60.0, "max_kb": 4096},
        "mscclpp": {"base_us": 4.5, "per_peer_us": 0.5, "gbps": 160.0, "max_kb": 1024},
        "torch_symm_mem": {"base_us": 4.0, "per_peer_us": 0.3, "gbps": 200.0, "max_kb": 16384},
    },
}


def parse_stack_overrides(text: str | None) -> dict[str, str]:
    """``"flashinfer=0.8.0,cuda=13.1"`` -> ``{"flashinfer": "0.8.0", "cuda": "13.1"}`` (perfgate.versions.key_versions;
    a key given twice: the last); ValueError names an item that is not KEY=VERSION."""
    return {k: v for _, k, v in key_versions(text)}


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """The served model, as the cost model sees it."""

    name: str
    architecture: str
    attention: str  # "mla" | "mha"
    layers: int
    hidden: int
    allreduces_per_layer: int
    vocab: int
    experts: int
    experts_per_token: int
    weights_gb: float
    kv_bytes_per_token: int  # per GPU at tp = hardware count
    context_length: int


@dataclass(frozen=True, kw_only=True)
class DrafterSpec:
    """The speculative drafter: acceptance lengths and the cost of one draft forward pass."""

    eagle_acceptance: float  # EAGLE / EAGLE3 / NEXTN / STANDALONE
    ngram_acceptance: float
    layers: int
    forward_ms: float
    allreduces_per_forward: int
    weights_gb: float


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """One simulated box (see the module docstring for the file format)."""

    path: str
    gpu: str
    count: int
    sm: str
    memory_gb: float
    interconnect: str
    nvswitch: bool
    p2p: bool
    driver: str
    stack: Mapping[str, str]
    installed: frozenset[str]
    model: ModelSpec
    drafter: DrafterSpec
    cost: Mapping[str, Any] = field(repr=False)

    @property
    def sm_major(self) -> int:
        return parse_version(self.sm)[0]

    @property
    def sglang_version(self) -> str:
        return str(self.stack.get("sglang", "0.5.23"))

    def version(self, key: str) -> str | None:
        v = self.stack.get(key)
        return None if v is None else str(v)

    def describe(self) -> str:
        return f"{self.count}x {self.gpu} (SM {self.sm}, {self.memory_gb:g} GB, {self.interconnect})"

    def with_stack(self, overrides: Mapping[str, str]) -> Hardware:
        """A copy with stack versions replaced; non-core keys install / remove packages."""
        from dataclasses import replace

        stack = dict(self.stack)
        installed = set(self.installed)
        for k, v in overrides.items():
            if k in CORE_STACK_KEYS:
                stack[k] = v
            elif str(v).strip().lower() in ABSENT_VALUES:
                installed.discard(k)
                stack.pop(k, None)
            else:
                installed.add(k)
                stack[k] = v
        return replace(self, stack=stack, installed=frozenset(installed))


def _need(path: str, table: Mapping[str, Any], section: str, key: str, typ: type | tuple[type, ...]) -> Any:
    if key not in table:
        raise ProfileSchemaError(path, f"{section}.{key}", f"a {getattr(typ, '__name__', typ)}", None,
                                 fix=f"add `{key} = ...` to [{section}]")
    v = table[key]
    if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool:
        raise ProfileSchemaError(path, f"{section}.{key}", f"a {getattr(typ, '__name__', typ)}", v)
    return v


def load_hardware(path: str | Path, stack_overrides: Mapping[str, str] | None = None) -> Hardware:
    """Load and validate a hardware file; raise :class:`ProfileSchemaError` naming the bad key."""
    p = str(path)
    try:
        with open(p, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ProfileSchemaError(p, "<file>", "an existing hardware TOML file", "missing") from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileSchemaError(p, "<file>", "valid TOML", str(e)) from None

    hw = data.get("hardware")
    if not isinstance(hw, dict):
        raise ProfileSchemaError(p, "hardware", "a [hardware] table")
    num = (int, float)
    interconnect = _need(p, hw, "hardware", "interconnect", str)
    if interconnect not in DEFAULT_COST:
        raise ProfileSchemaError(p, "hardware.interconnect", "'pcie' or 'nvlink'", interconnect)
    sm = str(_need(p, hw, "hardware", "sm", (str, int, float)))
    if not parse_version(sm):
        raise ProfileSchemaError(p, "hardware.sm", "a compute capability like '12.0'", sm)

    stack_t = data.get("stack", {})
    if not isinstance(stack_t, dict):
        raise ProfileSchemaError(p, "stack", "a [stack] table", stack_t)
    installed = stack_t.get("installed", [])
    if not isinstance(installed, list) or not all(isinstance(x, str) for x in installed):
        raise ProfileSchemaError(p, "stack.installed", "a list of package names", installed)
    stack = {k: str(v) for k, v in stack_t.items() if k != "installed"}
    stack.setdefault("sglang", "0.5.23")

    m = data.get("model")
    if not isinstance(m, dict):
        raise ProfileSchemaError(p, "model", "a [model] table")
    hidden = _need(p, m, "model", "hidden", int)
    layers = _need(p, m, "model", "layers", int)
    model = ModelSpec(
        name=_need(p, m, "model", "name", str),
        architecture=str(m.get("architecture", "LlamaForCausalLM")),
        attention=str(m.get("attention", "mha")),
        layers=layers,
        hidden=hidden,
        allreduces_per_layer=_need(p, m, "model", "allreduces_per_layer", int),
        vocab=_need(p, m, "model", "vocab", int),
        experts=int(m.get("experts", 0)),
        experts_per_token=int(m.get("experts_per_token", 0)),
        weights_gb=float(m.get("weights_gb", 0.0)),
        kv_bytes_per_token=int(m.get("kv_bytes_per_token", layers * hidden // 4)),
        context_length=int(m.get("context_length", 131072)),
    )
    d = data.get("drafter", {})
    if not isinstance(d, dict):
        raise ProfileSchemaError(p, "drafter", "a [drafter] table", d)
    drafter = DrafterSpec(
        eagle_acceptance=float(d.get("eagle_acceptance", 2.0)),
        ngram_acceptance=float(d.get("ngram_acceptance", 1.5)),
        layers=int(d.get("layers", 1)),
        forward_ms=float(d.get("forward_ms", 0.7)),
        allreduces_per_forward=int(d.get("allreduces_per_forward", 3)),
        weights_gb=float(d.get("weights_gb", 3.0)),
    )
    cost_t = data.get("cost", {})
    if not isinstance(cost_t, dict):
        raise ProfileSchemaError(p, "cost", "a [cost] table", cost_t)
    cost = _deep_merge(DEFAULT_COST[interconnect], cost_t)

    return Hardware(
        path=p,
        gpu=_need(p, hw, "hardware", "gpu", str),
        count=_need(p, hw, "hardware", "count", int),
        sm=sm,
        memory_gb=float(_need(p, hw, "hardware", "memory_gb", num)),
        interconnect=interconnect,
        nvswitch=bool(hw.get("nvswitch", False)),
        p2p=bool(hw.get("p2p", True)),
        driver=str(hw.get("driver", "unknown")),
        stack=stack,
        installed=frozenset(installed),
        model=model,
        drafter=drafter,
        cost=cost,
    ).with_stack(dict(stack_overrides or {}))
