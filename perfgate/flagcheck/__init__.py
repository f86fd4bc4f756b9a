"""Flag validation against SGLang's own ``ServerArgs`` parser, before any launch.

A renamed flag after an SGLang upgrade (``--cuda-graph-max-bs`` is a deprecated alias in
0.5.17 and rejected as ambiguous by 0.5.23) otherwise costs a model load to discover.
:func:`check_argv` / :func:`check_many` build SGLang's real parser
(``ServerArgs.add_cli_args`` on an ``argparse.ArgumentParser``) and parse each argv, in
seconds. Every problem names the bad flag, argparse's message and the closest valid
spelling (difflib over the parser's option strings; for an ambiguous prefix, the closest
of the candidates argparse lists).

SGLang imports torch, so the parsing happens in a **subprocess** (``python -m perfgate.flagcheck.worker
--sglang-path DIR --json ARGV_JSON``, :mod:`perfgate.flagcheck.worker`) that checks a whole batch in one
import; the pytest process never imports SGLang or torch. The subprocess skips ``sglang/__init__.py`` (a stub
package whose ``__path__`` is the real directory), so only what ``sglang.srt.server_args`` needs must be
installed (``ci/install-sglang-parsers.sh``).

Which parser: the SGLang the server's own environment imports (its interpreter and ``PYTHONPATH``), else the
installed parser of that release (:func:`installed_parser`: ``$PERFGATE_SGLANG_PARSERS/sglang-X``). When
SGLang cannot be imported the result has ``available=False`` and a ``reason``; callers skip. How one argv is
checked against a parser (no SGLang needed) is :mod:`perfgate.flagcheck.parsing`; this module is the caller's
side. """

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfgate.flagcheck.parsing import BAD_FLAG, FlagProblem
from perfgate.host.procs import perfgate_pythonpath

DEFAULT_TIMEOUT_S = 300.0
#: the folder of installed parsers, one ``sglang-X`` per release (``ci/install-sglang-parsers.sh DIR``)
PARSERS_ENV = "PERFGATE_SGLANG_PARSERS"


@dataclass(frozen=True, kw_only=True)
class FlagCheckResult:
    """The verdict of SGLang's parser on one argv."""

    available: bool
    argv: tuple[str, ...] = ()
    problems: tuple[FlagProblem, ...] = ()
    deprecations: tuple[str, ...] = ()
    sglang_version: str = "unknown"
    elapsed_s: float = 0.0  # wall time of the check (subprocess start, SGLang import, parse)
    parse_s: float = 0.0  # time spent parsing this argv
    reason: str = ""  # why SGLang's parser was not available

    @property
    def ok(self) -> bool:
        """Parsed without problems (False when the parser was not available)."""
        return self.available and not self.problems

    @property
    def category(self) -> str | None:
        """``bad-flag`` when the parser rejected the argv, else None."""
        return BAD_FLAG if self.problems else None

    def message(self) -> str:
        """One line for a test report."""
        if not self.available:
            return f"SGLang's parser is not available: {self.reason}"
        if not self.problems:
            return f"accepted by SGLang {self.sglang_version}"
        return f"SGLang {self.sglang_version} rejects: " + "; ".join(p.describe() for p in self.problems)


def installed_parser(version: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The folder holding SGLang ``version``'s parser under ``$PERFGATE_SGLANG_PARSERS`` (``DIR/sglang-X``, as
    ``ci/install-sglang-parsers.sh DIR`` fills it), or None where that release's parser is not installed."""
    root = (os.environ if environ is None else environ).get(PARSERS_ENV, "")
    if not root or not version:
        return None
    path = os.path.join(root, f"sglang-{version}")
    return path if os.path.isfile(os.path.join(path, "sglang", "srt", "server_args.py")) else None


def check_many(argvs: Mapping[str, Sequence[str]], sglang_path: str | None = None, *,
               python: str | None = None, env: Mapping[str, str] | None = None,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, FlagCheckResult]:
    """Check many argvs with one subprocess (one SGLang import). Never raises for SGLang's sake.

    ``sglang_path`` is a directory holding the ``sglang`` package (as made by
    ``pip install --no-deps --target DIR sglang==X``); None uses the SGLang that ``python`` finds.
    ``python`` is the interpreter (default: ``$PERFGATE_SGLANG_PYTHON`` or this one); ``env`` the variables set
    on top of this process's for it (an arm's ``PYTHONPATH``, say: the SGLang that arm's server imports).
    """
    exe = python or os.environ.get("PERFGATE_SGLANG_PYTHON") or sys.executable
    names = list(argvs)
    t0 = time.perf_counter()

    def unavailable(reason: str) -> dict[str, FlagCheckResult]:
        el = time.perf_counter() - t0
        return {n: FlagCheckResult(available=False, argv=tuple(argvs[n]), reason=reason, elapsed_s=el)
                for n in names}

    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="perfgate-flagcheck-", delete=False) as f:
        json.dump({n: [str(x) for x in argvs[n]] for n in names}, f)
        argv_file = f.name
    cmd = [exe, "-m", "perfgate.flagcheck.worker", "--json", argv_file]
    if sglang_path:
        cmd[3:3] = ["--sglang-path", str(sglang_path)]
    child = {**os.environ, **(env or {})}
    child["PYTHONPATH"] = perfgate_pythonpath(child)
    child.setdefault("PYTHONWARNINGS", "ignore")
    child.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=child,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return unavailable(f"flag check timed out after {timeout_s:.0f} s ({' '.join(cmd)})")
    except OSError as e:
        return unavailable(f"cannot run {exe}: {e}")
    finally:
        try:
            os.unlink(argv_file)
        except OSError:
            pass
    elapsed = time.perf_counter() - t0
    data: dict[str, Any] | None = None
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            data = json.loads(line)
            break
        except ValueError:
            continue
    if proc.returncode != 0 or not isinstance(data, dict):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return unavailable(f"flag-check subprocess failed (exit {proc.returncode}): {tail}")
    if not data.get("available"):
        return unavailable(str(data.get("reason") or "SGLang could not be imported"))
    version = str(data.get("sglang_version") or "unknown")
    out: dict[str, FlagCheckResult] = {}
    for n in names:
        r = data["results"].get(n, {})
        out[n] = FlagCheckResult(
            available=True,
            argv=tuple(argvs[n]),
            problems=tuple(FlagProblem(**{**p, "candidates": tuple(p.get("candidates", ()))})
                           for p in r.get("problems", [])),
            deprecations=tuple(r.get("deprecations", [])),
            sglang_version=version,
            elapsed_s=elapsed,
            parse_s=float(r.get("parse_s", 0.0)),
        )
    return out


def check_argv(argv: Sequence[str], *, sglang_path: str | None = None, python: str | None = None,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> FlagCheckResult:
    """Check one argv against SGLang's parser (see :func:`check_many`)."""
    return check_many({"argv": list(argv)}, sglang_path, python=python, timeout_s=timeout_s)["argv"]


def problems_by_flag(results: Mapping[str, FlagCheckResult]) -> dict[str, list[str]]:
    """``{flag: [argv names]}`` over a batch, for one summary line per bad flag."""
    out: dict[str, list[str]] = {}
    for name, res in results.items():
        for p in res.problems:
            out.setdefault(p.flag, []).append(name)
    return out


