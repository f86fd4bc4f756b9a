"""``perfgate history``, ``plot``, ``report`` and ``merge``: many reports tabulated, drawn, joined."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfgate.cli.registry import EXIT_OK, emit, format_args, subcommand, usage_error


def _history_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT.xml",
                   help="reports, any order (sorted by time): files, folders (every *.xml below) or globs")
    format_args(p)
    p.add_argument("--min-segment", type=int, default=2, metavar="N", help="points a level must last (default 2)")
    p.add_argument(
        "--threshold", type=float, default=3.0, metavar="K", help="step size in noise scales (default 3)"
    )
    p.add_argument(
        "--min-rel-step", type=float, default=0.01, metavar="X", help="smallest relative step (default 0.01)"
    )
    p.add_argument("--bands", action="store_true",
                   help="print each record's noise band instead: the spread between starts on one machine and "
                        "between machines that `perfgate gate --history` would judge with")


@subcommand("history", "table of outcome and tok/s per record across reports, with sustained steps", _history_args)
def _run_history(args: argparse.Namespace) -> int:
    from perfgate.report.gate import history_paths
    from perfgate.report.history import build_history
    from perfgate.report.junit_read import read_reports
    from perfgate.report.render import render_history

    if args.min_segment < 1:
        raise usage_error("--min-segment must be >= 1")
    args.reports = [str(p) for p in history_paths(args.reports)]  # a folder: every report below it
    if args.bands:
        from perfgate.report.noise import bands_from_reports

        bands = bands_from_reports(read_reports(args.reports))
        emit("".join(b.describe() + "\n" for _, b in sorted(bands.items())), args.output)
        return EXIT_OK
    h = build_history(
        read_reports(args.reports),
        min_segment=args.min_segment,
        threshold=args.threshold,
        min_rel_step=args.min_rel_step,
    )
    emit(render_history(h, args.format), args.output)
    return EXIT_OK


def _plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT.xml")
    p.add_argument("-o", "--output-dir", required=True, metavar="DIR", help="folder for the PNG files")
    p.add_argument(
        "--what",
        choices=("all", "history", "matrix", "load"),
        default="all",
        help="history: tok/s per record over reports (history.png); matrix: variants × modes of the "
        "newest report (matrix.png); load: the newest report's pareto.png, goodput.png and crossover.png "
        "(goodput and crossover records); all (default): every one the reports have records for",
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
    if args.what in ("all", "load"):
        from perfgate.report.loadplot import crossover_png, goodput_png, load_data, pareto_png

        data = load_data(reports[-1])
        if not data.empty or args.what == "load":
            written.append(write_png(pareto_png(data), out / "pareto.png"))
            written.append(write_png(goodput_png(data), out / "goodput.png"))
            written.append(write_png(crossover_png(data), out / "crossover.png"))
    for p in written:
        print(p)
    return EXIT_OK


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT.xml")
    p.add_argument("-o", "--output", required=True, metavar="FILE.html")
    p.add_argument("--title", default="perfgate report")
    p.add_argument("--no-plots", action="store_true", help="leave the PNG plots out (no matplotlib needed)")


@subcommand("report", "one-page HTML, verdict first: the gate's exit and what blocks, each record's verdict on its own "
            "metric, the matrix, trends (embedded PNG), stack and machine", _report_args)
def _run_report(args: argparse.Namespace) -> int:
    from perfgate.report.html import render_html
    from perfgate.report.junit_read import read_reports
    from perfgate.report.policy import load_policy

    page = render_html(read_reports(args.reports), plots=not args.no_plots, title=args.title, policy=load_policy())
    emit(page, args.output)
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
