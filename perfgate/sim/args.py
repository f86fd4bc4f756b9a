"""SGLang's command line as data, and the argparse parser built from it.

:data:`FLAGS` is the one table of SGLang flags the simulator accepts: option strings (aliases),
destination (SGLang's ServerArgs field name), type, default, choices, deprecation and the
SGLang versions that have the flag. :func:`build_parser` turns it into an argparse parser for a
given simulated SGLang version, with ``prog="sglang serve"`` so errors read exactly like
SGLang's (``sglang serve: error: ...``, exit 2). Version drift is data too: from 0.5.18 on there
is no ``--cuda-graph-max-bs`` (argparse then reports it as ambiguous, as 0.5.23 does).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from perfgate.versions import version_at_least

PROG = "sglang serve"

LOAD_FORMATS = (
    "auto", "pt", "safetensors", "instanttensor", "npcache", "dummy", "sharded_state", "presharded",
    "gguf", "expert_pack", "bitsandbytes", "mistral", "layered", "flash_rl", "remote",
    "remote_instance", "fastsafetensors", "private", "runai_streamer",
)
ATTENTION_BACKENDS = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3",
    "fa4", "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
    "tokenspeed_mla", "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter",
    "wave", "intel_amx", "ascend", "intel_xpu",
)
MOE_A2A_BACKENDS = (
    "none", "deepep", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer", "megamoe",
    "deepep_v2", "pplx", "ascend_tp", "flashinfer_megamoe",
)
MOE_RUNNER_BACKENDS = (
    "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass",
    "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass", "marlin",
)
CUDA_GRAPH_BACKENDS = ("full", "breakable", "disabled")
FUSION_BACKENDS = ("auto", "trtllm", "mnnvl", "cutedsl")


@dataclass(frozen=True, kw_only=True)
class Flag:
    """One SGLang flag: option strings, ServerArgs field, type and version range."""

    opts: tuple[str, ...]
    dest: str
    kind: str = "str"  # str | int | float | bool | int_list | deprecated_bool
    default: Any = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    help: str = ""
    replacement: str | None = None  # deprecated flags: what to use instead (warning text)
    since: str | None = None  # first SGLang version with the flag
    until: str | None = None  # first SGLang version WITHOUT the flag

    def exists_in(self, version: str) -> bool:
        if self.since is not None and not version_at_least(version, self.since):
            return False
        if self.until is not None and version_at_least(version, self.until):
            return False
        return True


def _f(*opts: str, dest: str | None = None, **kw: Any) -> Flag:
    return Flag(opts=opts, dest=dest or opts[0].lstrip("-").replace("-", "_"), **kw)


FLAGS: tuple[Flag, ...] = (
    # model and tokenizer
    _f("--model-path", "--model", required=True, help="model weights path or HF repo id"),
    _f("--tokenizer-path"),
    _f("--tokenizer-mode", default="auto"),
    _f("--skip-tokenizer-init", kind="bool", help="skip init tokenizer and pass input_ids in generate request"),
    _f("--load-format", default="auto", choices=LOAD_FORMATS),
    _f("--trust-remote-code", kind="bool"),
    _f("--context-length", kind="int"),
    _f("--dtype", default="auto", choices=("auto", "half", "float16", "bfloat16", "float", "float32")),
    _f("--kv-cache-dtype", default="auto",
       choices=("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")),
    _f("--quantization"),
    _f("--revision"),
    _f("--served-model-name"),
    _f("--chat-template"),
    _f("--reasoning-parser"),
    _f("--tool-call-parser"),
    # parallelism
    _f("--tp-size", "--tensor-parallel-size", kind="int", default=1),
    _f("--dp-size", "--data-parallel-size", kind="int", default=1),
    _f("--pp-size", "--pipeline-parallel-size", kind="int", default=1),
    _f("--attn-dp-size", "--attention-data-parallel-size", kind="int", default=1),
    _f("--enable-dp-attention", kind="deprecated_bool", replacement="--attn-dp-size N"),
    _f("--ep-size", "--expert-parallel-size", "--ep", kind="int", default=1),
    _f("--base-gpu-id", kind="int", default=0),
    _f("--nccl-port", kind="int"),
    _f("--dist-init-addr"),
    _f("--nnodes", kind="int", default=1),
    _f("--node-rank", kind="int", default=0),
    _f("--device"),
    # server
    _f("--host", default="127.0.0.1"),
    _f("--port", kind="int", default=30000),
    _f("--api-key"),
    _f("--watchdog-timeout", kind="float", default=300),
    _f("--skip-server-warmup", kind="bool"),
    _f("--random-seed", kind="int"),
    _f("--log-level", default="info"),
    _f("--log-level-http"),
    _f("--log-requests", kind="bool"),
    _f("--enable-metrics", kind="bool"),
    _f("--enable-metrics-for-all-schedulers", kind="bool"),
    _f("--decode-log-interval", kind="int", default=40),
    _f("--enable-cache-report", kind="bool"),
    _f("--stream-interval", kind="int", default=1),
    _f("--incremental-streaming-output", kind="bool"),
    # memory and scheduling
    _f("--mem-fraction-static", kind="float"),
    _f("--max-running-requests", kind="int"),
    _f("--max-queued-requests", kind="int"),
    _f("--max-total-tokens", kind="int"),
    _f("--chunked-prefill-size", kind="int"),
    _f("--max-prefill-tokens", kind="int", default=16384),
    _f("--page-size", kind="int", default=1),
    _f("--schedule-policy", default="fcfs"),
    _f("--disable-radix-cache", kind="bool"),
    _f("--disable-overlap-schedule", kind="bool"),
    _f("--enable-mixed-chunk", kind="bool"),
    # cuda graphs
    _f("--cuda-graph-max-bs", dest="cuda_graph_max_bs", kind="int", until="0.5.18",
       replacement="--cuda-graph-max-bs-decode"),
    _f("--cuda-graph-max-bs-decode", kind="int"),
    _f("--cuda-graph-max-bs-prefill", kind="int"),
    _f("--cuda-graph-bs-decode", kind="int_list"),
    _f("--cuda-graph-bs-prefill", kind="int_list"),
    _f("--cuda-graph-backend-decode", choices=CUDA_GRAPH_BACKENDS),
    _f("--cuda-graph-backend-prefill", choices=CUDA_GRAPH_BACKENDS),
    _f("--disable-decode-cuda-graph", kind="bool"),
    _f("--disable-prefill-cuda-graph", kind="bool"),
    _f("--disable-cuda-graph", kind="deprecated_bool", replacement="--cuda-graph-backend-{decode,prefill}=disabled"),
    _f("--disable-cuda-graph-padding", kind="bool"),
    _f("--enable-torch-compile", kind="bool"),
    _f("--torch-compile-max-bs", kind="int", default=32),
    # kernels
    _f("--attention-backend", choices=ATTENTION_BACKENDS),
    _f("--prefill-attention-backend", choices=ATTENTION_BACKENDS),
    _f("--decode-attention-backend", choices=ATTENTION_BACKENDS),
    _f("--sampling-backend", choices=("flashinfer", "pytorch", "ascend")),
    # communication
    _f("--disable-custom-all-reduce", kind="bool", help="Disable the custom all-reduce kernel and fall back to NCCL."),
    _f("--enable-mscclpp", kind="bool"),
    _f("--enable-torch-symm-mem", kind="bool"),
    _f("--enable-symm-mem", kind="bool"),
    _f("--enable-nccl-nvls", kind="bool"),
    _f("--pre-warm-nccl", kind="bool"),
    _f("--enable-fused-moe-sum-all-reduce", kind="bool"),
    _f("--enable-quant-communications", kind="bool"),
    _f("--enable-p2p-check", kind="bool"),
    _f("--flashinfer-allreduce-fusion-backend", choices=FUSION_BACKENDS),
    _f("--enable-flashinfer-allreduce-fusion", kind="deprecated_bool",
       replacement="--flashinfer-allreduce-fusion-backend=auto"),
    _f("--enforce-disable-flashinfer-allreduce-fusion", kind="bool"),
    # MoE / expert parallel
    _f("--moe-a2a-backend", default="none", choices=MOE_A2A_BACKENDS),
    _f("--moe-runner-backend", default="auto", choices=MOE_RUNNER_BACKENDS),
    _f("--deepep-mode", default="auto", choices=("auto", "normal", "low_latency")),
    _f("--deepep-config"),
    _f("--ep-num-redundant-experts", kind="int", default=0),
    _f("--enable-eplb", kind="bool"),
    _f("--enable-two-batch-overlap", kind="bool"),
    _f("--enable-single-batch-overlap", kind="bool"),
    # speculative decoding
    _f("--speculative-algorithm"),
    _f("--speculative-draft-model-path", "--speculative-draft-model"),
    _f("--speculative-draft-model-revision"),
    _f("--speculative-draft-load-format", choices=LOAD_FORMATS),
    _f("--speculative-num-steps", kind="int"),
    _f("--speculative-eagle-topk", kind="int"),
    _f("--speculative-num-draft-tokens", kind="int"),
    _f("--speculative-accept-threshold-single", kind="float", default=1.0),
    _f("--speculative-accept-threshold-acc", kind="float", default=1.0),
    _f("--speculative-attention-mode", default="prefill", choices=("prefill", "decode")),
    _f("--speculative-draft-attention-backend", choices=ATTENTION_BACKENDS),
    _f("--speculative-moe-runner-backend", choices=MOE_RUNNER_BACKENDS),
    _f("--speculative-moe-a2a-backend", choices=MOE_A2A_BACKENDS),
    _f("--speculative-ngram-min-bfs-breadth", kind="int", default=1),
    _f("--speculative-ngram-max-bfs-breadth", kind="int", default=10),
    _f("--speculative-ngram-match-type", default="BFS", choices=("BFS", "PROB")),
    _f("--speculative-ngram-max-trie-depth", kind="int", default=18),
    _f("--speculative-ngram-capacity", kind="int", default=10_000_000),
)

# Options of the simulator itself (never passed to a real SGLang).
SIM_DESTS = ("sim_hardware", "sim_startup_s", "sim_stack", "sim_fault", "sim_fault_after", "sim_speedup",
             "sim_machine", "sim_scale", "sim_start_seed", "sim_step_sd", "sim_package_cost",
             "sim_ttft_modes", "sim_prefill_delay_ms", "sim_prefill_gpu_ms", "sim_prefill_host_ms")
SIM_FAULTS = (
    "crash-at-start", "crash-mid-stream", "hang-before-ready", "hang-mid-stream", "slow-start",
    "http-500", "malformed-sse", "health-no-generate", "wrong-output", "flush-refused",
)

_BY_OPT: dict[str, Flag] = {o: f for f in FLAGS for o in f.opts}


class SglangArgError(Exception):
    """argparse rejected the command line; ``str(self)`` is the message after ``error:``."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage

    def render(self) -> str:
        """Exactly what argparse prints on stderr before exiting 2."""
        return f"{self.usage}{PROG}: error: {self.message}\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise SglangArgError(message, self.format_usage())

    def format_help(self) -> str:
        # errors read as SGLang's (``sglang serve: error``), but --help says what this program is
        text = super().format_help()
        return ("python -m perfgate.sim: perfgate's simulated SGLang server. It takes SGLang's flags (and "
                "rejects unknown ones as SGLang does, as `sglang serve`) plus the --sim-* options below.\n\n"
                + text.replace(f"usage: {PROG}", "usage: python -m perfgate.sim", 1))


class _DeprecatedStoreTrue(argparse.Action):
    """SGLang's DeprecatedStoreTrueAction: sets the field, records the warning text."""

    def __init__(self, option_strings: Sequence[str], dest: str, replacement: str = "", **kw: Any) -> None:
        self.replacement = replacement
        super().__init__(option_strings, dest, nargs=0, default=False, **kw)

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(ns, self.dest, True)
        _note_deprecated(ns, self.option_strings[0], self.replacement)


class _DeprecatedAlias(argparse.Action):
    """A removed flag still accepted as an alias of its replacement (older SGLang)."""

    def __init__(self, option_strings: Sequence[str], dest: str, replacement: str = "", **kw: Any) -> None:
        self.replacement = replacement
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(ns, self.dest, values)
        _note_deprecated(ns, self.option_strings[0], self.replacement)


def _note_deprecated(ns: argparse.Namespace, flag: str, replacement: str) -> None:
    notes = list(getattr(ns, "_deprecations", []))
    notes.append(
        f"'{flag}' is deprecated and will be removed in a future release. Use '{replacement}' instead."
    )
    ns._deprecations = notes


def build_parser(version: str, *, sim_options: bool = True) -> argparse.ArgumentParser:
    """The ``sglang serve`` parser of SGLang ``version`` (plus the ``--sim-*`` options)."""
    p = _Parser(prog=PROG, description="perfgate's simulated SGLang server")
    for f in FLAGS:
        if not f.exists_in(version):
            continue
        kw: dict[str, Any] = {"dest": f.dest, "help": f.help or None}
        if f.kind == "bool":
            p.add_argument(*f.opts, action="store_true", **kw)
        elif f.kind == "deprecated_bool":
            p.add_argument(*f.opts, action=_DeprecatedStoreTrue, replacement=f.replacement or "", **kw)
        else:
            conv = {"str": str, "int": int, "float": float, "int_list": int}[f.kind]
            if f.kind == "int_list":
                kw["nargs"] = "+"
            if f.choices:
                kw["choices"] = f.choices
            if f.replacement:
                p.add_argument(*f.opts, action=_DeprecatedAlias, replacement=f.replacement,
                               type=conv, default=f.default, **kw)
            else:
                p.add_argument(*f.opts, type=conv, default=f.default, required=f.required, **kw)
    if sim_options:
        g = p.add_argument_group("perfgate simulator")
        g.add_argument("--sim-hardware", dest="sim_hardware", required=True,
                       help="hardware/stack/cost description (TOML)")
        g.add_argument("--sim-startup-s", dest="sim_startup_s", type=float, default=2.0,
                       help="total simulated model-load time in seconds")
        g.add_argument("--sim-stack", dest="sim_stack", default=None,
                       help="KEY=VER[,KEY=VER...] stack overrides (env PERFGATE_SIM_STACK)")
        g.add_argument("--sim-fault", dest="sim_fault", default=None, choices=SIM_FAULTS,
                       help="inject a fault (env PERFGATE_SIM_FAULT)")
        g.add_argument("--sim-fault-after", dest="sim_fault_after", type=int, default=3,
                       help="mid-stream faults hit after N tokens")
        g.add_argument("--sim-speedup", dest="sim_speedup", type=float, default=1.0,
                       help="divide every simulated duration by this (tests only)")
        g.add_argument("--sim-machine", dest="sim_machine", default=None,
                       help="the simulated machine: its speed factor (perfgate.sim.variation; env "
                            "PERFGATE_SIM_MACHINE, default 'reference', factor 1.0)")
        g.add_argument("--sim-scale", dest="sim_scale", default=None,
                       help="multiply the simulated speed by this, e.g. 0.99 = 1 %% slower (env PERFGATE_SIM_SCALE)")
        g.add_argument("--sim-start-seed", dest="sim_start_seed", default=None,
                       help="seed of this start's jitter (env PERFGATE_SIM_START_SEED; default: random, each start "
                            "its own; the model's --random-seed does not seed it)")
        g.add_argument("--sim-step-sd", dest="sim_step_sd", default=None,
                       help="sd of every step's log duration, e.g. 0.05 = 5 %% step-to-step noise inside the start "
                            "(env PERFGATE_SIM_STEP_SD; default 0; seeded with the start's jitter)")
        g.add_argument("--sim-ttft-modes", dest="sim_ttft_modes", default=None,
                       help="host-side prefill levels switching inside the start, F1,F2[,...][/DWELL], e.g. 1.0,1.6/12 "
                            "(a mean stay of 12 prefill steps; env PERFGATE_SIM_TTFT_MODES; default off; seeded with "
                            "the start's jitter); /DWELLs: the host's levels, a level per DWELL simulated seconds, the "
                            "same for every simulated server of the machine")
        g.add_argument("--sim-prefill-delay-ms", dest="sim_prefill_delay_ms", default=None,
                       help="milliseconds added to every prefill step, host-side: a TTFT-only slowdown "
                            "(env PERFGATE_SIM_PREFILL_DELAY_MS; default 0)")
        g.add_argument("--sim-prefill-gpu-ms", dest="sim_prefill_gpu_ms", default=None,
                       help="milliseconds of GPU time added inside every prefill step: a GPU-side prefill slowdown "
                            "(env PERFGATE_SIM_PREFILL_GPU_MS; default 0)")
        g.add_argument("--sim-prefill-host-ms", dest="sim_prefill_host_ms", default=None,
                       help="milliseconds of host time added inside every prefill step: a host-side prefill slowdown "
                            "(env PERFGATE_SIM_PREFILL_HOST_MS; default 0)")
        g.add_argument("--sim-package-cost", dest="sim_package_cost", default=None,
                       help="KEY=VER[+KEY=VER]:FACTOR|incompatible[;...]: a slowdown planted in a package's version, "
                            "or packages that do not import together (env PERFGATE_SIM_PACKAGE_COST; "
                            "perfgate.sim.packages)")
    return p


@dataclass(frozen=True, kw_only=True)
class ParsedArgs:
    """A parsed command line: SGLang fields, simulator options, deprecation warnings."""

    fields: Mapping[str, Any]
    sim: Mapping[str, Any]
    deprecations: tuple[str, ...]


def parse_argv(argv: Sequence[str], version: str, *, sim_options: bool = True) -> ParsedArgs:
    """Parse like ``sglang serve`` of ``version``; raise :class:`SglangArgError` on a bad line."""
    ns = build_parser(version, sim_options=sim_options).parse_args(list(argv))
    d = vars(ns)
    deprecations = tuple(d.pop("_deprecations", ()))
    sim = {k: d.pop(k) for k in SIM_DESTS if k in d}
    return ParsedArgs(fields=d, sim=sim, deprecations=deprecations)


def flags_to_argv(flags: Mapping[str, object]) -> list[str]:
    """ServerConfig-style flags (``{"tp-size": 8, "disable-custom-all-reduce": True}``) -> argv.

    Keys may carry leading dashes or use underscores; ``True`` is a bare switch, ``False`` and
    ``None`` leave the flag out, lists become several values.
    """
    argv: list[str] = []
    for key, value in flags.items():
        name = "--" + key.lstrip("-").replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(name)
        elif isinstance(value, (list, tuple)):
            argv.append(name)
            argv.extend(str(v) for v in value)
        else:
            argv.extend([name, str(value)])
    return argv


def dest_of(flag: str) -> str:
    """The ServerArgs field of an SGLang flag written without its dashes, under any of its option strings
    (``tp``, ``tp-size`` and ``tensor-parallel-size`` are ``tp_size``); a flag not in :data:`FLAGS` keeps its
    own name with underscores."""
    return _DESTS.get(flag.lstrip("-"), flag.lstrip("-").replace("-", "_"))


_DESTS = {o.lstrip("-"): f.dest for f in FLAGS for o in f.opts}
