"""The signatures :func:`perfgate.classify.classify` looks for: failures (:data:`RULES`) and backend
fallbacks (:data:`FALLBACK_RULES`), as data: ``(category, regex, priority)``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfgate.categories import FROM_LOG, Backend, Category

# Categories (perfgate.categories). wrong-output / slower-than-baseline / noisy are decided by the
# verdict, never from a log.
BAD_FLAG = Category.BAD_FLAG
CONFIG_ERROR = Category.CONFIG_ERROR


UNSUPPORTED_ARCH = Category.UNSUPPORTED_ARCH
CUDA_GRAPH_CAPTURE = Category.CUDA_GRAPH_CAPTURE


OOM = Category.OOM
NCCL_ERROR = Category.NCCL_ERROR


ASSERTION = Category.ASSERTION
MISSING_DEPENDENCY = Category.MISSING_DEPENDENCY


STARTUP_TIMEOUT = Category.STARTUP_TIMEOUT
CRASH = Category.CRASH


LOG_CATEGORIES = FROM_LOG


@dataclass(frozen=True, kw_only=True)
class Rule:
    """A failure signature: lines matching ``pattern`` mean ``category``.

    ``weak`` rules (generic tracebacks, NCCL WARN, SIGQUIT) count only when the process died.
    """

    category: str
    pattern: re.Pattern[str]
    priority: int
    weak: bool = False


@dataclass(frozen=True, kw_only=True)
class FallbackRule:
    """A warning that ``backend`` was disabled and traffic fell back (to NCCL).

    ``category`` is the reason; ``None`` means "classify the error text in group ``detail``,
    defaulting to unsupported-arch".
    """

    backend: Backend
    pattern: re.Pattern[str]
    category: str | None


def _r(category: str, pattern: str, priority: int, *, weak: bool = False, flags: int = 0) -> Rule:
    return Rule(category=category, pattern=re.compile(pattern, flags), priority=priority, weak=weak)


# start of a traceback's final exception line: optional "[rank1]: " / "(Worker pid=7) " prefix, optional module
_EXC_LINE = r"^\s*(?:\[[^\]]*\]:?\s*)?(?:\([^)]*\)\s*)?(?:[\w.]+\.)?"


#: Failure signatures (the highest priority among matching lines wins; order does not matter).
RULES: tuple[Rule, ...] = (
    # argparse (exit 2): "sglang serve: error: ...", "launch_server.py: error: ..."
    _r(BAD_FLAG, r": error: unrecognized arguments:", 100),
    _r(BAD_FLAG, r": error: ambiguous option:", 100),
    _r(BAD_FLAG, r": error: argument [^:]+: (?:invalid choice|invalid \w+ value|expected)", 100),
    _r(BAD_FLAG, r": error: the following arguments are required", 100),
    _r(BAD_FLAG, r"^(?:usage: |(?:sglang serve|[\w.\-/]+): error: )", 95, weak=True),
    # architecture / kernel availability: a fact about the box, whatever phase it surfaces in
    _r(UNSUPPORTED_ARCH, r"requires SM90 or SM10X", 90),
    _r(UNSUPPORTED_ARCH, r"requires a Blackwell system", 90),
    _r(UNSUPPORTED_ARCH, r"[Uu]nsupported (?:gpu |GPU )?architecture", 90),
    _r(UNSUPPORTED_ARCH, r"no kernel image is available for execution on the device", 90),
    _r(UNSUPPORTED_ARCH, r"No supported CUDA architectures found", 90),
    _r(UNSUPPORTED_ARCH, r"Could not load any common_ops library", 90),
    _r(UNSUPPORTED_ARCH, r"(?:Device|Compute) capability \d+(?:\.\d+)? (?:is )?not supported", 88),
    # missing packages (the final line of a traceback, not "ignore import error ..." chatter)
    _r(MISSING_DEPENDENCY, _EXC_LINE + r"ModuleNotFoundError: No module named", 86),
    _r(MISSING_DEPENDENCY, _EXC_LINE + r"ImportError: ", 86),
    # SGLang's own version checks (sglang.srt.utils.common.assert_pkg_version, at launch): a stack upgrade's
    # likeliest failure is a package older than the new SGLang requires
    _r(MISSING_DEPENDENCY, r"is installed with version \S+, which is less than the minimum required version", 86),
    _r(MISSING_DEPENDENCY, r"with minimum required version \S+ is not installed", 86),
    # `python -m sglang.launch_server` without SGLang installed (no traceback, one line from the interpreter)
    _r(MISSING_DEPENDENCY,
       r"Error while finding module specification for .*\(ModuleNotFoundError: No module named", 86),
    # memory: out of memory is out of memory, also while capturing CUDA graphs (cause says so)
    _r(OOM, r"Not enough memory\. Please try to increase --mem-fraction-static", 82),
    _r(OOM, r"CUDA out of memory", 82),
    _r(OOM, r"OutOfMemoryError", 82),
    _r(OOM, r"(?:Prefill|Decode) out of memory", 82),
    _r(OOM, r"The memory capacity is unbalanced", 82),
    _r(OOM, r"Cuda failure '?out of memory'?", 82),
    _r(OOM, r"leave no GPU memory for the KV cache|leaves no room for the full KV pool|Not enough GPU memory for|"
            r"state cache is too small to serve any requests", 82),
    # CUDA graph capture: outranks what broke inside it (NCCL under capture, e.g. NCCL_ALGO=Tree)
    _r(CUDA_GRAPH_CAPTURE, r"Capture (?:prefill )?cuda graph failed", 80, flags=re.IGNORECASE),
    _r(CUDA_GRAPH_CAPTURE, r"Capture .*CUDA graph failed", 80, flags=re.IGNORECASE),
    _r(CUDA_GRAPH_CAPTURE, r"operation not permitted (?:when stream is capturing|on an event last recorded in a "
                           r"capturing stream)|operation failed due to a previous error during capture", 78),
    # NCCL
    _r(NCCL_ERROR, r"\bNCCL error\b", 60, flags=re.IGNORECASE),
    _r(NCCL_ERROR, r"\bnccl(?:InternalError|UnhandledCudaError|SystemError|InvalidUsage|InvalidArgument|"
                   r"RemoteError)\b", 60),
    _r(NCCL_ERROR, r"\bDistBackendError\b", 60),
    _r(NCCL_ERROR, r"\bNCCL WARN\b", 20, weak=True),
    # assertions (Python, and C/CUDA asserts such as DeepEP's)
    _r(ASSERTION, _EXC_LINE + r"AssertionError\b", 50),
    _r(ASSERTION, r"\bAssertion (?:failed|error)\b|Assertion `.*' failed", 50),
    # argument validation (ValueError raised by resolution, exit 1); more GPUs asked than exist
    _r(CONFIG_ERROR, _EXC_LINE + r"ValueError: ", 30),
    _r(CONFIG_ERROR, r"CUDA error: invalid device ordinal", 30),
    # something died, cause unknown
    _r(CRASH, r"Scheduler hit an exception", 10, weak=True),
    _r(CRASH, r"Received sigquit from a child process", 10, weak=True),
    _r(CRASH, r"scheduler died during initialization", 10, weak=True),
    _r(CRASH, r"Initialization failed\. warmup error", 10, weak=True),
    _r(CRASH, r"Segmentation fault|core dumped|Fatal Python error|SIGSEGV|SIGABRT|SIGFPE", 10, weak=True),
    _r(CRASH, r"^\s*Traceback \(most recent call last\)", 5, weak=True),
    _r(CRASH, r"crashed with exit code", 5, weak=True),
)


def _f(backend: Backend, pattern: str, category: str | None) -> FallbackRule:
    return FallbackRule(backend=backend, pattern=re.compile(pattern), category=category)


_CAR = r"Custom ?[Aa]ll ?[Rr]educe(?:V2)? is disabled "


#: Backend fallbacks: the server keeps running on NCCL; the backend a variant asked for did not run.
#: A ``None`` category classifies the error text (group ``detail``) and defaults to unsupported-arch.
FALLBACK_RULES: tuple[FallbackRule, ...] = (
    # SGLang's custom all-reduce (CustomAllReduceV2 first, then CustomAllreduce)
    _f(Backend.CUSTOM_AR, _CAR + r"because it's not supported on more than two PCIe-only GPUs", UNSUPPORTED_ARCH),
    _f(Backend.CUSTOM_AR, _CAR + r"because your platform lacks GPU P2P capability", UNSUPPORTED_ARCH),
    _f(Backend.CUSTOM_AR, _CAR + r"due to an unsupported world size", CONFIG_ERROR),
    _f(Backend.CUSTOM_AR, _CAR + r"because this process group spans across nodes", CONFIG_ERROR),
    _f(Backend.CUSTOM_AR, r"Setup Custom allreduce failed with (?P<detail>.*?)(?:\. To silence this warning|$)", None),
    # torch symmetric memory
    _f(Backend.TORCH_SYMM_MEM, r"TorchSymmMemCommunicator: Device capability \S+ not supported", UNSUPPORTED_ARCH),
    _f(Backend.TORCH_SYMM_MEM, r"TorchSymmMemCommunicator: World size \d+ not supported", CONFIG_ERROR),
    _f(Backend.TORCH_SYMM_MEM, r"TorchSymmMemCommunicator: torch symmetric memory multicast operations are not "
                         r"supported", UNSUPPORTED_ARCH),
    _f(Backend.TORCH_SYMM_MEM, r"(?<!Torch)SymmMemCommunicator: Device capability \S+ not supported", UNSUPPORTED_ARCH),
    # MSCCL++
    _f(Backend.MSCCLPP, r"PyMscclpp is unavailable because its dependencies failed to import", MISSING_DEPENDENCY),
    _f(Backend.MSCCLPP, r"PyMscclpp is disabled due to an unsupported (?:world size|group)", CONFIG_ERROR),
    # FlashInfer all-reduce + RMSNorm fusion
    _f(Backend.FLASHINFER_AR_FUSION, r"Failed to initialize FlashInfer workspace \(backend=[^)]*\): (?P<detail>.*?)\.? "
                               r"Disabling flashinfer allreduce fusion permanently", None),
    _f(Backend.FLASHINFER_AR_FUSION, r"Disabling flashinfer allreduce fusion permanently", UNSUPPORTED_ARCH),
    _f(Backend.FLASHINFER_AR_FUSION, r"FlashInfer AllReduce fusion disabled: .*NVLink clique", UNSUPPORTED_ARCH),
    _f(Backend.FLASHINFER_AR_FUSION, r"FlashInfer workspace preflight.*Skipping allreduce fusion", UNSUPPORTED_ARCH),
    _f(Backend.FLASHINFER_AR_FUSION, r"FlashInfer allreduce fusion disabled globally because workspace initialization "
                               r"failed", UNSUPPORTED_ARCH),
    # FlashInfer PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1)
    _f(Backend.PCIE_IPC, r"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no pcie_ipc_comm",
       MISSING_DEPENDENCY),
    _f(Backend.PCIE_IPC, r"Setup FlashInfer PCIe-IPC allreduce failed with (?P<detail>.*)", None),
    _f(Backend.PCIE_IPC, r"FlashInfer PCIe-IPC workspace \(max_numel=\d+\) failed: (?P<detail>.*?); reductions stay on "
                   r"NCCL", None),
    _f(Backend.PCIE_IPC, r"Deterministic inference is on; leaving PCIe-IPC all-reduce off", CONFIG_ERROR),
    _f(Backend.PCIE_IPC, r"FlashInfer PCIe-IPC all-reduce serves bf16 only", CONFIG_ERROR),
    # ROCm quick all-reduce
    _f(Backend.QUICK_AR, r"Custom quick allreduce is disabled because of missing custom quick allreduce library",
       MISSING_DEPENDENCY),
    _f(Backend.QUICK_AR, r"Custom quick allreduce is disabled (?:because it's not supported|due to an unsupported)",
       UNSUPPORTED_ARCH),
)


def best_category(text: str) -> str | None:
    """The category of the highest-priority strong rule matching ``text`` (None: no match)."""
    best: Rule | None = None
    for rule in RULES:
        if rule.weak:
            continue
        if rule.pattern.search(text) and (best is None or rule.priority > best.priority):
            best = rule
    return best.category if best else None
