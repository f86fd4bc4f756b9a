"""The ``perfgate`` command: one argparse parser, subcommands from a registry.

Each subcommand is a :class:`Subcommand` in :data:`SUBCOMMANDS` (add one with the
:func:`subcommand` decorator: a name, a help line, a function that adds its arguments and a
function that runs it and returns the exit code). This module is the only place that sees an
argparse ``Namespace``: the run functions translate it into library calls.

Exit codes common to every subcommand: 0 success, 2 usage error or unreadable input
(``perfgate gate`` adds 1 and 3; see ``docs/gate.md``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate import __version__
from perfgate.errors import PerfgateError

EXIT_OK = 0
EXIT_USAGE = 2


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


def _emit(text: str, output: str | None) -> None:
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


# --- diff / gate -----------------------------------------------------------------------


def _format_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("text", "md", "json"),
        default="text",
        help="text: terminal table (default); md: Markdown for a PR comment; json: for tools",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write there instead of stdout")


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("old", metavar="OLD.xml", help="report of the current stack")
    p.add_argument("new", metavar="NEW.xml", help="report of the candidate stack")
    _format_args(p)


@subcommand("diff", "compare two JUnit reports: outcomes, tok/s beyond noise, stack changes", _diff_args)
def _run_diff(args: argparse.Namespace) -> int:
    from perfgate.report.diff import diff
    from perfgate.report.junit_read import read_report
    from perfgate.report.render import render_diff

    d = diff(read_report(args.old), read_report(args.new))
    _emit(render_diff(d, args.format), args.output)
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
        help="comma-separated: newly-broken,regressed,unblocked,gone,changed,new-failing,lost-verdict,unjudged "
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
    from perfgate.report.gate import load_policy, run_gate
    from perfgate.report.junit_read import read_report
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
    )
    d, result = run_gate(read_report(args.old), read_report(args.new), policy)
    _emit(render_diff(d, args.format, result), args.output)
    print(f"perfgate gate: exit {int(result.exit_code)}: {result.message}", file=sys.stderr)
    return int(result.exit_code)


# --- history / plot / report -----------------------------------------------------------


def _history_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT.xml", help="reports, any order (sorted by time)")
    _format_args(p)
    p.add_argument("--min-segment", type=int, default=2, metavar="N", help="points a level must last (default 2)")
    p.add_argument(
        "--threshold", type=float, default=3.0, metavar="K", help="step size in noise scales (default 3)"
    )
    p.add_argument(
        "--min-rel-step", type=float, default=0.01, metavar="X", help="smallest relative step (default 0.01)"
    )


@subcommand("history", "table of outcome and tok/s per record across reports, with sustained steps", _history_args)
def _run_history(args: argparse.Namespace) -> int:
    from perfgate.report.history import build_history
    from perfgate.report.junit_read import read_reports
    from perfgate.report.render import render_history

    if args.min_segment < 1:
        raise _usage("--min-segment must be >= 1")
    h = build_history(
        read_reports(args.reports),
        min_segment=args.min_segment,
        threshold=args.threshold,
        min_rel_step=args.min_rel_step,
    )
    _emit(render_history(h, args.format), args.output)
    return EXIT_OK


def _usage(message: str) -> PerfgateError:
    from perfgate.errors import ConfigError

    return ConfigError(message)


def _plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT.xml")
    p.add_argument("-o", "--output-dir", required=True, metavar="DIR", help="folder for the PNG files")
    p.add_argument(
        "--what",
        choices=("all", "history", "matrix"),
        default="all",
        help="history: tok/s per record over reports (history.png); matrix: variants × modes of the "
        "newest report (matrix.png); all (default): both",
    )


@subcommand("plot", "PNG plots: tok/s per record over reports, and the compatibility matrix", _plot_args)
def _run_plot(args: argparse.Namespace) -> int:
    from perfgate.report.history import build_history, order_reports
    from perfgate.report.junit_read import read_reports
    from perfgate.report.matrix import build_matrix
    from perfgate.report.plot import history_png, matrix_png, write_png

    reports = order_reports(read_reports(args.reports))
    out = Path(args.output_dir)
    written = []
    if args.what in ("all", "history"):
        written.append(write_png(history_png(build_history(reports)), out / "history.png"))
    if args.what in ("all", "matrix"):
        latest = reports[-1]
        png = matrix_png(build_matrix(latest), title=f"compatibility matrix — {latest.label}")
        written.append(write_png(png, out / "matrix.png"))
    for p in written:
        print(p)
    return EXIT_OK


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT.xml")
    p.add_argument("-o", "--output", required=True, metavar="FILE.html")
    p.add_argument("--title", default="perfgate report")
    p.add_argument("--no-plots", action="store_true", help="leave the PNG plots out (no matplotlib needed)")


@subcommand("report", "one-page HTML: matrix, plots (embedded PNG) and stack side by side", _report_args)
def _run_report(args: argparse.Namespace) -> int:
    from perfgate.report.html import render_html
    from perfgate.report.junit_read import read_reports

    page = render_html(read_reports(args.reports), plots=not args.no_plots, title=args.title)
    _emit(page, args.output)
    print(args.output)
    return EXIT_OK


def _merge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="REPORT.xml")
    p.add_argument("-o", "--output", required=True, metavar="MERGED.xml")


@subcommand("merge", "merge the reports of several boxes into one (records of different boxes stay apart)", _merge_args)
def _run_merge(args: argparse.Namespace) -> int:
    from perfgate.report.merge import merge_reports

    result = merge_reports(args.inputs, args.output)
    print(f"{result.path}: {result.suites} suite(s), {result.records} record(s)")
    if result.qualified_keys:
        print(
            f"{len(result.qualified_keys)} record id(s) occur on several boxes and are keyed apart:",
            file=sys.stderr,
        )
        for k in result.qualified_keys:
            print(f"  {k}", file=sys.stderr)
    return EXIT_OK


def _check_flags_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("profiles", nargs="*", help="profile files (default: every profile under ./baselines)")
    p.add_argument("--sglang-path", default=None,
                   help="a folder holding the sglang package (pip install --no-deps --target DIR sglang==X); "
                        "default: the installed SGLang")
    p.add_argument("--sglang-version", default=None,
                   help="spell flags for this SGLang version (default: the version found at --sglang-path)")
    p.add_argument("--variants", default="baselines/variants.toml", help="the variants file")


@subcommand("check-flags", "parse every profile x mode x variant argv with SGLang's own parser (no GPU, seconds)",
            _check_flags_args)
def _check_flags(args: argparse.Namespace) -> int:
    from perfgate.flagcheck.worker import sglang_version_at
    from perfgate.preflight import check_configs, profile_configs
    from perfgate.profiles.load import find_profiles, load_profile
    from perfgate.variants import load_variants

    variants = load_variants(args.variants)
    paths = [Path(p) for p in args.profiles] or [p for p in find_profiles(Path.cwd())]
    version = args.sglang_version
    if version is None and args.sglang_path:
        version = sglang_version_at(Path(args.sglang_path))
    configs = {}
    for path in paths:
        prof = load_profile(path)
        if prof.simulated:
            continue  # the simulated engine parses its own flags at launch
        configs.update(profile_configs(prof, variants))
    results = check_configs(configs, variants, version=version, sglang_path=args.sglang_path)
    any_res = next(iter(results.values()), None)
    if any_res is None:
        print("perfgate check-flags: no real-engine profile to check")
        return EXIT_USAGE
    if not any_res.available:
        print(f"perfgate check-flags: SGLang's parser is not available: {any_res.reason}")
        return EXIT_USAGE
    bad = {n: r for n, r in results.items() if not r.ok}
    for n, r in results.items():
        status = "ok" if r.ok else "BAD"
        extra = f" (deprecated: {'; '.join(r.deprecations)})" if r.deprecations else ""
        print(f"{status:3} {n}{extra}" if r.ok else f"BAD {n}: {r.message()}")
    print(f"perfgate check-flags: {len(results)} argv(s) against SGLang {any_res.sglang_version} in "
          f"{any_res.elapsed_s:.1f} s: {len(bad)} bad")
    return 1 if bad else EXIT_OK


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("profiles", nargs="+", metavar="PROFILE",
                   help="profiles to run (a path, or <hardware>/<model> under ./baselines); one runner label each, "
                        "the profile's hardware folder (h200-x2/... runs on label h200-x2)")
    p.add_argument("--reports", nargs="*", default=[], metavar="REPORT.xml",
                   help="earlier JUnit reports: each config's cost is the median of its recorded test times "
                        "(start-up included); configs no report has are estimated from the profile")
    p.add_argument("--runners", action="append", default=[], metavar="N|LABEL=N",
                   help="runners per label (default 1); repeat LABEL=N for several labels")
    p.add_argument("--budget-s", type=float, default=None, metavar="S",
                   help="the longest a job may run: use the fewest cells that fit it (at most --runners)")
    p.add_argument("--variants", default="baselines/variants.toml", help="the variants file")
    p.add_argument("--format", choices=("json", "text"), default="json",
                   help="json: a CI matrix ({'include': [...]}, GitHub Actions strategy.matrix); text: a table")


@subcommand("plan", "split the profiles' configs into CI cells balanced by recorded durations (a matrix as JSON)",
            _plan_args)
def _plan(args: argparse.Namespace) -> int:
    import json

    from perfgate.fleet import config_costs, matrix, plan, totals
    from perfgate.profiles.load import load_profile, resolve_profile
    from perfgate.report.junit_read import read_report
    from perfgate.variants import load_variants

    variants = load_variants(args.variants)
    reports = [read_report(r) for r in args.reports]
    per_label: dict[str, int] = {}
    default = 1
    for spec in args.runners:
        label, _, n = spec.rpartition("=")
        try:
            count = int(n)
        except ValueError:
            count = 0
        if count < 1:
            print(f"perfgate plan: --runners {spec!r}: expected N or LABEL=N with N >= 1", file=sys.stderr)
            return EXIT_USAGE
        if label:
            per_label[label] = count
        else:
            default = count
    cells_by_label = {}
    notes = []
    for spec in args.profiles:
        prof = load_profile(resolve_profile(spec, Path.cwd()))
        label = prof.name.split("/")[0]
        costs = config_costs(prof, variants, reports)
        most = per_label.get(label, default)
        cells = plan(costs, most)
        if args.budget_s is not None:
            for n in range(1, most + 1):
                cells = plan(costs, n)
                if max(c.seconds for c in cells) <= args.budget_s:
                    break
            if max(c.seconds for c in cells) > args.budget_s:
                notes.append(f"{label}: the longest cell needs {max(c.seconds for c in cells):.0f} s, over the "
                             f"{args.budget_s:.0f} s budget even with {most} runner(s)")
        estimated = sum(1 for c in costs if c.source == "estimate")
        if estimated:
            notes.append(f"{label}: {estimated} of {len(costs)} config cost(s) estimated (no report has them)")
        cells_by_label[f"{label}:{prof.name}" if label in {k.split(':')[0] for k in cells_by_label} else label] = \
            (prof, cells)
    m = matrix(cells_by_label)
    wall, total = totals(m)
    for n in notes:
        print(f"perfgate plan: {n}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(m))
        print(f"perfgate plan: {len(m['include'])} cell(s), expected wall {wall} s, runner time {total} s",
              file=sys.stderr)
        return EXIT_OK
    print(f"{'label':<18} {'cell':<6} {'expected':>9}  configs")
    for row in m["include"]:  # type: ignore[union-attr]
        print(f"{row['label']:<18} {row['cell']:<6} {row['expected_s']:>7} s  {row['names']}")
    print(f"wall {wall} s (the longest cell), runner time {total} s")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
