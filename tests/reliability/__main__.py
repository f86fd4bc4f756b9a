"""The Markdown table of docs/reliability.md: every scenario run, one row each.

    python -m tests.reliability                         # print the table
    python -m tests.reliability --out docs/reliability.md
    python -m tests.reliability --only faults,stops     # some groups (names: --list)

It exits 1 if any row has processes left, records lost, or an outcome other than expected.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability import (
    BAD_INPUTS,
    FAULT_SESSIONS,
    FAULTS,
    RAISING_ARGS,
    STUCK_ARGS,
    TIMEOUT_ARGS,
    Record,
    Run,
    bad_input_project,
    raising_project,
    run_faults,
    run_of,
    run_pytest,
    run_signalled,
    stuck_project,
)

# ----------------------------------------------------------------------------- the table


@dataclass(kw_only=True)
class Row:
    scenario: str
    outcome: str
    left: int
    lost: int
    time_s: float
    ok: bool
    notes: list[str] = field(default_factory=list)


def _rec(r: Record | None) -> str:
    return f"{r.outcome}/{r.category}" if r is not None and r.category else (r.outcome if r else "no record")


def _fault_rows(where: Path) -> list[Row]:
    runs = run_faults(where)
    rows = []
    for f in FAULTS:
        run = run_of(runs, f.mode)
        r = run.records.get(f"test_decode_floor[m:{f.mode}]")
        ok = r is not None and r.outcome == "fail" and r.category == f.category and bool(r.props.get("log"))
        rows.append(Row(scenario=f"fault: {f.what}", outcome=f"exit {run.returncode}; {_rec(r)}", left=len(run.left),
                        lost=len(run.lost), time_s=r.time_s if r else 0.0, ok=ok))
    for i, run in enumerate(runs):
        after = run.records.get("test_decode_floor[m:after]")
        rows.append(Row(scenario=f"next config after the faults of session {i + 1} "
                        f"({', '.join(FAULT_SESSIONS[i])})", outcome=f"exit {run.returncode}; {_rec(after)}",
                        left=len(run.left), lost=len(run.lost), time_s=after.time_s if after else 0.0,
                        ok=after is not None and after.outcome == "pass"))
    return rows


def _stop_rows(where: Path) -> list[Row]:
    rows = []
    by_signal = run_signalled(where)
    cases: list[tuple[str, Run, int]] = [
        ("pytest gets SIGINT (Ctrl-C) mid-measurement", by_signal[signal.SIGINT], 2),
        ("pytest gets SIGTERM mid-measurement", by_signal[signal.SIGTERM], 2),
        ("pytest killed with SIGKILL mid-measurement", by_signal[signal.SIGKILL], -9),
        ("pytest-timeout fires (--timeout-method thread: os._exit)",
         run_pytest(stuck_project(where / "timeout"), STUCK_ARGS + TIMEOUT_ARGS), 1),
    ]
    for label, run, rc in cases:
        stuck_outcome = "error"
        base = run.records.get("test_decode_floor[m:baseline]")
        stuck = run.records.get("test_decode_floor[m:stuck]")
        ok = (run.returncode == rc and base is not None and base.outcome == "pass" and stuck is not None
              and stuck.outcome == stuck_outcome)
        how = f" ({stuck.message.split(' while ')[0]})" if stuck is not None and stuck.message else ""
        rows.append(Row(scenario=label, outcome=f"exit {run.returncode}; baseline {_rec(base)}, "
                        f"running test {_rec(stuck)}{how}", left=len(run.left), lost=len(run.lost),
                        time_s=run.wall_s, ok=ok))
    run = run_pytest(raising_project(where / "raising"), RAISING_ARGS)
    boom = run.records.get("test_raises_mid_measurement[m:boom]")
    after = run.records.get("test_raises_mid_measurement[m:after]")
    rows.append(Row(scenario="a test raises mid-measurement", outcome=f"exit {run.returncode}; {_rec(boom)}, "
                    f"next config {_rec(after)}", left=len(run.left), lost=len(run.lost), time_s=run.wall_s,
                    ok=boom is not None and boom.outcome == "fail" and after is not None and after.outcome == "pass"))
    return rows


def _bad_rows(where: Path) -> list[Row]:
    rows = []
    for bad in BAD_INPUTS:
        run = run_pytest(bad_input_project(where / bad.name, bad), bad.args)
        ok = run.returncode == bad.returncode and all(s in run.output for s in bad.says) \
            and "Traceback" not in run.output
        outcome = f"exit {run.returncode}"
        t = run.wall_s
        if bad.record is not None:
            r = run.records.get(bad.record[0])
            outcome += f"; {_rec(r)}"
            ok = ok and r is not None and (r.outcome, r.category) == bad.record[1:]
            t = r.time_s if r else t
        else:
            outcome += " (usage error before any test)"
        rows.append(Row(scenario=f"bad input: {bad.what}", outcome=outcome, left=len(run.left), lost=len(run.lost),
                        time_s=t, ok=ok))
    return rows


GROUPS: dict[str, Callable[[Path], list[Row]]] = {"faults": _fault_rows, "stops": _stop_rows, "bad-input": _bad_rows}


def render(rows: Sequence[Row], *, command: str) -> str:
    lines = [
        "# Reliability: faults injected and bad input tried",
        "",
        f"Generated by `{command}` (perfgate's simulated server, no GPU); regenerate with",
        "`python -m tests.reliability --out docs/reliability.md`. Each row is a real `python -m pytest` run",
        "(or one record of it). *processes left*: processes of the run still alive after the reaper's",
        "grace period, found by the run's environment token and by each server's process group",
        "(`# pgid:` in its log). *records lost*: tests that finished but have no `<testcase>` in the JUnit",
        "file. *time*: the record's duration, or the whole pytest run for the rows without one.",
        "",
        "| scenario | outcome (pytest exit code; record outcome/category) | processes left | records lost "
        "| time (s) | as expected |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r.scenario} | {r.outcome} | {r.left} | {r.lost} | {r.time_s:.1f} | "
                     f"{'yes' if r.ok else '**NO**'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    ap.add_argument("--only", default="", help=f"comma-separated groups: {', '.join(GROUPS)}")
    ap.add_argument("--keep", type=Path, help="keep the throw-away projects under this directory")
    ap.add_argument("--list", action="store_true", help="list the groups and exit")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(GROUPS))
        return 0
    groups = [g for g in a.only.split(",") if g] or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        ap.error(f"unknown group(s) {unknown}; choose from {', '.join(GROUPS)}")
    where = a.keep or Path(tempfile.mkdtemp(prefix="perfgate-reliability-"))
    rows: list[Row] = []
    try:
        for g in groups:
            rows.extend(GROUPS[g](where / g))
    finally:
        if a.keep is None:
            shutil.rmtree(where, ignore_errors=True)
    text = render(rows, command="python -m tests.reliability" + (f" --only {a.only}" if a.only else ""))
    print(text, end="")
    if a.out:
        a.out.write_text(text)
    bad = [r for r in rows if r.left or r.lost or not r.ok]
    if bad:
        print(f"\n{len(bad)} row(s) with processes left, records lost or an unexpected outcome: "
              + "; ".join(r.scenario for r in bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
