"""Failure classification from a server's exit status and log.

:func:`classify` turns ``(returncode, log_text)`` into a :class:`Classification`: one of
the failure categories of docs/profiles.md (or ``None``), the log line that decided it, the
inner cause where an outer failure wraps another, and every backend *fallback* found —
"X is disabled / not available / falls back to NCCL" warnings. A backend that fell back did
not run, and a record must say so (:func:`fallbacks_for`).

The rules are data (:data:`RULES`, :data:`FALLBACK_RULES`): ``(category, regex, priority)``.
The highest-priority match wins, so the most specific line decides:

- ``Capture cuda graph failed: NCCL error ...`` is ``cuda-graph-capture`` (cause
  ``nccl-error``): the seed's ``NCCL_ALGO=Tree`` failure. The collective works eagerly;
  capturing it is what breaks, so the capture is the category.
- ``Capture cuda graph failed: CUDA out of memory ...`` is ``oom`` (cause
  ``cuda-graph-capture``). Decision: out of memory is out of memory in whatever phase it
  happens; the fix is a memory setting (``--mem-fraction-static``, a smaller
  ``--cuda-graph-max-bs-decode``), and the simulated server records it the same way.
- Facts about the environment outrank the phase they surface in: an unsupported
  architecture (``Capture cuda graph failed: No supported CUDA architectures found for
  major versions [9, 10]`` on SM120) or a missing module is ``unsupported-arch`` /
  ``missing-dependency``.
- ``Scheduler hit an exception`` whose traceback ends in ``AssertionError`` is ``assertion``;
  with no recognised cause it is ``crash``.

Priorities: bad-flag > unsupported-arch > missing-dependency > oom > cuda-graph-capture >
nccl-error > assertion > config-error > crash. *Weak* signatures (a bare traceback, NCCL
WARN, SIGQUIT chatter) count only when the process died.

Lines after ``SIGTERM received`` (perfgate's own teardown) are ignored for failures, so a
healthy server's shutdown noise ("SIGQUIT received ... one child failed") is no crash.
Header lines of captured-log fixtures (``# source: ...``) are skipped.
``startup-timeout`` is returned only for ``returncode=None`` (still running at the
deadline) with no failure in the log and no ready line; a log that ends in perfgate's own
teardown with no failure before it is no failure (``category=None``).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass

from perfgate.categories import FROM_LOG, Category

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
    defaulting to crash".
    """

    backend: str
    pattern: re.Pattern[str]
    category: str | None


@dataclass(frozen=True, kw_only=True)
class Fallback:
    """One backend that did not run: which, why (a category) and the log line that says so.

    ``backend`` uses the names of ``baselines/variants.toml`` (``torch_symm_mem``,
    ``flashinfer_ar_fusion``, ``custom_ar``, ``mscclpp``, ``pcie_ipc``, ``quick_ar``).
    """

    backend: str
    category: str
    line: str
    falls_back_to: str = "nccl"

    @property
    def evidence(self) -> str:
        """The log line (alias of ``line``)."""
        return self.line

    def describe(self) -> str:
        """E.g. ``torch_symm_mem fell back to NCCL: unsupported-arch``."""
        return f"{self.backend} fell back to {self.falls_back_to.upper()}: {self.category}"


@dataclass(frozen=True, kw_only=True)
class Classification:
    """What a server log says about how the server ended (or did not start)."""

    category: str | None
    evidence: str = ""
    cause: str | None = None
    fallback: bool = False
    fallbacks: tuple[Fallback, ...] = ()
    phase: str | None = None  # last start-up phase reached (see phase_of)
    ready: bool = False


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
    _r(MISSING_DEPENDENCY, r"Error while finding module specification for .*\(ModuleNotFoundError: No module named", 86),
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


def _f(backend: str, pattern: str, category: str | None) -> FallbackRule:
    return FallbackRule(backend=backend, pattern=re.compile(pattern), category=category)


_CAR = r"Custom ?[Aa]ll ?[Rr]educe(?:V2)? is disabled "

#: Backend fallbacks: the server keeps running on NCCL; the backend a variant asked for did not run.
#: A ``None`` category classifies the error text (group ``detail``) and defaults to unsupported-arch.
FALLBACK_RULES: tuple[FallbackRule, ...] = (
    # SGLang's custom all-reduce (CustomAllReduceV2 first, then CustomAllreduce)
    _f("custom_ar", _CAR + r"because it's not supported on more than two PCIe-only GPUs", UNSUPPORTED_ARCH),
    _f("custom_ar", _CAR + r"because your platform lacks GPU P2P capability", UNSUPPORTED_ARCH),
    _f("custom_ar", _CAR + r"due to an unsupported world size", CONFIG_ERROR),
    _f("custom_ar", _CAR + r"because this process group spans across nodes", CONFIG_ERROR),
    _f("custom_ar", r"Setup Custom allreduce failed with (?P<detail>.*?)(?:\. To silence this warning|$)", None),
    # torch symmetric memory
    _f("torch_symm_mem", r"TorchSymmMemCommunicator: Device capability \S+ not supported", UNSUPPORTED_ARCH),
    _f("torch_symm_mem", r"TorchSymmMemCommunicator: World size \d+ not supported", CONFIG_ERROR),
    _f("torch_symm_mem", r"TorchSymmMemCommunicator: torch symmetric memory multicast operations are not "
                         r"supported", UNSUPPORTED_ARCH),
    _f("torch_symm_mem", r"(?<!Torch)SymmMemCommunicator: Device capability \S+ not supported", UNSUPPORTED_ARCH),
    # MSCCL++
    _f("mscclpp", r"PyMscclpp is unavailable because its dependencies failed to import", MISSING_DEPENDENCY),
    _f("mscclpp", r"PyMscclpp is disabled due to an unsupported (?:world size|group)", CONFIG_ERROR),
    # FlashInfer all-reduce + RMSNorm fusion
    _f("flashinfer_ar_fusion", r"Failed to initialize FlashInfer workspace \(backend=[^)]*\): (?P<detail>.*?)\.? "
                               r"Disabling flashinfer allreduce fusion permanently", None),
    _f("flashinfer_ar_fusion", r"Disabling flashinfer allreduce fusion permanently", UNSUPPORTED_ARCH),
    _f("flashinfer_ar_fusion", r"FlashInfer AllReduce fusion disabled: .*NVLink clique", UNSUPPORTED_ARCH),
    _f("flashinfer_ar_fusion", r"FlashInfer workspace preflight.*Skipping allreduce fusion", UNSUPPORTED_ARCH),
    _f("flashinfer_ar_fusion", r"FlashInfer allreduce fusion disabled globally because workspace initialization "
                               r"failed", UNSUPPORTED_ARCH),
    # FlashInfer PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1)
    _f("pcie_ipc", r"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no pcie_ipc_comm",
       MISSING_DEPENDENCY),
    _f("pcie_ipc", r"Setup FlashInfer PCIe-IPC allreduce failed with (?P<detail>.*)", None),
    _f("pcie_ipc", r"FlashInfer PCIe-IPC workspace \(max_numel=\d+\) failed: (?P<detail>.*?); reductions stay on "
                   r"NCCL", None),
    _f("pcie_ipc", r"Deterministic inference is on; leaving PCIe-IPC all-reduce off", CONFIG_ERROR),
    _f("pcie_ipc", r"FlashInfer PCIe-IPC all-reduce serves bf16 only", CONFIG_ERROR),
    # ROCm quick all-reduce
    _f("quick_ar", r"Custom quick allreduce is disabled because of missing custom quick allreduce library",
       MISSING_DEPENDENCY),
    _f("quick_ar", r"Custom quick allreduce is disabled (?:because it's not supported|due to an unsupported)",
       UNSUPPORTED_ARCH),
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SOURCE_FRAME = re.compile(r'^(\s*)File ".*", line \d+')


def _is_source_line(prev: str, line: str) -> bool:
    """``line`` is the source Python prints under a traceback frame (indented deeper than ``File ...``)."""
    m = _SOURCE_FRAME.match(prev)
    if m is None:
        return False
    indent = len(line) - len(line.lstrip())
    return indent > len(m.group(1))


_TEARDOWN = re.compile(r"SIGTERM received")
_READY = re.compile(r"The server is fired up and ready to roll!")
_FINAL_EXC = re.compile(r"^\s*((?:[\w.]+\.)?(?:[A-Z]\w*)?(?:Error|Exception|Exit|Interrupt)\b:?.*)$")

_PHASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ready", re.compile(r"The server is fired up and ready to roll!")),
    ("cuda-graph", re.compile(r"Capture .*(?:cuda graph|CUDA graph).*(?:begin|end)|Capture cuda graph "
                              r"(?:begin|end)|Capturing batches|Capture .* (?:begin|end)\. ", re.IGNORECASE)),
    ("kv-cache", re.compile(r"KV Cache is allocated|Memory pool end|max_total_num_tokens=")),
    ("weights", re.compile(r"Load weight (?:begin|end)|Loading safetensors checkpoint shards|"
                           r"Loading pt checkpoint shards")),
    ("warmup", re.compile(r"Uvicorn running on|Application startup complete|Start of pd disaggregation warmup")),
)


def phase_of(line: str) -> str | None:
    """Start-up phase a log line marks: weights, kv-cache, cuda-graph, warmup, ready (or None)."""
    text = _ANSI.sub("", line)
    if "Initialization failed" in text or "server_args=ServerArgs(" in text:
        return None
    for name, pattern in _PHASES:
        if pattern.search(text):
            return name
    return None


def _lines(log_text: str) -> list[str]:
    out: list[str] = []
    for raw in re.split(r"\r\n|\r|\n", log_text):
        if raw.startswith("# source:"):
            continue
        out.append(_ANSI.sub("", raw))
    return out


def _fallback_of(line: str) -> Fallback | None:
    for rule in FALLBACK_RULES:
        m = rule.pattern.search(line)
        if m is None:
            continue
        category = rule.category
        if category is None:
            detail = m.groupdict().get("detail") or ""
            category = _best_category(detail) or UNSUPPORTED_ARCH
        return Fallback(backend=rule.backend, category=category, line=line.strip())
    return None


def _best_category(text: str) -> str | None:
    best: Rule | None = None
    for rule in RULES:
        if rule.weak:
            continue
        if rule.pattern.search(text) and (best is None or rule.priority > best.priority):
            best = rule
    return best.category if best else None


def find_fallbacks(log_text: str) -> tuple[Fallback, ...]:
    """Every backend fallback warning in the log, in order, one per (backend, line)."""
    out: list[Fallback] = []
    seen: set[tuple[str, str]] = set()
    for line in _lines(log_text):
        fb = _fallback_of(line)
        if fb is None:
            continue
        key = (fb.backend, _strip_prefix(fb.line))
        if key in seen:
            continue
        seen.add(key)
        out.append(fb)
    return tuple(out)


def _strip_prefix(line: str) -> str:
    """Drop a ``[timestamp TPn]`` prefix so per-rank duplicates collapse."""
    return re.sub(r"^\[[^\]]*\]\s*", "", line)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BACKEND_ALIASES: dict[str, tuple[str, ...]] = {
    "custom_ar": ("customar", "customallreduce", "customallreducev2", "customarpcie"),
    "torch_symm_mem": ("torchsymmmem", "torchsymmetricmemory", "enabletorchsymmmem"),
    "mscclpp": ("mscclpp", "pymscclpp", "enablemscclpp", "msccl"),
    "flashinfer_ar_fusion": ("flashinferarfusion", "flashinferallreducefusion", "enableflashinferallreducefusion",
                             "flashinferallreducefusionbackend"),
    "pcie_ipc": ("pcieipc", "pcieipcallreduce", "sglangenablepcieipcallreduce", "flashinferpcieipc"),
    "quick_ar": ("quickar", "quickallreduce"),
}


def backend_matches(backend: str, keyword: str) -> bool:
    """Whether a fallback's backend is the one a keyword (variant name, flag) refers to."""
    k = _norm(keyword)
    if not k:
        return False
    names = (_norm(backend),) + _BACKEND_ALIASES.get(backend, ())
    return any(k == n or (len(k) >= 4 and (k in n or n in k)) for n in names)


def fallbacks_for(log_text: str, backend_keywords: Iterable[str]) -> tuple[Fallback, ...]:
    """The fallbacks of the backends a variant wanted, e.g. ``["torch_symm_mem"]``.

    Keywords are matched loosely (``--enable-torch-symm-mem``, ``torch_symm_mem`` and
    ``torch-symm-mem`` all find ``torch_symm_mem``). Empty when the wanted backend ran.
    """
    keys = [k for k in backend_keywords if k]
    return tuple(fb for fb in find_fallbacks(log_text) if any(backend_matches(fb.backend, k) for k in keys))


def _signal_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name} (returncode {returncode})"
        except ValueError:
            return f"killed by signal {-returncode} (returncode {returncode})"
    if returncode > 128:
        try:
            return f"exit status {returncode} ({signal.Signals(returncode - 128).name})"
        except ValueError:
            pass
    return f"exit status {returncode}"


def classify(returncode: int | None, log_text: str) -> Classification:
    """Classify how a server ended from its returncode (None: still running) and log text.

    Never raises; see the module docstring for the rules.
    """
    lines = _lines(log_text or "")
    died = returncode is not None and returncode != 0
    fallbacks: list[Fallback] = []
    seen_fb: set[tuple[str, str]] = set()
    phase: str | None = None
    ready = False
    torn_down = False
    matches: list[tuple[Rule, int, str]] = []
    for idx, line in enumerate(lines):
        if not line.strip():
            continue
        if idx and _is_source_line(lines[idx - 1], line):
            continue  # a traceback's source line (`raise Exception(f"Capture cuda graph failed: ...`) is not the error
        p = phase_of(line)
        if p is not None:
            phase = p
            ready = ready or p == "ready"
        fb = _fallback_of(line)
        if fb is not None:
            key = (fb.backend, _strip_prefix(fb.line))
            if key not in seen_fb:
                seen_fb.add(key)
                fallbacks.append(fb)
            continue  # a fallback warning is never a fatal line
        if torn_down:
            continue
        if _TEARDOWN.search(line):
            torn_down = True
            continue
        for rule in RULES:
            if rule.weak and not died:
                continue
            if rule.pattern.search(line):
                matches.append((rule, idx, line))

    category: str | None = None
    evidence = ""
    cause: str | None = None
    if matches:
        # highest priority wins; among equals the first line (the root of a traceback chain)
        best_rule, best_idx, best_line = max(matches, key=lambda m: (m[0].priority, -m[1]))
        category = best_rule.category
        evidence = best_line.strip()
        # the inner error: another category on the deciding line ("Capture cuda graph failed: NCCL error"),
        # or, for a capture failure, anywhere in its traceback
        others = [m for m in matches if m[0].category not in (category, CRASH, CONFIG_ERROR) and not m[0].weak]
        inner = [m for m in others if m[1] == best_idx] or (others if category == CUDA_GRAPH_CAPTURE else [])
        if inner:
            cause = max(inner, key=lambda m: (m[0].priority, -m[1]))[0].category
        if category == CRASH:
            final = _final_exception(lines, best_idx)
            if final:
                evidence = final
        if category == BAD_FLAG and best_rule.weak:
            # a bare "usage:" line: prefer the "error:" line next to it
            err = next((ln for ln in lines if re.search(r": error: ", ln)), None)
            if err:
                evidence = err.strip()
    elif torn_down:
        category = None  # stopped on purpose (perfgate's SIGTERM), nothing failed before that
        evidence = "stopped by SIGTERM (teardown)"
    elif returncode is None and ready:
        category = None  # up and serving
    elif returncode is None:
        category = STARTUP_TIMEOUT
        evidence = f"still running at the deadline; last phase reached: {phase or 'none'}"
    elif returncode == 2:
        category = BAD_FLAG
        evidence = "exit status 2 (argparse usage error) with no message in the log"
    elif died:
        category = CRASH
        evidence = _final_exception(lines, 0) or _signal_text(returncode)
    if category is not None and category not in (CRASH, STARTUP_TIMEOUT) and not evidence:
        evidence = _signal_text(returncode) if returncode is not None else ""
    return Classification(
        category=category,
        evidence=evidence[:500],
        cause=cause,
        fallback=bool(fallbacks),
        fallbacks=tuple(fallbacks),
        phase=phase,
        ready=ready,
    )


def _final_exception(lines: list[str], start: int) -> str | None:
    """The last ``SomeError: message`` line at or after ``start`` (end of the traceback)."""
    found: str | None = None
    for line in lines[start:]:
        if _TEARDOWN.search(line):
            break
        m = _FINAL_EXC.match(line)
        if m and not line.lstrip().startswith(("File ", "Traceback")):
            found = m.group(1).strip()
    return found
