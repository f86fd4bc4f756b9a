"""What a launch does on the simulated box: resolve the flags like SGLang, decide whether and
where start-up fails, which all-reduce backend ends up in force, and how long every step takes.

Everything here is a pure function of (hardware file, flags, environment): no sockets, no
clocks, no globals. :func:`simulate_launch` is the entry point other code calls::

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.errors import ServerExitedError
from perfgate.sim.allreduce import Backend, CommSetup, NcclConfigError, backend_from_cost, nccl_model
from perfgate.sim.args import ParsedArgs, SglangArgError, flags_to_argv, parse_argv
from perfgate.sim.hardware import Hardware, load_hardware
from perfgate.versions import version_at_least

# --------------------------------------------------------------------------- data tables

SPEC_ALGOS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DSPARK", "UNO")
# architectures whose auto speculative params are (steps 5, topk 4, draft tokens 8); others (3, 1, 4)
WIDE_SPEC_ARCHS = ("LlamaForCausalLM", "Grok1ForCausalLM")
# _FLASHINFER_ALLREDUCE_FUSION_ARCHS (architecture name prefixes)
FUSION_ARCH_PREFIXES = (
    "DeepseekV3", "DeepseekV32", "DeepseekV4", "GptOss", "GlmMoeDsa", "Glm4Moe", "MistralLarge3",
    "Qwen3Moe", "Qwen3VLMoe", "Qwen3Next", "Qwen4Exp", "KimiK25", "Qwen3_5", "InternS2Preview",
    "NemotronH",
)
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
SUPPORTED_CA_WORLD = (2, 4, 6, 8)
TORCH_SYMM_MEM_WORLD = {9: (2, 4, 6, 8), 10: (2, 4, 6, 8)}  # TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES keys
SGL = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
PHASES = ("args", "validate", "distributed", "load", "model_init", "kv_cache", "cuda_graph", "serve")


def _truthy(v: str | None) -> bool:
    return v is not None and str(v).strip().lower() in ("1", "true", "yes", "on")


# --------------------------------------------------------------------------- results


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
        distinct = 0.0
        if m.experts > 0 and m.experts_per_token > 0:
            distinct = m.experts * (1.0 - (1.0 - m.experts_per_token / m.experts) ** tokens)
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


# --------------------------------------------------------------------------- helpers


def _tb(frames: list[tuple[str, int, str, str]], *exc_lines: str) -> tuple[str, ...]:
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines.append(f'  File "{path}", line {line}, in {func}')
        lines.append(f"    {code}")
    lines.extend(exc_lines)
    return tuple(lines)


_SCHED_FRAMES = [
    (f"{SGL}/managers/scheduler.py", 3254, "run_scheduler_process",
     "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
    (f"{SGL}/managers/scheduler.py", 412, "__init__", "self.init_model_worker()"),
    (f"{SGL}/managers/tp_worker.py", 248, "__init__", "self.model_runner = ModelRunner("),
]
_MAIN_FRAMES = [
    ("/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py", 71, "<module>", "run_server(server_args)"),
    (f"{SGL}/server_args.py", 1120, "resolve_once", "self._handle_speculative_decoding()"),
]


def _sched_fail(category: str, phase: str, frames: list[tuple[str, int, str, str]], *exc: str) -> Failure:
    return Failure(category=category, message=exc[0], exit_code=-9, phase=phase,
                   traceback=_tb(_SCHED_FRAMES + frames, *exc), in_scheduler=True)


def _main_fail(category: str, frames: list[tuple[str, int, str, str]], *exc: str) -> Failure:
    return Failure(category=category, message=exc[0], exit_code=1, phase="validate",
                   traceback=_tb(_MAIN_FRAMES[:1] + frames, *exc))


def capture_failed_hint(version: str) -> str:
    """CUDA_GRAPH_CAPTURE_FAILED_MSG of the simulated SGLang version."""
    if version_at_least(version, "0.5.18"):
        return ("Possible solutions:\n"
                "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
                "3. disable CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge performance loss)\n"
                "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")
    return ("Possible solutions:\n"
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
            "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
            "3. disable torch compile by not using --enable-torch-compile\n"
            "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
            "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")


def _capture_fail(version: str, phase_frames: list[tuple[str, int, str, str]], err: str, category: str) -> Failure:
    hint = capture_failed_hint(version).split("\n")
    return _sched_fail(category, "cuda_graph", phase_frames,
                       f"Exception: Capture cuda graph failed: {err}", *hint)


_CAPTURE_FRAMES = [
    (f"{SGL}/model_executor/model_runner.py", 2210, "init_device_graphs", "self.graph_runner = DecodeCudaGraphRunner(self)"),
    (f"{SGL}/model_executor/runner/decode_cuda_graph_runner.py", 388, "__init__",
     'raise Exception(f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")'),
]


def _mem_defaults(mem_gb: float, tp: int) -> tuple[int, int]:
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


def _sm_probe(hw: Hardware) -> dict[str, bool]:
    cuda = hw.version("cuda") or "0"
    major = hw.sm_major
    return {
        "sm90": major == 9 and version_at_least(cuda, "12.3"),
        "sm100": major == 10 and version_at_least(cuda, "12.8"),
        "sm120": major == 12 and version_at_least(cuda, "12.8"),
        "blackwell": major in (10, 11, 12),
    }


# --------------------------------------------------------------------------- the launch


class _Builder:
    def __init__(self, hw: Hardware, version: str, fields: Mapping[str, Any], env: Mapping[str, str]) -> None:
        self.hw = hw
        self.version = version
        self.a: dict[str, Any] = dict(fields)
        self.env = dict(env)
        self.log: list[LogLine] = []
        self.known: dict[str, Any] = {}  # plan parts known so far (failure plans carry them too)

    def info(self, phase: str, text: str) -> None:
        self.log.append(LogLine(phase=phase, text=text))

    def warn(self, phase: str, text: str) -> None:
        self.log.append(LogLine(phase=phase, text=text, warning=True))

    def plan(self, failure: Failure | None, **kw: Any) -> LaunchPlan:
        parts = {**self.known, **kw}
        return LaunchPlan(hardware=self.hw, version=self.version, args=dict(self.a), env=dict(self.env),
                          failure=failure, log=tuple(self.log), _cost=self.hw.cost, **parts)

    # ------------------------------------------------------------------ resolution (main process)
    def resolve(self) -> Failure | None:
        a, hw = self.a, self.hw
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
            if not version_at_least(self.version, key) or _truthy(self.env.get("SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK")):
                continue
            have = hw.version(stack_key)
            if have is not None and not version_at_least(have, minimum):
                return _main_fail(
                    "missing-dependency",
                    [(f"{SGL}/entrypoints/engine.py", 905, "_set_envs_and_config",
                      f'assert_pkg_version("{pkg}", "{minimum}", "Please reinstall the latest version with "'),
                     (f"{SGL}/utils/common.py", 1032, "assert_pkg_version", "raise Exception(")],
                    f"Exception: {pkg} is installed with version {have}, which is less than the minimum required "
                    f"version {minimum}. Please reinstall the latest version with `pip install {pkg} --force-reinstall`",
                )

        mf = a.get("mem_fraction_static")
        if mf is not None and not (0.0 < float(mf) < 1.0):
            return _main_fail("config-error", [(f"{SGL}/arg_groups/memory_hook.py", 88, "handle_gpu_memory_settings",
                                                "raise ValueError(")],
                              f"ValueError: mem_fraction_static must be in (0, 1), got {mf}")

        # --- speculative decoding
        algo = a.get("speculative_algorithm")
        if algo:
            algo = str(algo).upper()
            if algo not in SPEC_ALGOS:
                return _main_fail("config-error", [(f"{SGL}/arg_groups/speculative_hook.py", 61,
                                                    "_resolve_speculative_algorithm", "raise ValueError(")],
                                  f"ValueError: Unknown speculative algorithm name: {a['speculative_algorithm']}")
            if algo == "NEXTN":
                algo = "EAGLE"
            a["speculative_algorithm"] = algo
            steps, topk, ndt = (a.get("speculative_num_steps"), a.get("speculative_eagle_topk"),
                                a.get("speculative_num_draft_tokens"))
            if algo == "NGRAM":
                topk = int(a.get("speculative_ngram_max_bfs_breadth") or 10)
                ndt = int(ndt or 12)
                steps = max(1, ndt // topk)
            else:
                if steps is None:
                    if topk is not None or ndt is not None:
                        return _main_fail(
                            "assertion",
                            [(f"{SGL}/arg_groups/speculative_hook.py", 142, "_handle_eagle",
                              "assert self.speculative_eagle_topk is None and self.speculative_num_draft_tokens is None")],
                            "AssertionError: speculative_eagle_topk and speculative_num_draft_tokens must be unset "
                            "when speculative_num_steps is unset (set all three or none)")
                    wide = any(hw.model.architecture.startswith(x) for x in WIDE_SPEC_ARCHS)
                    steps, topk, ndt = (5, 4, 8) if wide else (3, 1, 4)
                    self.info("validate", f"Auto choose speculative params: num_steps={steps}, "
                                          f"eagle_topk={topk}, num_draft_tokens={ndt}")
                topk = int(topk if topk is not None else 1)
                if ndt is None:
                    ndt = steps + 1 if topk == 1 else steps * topk
                if topk == 1 and ndt != steps + 1:
                    self.warn("validate", "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                                          "when speculative_eagle_topk == 1")
                    ndt = steps + 1
            a["speculative_num_steps"], a["speculative_eagle_topk"], a["speculative_num_draft_tokens"] = (
                int(steps), int(topk), int(ndt))
            if a.get("max_running_requests") is None:
                a["max_running_requests"] = 48
                self.warn("validate", "Max running requests is reset to 48 for speculative decoding. "
                                      "You can override it by explicitly setting --max-running-requests.")
            a["speculative_draft_model_path"] = a.get("speculative_draft_model_path")
            a["speculative_draft_load_format"] = a.get("speculative_draft_load_format") or None

        # --- memory settings (handle_gpu_memory_settings)
        tp = int(a.get("tp_size") or 1)
        chunk, max_bs = _mem_defaults(hw.memory_gb, tp)
        if a.get("chunked_prefill_size") is None:
            a["chunked_prefill_size"] = chunk
        if a.get("cuda_graph_max_bs_decode") is None:
            if a.get("max_running_requests") is not None:
                max_bs = min(max_bs, int(a["max_running_requests"]))
            a["cuda_graph_max_bs_decode"] = max_bs

        # --- cuda graph backends (parse_cuda_graph_config)
        dec = a.get("cuda_graph_backend_decode") or "full"
        pre = a.get("cuda_graph_backend_prefill") or "breakable"
        if a["disable_cuda_graph"]:
            dec = pre = "disabled"
        if a.get("disable_decode_cuda_graph"):
            dec = "disabled"
        if a.get("disable_prefill_cuda_graph"):
            pre = "disabled"

        # --- attention backend
        probe = _sm_probe(hw)
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
            self.info("validate", f"Attention backend not specified. Use {ab} backend by default.")
        if a["attention_backend"] in ("torch_native", "flex_attention"):
            dec = pre = "disabled"
        a["sampling_backend"] = a.get("sampling_backend") or "flashinfer"

        # --- MoE all-to-all backends force ep = tp
        a2a = a.get("moe_a2a_backend") or "none"
        if a2a not in ("none", "ascend_tp"):
            old = int(a.get("ep_size") or 1)
            a["ep_size"] = tp
            self.info("validate", f"{A2A_DISPLAY.get(a2a, a2a)} MoE is enabled. The expert parallel size is "
                                  f"adjusted from {old} to the tensor parallel size [{tp}].")
            if a2a in ("deepep", "deepep_v2") and a.get("deepep_mode") == "normal":
                dec = "disabled"
        a["cuda_graph_backend_decode"], a["cuda_graph_backend_prefill"] = dec, pre

        # --- FlashInfer all-reduce fusion auto-enable / enforce-disable
        attn_dp = int(a.get("attn_dp_size") or 1) > 1 or bool(a.get("enable_dp_attention"))
        if (not a.get("flashinfer_allreduce_fusion_backend")
                and any(hw.model.architecture.startswith(x) for x in FUSION_ARCH_PREFIXES)
                and (probe["sm90"] or probe["sm100"]) and tp > 1 and not attn_dp
                and (int(a.get("nnodes") or 1) == 1 or probe["sm100"]) and a2a == "none"):
            a["flashinfer_allreduce_fusion_backend"] = "auto"
            self.info("validate", f"Auto-enabling FlashInfer AllReduce Fusion (auto) for {hw.model.architecture}")
        if a.get("enforce_disable_flashinfer_allreduce_fusion") and a.get("flashinfer_allreduce_fusion_backend"):
            a["flashinfer_allreduce_fusion_backend"] = None
            self.info("validate", "FlashInfer allreduce fusion is forcibly disabled via "
                                  "--enforce-disable-flashinfer-allreduce-fusion.")
        a["enable_flashinfer_allreduce_fusion"] = bool(a.get("flashinfer_allreduce_fusion_backend"))

        # --- mem fraction (auto)
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

    # ------------------------------------------------------------------ the scheduler's start-up
    def launch(self) -> LaunchPlan:
        failure = self.resolve()
        if failure is not None:
            return self.plan(failure)
        a, hw, env = self.a, self.hw, self.env
        tp = int(a["tp_size"])
        attn_dp = int(a.get("attn_dp_size") or 1) > 1 or bool(a.get("enable_dp_attention"))
        dp_mult = 1 if attn_dp else int(a["dp_size"] or 1)
        needed = tp * int(a.get("pp_size") or 1) * dp_mult + int(a.get("base_gpu_id") or 0)
        algo = a.get("speculative_algorithm")
        spec = self._spec_setup() if algo else None
        a2a = a.get("moe_a2a_backend") or "none"
        self.known.update(spec=spec, a2a_backend=a2a)

        # distributed init -------------------------------------------------------------
        if needed > hw.count:
            return self.plan(_sched_fail(
                "config-error", "distributed",
                [(f"{SGL}/distributed/bootstrap.py", 214, "init_parallel_runtime", "torch.cuda.set_device(self.gpu_id)")],
                "torch.AcceleratorError: CUDA error: invalid device ordinal",
                f"GPU {needed - 1} requested, but the box has {hw.count} GPUs (tp_size={tp}, "
                f"base_gpu_id={a.get('base_gpu_id') or 0}).",
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."))
        try:
            nccl = nccl_model(hw.cost, interconnect=hw.interconnect, nvswitch=hw.nvswitch, env=env,
                              symm_mem=bool(a.get("enable_symm_mem")))
        except NcclConfigError as e:
            return self.plan(_sched_fail(
                "nccl-error", "distributed",
                [(f"{SGL}/distributed/parallel_state.py", 1530, "init_distributed_environment",
                  "torch.distributed.barrier(device_ids=[local_rank])")],
                f"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                f"ProcessGroupNCCL.cpp:3356, invalid usage (run with NCCL_DEBUG=WARN for details), "
                f"NCCL version {hw.version('nccl') or 'unknown'}",
                "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
                f"Last error:\n{e}"))
        if a.get("enable_symm_mem") and env.get("SGLANG_SYMM_MEM_PREALLOC_GB_SIZE") is None:
            self.env["SGLANG_SYMM_MEM_PREALLOC_GB_SIZE"] = "4"
        backends = self._allreduce_backends(tp) if tp > 1 else []

        # load weights -------------------------------------------------------------------
        mem = self._memory(spec)
        self.known["memory"] = mem
        if mem.weights_gb + mem.draft_weights_gb > hw.memory_gb - 1.0:
            need = mem.weights_gb + mem.draft_weights_gb - (hw.memory_gb - 1.0)
            return self.plan(_sched_fail(
                "oom", "load",
                [(f"{SGL}/model_executor/model_runner.py", 1012, "load_model", "self.model = self.loader.load_model("),
                 (f"{SGL}/model_loader/loader.py", 640, "load_weights_and_postprocess", "model.load_weights(weights)")],
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {max(0.5, need):.2f} GiB. "
                f"GPU 0 has a total capacity of {hw.memory_gb:.2f} GiB of which 0 bytes is free. "
                f"Including non-PyTorch memory, this process has {hw.memory_gb - 0.5:.2f} GiB memory in use."))
        if a2a in A2A_MODULES and A2A_MODULES[a2a] not in hw.installed:
            mod = A2A_MODULES[a2a]
            return self.plan(_sched_fail(
                "missing-dependency", "load",
                [(f"{SGL}/layers/moe/token_dispatcher/{a2a}.py", 31, "<module>", f"import {mod}")],
                f"ModuleNotFoundError: No module named '{mod}'"))

        # model init (after weights) -----------------------------------------------------
        fusion = self._fusion(tp)
        if isinstance(fusion, Failure):
            return self.plan(fusion)
        if a2a in ("deepep", "deepep_v2") and (hw.interconnect != "nvlink" or not hw.p2p):
            return self.plan(_sched_fail(
                "assertion", "model_init",
                [(f"{SGL}/layers/moe/token_dispatcher/deepep.py", 118, "get_deepep_buffer",
                  "cls._buffer = Buffer(group, num_nvl_bytes, num_rdma_bytes, low_latency_mode=low_latency_mode,"),
                 ("/usr/local/lib/python3.12/dist-packages/deep_ep/buffer.py", 94, "__init__",
                  "self.runtime.sync(device_ids, ipc_handles, root_unique_id)")],
                "AssertionError: DeepEP intranode buffer requires NVLink peer access between all "
                f"{tp} ranks (found a {hw.interconnect.upper()}-only topology)"))

        # KV cache -------------------------------------------------------------------------
        if mem.kv_gb < float(hw.cost["min_kv_gb"]):
            return self.plan(_sched_fail(
                "oom", "kv_cache",
                [(f"{SGL}/model_executor/model_runner.py", 1633, "init_memory_pool", "self.pool_config = MemoryPoolConfig("),
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
        self.known.update(comm=comm, decode_graph_bs=graph_bs, fusion_backend=fusion or None,
                          allreduce_backend_name=ar_name)

        # memory too tight outside the static pool: CUDA OOM while capturing / warming up
        if mem.headroom_gb < float(hw.cost["activation_gb"]):
            free_mib = max(0.0, mem.headroom_gb) * 1024
            oom = (f"CUDA out of memory. Tried to allocate {float(hw.cost['activation_gb']) / 2:.2f} GiB. "
                   f"GPU 0 has a total capacity of {hw.memory_gb:.2f} GiB of which {free_mib:.2f} MiB is free.")
            if a["cuda_graph_backend_decode"] != "disabled":
                return self.plan(_capture_fail(self.version, _CAPTURE_FRAMES, oom, "oom"))
            return self.plan(_sched_fail(
                "oom", "cuda_graph",
                [(f"{SGL}/model_executor/model_runner.py", 2190, "kernel_warmup", "self._dummy_run(batch_size=bs)")],
                f"torch.OutOfMemoryError: {oom}"))

        # NCCL Tree captured into a full cuda graph on a PCIe-only box with > 2 GPUs
        if (a["cuda_graph_backend_decode"] == "full" and tp > 2 and hw.interconnect == "pcie"
                and "tree" in nccl.algos and ar_name.startswith("nccl")):
            return self.plan(_capture_fail(
                self.version, _CAPTURE_FRAMES,
                "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error "
                f"(run with NCCL_DEBUG=INFO for details), NCCL version {hw.version('nccl') or 'unknown'}\n"
                "ncclUnhandledCudaError: Call to CUDA function failed.\n"
                "Last error:\n"
                "Cuda failure 'operation not permitted when stream is capturing'",
                "cuda-graph-capture"))

        return self.plan(None)

    # ------------------------------------------------------------------ parts
    def _spec_setup(self) -> SpecSetup:
        a, hw = self.a, self.hw
        algo = a["speculative_algorithm"]
        steps, topk, ndt = a["speculative_num_steps"], a["speculative_eagle_topk"], a["speculative_num_draft_tokens"]
        if algo == "NGRAM":
            cap, default = ndt, hw.drafter.ngram_acceptance
        else:
            cap, default = min(ndt, steps + 1), hw.drafter.eagle_acceptance
        acc = default
        raw = self.env.get("SGLANG_SIMULATE_ACC_LEN")
        if raw is not None and str(raw).strip():
            try:
                acc = float(raw)
            except ValueError:
                pass
        acc = max(1.0, min(float(acc), float(cap)))
        return SpecSetup(algorithm=algo, num_steps=steps, topk=topk, num_draft_tokens=ndt,
                         accept_length=acc, max_accept=cap)

    def _memory(self, spec: SpecSetup | None) -> MemoryPlan:
        a, hw = self.a, self.hw
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

    def _allreduce_backends(self, tp: int) -> list[Backend]:
        """Which non-NCCL backends SGLang ends up with, logging its warnings (distributed init)."""
        a, hw, env = self.a, self.hw, self.env
        out: list[Backend] = []
        ph = "distributed"
        nvlink = hw.interconnect == "nvlink"
        if not a.get("disable_custom_all_reduce"):
            classes = ["CustomAllReduceV2", "CustomAllreduce"]
            if str(env.get("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", "1")).strip().lower() in ("0", "false", "no"):
                classes = ["CustomAllreduce"]
            for cls in classes:
                if tp not in SUPPORTED_CA_WORLD:
                    self.warn(ph, f"{cls} is disabled due to an unsupported world size: {tp}. Supported world "
                                  f"sizes: {list(SUPPORTED_CA_WORLD)}. To silence this warning, specify "
                                  "disable_custom_all_reduce=True explicitly.")
                    continue
                if a.get("enable_p2p_check") and not hw.p2p:
                    self.warn(ph, f"{cls} is disabled because your platform lacks GPU P2P capability or P2P test "
                                  "failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.")
                    continue
                if not nvlink and (tp > 2 or cls == "CustomAllReduceV2"):
                    self.warn(ph, f"{cls} is disabled because it's not supported on more than two PCIe-only GPUs. "
                                  "To silence this warning, specify disable_custom_all_reduce=True explicitly.")
                    continue
                out.append(backend_from_cost("custom_ar", hw.cost))
                break
        if _truthy(env.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE")):
            if a.get("dtype", "auto") in ("auto", "bfloat16"):
                out.append(backend_from_cost("pcie_ipc", hw.cost))
                self.info(ph, f"FlashInfer PCIe IPC all-reduce initialized (world_size={tp}, dtype=bfloat16).")
            else:
                self.warn(ph, "FlashInfer PCIe IPC all-reduce only supports bfloat16; falling back.")
        if a.get("enable_mscclpp"):
            if "mscclpp" in hw.installed:
                out.append(backend_from_cost("mscclpp", hw.cost))
            else:
                self.warn(ph, "PyMscclpp is unavailable because its dependencies failed to import: "
                              "No module named 'mscclpp'")
        if a.get("enable_torch_symm_mem"):
            major = hw.sm_major
            if major not in TORCH_SYMM_MEM_WORLD:
                self.warn(ph, f"TorchSymmMemCommunicator: Device capability {major} not supported, "
                              "communicator is not available.")
            elif tp not in TORCH_SYMM_MEM_WORLD[major]:
                self.warn(ph, f"TorchSymmMemCommunicator: World size {tp} not supported, "
                              "communicator is not available.")
            elif not (nvlink and hw.nvswitch):
                self.warn(ph, "TorchSymmMemCommunicator: torch symmetric memory multicast operations are not supported.")
            else:
                out.append(backend_from_cost("torch_symm_mem", hw.cost))
        return out

    def _fusion(self, tp: int) -> str | Failure | None:
        """The FlashInfer all-reduce fusion backend in force, None, or the init failure."""
        a, hw = self.a, self.hw
        backend = a.get("flashinfer_allreduce_fusion_backend")
        if not backend or tp <= 1:
            return None
        probe = _sm_probe(hw)
        fi_sm120 = probe["sm120"] and version_at_least(hw.version("flashinfer"), "0.8.0")
        frames = [(f"{SGL}/model_executor/model_runner.py", 905, "initialize",
                   "self.flashinfer_comm_fusion = init_flashinfer_allreduce_fusion(self.server_args)"),
                  (f"{SGL}/layers/flashinfer_comm_fusion.py", 141, "_resolve_backend", "raise ValueError(")]
        if not (probe["sm90"] or probe["sm100"] or fi_sm120):
            return _sched_fail("unsupported-arch", "model_init", frames,
                               "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.")
        if backend == "auto":
            backend = "mnnvl" if probe["sm100"] else "trtllm"
        if backend == "cutedsl" and not probe["blackwell"]:
            return _sched_fail(
                "unsupported-arch", "model_init", frames,
                "ValueError: FlashInfer allreduce fusion with the cutedsl backend requires a Blackwell system.")
        if backend == "trtllm" and int(a.get("nnodes") or 1) > 1:
            return _sched_fail("config-error", "model_init", frames,
                               "ValueError: FlashInfer allreduce fusion with the trtllm backend supports single-node only.")
        if backend == "mnnvl" and not (hw.interconnect == "nvlink" and probe["sm100"]):
            self.warn("cuda_graph", "Failed to initialize FlashInfer workspace (backend=mnnvl): MNNVL fabric "
                                    "handles are not supported on this system. Disabling flashinfer allreduce "
                                    "fusion permanently.")
            return None
        self.info("cuda_graph", f"FlashInfer AllReduce Fusion enabled and workspace initialized: backend={backend}, "
                                f"rank=0, world_size={tp}")
        return backend


# --------------------------------------------------------------------------- entry points


def plan_from_args(hardware: Hardware, parsed: ParsedArgs, env: Mapping[str, str]) -> LaunchPlan:
    """The plan of an already-parsed command line (what ``python -m perfgate.sim`` uses)."""
    b = _Builder(hardware, hardware.sglang_version, parsed.fields, env)
    for text in parsed.deprecations:
        b.warn("args", text)
    return b.launch()


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


def distinct_experts(experts: int, per_token: int, tokens: int) -> float:
    """Expected number of distinct experts ``tokens`` tokens route to."""
    if experts <= 0 or per_token <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)


__all__ = [
    "Failure", "LaunchPlan", "LogLine", "MemoryPlan", "SpecSetup", "simulate_launch", "plan_from_args",
    "graph_bs_list", "capture_failed_hint", "distinct_experts", "PHASES",
]
