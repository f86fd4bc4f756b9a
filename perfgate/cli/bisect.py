"""``perfgate bisect``: which package change of a stack upgrade carries its regression (issue 38; docs/bisect.md).

The two stacks of a regressed comparison are given as the current stack (the session's: the profile's simulated
stack, or the environment pytest runs in) and the candidate's packages: ``--candidate-sim-stack KEY=VER,...`` on
the simulator, ``--current-site DIR`` and ``--candidate-site DIR`` (site-packages or overlay folders) on real
environments, or ``--current-lock FILE`` and ``--candidate-lock FILE`` (the current environment checked against
the first; the second's changed packages installed into ``OUT/candidate-site`` before the first step,
perfgate.stack.lockfile). Each step layers some of the candidate's changed packages over the current stack, as a
``--perfgate-candidate`` arm (``sim-stack=...``, or ``env.PYTHONPATH=<the step's overlay folder>:<the current
PYTHONPATH>``, perfgate.stack.overlay), and runs the stack-pair records (``pytest perftests -m stack_pair``): the
same paired, sequential judge as every stack pair, starts interleaved, its JUnit kept (``OUT/step-N.xml``). The
search itself is :func:`perfgate.measuring.bisect.bisect`. Its cost in server starts is printed before it runs and
bounded by ``--budget-starts``.

Exit codes: 0 the search completed (a culprit, or no regression, or nothing changed), 3 it stopped early (the
budget, an undecided step, a current stack that does not start: what is known is printed), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.categories import RecordKind
from perfgate.cli.bisect_arms import Arms, lock_arms, sim_arms, site_arms
from perfgate.cli.registry import EXIT_OK, emit, subcommand, usage_error
from perfgate.errors import ExitCode
from perfgate.measuring.notation import interval_text
from perfgate.measuring.stackpair import PAIR_METRICS
from perfgate.measuring.ttft_parts import LEG_METRICS
from perfgate.record import WHY_UNDECIDED, Case, pair_of

if TYPE_CHECKING:
    from perfgate.measuring.bisect import Bisection, StepResult
    from perfgate.report.records import Record

__all__ = ["EXIT_STOPPED", "Arms", "sim_arms", "site_arms", "lock_arms", "step_result", "run_step", "step_tests",
           "render", "write_junit", "planned_cost"]

#: the search stopped before it completed (budget, undecided, the current stack does not start)
EXIT_STOPPED = ExitCode.STOPPED  # the table: perfgate.errors.ExitCode
#: the metrics a step can be decided on besides the record's own verdict: those the stack pair judges, TTFT's legs too
#: (perfgate.measuring.stackpair)
METRICS = (*PAIR_METRICS, *LEG_METRICS)
_STARTS = re.compile(r"perfgate: (\d+) server start\(s\)")


def planned_cost(n: int, step_starts: int) -> tuple[int, int]:
    """(most steps, most server starts) of a bisection of ``n`` packages where no two act only together."""
    from perfgate.measuring.bisect import planned_steps

    most = planned_steps(n)[1]
    return most, most * step_starts


def _num(r: Record, name: str) -> float | None:
    try:
        return float(r.prop(name))
    except ValueError:
        return None


def step_result(records: Sequence[Record], *, metric: str = "record", starts: int = 0, where: str = "") -> StepResult:
    """One step's result from its stack-pair records (one per mode), the worst of them deciding: the current failed,
    then the layered stack failed (its category), regressed, undecided, same, improved. ``metric``: ``record`` (the
    record's own verdict: regressed on any metric fails it) or one of :data:`METRICS` (that metric's decision)."""
    from perfgate.measuring.bisect import StepResult
    from perfgate.measuring.judge import Decision
    from perfgate.measuring.stackpair import PAIR_METRICS
    from perfgate.measuring.ttft_parts import LEG_METRICS

    if not records:
        raise usage_error(f"{where}: no stack-pair record; fix: read the step's log beside it (is the profile's "
                          f"perftests/ there, and does `pytest perftests -m stack_pair` select a record?)")
    results = []
    for r in records:
        if r.outcome == "skip":
            raise usage_error(f"{where}: the stack-pair record skipped: {r.prop('reason') or r.message}")
        category = r.prop("category")
        failed = r.outcome in ("fail", "error")
        pairs = int(_num(r, "pair_n") or 0)
        if failed and _num(r, "tok_s") is None:
            results.append(StepResult(category=category or "crash", current_failed=True, message=r.message))
            continue
        if failed and _num(r, "candidate.tok_s") is None:
            results.append(StepResult(category=category or "crash", message=r.prop("reason") or r.message))
            continue
        decided = ""  # the metric whose figures the step shows when it is not decode tok/s
        if metric == "record":
            text = "regressed" if failed and category == "slower-than-baseline" else r.prop("pair_decision")
            if text == "regressed" and r.prop("pair_decision") != "regressed":  # another metric failed the record
                decided = next((m for m in (*PAIR_METRICS, *LEG_METRICS)
                                if r.prop(pair_of(m, "decision")) == "regressed"), "")
        else:
            text = r.prop(pair_of(metric, "decision"))
        shown = metric if metric != "record" else decided
        ratio, lo, hi = (_num(r, pair_of(shown, field) if shown else f"pair_{field}")
                         for field in ("ratio", "ci_low", "ci_high"))
        try:
            decision = Decision(text)
        except ValueError:
            decision = Decision.UNDECIDED
        results.append(StepResult(decision=decision, ratio=ratio, ci=(lo, hi) if lo is not None and hi is not None
                                  else None, pairs=pairs, message=r.prop("reason") or r.message,
                                  why=r.prop(WHY_UNDECIDED), metric=decided))
    rank = {Decision.REGRESSED: 2, Decision.UNDECIDED: 3, Decision.SAME: 4, Decision.IMPROVED: 5}
    worst = min(results, key=lambda x: 0 if x.current_failed else 1 if x.broken else rank[x.decision]
                if x.decision is not None else 9)
    from dataclasses import replace

    return replace(worst, starts=starts, record=where)


def step_tests(tests: str, profile_name: str, modes: Sequence[str]) -> list[str]:
    """What each step's pytest session selects: the stack-pair test of each mode asked for (its node id's parameter
    is the record's own id, :attr:`perfgate.record.Case.id`), else the whole ``tests`` folder."""
    return [f"{tests}/test_stack_pair.py::test_stack_pair[{Case(profile_name, RecordKind.FLOOR, m, None).id}]"
            for m in modes] or [tests]


def run_step(number: int, spec: str, *, out: Path, root: Path, profile: str, tests: Sequence[str], starts: int,
             max_starts: int, extra: Sequence[str], metric: str) -> StepResult:
    """Run the stack-pair records with the step's candidate arm; its JUnit is ``OUT/step-N.xml``, its log
    ``OUT/step-N.log``."""
    from perfgate.report.junit_read import read_report

    xml, log = out / f"step-{number}.xml", out / f"step-{number}.log"
    cmd = [sys.executable, "-m", "pytest", *tests, "-m", "stack_pair", f"--perfgate-profile={profile}",
           "--perfgate-candidate", spec, "--perfgate-starts", str(starts), "--perfgate-max-starts", str(max_starts),
           f"--junitxml={xml.resolve()}", "-p", "no:cacheprovider", "-q", *extra]
    with log.open("w", encoding="utf-8") as fh:
        fh.write("$ " + shlex.join(cmd) + "\n")
        fh.flush()
        subprocess.run(cmd, cwd=root, stdout=fh, stderr=subprocess.STDOUT, check=False)
    text = log.read_text(encoding="utf-8", errors="replace")
    m = _STARTS.search(text)
    if not xml.is_file():
        raise usage_error(f"{log}: the step's pytest session wrote no JUnit report; fix: read the log")
    records = [r for r in read_report(xml).records if r.prop("candidate")]
    return step_result(records, metric=metric, starts=int(m.group(1)) if m else 0, where=str(xml))


def _interval(r: StepResult) -> tuple[str, str]:
    ratio = f"×{r.ratio:.4f}" if r.ratio is not None else ""
    return ratio, interval_text(r.ci) if r.ratio is not None and r.ci is not None else ""


def render(b: Bisection, arms: Arms, fmt: str = "text") -> str:
    """The step table, how it ended, the culprit with its interval, the notes."""
    if fmt == "json":
        return json.dumps({
            "status": b.status, "target": b.target, "culprit": list(b.culprit), "likely": list(b.likely),
            "changes": {k: list(v) for k, v in arms.changes.items()}, "starts": b.starts,
            "culprit_step": b.culprit_step.number if b.culprit_step else None,
            "steps": [{"step": s.number, "packages": list(s.packages), "role": s.role, "decision": s.result.label,
                       "metric": s.result.metric or "tok_s", "ratio": s.result.ratio,
                       "ci": list(s.result.ci) if s.result.ci else None,
                       "pairs": s.result.pairs, "starts": s.result.starts, "record": s.result.record}
                      for s in b.steps],
            "notes": list(b.notes) + arms.notes}, indent=2) + "\n"
    head = ("step", "packages layered over the current stack", "role", "decision", "ratio", "interval", "pairs",
            "starts")
    rows = [(str(s.number), ", ".join(s.packages), s.role, s.result.label, *_interval(s.result), str(s.result.pairs),
             str(s.result.starts)) for s in b.steps]
    lines = []
    if fmt == "md":
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        widths = [max(len(x) for x in col) for col in zip(head, *rows)]
        lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in (head, *rows)]
    lines.append("")
    lines.append(f"bisect: {b.status} after {len(b.steps)} step(s), {b.starts} server start(s)")
    if b.culprit:
        what = "; ".join(arms.change(p) for p in b.culprit)
        word = "culprit" if b.complete else "known so far to carry it"
        line = f"{word}: {what}"
        if b.culprit_step is not None:
            ratio, ci = _interval(b.culprit_step.result)
            line += (f": {b.culprit_step.result.label} {ratio} {ci} over {b.culprit_step.result.pairs} start pair(s)"
                     f" (step {b.culprit_step.number})").replace("  ", " ")
        lines.append(line)
    if b.likely:
        lines.append(f"likely within: {', '.join(b.likely)} (the rest measured the same; not yet confirmed)")
    for n in (*b.notes, *arms.notes):
        lines.append(f"note: {n}")
    return "\n".join(lines) + "\n"


def write_junit(b: Bisection, arms: Arms, path: Path) -> None:
    """``OUT/bisect.xml``: every step's records (``bisect.step``, ``bisect.packages``, ``bisect.decision`` added)
    and one record of the bisection (kind ``bisect``: its status, culprit, interval, steps and starts)."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name="perfgate-bisect")
    for s in b.steps:
        if not s.result.record or not Path(s.result.record).is_file():
            continue
        for case in ET.parse(s.result.record).getroot().iter("testcase"):
            props = case.find("properties")
            if props is None:
                props = ET.SubElement(case, "properties")
            for k, v in (("bisect.step", str(s.number)), ("bisect.packages", ",".join(s.packages)),
                         ("bisect.role", s.role), ("bisect.decision", s.result.label)):
                ET.SubElement(props, "property", name=k, value=v)
            case.set("name", f"{case.get('name')}[bisect step {s.number}]")
            suite.append(case)
    case = ET.SubElement(suite, "testcase", classname="perfgate.bisect", name="bisect")
    props = ET.SubElement(case, "properties")
    outcome = ("pass" if b.status in ("no regression", "no change") else "fail" if b.complete else "inconclusive")
    values: list[tuple[str, str]] = [("kind", "bisect"), ("outcome", outcome), ("bisect.status", b.status),
                                     ("bisect.target", b.target), ("bisect.steps", str(len(b.steps))),
                                     ("bisect.starts", str(b.starts)),
                                     ("bisect.packages", ";".join(arms.change(p) for p in arms.packages)),
                                     ("bisect.culprit", ",".join(b.culprit))]
    if b.culprit_step is not None:
        r = b.culprit_step.result
        values += [("bisect.culprit_step", str(b.culprit_step.number)), ("bisect.culprit_decision", r.label)]
        if r.category:
            values.append(("category", r.category))
        elif r.decision is not None and str(r.decision) == "regressed":
            values.append(("category", "slower-than-baseline"))
        if r.ratio is not None and r.ci is not None:
            values += [("pair_ratio", f"{r.ratio:.6g}"), ("pair_ci_low", f"{r.ci[0]:.6g}"),
                       ("pair_ci_high", f"{r.ci[1]:.6g}"), ("pair_n", str(r.pairs))]
    for k, v in values:
        ET.SubElement(props, "property", name=k, value=v)
    if outcome == "fail":
        ET.SubElement(case, "failure", message=f"bisect: {b.target}: {', '.join(b.culprit)}")
    elif outcome == "inconclusive":
        ET.SubElement(case, "skipped", message=f"bisect: {b.status}")
    suite.set("tests", str(len(suite.findall("testcase"))))
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the two stacks (one of)")
    g.add_argument("--candidate-sim-stack", metavar="KEY=VER,...",
                   help="simulator: the candidate's stack versions; the current is the profile's box with "
                        "PERFGATE_SIM_STACK / --sim-stack")
    g.add_argument("--candidate-site", action="append", metavar="DIR",
                   help="real environments: the candidate's package folder (site-packages or an overlay; repeatable, "
                        "the first holding a package wins)")
    g.add_argument("--current-site", action="append", metavar="DIR",
                   help="real environments: the current's package folders, as on its PYTHONPATH (repeatable; with "
                        "lock files: the folders checked against --current-lock, instead of the interpreter's)")
    g.add_argument("--current-lock", metavar="FILE",
                   help="lock files: the current environment's pins (pip freeze / pip-compile / uv pip compile "
                        "output, uv.lock, pylock.toml); checked against the environment the servers run in")
    g.add_argument("--candidate-lock", metavar="FILE",
                   help="lock files: the candidate's pins; its changed packages are installed into "
                        "OUT/candidate-site before the first step")
    g.add_argument("--wheelhouse", metavar="DIR",
                   help="lock files: install the candidate's packages from this folder of wheels only (pip "
                        "--no-index --find-links DIR)")
    g.add_argument("--pip-args", default="", metavar="ARGS",
                   help="lock files: more pip install arguments, one shell string (e.g. \"--index-url URL\")")
    g.add_argument("--current-pythonpath", metavar="PATH",
                   help="the current arm's PYTHONPATH, after the step's overlay (default: this environment's)")
    g.add_argument("--python", metavar="PATH", default="",
                   help="the candidate arm's interpreter (default: the profile's, as for the current arm)")
    p.add_argument("--profile", required=True, metavar="TOML", help="the perfgate profile (--perfgate-profile)")
    p.add_argument("--sim-stack", metavar="KEY=VER,...", default=None,
                   help="simulator: the current stack's overrides (default: PERFGATE_SIM_STACK)")
    p.add_argument("--mode", action="append", metavar="MODE",
                   help="the profile's mode(s) to compare (repeatable; default: every stack-pair record)")
    p.add_argument("--starts", type=int, default=2, help="server starts per arm first (--perfgate-starts; default 2)")
    p.add_argument("--max-starts", type=int, default=6,
                   help="the most starts per arm while undecided (--perfgate-max-starts; default 6)")
    p.add_argument("--budget-starts", type=int, metavar="N",
                   help="the most server starts all steps may take (default: twice the single-culprit bound)")
    p.add_argument("--metric", default="record", choices=("record", *METRICS),
                   help="what decides a step: the record's verdict (regressed on any metric; default) or one metric")
    p.add_argument("--tests", default="perftests", metavar="PATH", help="the stack-pair tests (default perftests)")
    p.add_argument("--root", default=".", metavar="DIR", help="where pytest runs (the project; default .)")
    p.add_argument("--out", default="perfgate-bisect", metavar="DIR",
                   help="steps' JUnit and logs, bisect.txt/.json/.xml (default perfgate-bisect; must be new or empty)")
    p.add_argument("--pytest-args", default="", metavar="ARGS", help="more pytest arguments, one shell string")
    p.add_argument("--no-infer", action="store_true",
                   help="measure both halves at every level (no inferred half; more steps, sound without "
                        "confirmation)")
    p.add_argument("--dry-run", action="store_true", help="print the changed packages and the cost, run nothing")
    p.add_argument("--format", choices=("text", "md", "json"), default="text", help="the table's format")


@subcommand("bisect", "find the package change of a stack upgrade that carries its regression: each step layers "
                      "some of the candidate's packages over the current stack and runs the paired stack-pair judge",
            _args)
def _run(args: argparse.Namespace) -> int:
    from perfgate.measuring.bisect import BUDGET, bisect
    from perfgate.profiles.load import load_profile

    root = Path(args.root)
    profile_path = Path(args.profile)
    prof = load_profile(profile_path if profile_path.is_absolute() else root / profile_path)
    if args.starts < 1 or args.max_starts < args.starts:
        raise usage_error(f"--starts {args.starts} --max-starts {args.max_starts}: expected 1 <= starts <= "
                          f"max-starts")
    if args.candidate_sim_stack is not None:
        if not prof.simulated or prof.engine.sim_hardware is None:
            raise usage_error(f"--candidate-sim-stack: the profile {prof.path} is not simulated; fix: "
                              f"--current-site and --candidate-site for real environments")
        current = args.sim_stack if args.sim_stack is not None else os.environ.get("PERFGATE_SIM_STACK", "")
        arms = sim_arms(prof.engine.sim_hardware, current, args.candidate_sim_stack)
    elif args.current_lock or args.candidate_lock:
        if not (args.current_lock and args.candidate_lock) or args.candidate_site:
            raise usage_error("bisect: lock files are --current-lock FILE and --candidate-lock FILE, both (and no "
                              "--candidate-site); fix: pass both lock files")
        path = args.current_pythonpath if args.current_pythonpath is not None else os.environ.get("PYTHONPATH", "")
        arms = lock_arms(Path(args.current_lock), Path(args.candidate_lock),
                         python=args.python or prof.engine.python or sys.executable, pythonpath=path,
                         current_site=args.current_site, wheelhouse=Path(args.wheelhouse) if args.wheelhouse else None,
                         pip_args=args.pip_args, candidate_python=args.python)
    elif args.candidate_site and args.current_site:
        path = args.current_pythonpath if args.current_pythonpath is not None else os.environ.get("PYTHONPATH", "")
        arms = site_arms(args.current_site, args.candidate_site, path, args.python)
    else:
        raise usage_error("bisect: no candidate; fix: --candidate-sim-stack KEY=VER,... (simulator), "
                          "--current-site DIR --candidate-site DIR or --current-lock FILE --candidate-lock FILE (real "
                          "environments)")
    if (args.wheelhouse or args.pip_args) and not args.candidate_lock:
        raise usage_error("--wheelhouse / --pip-args: they install a candidate lock's packages; fix: pass them with "
                          "--current-lock FILE --candidate-lock FILE")
    modes = list(args.mode or [m for m in prof.modes])
    for m in args.mode or []:
        prof.mode(m)  # a ProfileSchemaError naming the modes there are
    tests = step_tests(args.tests, prof.name, args.mode or [])
    step_starts = 2 * args.max_starts * max(1, len(modes))
    n = len(arms.packages)
    most, most_starts = planned_cost(n, step_starts)
    budget = args.budget_starts if args.budget_starts is not None else 2 * most_starts
    if n and budget < step_starts:
        raise usage_error(f"--budget-starts {budget}: below one step's {step_starts} server starts, no step could "
                          f"run; fix: at least {step_starts} (a single culprit takes up to {most_starts})")
    missing_tests = [t for t in tests if "::" in t and not (root / t.split("::")[0]).is_file()]
    if missing_tests:
        raise usage_error(f"bisect: {missing_tests[0].split('::')[0]} is not in {root}: no stack-pair record to run "
                          f"(a project from `perfgate init` has one); fix: --tests DIR naming the folder that holds "
                          f"test_stack_pair.py, or copy perfgate's perftests/test_stack_pair.py there")
    halvings = math.ceil(math.log2(n)) if n > 1 else 0
    print(f"perfgate bisect: {n} changed package(s), current -> candidate:", file=sys.stderr)
    for p in arms.packages:
        print(f"  {arms.change(p)}", file=sys.stderr)
    for note in arms.notes:
        print(f"  note: {note}", file=sys.stderr)
    if not n:  # identical stacks: nothing to search, no step, no server start
        for line in arms.prepare(Path(args.out)) if arms.prepare is not None and not args.dry_run else ():
            print(f"perfgate bisect: {line}", file=sys.stderr)
        print("perfgate bisect: the two stacks pin the same versions: nothing to search, no step run", file=sys.stderr)
        return EXIT_OK
    print(f"perfgate bisect: cost: a step is one stack-pair session of {len(modes)} mode(s), 2x{args.starts} to "
          f"2x{args.max_starts} server starts each; a single culprit takes 1 to {most} step(s) (the whole set, "
          f"{halvings} halving(s), 1 confirmation): at most {most_starts} server starts; interactions take more; "
          f"budget {budget} server starts (--budget-starts): a step runs only while the budget holds "
          f"{step_starts} more", file=sys.stderr)
    print(f"perfgate bisect: each step runs pytest {shlex.join(tests)} -m stack_pair", file=sys.stderr)
    if args.dry_run:
        return EXIT_OK
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise usage_error(f"{out}: not empty; fix: remove it or pass another --out")
    out.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(args.pytest_args)
    if arms.prepare is not None:
        for line in arms.prepare(out):
            print(f"perfgate bisect: {line}", file=sys.stderr)

    steps = 0

    def judge(pkgs: tuple[str, ...], role: str) -> StepResult:
        nonlocal steps
        steps += 1
        number = steps
        folder = out / f"step-{number}"
        folder.mkdir(parents=True, exist_ok=True)
        spec = arms.spec(pkgs, folder)
        print(f"perfgate bisect: step {number} ({role}): {', '.join(pkgs)}", file=sys.stderr)
        r = run_step(number, spec, out=out, root=root, profile=str(prof.path), tests=tests, starts=args.starts,
                     max_starts=args.max_starts, extra=extra, metric=args.metric)
        ratio, ci = _interval(r)
        finished.append(f"step {number} ({role}): {', '.join(pkgs)}: {r.label} {ratio} {ci} ({r.pairs} pair(s), "
                        f"{r.starts} start(s))")
        print(f"perfgate bisect: step {number}: {r.label} {ratio} {ci} ({r.pairs} pair(s), {r.starts} start(s))",
              file=sys.stderr)
        return r

    finished: list[str] = []
    try:
        b = bisect(arms.packages, judge, step_starts=step_starts, budget_starts=budget, infer=not args.no_infer)
    except KeyboardInterrupt:  # what the finished steps found is kept, not lost to a traceback
        kept = "\n".join(finished) or "no step finished"
        (out / "bisect-interrupted.txt").write_text(kept + "\n", encoding="utf-8")
        print(f"perfgate bisect: interrupted after {len(finished)} finished step(s) (kept in "
              f"{out / 'bisect-interrupted.txt'}; each step's JUnit and log in {out}):\n  "
              + kept.replace("\n", "\n  "), file=sys.stderr)
        return EXIT_STOPPED
    text = render(b, arms, "text")
    (out / "bisect.txt").write_text(text, encoding="utf-8")
    (out / "bisect.json").write_text(render(b, arms, "json"), encoding="utf-8")
    write_junit(b, arms, out / "bisect.xml")
    emit(text if args.format == "text" else render(b, arms, args.format), None)
    if b.status == BUDGET:
        print(f"perfgate bisect: the budget of {budget} server starts ran out; what is known is above", file=sys.stderr)
    if not b.complete:
        whys = sorted({s.result.why for s in b.steps if s.result.why})
        from perfgate.categories import WHY_SAID

        print(f"perfgate bisect: exit {int(EXIT_STOPPED)}: stopped before it decided"
              + (": " + "; ".join(f"{w}: {WHY_SAID.get(w, w)}" for w in whys) if whys else ""), file=sys.stderr)
    return EXIT_OK if b.complete else EXIT_STOPPED
