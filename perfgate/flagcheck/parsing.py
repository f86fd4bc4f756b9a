"""Checking one argv against an ``argparse`` parser (SGLang's, or any): the problems, each naming the
bad flag, argparse's message and the closest valid spelling, and the deprecation warnings printed."""

from __future__ import annotations

import argparse
import difflib
import io
import re
import warnings
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

BAD_FLAG = "bad-flag"


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


class ParseError(Exception):
    """argparse called ``error()``: the parser rejected the command line."""


class CheckingParser(argparse.ArgumentParser):
    """An ArgumentParser that raises :class:`ParseError` instead of exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("exit_on_error", False)
        kwargs.setdefault("add_help", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:
        raise ParseError(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
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
