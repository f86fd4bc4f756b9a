"""The ``perfgate`` command: one argparse parser, subcommands from a registry.

Each subcommand is a :class:`~perfgate.cli.registry.Subcommand` in the registry
(:mod:`perfgate.cli.registry`; add one with its ``subcommand`` decorator: a name, a help line, a
function that adds its arguments and a function that runs it and returns the exit code). The
subcommands, by group: :mod:`~perfgate.cli.compare` (diff, gate), :mod:`~perfgate.cli.present`
(history, plot, report, merge), :mod:`~perfgate.cli.configs` (check-flags, plan), :mod:`~perfgate.cli.floors`
(floors), :mod:`~perfgate.cli.project` (init), :mod:`~perfgate.cli.bisect` (bisect). This package
is the only place that sees an argparse ``Namespace``: the run functions translate it into
library calls. ``python -m perfgate.cli`` runs :func:`main`.

Exit codes common to every subcommand: 0 success, 2 usage error or unreadable input
(``perfgate gate`` adds 1 and 3; see ``docs/gate.md``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from perfgate._version import __version__
from perfgate.cli import bisect, compare, configs, floors, present, project
from perfgate.cli.registry import EXIT_USAGE, SUBCOMMANDS
from perfgate.errors import PerfgateError

#: the subcommand modules: importing one registers its subcommands, so this order is --help's
GROUPS = (project, compare, present, configs, floors, bisect)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="perfgate",
        description="perfgate: performance regression suite for SGLang serving — report tools and CI gate.",
    )
    parser.add_argument("--version", action="version", version=f"perfgate {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs.required = True
    for cmd in SUBCOMMANDS.values():
        p = subs.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``perfgate`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        return int(args._run(args))
    except PerfgateError as e:
        print(f"perfgate {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
