"""``perfgate floors``: the decode floor a fleet can hold, from reports of several machines."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.cli.registry import EXIT_OK, emit, subcommand


def _floors_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", metavar="PROFILE.toml", help="the profile whose [floors.<mode>] to check or write")
    p.add_argument("reports", nargs="+", metavar="REPORT", help="reports of the fleet (files, directories, globs)")
    p.add_argument("--write", action="store_true",
                   help="write each mode's fleet floor (the slowest machine's median) and its machines into the "
                        "profile")
    p.add_argument("-o", "--output", metavar="FILE", help="write the table there instead of stdout")


@subcommand("floors", "the decode floor every machine of a fleet can hold, from their reports; flags tolerances "
                      "narrower than the spread between machines (exit 1)", _floors_args)
def _run_floors(args: argparse.Namespace) -> int:
    from perfgate.profiles.load import load_profile
    from perfgate.profiles.writer import write_updates
    from perfgate.report.fleet_floors import fleet_floors, narrow_tolerances
    from perfgate.report.gate import history_paths
    from perfgate.report.junit_read import read_reports

    prof = load_profile(Path(args.profile))
    reports = read_reports(history_paths(args.reports))
    found = fleet_floors(reports, modes=list(prof.modes))
    lines = []
    for mode, ff in found.items():
        cur = prof.floors.get(mode)
        now = f"{cur.tok_s:g} at {cur.tolerance:.1%}" if cur and cur.tok_s is not None else "none"
        lines.append(f"{mode}: fleet floor {ff.tok_s:.2f} tok/s (slowest of {len(ff.machines)} machine(s), "
                     f"{ff.runs} run(s), spread {ff.spread:.2%}); the profile's floor: {now}")
        lines += [f"  {mid}: {v:.2f}" for mid, v in ff.machines]
    flagged = narrow_tolerances(prof.floors, reports)
    lines += [f"FLAGGED: {f}" for f in flagged]
    if args.write and found:
        updates = [(mode, "tok_s", prof.floors[mode].tok_s if mode in prof.floors else None, round(ff.tok_s, 2))
                   for mode, ff in found.items()]
        write_updates(prof.path, updates, {mode: ff.measured() for mode, ff in found.items()})
        lines.append(f"wrote {len(updates)} fleet floor(s) into {prof.path}")
    emit("\n".join(lines) + "\n", args.output)
    return 1 if flagged and not args.write else EXIT_OK
