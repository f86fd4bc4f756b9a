"""Why a record failed (Category) and what it came to (Outcome): the two vocabularies of a record.

Both are ``str`` enums: a member *is* its text (``Category.OOM == "oom"``), so records, profiles and
reports keep plain strings, while code names the members and a typo is an AttributeError, not a silently
unmatched string.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Category", "Outcome", "EXPECTABLE", "FROM_LOG"]


class _Text(str, Enum):
    def __str__(self) -> str:  # f"{Category.OOM}" is "oom" on every Python version
        return self.value

    __format__ = str.__format__  # type: ignore[assignment]
    __hash__ = str.__hash__  # a member finds its text's entry in a dict, and the reverse


class Category(_Text):
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
    # the trace shows another all-reduce family than the one the variant asks for (perfgate.profiling)
    FALLBACK = "fallback"
    WARM_CACHE = "warm-cache"


class Outcome(_Text):
    """What a record came to (its ``outcome`` property)."""

    PASS = "pass"
    FAIL = "fail"
    XFAIL = "xfail"
    XPASS = "xpass"
    INCONCLUSIVE = "inconclusive"
    SKIP = "skip"
    ERROR = "error"


#: the categories the server's log can decide
FROM_LOG: tuple[Category, ...] = (
    Category.BAD_FLAG, Category.CONFIG_ERROR, Category.UNSUPPORTED_ARCH, Category.CUDA_GRAPH_CAPTURE, Category.OOM,
    Category.NCCL_ERROR, Category.ASSERTION, Category.MISSING_DEPENDENCY, Category.STARTUP_TIMEOUT, Category.CRASH,
)
#: the categories an expectation (xfail) may name
EXPECTABLE: tuple[Category, ...] = (*FROM_LOG, Category.WRONG_OUTPUT, Category.SLOWER_THAN_BASELINE, Category.FALLBACK)
