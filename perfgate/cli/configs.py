"""``perfgate check-flags`` and ``perfgate plan``: a profile's configs checked against SGLang's parser,
and split into CI cells."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.cli.registry import EXIT_OK, EXIT_USAGE, subcommand

if TYPE_CHECKING:
    from perfgate.profiles import Profile
    from perfgate.profiles.fleet import Cell


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
    from perfgate.profiles.load import find_profiles, load_profile
    from perfgate.profiles.variants import load_variants
    from perfgate.serving.preflight import check_configs, profile_configs

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
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="the jobs run with pytest --perfgate-trials N: cost each config at N trials")
    p.add_argument("--starts", type=int, default=None, metavar="N",
                   help="the jobs run with pytest --perfgate-starts N: cost each config at N server starts")
    p.add_argument("--format", choices=("json", "text"), default="json",
                   help="json: a CI matrix ({'include': [...]}, GitHub Actions strategy.matrix); text: a table")


@subcommand("plan", "split the profiles' configs into CI cells balanced by recorded durations (a matrix as JSON)",
            _plan_args)
def _plan(args: argparse.Namespace) -> int:
    import json

    from perfgate.profiles.fleet import config_costs, matrix, plan, totals
    from perfgate.profiles.load import load_profile, resolve_profile
    from perfgate.profiles.variants import load_variants
    from perfgate.report.junit_read import read_report

    for name in ("trials", "starts"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            print(f"perfgate plan: --{name} {getattr(args, name)}: expected a whole number >= 1 (the jobs' "
                  f"--perfgate-{name})", file=sys.stderr)
            return EXIT_USAGE
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
    cells_by_label: dict[str, tuple[Profile, list[Cell]]] = {}
    notes = []
    for spec in args.profiles:
        prof = load_profile(resolve_profile(spec, Path.cwd()))
        label = prof.name.split("/")[0]
        from perfgate.profiles.settings import Settings

        settings = Settings(trials=args.trials, starts=args.starts or prof.workload.starts)
        costs = config_costs(prof, variants, reports, settings=settings)
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
    for row in m["include"]:
        print(f"{row['label']:<18} {row['cell']:<6} {row['expected_s']:>7} s  {row['names']}")
    print(f"wall {wall} s (the longest cell), runner time {total} s")
    return EXIT_OK
