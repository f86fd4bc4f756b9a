"""Flag validation against SGLang's own ``ServerArgs`` parser, before any launch.

A renamed flag after an SGLang upgrade (``--cuda-graph-max-bs`` is a deprecated alias in
0.5.17 and rejected as ambiguous by 0.5.23) otherwise costs a model load to discover.
:func:`check_argv` / :func:`check_many` build SGLang's real parser
(``ServerArgs.add_cli_args`` on an ``argparse.ArgumentParser``) and parse each argv, in
seconds. Every problem names the bad flag, argparse's message and the closest valid
spelling (difflib over the parser's option strings; for an ambiguous prefix, the closest
of the candidates argparse lists).

SGLang imports torch, so the parsing happens in a **subprocess**
(``python -m perfgate.flagcheck --sglang-path DIR --json ARGV_JSON``) that checks a whole
batch in one import; the pytest process never imports SGLang or torch. The subprocess
skips ``sglang/__init__.py`` (a stub package whose ``__path__`` is the real directory), so
only what ``sglang.srt.server_args`` needs must be installed (``ci/install-sglang-parsers.sh``).

When SGLang cannot be imported the result has ``available=False`` and a ``reason``;
callers skip.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BAD_FLAG = "bad-flag"
DEFAULT_TIMEOUT_S = 300.0
#: Placeholder model path added when an argv has none (0.5.23 makes --model-path required).
PLACEHOLDER_MODEL = "/perfgate-flagcheck/model"


@dataclass(frozen=True, kw_only=True)
class FlagProblem:
    """One argument SGLang's parser rejects.

    ``kind`` is ``unknown`` (no such flag), ``ambiguous`` (a prefix of several flags),
    ``value`` (bad or missing value) or ``required`` (a required flag is missing).
    """

    flag: str
    kind: str
    message: str
    suggestion: str | None = None
    candidates: tuple[str, ...] = ()
    category: str = BAD_FLAG

    def describe(self) -> str:
        """``--x: argparse's message; did you mean --y?``"""
        text = f"{self.flag}: {self.message}"
        if self.suggestion:
            text += f"; did you mean {self.suggestion}?"
        return text


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


# ---------------------------------------------------------------- parsing logic (no SGLang needed)


class ParseError(Exception):
    """argparse called ``error()``: the parser rejected the command line."""


class CheckingParser(argparse.ArgumentParser):
    """An ArgumentParser that raises :class:`ParseError` instead of exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("exit_on_error", False)
        kwargs.setdefault("add_help", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise ParseError(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:  # type: ignore[override]
        raise ParseError(message or f"parser exited with status {status}")


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every ``--long`` option string the parser knows."""
    return sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})


def closest(word: str, choices: Sequence[str], *, cutoff: float = 0.6) -> str | None:
    """The closest spelling of ``word`` among ``choices`` (difflib), or None."""
    if not choices:
        return None
    hits = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    if hits:
        return hits[0]
    # a prefix relation is a strong hint even when the ratio is low (--tp vs --tp-size)
    pref = [c for c in choices if c.startswith(word) or word.startswith(c)]
    return min(pref, key=len) if pref else None


def _flag_name(token: str) -> str:
    return token.split("=", 1)[0]


def _drop(argv: list[str], token_index: int) -> list[str]:
    """argv without the token at ``token_index`` and the values after it."""
    end = token_index + 1
    if "=" not in argv[token_index]:
        while end < len(argv) and not _looks_like_flag(argv[end]):
            end += 1
    return argv[:token_index] + argv[end:]


def _looks_like_flag(token: str) -> bool:
    return token.startswith("-") and not re.fullmatch(r"-\d+(?:\.\d+)?(?:e-?\d+)?", token)


def _find_token(argv: list[str], flag: str) -> int | None:
    for i, tok in enumerate(argv):
        if _flag_name(tok) == flag:
            return i
    return None


def _problem_from_error(message: str, argv: list[str], options: list[str],
                        parser: argparse.ArgumentParser) -> tuple[FlagProblem, int | None]:
    """Turn argparse's message into a problem and the index of the token to drop."""
    m = re.match(r"ambiguous option: (\S+?)(?:=\S*)? could match (.+)$", message)
    if m:
        flag = m.group(1)
        cands = tuple(c.strip() for c in m.group(2).split(","))
        return (FlagProblem(flag=flag, kind="ambiguous", message=message, candidates=cands,
                            suggestion=closest(flag, cands, cutoff=0.0)), _find_token(argv, flag))
    m = re.match(r"argument ([^:]+): (.*)$", message, re.DOTALL)
    if m:
        names = [n.strip() for n in m.group(1).split("/")]
        flag = next((n for n in names if n.startswith("--")), names[0])
        detail = m.group(2)
        suggestion: str | None = None
        cm = re.match(r"invalid choice: '([^']*)' \(choose from (.*)\)", detail)
        if cm:
            choices = [c.strip().strip("'\"") for c in cm.group(2).split(",")]
            suggestion = closest(cm.group(1), choices)
        idx = next((i for i, tok in enumerate(argv) if _flag_name(tok) in names), None)
        return FlagProblem(flag=flag, kind="value", message=message, suggestion=suggestion), idx
    m = re.match(r"the following arguments are required: (.*)$", message)
    if m:
        return FlagProblem(flag=m.group(1).split(",")[0].strip(), kind="required", message=message), None
    m = re.match(r"unrecognized arguments: (.*)$", message)
    if m:
        flag = m.group(1).split()[0]
        return (FlagProblem(flag=flag, kind="unknown", message=message,
                            suggestion=closest(_flag_name(flag), options)), _find_token(argv, _flag_name(flag)))
    return FlagProblem(flag=argv[0] if argv else "", kind="value", message=message), None


def check_with_parser(parser: argparse.ArgumentParser, argv: Sequence[str],
                      *, max_problems: int = 50) -> tuple[tuple[FlagProblem, ...], tuple[str, ...]]:
    """Parse ``argv`` with ``parser`` and collect every problem (not only the first).

    The parser must not exit (use :class:`CheckingParser`, or any parser whose ``error``
    raises). After each rejected flag, that flag and its values are dropped and the rest is
    parsed again, so one run reports all of them. Returns (problems, deprecation messages).
    """
    options = option_strings(parser)
    rest = list(argv)
    problems: list[FlagProblem] = []
    deprecations: list[str] = []
    for _ in range(max_problems):
        out, err = io.StringIO(), io.StringIO()
        try:
            with warnings.catch_warnings(record=True) as caught, redirect_stdout(out), redirect_stderr(err):
                warnings.simplefilter("always")
                _, extras = parser.parse_known_args(rest)
        except (ParseError, argparse.ArgumentError) as e:
            msg = str(e) if isinstance(e, ParseError) else f"argument {e.argument_name}: {e.message}"
            problem, idx = _problem_from_error(msg, rest, options, parser)
            problems.append(problem)
            if idx is None:
                break
            rest = _drop(rest, idx)
            continue
        for text in [*(str(w.message) for w in caught), *out.getvalue().splitlines(),
                     *err.getvalue().splitlines()]:
            text = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
            if text and "deprecat" in text.lower() and text not in deprecations:
                deprecations.append(text)
        i = 0
        while i < len(extras):
            tok = extras[i]
            if _looks_like_flag(tok):
                flag = _flag_name(tok)
                values = []
                j = i + 1
                while j < len(extras) and not _looks_like_flag(extras[j]):
                    values.append(extras[j])
                    j += 1
                shown = " ".join([tok, *values])
                problems.append(FlagProblem(flag=flag, kind="unknown",
                                            message=f"unrecognized arguments: {shown}",
                                            suggestion=closest(flag, options)))
                i = j
            else:
                problems.append(FlagProblem(flag=tok, kind="unknown", message=f"unrecognized arguments: {tok}"))
                i += 1
        break
    return tuple(problems), tuple(deprecations)


def with_model_path(argv: Sequence[str]) -> list[str]:
    """``argv`` with a placeholder ``--model-path`` when it names no model (parsing only)."""
    for tok in argv:
        if _flag_name(tok) in ("--model-path", "--model"):
            return list(argv)
    return ["--model-path", PLACEHOLDER_MODEL, *argv]


# ---------------------------------------------------------------- the subprocess side


def _sglang_version(pkg_parent: Path) -> str:
    import importlib.metadata

    try:
        for dist in importlib.metadata.distributions(path=[str(pkg_parent)]):
            if (dist.metadata["Name"] or "").lower() == "sglang":
                return dist.version
    except Exception:
        pass
    for name in ("_version.py", "version.py"):
        f = pkg_parent / "sglang" / name
        if f.exists():
            m = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", f.read_text())
            if m:
                return m.group(1)
    return "unknown"


def build_sglang_parser(sglang_path: str | None) -> tuple[argparse.ArgumentParser, str, float]:
    """Import ``ServerArgs`` (skipping ``sglang/__init__``) and return (parser, version, import_s).

    Runs in the flag-check subprocess. Raises ImportError (or anything the import raises)
    when SGLang cannot be imported.
    """
    import importlib.util
    import types

    t0 = time.perf_counter()
    if sglang_path:
        parent = Path(sglang_path).resolve()
        if not (parent / "sglang" / "srt" / "server_args.py").exists():
            raise ImportError(f"no sglang/srt/server_args.py under {parent}")
        sys.path.insert(0, str(parent))
    else:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("sglang is not installed (no module named 'sglang')")
        parent = Path(next(iter(spec.submodule_search_locations))).parent
    if "sglang" not in sys.modules:
        stub = types.ModuleType("sglang")
        stub.__path__ = [str(parent / "sglang")]  # skip sglang/__init__.py: only ServerArgs is needed
        sys.modules["sglang"] = stub
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    parser = CheckingParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser, _sglang_version(parent), time.perf_counter() - t0


def run_batch(argvs: Mapping[str, Sequence[str]], sglang_path: str | None) -> dict[str, Any]:
    """Check every argv with one import of SGLang; the JSON the subprocess prints."""
    t0 = time.perf_counter()
    try:
        parser, version, import_s = build_sglang_parser(sglang_path)
    except BaseException as e:  # an import can raise anything (SystemExit included)
        return {"available": False, "reason": f"{type(e).__name__}: {e}".strip()[:500],
                "sglang_version": "unknown", "import_s": time.perf_counter() - t0, "results": {}}
    results: dict[str, Any] = {}
    for name, argv in argvs.items():
        t1 = time.perf_counter()
        try:
            problems, deprecations = check_with_parser(parser, with_model_path(argv))
        except Exception as e:  # a parser action blew up: report it, keep going
            problems = (FlagProblem(flag="", kind="value", message=f"{type(e).__name__}: {e}"),)
            deprecations = ()
        results[name] = {
            "argv": list(argv),
            "problems": [asdict(p) for p in problems],
            "deprecations": list(deprecations),
            "parse_s": time.perf_counter() - t1,
        }
    return {"available": True, "reason": "", "sglang_version": version, "import_s": import_s,
            "results": results}


def main(args: Sequence[str] | None = None) -> int:
    """``python -m perfgate.flagcheck [--sglang-path DIR] --json ARGV_JSON``: print the verdicts as JSON.

    ARGV_JSON holds ``{"name": ["--flag", "value", ...], ...}`` (or ``-`` for stdin).
    """
    argl = list(sys.argv[1:] if args is None else args)
    sglang_path: str | None = None
    source: str | None = None
    i = 0
    while i < len(argl):
        tok = argl[i]
        if tok in ("--sglang-path", "--json") and i + 1 < len(argl):
            if tok == "--sglang-path":
                sglang_path = argl[i + 1]
            else:
                source = argl[i + 1]
            i += 2
        elif tok in ("-h", "--help"):
            print(main.__doc__)
            return 0
        else:
            print(f"perfgate.flagcheck: unexpected argument {tok!r}; usage: "
                  "python -m perfgate.flagcheck [--sglang-path DIR] --json ARGV_JSON", file=sys.stderr)
            return 2
    if source is None:
        print("perfgate.flagcheck: --json ARGV_JSON is required", file=sys.stderr)
        return 2
    text = sys.stdin.read() if source == "-" else Path(source).read_text()
    argvs = json.loads(text)
    if not isinstance(argvs, dict) or not all(isinstance(v, list) for v in argvs.values()):
        print("perfgate.flagcheck: ARGV_JSON must be an object of name -> list of strings", file=sys.stderr)
        return 2
    out = run_batch({str(k): [str(x) for x in v] for k, v in argvs.items()}, sglang_path)
    real_stdout = sys.__stdout__ or sys.stdout
    real_stdout.write(json.dumps(out) + "\n")
    real_stdout.flush()
    return 0


# ---------------------------------------------------------------- the caller side


def _perfgate_parent() -> str:
    return str(Path(__file__).resolve().parent.parent)


def check_many(argvs: Mapping[str, Sequence[str]], sglang_path: str | None = None, *,
               python: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, FlagCheckResult]:
    """Check many argvs with one subprocess (one SGLang import). Never raises for SGLang's sake.

    ``sglang_path`` is a directory holding the ``sglang`` package (as made by
    ``pip install --no-deps --target DIR sglang==X``); None uses the installed SGLang.
    ``python`` is the interpreter (default: ``$PERFGATE_SGLANG_PYTHON`` or this one).
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
    cmd = [exe, "-m", "perfgate.flagcheck", "--json", argv_file]
    if sglang_path:
        cmd[3:3] = ["--sglang-path", str(sglang_path)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_perfgate_parent(), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env,
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


__all__ = [
    "BAD_FLAG", "CheckingParser", "FlagCheckResult", "FlagProblem", "ParseError", "check_argv", "check_many",
    "check_with_parser", "closest", "option_strings", "problems_by_flag", "with_model_path",
]


if __name__ == "__main__":
    raise SystemExit(main())

