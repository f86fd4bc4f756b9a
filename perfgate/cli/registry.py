"""The subcommand registry of the ``perfgate`` command, and what every subcommand shares: exit codes,
``--format``/``-o`` options, writing the output, usage errors."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfgate.errors import ExitCode, PerfgateError

EXIT_OK = ExitCode.OK  # the table: perfgate.errors.ExitCode
EXIT_USAGE = ExitCode.USAGE


@dataclass(frozen=True, kw_only=True)
class Subcommand:
    """One ``perfgate <name>`` subcommand."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


SUBCOMMANDS: dict[str, Subcommand] = {}
"""The registry, in the order subcommands are listed in ``--help``."""


def subcommand(
    name: str, help: str, add_arguments: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register the decorated ``run(args) -> int`` as ``perfgate <name>``."""

    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if name in SUBCOMMANDS:
            raise ValueError(f"subcommand {name!r} is registered twice")
        SUBCOMMANDS[name] = Subcommand(name=name, help=help, add_arguments=add_arguments, run=run)
        return run

    return register


def emit(text: str, output: str | None) -> None:
    """Write ``text`` to the file ``output`` (its folder made), or to stdout."""
    if output:
        out = Path(output)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
        except OSError as e:
            from perfgate.errors import ReportError

            raise ReportError(f"{out}: cannot write: {e}") from e
    else:
        sys.stdout.write(text)


def format_args(p: argparse.ArgumentParser) -> None:
    """``--format`` and ``-o/--output``."""
    p.add_argument(
        "--format",
        choices=("text", "md", "json"),
        default="text",
        help="text: terminal table (default); md: Markdown for a PR comment; json: for tools",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write there instead of stdout")


def usage_error(message: str) -> PerfgateError:
    """A usage error (exit code 2) with ``message``."""
    from perfgate.errors import ConfigError

    return ConfigError(message)
