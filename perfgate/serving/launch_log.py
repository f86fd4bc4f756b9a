"""What a server's log says about its config after a launch: a variant's backend that SGLang fell back from
(:func:`fallback_verdict`, a failure with the fallback's category) and where an unrecognized flag came from
(:func:`bad_flag_hint`: the file and key, and the closest flag this SGLang knows), and the failure of requests a
running server did not serve, with its log's last lines (:func:`failed_requests_verdict`). The server pool
(:mod:`perfgate.serving.pool`) and the step profiler ask them; ``state`` is anything with the session's
``profile`` and ``variants``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.categories import Category, Outcome
from perfgate.measuring.verdict import Verdict

if TYPE_CHECKING:
    from perfgate.profiles.config import ServerConfig

__all__ = ["bad_flag_hint", "fallback_verdict", "failed_requests_verdict"]


def fallback_verdict(state: Any, config: ServerConfig, log_path: str | Path | None) -> Verdict | None:
    """A variant whose backend SGLang disabled (its log says so, e.g. an unsupported GPU) did not run.
    ``state``: anything with the session's ``variants``."""
    if not config.variant or not log_path:
        return None
    variant = state.variants.get(config.variant)
    if not variant.backend:
        return None
    from perfgate.classify import classify

    cls = classify(None, Path(log_path).read_text(errors="replace"))
    for fb in cls.fallbacks:
        if fb.backend == variant.backend:
            return Verdict(outcome=Outcome.FAIL, category=Category(fb.category),
                           message=f"{variant.name}: {variant.backend} did not run, SGLang fell back: "
                                   f"{fb.line.strip()}")
    return None


def bad_flag_hint(state: Any, config: ServerConfig, log_path: str | Path | None) -> str:
    """Where an unrecognized flag came from (file and key) and the closest flag the launcher knows.
    ``state``: anything with the session's ``profile`` and ``variants``."""
    import difflib
    import re

    text = Path(log_path).read_text(errors="replace") if log_path else ""
    m = re.search(r"unrecognized arguments: (--[\w-]+)", text)
    if m is None:
        return ""
    flag = m.group(1)
    known = sorted(set(re.findall(r"(?<![\w-])--[a-z0-9][\w-]*", text)) - {flag})
    close = difflib.get_close_matches(flag, known, n=1)
    name = flag[2:]
    p = state.profile
    where = f"{p.path} [server]"
    if config.variant and name in state.variants.get(config.variant).flags:
        where = f"{state.variants.path} [variants.{config.variant}] flags"
    elif name in p.mode(config.mode).flags:
        where = f"{p.path} [modes.{config.mode}] flags"
    fix = f"did you mean {close[0]}?" if close else "remove it, or use the flag's name in this SGLang version"
    return f"{where}: key '{name}': {flag} is not a flag of this SGLang; fix: {fix}\n"


def failed_requests_verdict(name: str, failures: int, errors: tuple[str, ...], log_path: str, *,
                            warmup: bool = False) -> Verdict:
    """A crash: ``failures`` requests of config ``name`` failed while measuring (``warmup``: in its warm-up), their
    first distinct errors, and the last lines of the server's log where it has one."""
    from perfgate.host.procs import tail

    during = " (warm-up)" if warmup else ""
    msg = f"{failures} request(s) failed while measuring {name}{during}: {'; '.join(list(dict.fromkeys(errors))[:3])}"
    if log_path:
        msg += f"\n  log: {log_path}\n  last lines of the log:\n" + "\n".join(
            "    | " + ln for ln in tail(log_path, 15).splitlines())
    return Verdict(outcome=Outcome.FAIL, category=Category.CRASH, message=msg)
