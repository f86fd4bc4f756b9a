"""Failure classification from a server's exit status and log.

:func:`classify` turns ``(returncode, log_text)`` into a :class:`Classification`: one of
the failure categories of docs/profiles.md (or ``None``), the log line that decided it, the
inner cause where an outer failure wraps another, and every backend *fallback* found —
"X is disabled / not available / falls back to NCCL" warnings. A backend that fell back did
not run, and a record must say so (:func:`perfgate.classify.fallbacks.fallbacks_for`).

The rules are data (:mod:`perfgate.classify.rules`): ``(category, regex, priority)``.
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
from dataclasses import dataclass

from perfgate.classify.fallbacks import Fallback, fallback_of, strip_prefix
from perfgate.classify.phases import log_lines, phase_of
from perfgate.classify.rules import BAD_FLAG, CONFIG_ERROR, CRASH, CUDA_GRAPH_CAPTURE, RULES, STARTUP_TIMEOUT, Rule


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


_SOURCE_FRAME = re.compile(r'^(\s*)File ".*", line \d+')


def _is_source_line(prev: str, line: str) -> bool:
    """``line`` is the source Python prints under a traceback frame (indented deeper than ``File ...``)."""
    m = _SOURCE_FRAME.match(prev)
    if m is None:
        return False
    indent = len(line) - len(line.lstrip())
    return indent > len(m.group(1))


_TEARDOWN = re.compile(r"SIGTERM received")
_FINAL_EXC = re.compile(r"^\s*((?:[\w.]+\.)?(?:[A-Z]\w*)?(?:Error|Exception|Exit|Interrupt)\b:?.*)$")


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
    lines = log_lines(log_text or "")
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
        fb = fallback_of(line)
        if fb is not None:
            key = (fb.backend, strip_prefix(fb.line))
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
