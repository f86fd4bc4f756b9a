"""Why a record failed (Category) and what it came to (Outcome): the two vocabularies of a record; the names of
perfgate's own record kinds (RecordKind); and the communication backend a server variant must exercise (Backend).

Both are ``str`` enums: a member *is* its text (``Category.OOM == "oom"``), so records, profiles and
reports keep plain strings, while code names the members and a typo is an AttributeError, not a silently
unmatched string.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Backend", "Category", "Outcome", "RecordKind", "Why", "WHY_SAID", "EXPECTABLE", "FROM_LOG",
           "TRACE_FAMILIES"]


class Word(str, Enum):
    """A word of the record's vocabulary (an outcome, a category, a decision): the enum member is its text."""

    def __str__(self) -> str:  # f"{Category.OOM}" is "oom" on every Python version
        return str(self.value)

    def __format__(self, format_spec: str) -> str:  # str's, not Enum's: f"{Decision.SAME}" is "same" on 3.10-3.12 too
        return str.__format__(self, format_spec)

    __hash__ = str.__hash__  # a member finds its text's entry in a dict, and the reverse


class Category(Word):
    """A failure category (docs/profiles.md, "Failure categories") or why a record has no verdict."""

    # classified from the server's exit status and log (perfgate.classify)
    BAD_FLAG = "bad-flag"
    CONFIG_ERROR = "config-error"
    UNSUPPORTED_ARCH = "unsupported-arch"
    CUDA_GRAPH_CAPTURE = "cuda-graph-capture"
    OOM = "oom"
    NCCL_ERROR = "nccl-error"
    ASSERTION = "assertion"
    MISSING_DEPENDENCY = "missing-dependency"
    STARTUP_TIMEOUT = "startup-timeout"
    CRASH = "crash"
    # decided by the verdict from the numbers
    WRONG_OUTPUT = "wrong-output"
    SLOWER_THAN_BASELINE = "slower-than-baseline"
    MEASUREMENT_MISMATCH = "measurement-mismatch"
    # no verdict (inconclusive)
    CONFOUNDED = "confounded"
    NOISY = "noisy"
    NOISE_UNKNOWN = "noise-unknown"
    WITHIN_NOISE = "within-noise"
    NOT_EXERCISED = "not-exercised"
    CLIENT_BEHIND = "client-behind"  # an open-loop sender fell behind its schedule: the number is the client's
    UNRESOLVED = "unresolved"  # a goodput interval straddles its floor: more requests at its levels decide it
    # the trace shows another all-reduce family than the one the variant asks for (perfgate.plugin.profiling)
    FALLBACK = "fallback"
    WARM_CACHE = "warm-cache"


class Outcome(Word):
    """What a record came to (its ``outcome`` property)."""

    PASS = "pass"
    FAIL = "fail"
    XFAIL = "xfail"
    XPASS = "xpass"
    INCONCLUSIVE = "inconclusive"
    SKIP = "skip"
    ERROR = "error"


class Why(Word):
    """Why a comparison is undecided (or a check inconclusive): the one vocabulary every view says it in (the record's
    ``why_undecided``, the terminal's line, ``perfgate gate``, the Markdown, JSON and HTML views, bisect, history)."""

    HOST_BUSY = "host-busy"  # an unpaired change or miss measured on a busy host or a throttled GPU: re-run quiet
    ONE_SIDED = "one-sided-pair"  # start pairs with one arm disturbed and the other quiet, left out
    PRIOR_BOUND = "prior-bound"  # the pairs agree more closely than the prior allows: the prior keeps it open
    BUDGET_SPENT = "budget-spent"  # more start pairs would decide it; the budget (starts or time) ran out
    MIN_EFFECT_EDGE = "min-effect-edge"  # the change sits on the practical floor: no number of pairs decides it
    NO_HISTORY = "no-history"  # the reports compared carry no noise to judge against, and the prior cannot decide


#: each reason as a person reads it
WHY_SAID: dict[str, str] = {
    Why.HOST_BUSY: "measured on a busy host or a throttled GPU (re-run quiet, or pair the arms)",
    Why.ONE_SIDED: "start pairs with one arm on a busy host and the other quiet were left out",
    Why.PRIOR_BOUND: "the noise prior is wider than the pairs show; more pairs, or this box's measured noise, decide",
    Why.BUDGET_SPENT: "more start pairs would decide it; the budget ran out (--perfgate-max-starts, "
                      "--perfgate-max-time)",
    Why.MIN_EFFECT_EDGE: "the change sits on the practical floor (min effect): no number of pairs decides it",
    Why.NO_HISTORY: "no measured noise to judge against, and the prior cannot decide",
}


class RecordKind(Word):
    """The kind of one of perfgate's own records (its ``kind`` property). What each kind decides (its cases, run
    order, matrix row, floor update, the config it is compared with) is the registry in perfgate.kinds; the
    names live here so that the record contract (perfgate.record) names them too. A user's kind is any other text."""

    FLOOR = "floor"
    SWEEP = "sweep"
    ACCEPTANCE = "acceptance"
    CROSSCHECK = "crosscheck"
    SPECULATION = "speculation-vs-baseline"
    VARIANT = "variant"
    STACK_PAIR = "stack-pair"
    PROFILE = "profile"
    GOODPUT = "goodput"
    CROSSOVER = "crossover"
    ALLREDUCE = "allreduce"


#: the categories the server's log can decide
FROM_LOG: tuple[Category, ...] = (
    Category.BAD_FLAG, Category.CONFIG_ERROR, Category.UNSUPPORTED_ARCH, Category.CUDA_GRAPH_CAPTURE, Category.OOM,
    Category.NCCL_ERROR, Category.ASSERTION, Category.MISSING_DEPENDENCY, Category.STARTUP_TIMEOUT, Category.CRASH,
)
#: the categories an expectation (xfail) may name
EXPECTABLE: tuple[Category, ...] = (*FROM_LOG, Category.WRONG_OUTPUT, Category.SLOWER_THAN_BASELINE, Category.FALLBACK)


class Backend(Word):
    """The communication backend a server variant must exercise: ``backend`` in ``baselines/variants.toml``
    (checked at load: an unknown one is an error naming these), the backend a fallback warning in the log
    names (:mod:`perfgate.classify.rules`) and the all-reduce family a trace's kernels show
    (:mod:`perfgate.measuring.trace`). The micro tier's backends (``perfgate.allreduce.BACKENDS``) are another list:
    ways of running one all-reduce outside a server."""

    NCCL = "nccl"
    CUSTOM_AR = "custom_ar"  # SGLang's custom all-reduce (IPC buffers, P2P)
    QUICK_AR = "quick_ar"  # ROCm quick all-reduce
    PCIE_IPC = "pcie_ipc"  # FlashInfer's PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE)
    TORCH_SYMM_MEM = "torch_symm_mem"
    MSCCLPP = "mscclpp"
    FLASHINFER_AR_FUSION = "flashinfer_ar_fusion"  # FlashInfer's all-reduce + RMSNorm fusion
    DEEPEP = "deepep"  # MoE all-to-all
    FLASHINFER_A2A = "flashinfer_a2a"  # MoE all-to-all


#: the all-reduce backends whose kernels a trace tells apart (perfgate.measuring.trace's families)
TRACE_FAMILIES: frozenset[Backend] = frozenset({
    Backend.NCCL, Backend.CUSTOM_AR, Backend.FLASHINFER_AR_FUSION, Backend.PCIE_IPC, Backend.TORCH_SYMM_MEM,
    Backend.MSCCLPP,
})
