"""``perfgate diff`` and ``perfgate gate``: two reports compared, and the CI gate over them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.cli.registry import EXIT_OK, emit, format_args, subcommand

if TYPE_CHECKING:
    from perfgate.report.records import Report


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("old", metavar="OLD.xml", help="report of the current stack")
    p.add_argument("new", metavar="NEW.xml", help="report of the candidate stack")
    p.add_argument("--history", action="append", metavar="PATH",
                   help="reports (a file, a directory of *.xml, or a glob) whose spread is each record's noise band "
                        "between starts and machines (repeatable; adds to gate.history); without history, and where "
                        "the reports carry no repeated starts, the documented priors stand in")
    p.add_argument("--min-effect", type=float, metavar="X",
                   help="the practical floor of a change for every metric, a fraction (overrides gate.min_effect; "
                        "default 0.005 for throughput, 0.02 for latencies)")
    format_args(p)


def _history(args: argparse.Namespace, policy_history: tuple[str, ...] = (), base: Path | None = None) -> list[Report]:
    from perfgate.report.gate import history_paths
    from perfgate.report.junit_read import read_reports

    paths = history_paths(policy_history, base=base) + history_paths(args.history or [])
    return read_reports(paths)


@subcommand("diff", "compare two JUnit reports: outcomes, numbers judged against the noise they cross, stack "
                    "changes", _diff_args)
def _run_diff(args: argparse.Namespace) -> int:
    from perfgate.report.diff import diff
    from perfgate.report.gate import judging_for
    from perfgate.report.junit_read import read_report
    from perfgate.report.policy import GatePolicy
    from perfgate.report.render import render_diff

    policy = GatePolicy().with_overrides(min_effect=(("default", args.min_effect),) if args.min_effect is not None
                                         else None)
    old, new = read_report(args.old), read_report(args.new)
    d = diff(old, new, judging_for(policy, _history(args), (new,)))
    emit(render_diff(d, args.format), args.output)
    return EXIT_OK


def _gate_args(p: argparse.ArgumentParser) -> None:
    _diff_args(p)
    p.add_argument(
        "--pyproject",
        metavar="PATH",
        help="read [tool.perfgate.gate] from this file (default: the first pyproject.toml from the "
        "current directory upwards)",
    )
    p.add_argument(
        "--block-on",
        metavar="LIST",
        help="comma-separated: newly-broken,regressed,unblocked,gone,changed,new-failing,lost-verdict,unjudged,"
             "undecided "
             "(overrides gate.block_on)",
    )
    p.add_argument("--min-ratio", type=float, metavar="X", help="overrides gate.min_ratio")
    p.add_argument(
        "--allow-inconclusive",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="overrides gate.allow_inconclusive",
    )
    p.add_argument(
        "--allow-mixed-engines",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="overrides gate.allow_mixed_engines",
    )
    p.add_argument(
        "--allow-hardware-mismatch",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="overrides gate.allow_hardware_mismatch (reports of different GPU, count, SM or interconnect)",
    )
    p.add_argument(
        "--ignore", action="append", metavar="PATTERN", help="record key/id pattern that never blocks (repeatable)"
    )


@subcommand(
    "gate",
    "diff two reports and exit 0 (ok), 1 (regression/newly broken), 3 (unblocked: update expectations), "
    "2 (usage/unreadable)",
    _gate_args,
)
def _run_gate(args: argparse.Namespace) -> int:
    from perfgate.report.gate import run_gate
    from perfgate.report.junit_read import read_report
    from perfgate.report.policy import load_policy
    from perfgate.report.render import render_diff

    policy = load_policy(Path(args.pyproject) if args.pyproject else None)
    block_on = None
    if args.block_on is not None:
        block_on = frozenset(x.strip() for x in args.block_on.split(",") if x.strip())
    policy = policy.with_overrides(
        block_on=block_on,
        min_ratio=args.min_ratio,
        allow_inconclusive=args.allow_inconclusive,
        allow_mixed_engines=args.allow_mixed_engines,
        allow_hardware_mismatch=args.allow_hardware_mismatch,
        ignore=tuple(policy.ignore) + tuple(args.ignore) if args.ignore else None,
        min_effect=(("default", args.min_effect),) if args.min_effect is not None else None,
    )
    base = Path(policy.source).parent if policy.source.endswith("pyproject.toml") else None
    history = _history(args, policy.history, base)
    d, result = run_gate(read_report(args.old), read_report(args.new), policy, history)
    emit(render_diff(d, args.format, result), args.output)
    print(f"perfgate gate: exit {int(result.exit_code)}: {result.message}", file=sys.stderr)
    return int(result.exit_code)
