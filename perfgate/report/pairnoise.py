"""One server start's noise per metric, measured by earlier paired runs on this machine (pure): what a stack pair is
judged against in place of the documented prior (``--perfgate-noise-from``; ``benchmarks/sequential_power.py
--noise-from`` prints it).

The priors (perfgate.profiles.noise) are the widest noise seen on any machine: a TTFT's 16 % between starts is what
an H200 showed whose servers' processes ran where they landed. A box that is calmer (its servers pinned,
``--perfgate-server-cpus``, or simply calmer than the widest) judged against the widest cannot see a change that
its own noise would show. Earlier paired runs on the box measure that noise: per metric the pooled sd of each
stack-pair record's log candidate/current start-pair ratios around that record's own mean (a real change, an
injected one included, moves the mean, not the spread), over sqrt(2) (one start's), with the degrees of freedom
behind it. The judge takes it in place of the prior with those degrees of freedom
(:func:`perfgate.measuring.judge.paired`'s ``prior_df``), so a noise resting on few pairs counts for little, and
a run whose own pairs spread wider than it rejects it (the judge's chi-square check): it never hides what the run
itself shows.

Only records like the one judged count (:class:`Match`): the same server config (the record's ``config``), the same
pairing (alternated starts or side by side: ``co_resident_starts``), the same machine (``machine.id``) and the
same pinning (``host.server_cpus``); start pairs measured disturbed (``pair_disturbed``) are left out. What was left
out, and why, is counted (:attr:`PairNoises.left_out`).

Without ``--perfgate-noise-from``, a box's own earlier paired runs are used where perfgate kept them: a session
whose ``--junitxml`` report holds a paired record keeps a copy under the log folder (:func:`keep_paired`,
``perfgate-logs/pairs/``), and the next session reads those (:func:`kept_reports`), matched as above (this machine,
this config and pinning). ``PERFGATE_NOISE_AUTO=off`` judges on the priors alone.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.host.conditions import SERVER_CPUS
from perfgate.record import CANDIDATE_PREFIX, CO_RESIDENT_STARTS, MACHINE_ID, PAIR_DISTURBED, PAIR_N, START_VALUES
from perfgate.report.noise import start_values
from perfgate.report.records import Record, Report

__all__ = ["Match", "PairNoise", "PairNoises", "pair_noise", "paired_values", "NOISE_AUTO_ENV", "KEPT_DIR",
           "noise_auto", "keep_paired", "kept_reports"]

#: ``off`` (or 0, false, no): no session keeps its paired records, and none reads them (the priors alone)
NOISE_AUTO_ENV = "PERFGATE_NOISE_AUTO"
#: the folder under the log folder (``perfgate-logs/``) where paired reports are kept for the next session
KEPT_DIR = "pairs"


def noise_auto() -> bool:
    """Whether sessions keep their paired records and judge on the box's own (``PERFGATE_NOISE_AUTO``, default on)."""
    return os.environ.get(NOISE_AUTO_ENV, "on").strip().lower() not in ("off", "0", "false", "no")


def keep_paired(junit: Path, log_root: Path, name: str) -> Path | None:
    """A copy of the JUnit report ``junit`` as ``<log_root>/pairs/<name>.xml`` when it holds a paired record (one
    with ``pair_n``): the next session's measured noise on this box. None when there is nothing to keep."""
    from perfgate.errors import ReportError
    from perfgate.report.junit_read import read_report

    try:
        report = read_report(junit)
    except (OSError, ReportError):
        return None
    if not any(r.prop(PAIR_N) for r in report.records):
        return None
    dest = log_root / KEPT_DIR / f"{name}.xml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(junit, dest)
    return dest


def kept_reports(log_root: Path) -> list[str]:
    """The paired reports kept under ``log_root`` (oldest first), as ``--perfgate-noise-from`` would name them."""
    return [str(p) for p in sorted((log_root / KEPT_DIR).glob("*.xml"))]


@dataclass(frozen=True, kw_only=True)
class PairNoise:
    """One metric's noise of one server start, from paired runs."""

    cv: float  # relative sd of one start
    df: int  # the degrees of freedom behind it
    records: int  # the stack-pair records it pooled
    pairs: int  # their start pairs

    def text(self) -> str:
        return f"{self.cv:.2%} a start ({self.df} df: {self.pairs} pairs of {self.records} records)"


@dataclass(frozen=True, kw_only=True)
class Match:
    """Which records' pairs count (None: any)."""

    config: str | None = None
    level: str | None = None  # "starts" (alternated) or "side-by-side"
    machine: str | None = None
    server_cpus: str | None = None  # "" for servers that were not pinned

    def problem(self, r: Record) -> str:
        """Why ``r`` does not count ("" when it does)."""
        if self.config is not None and r.config != self.config:
            return "another server config"
        if self.level is not None and level_of(r) != self.level:
            return "other pairing (side by side / alternated)"
        if self.machine is not None and r.machine_dict.get(MACHINE_ID, "") != self.machine:
            return "another machine"
        if self.server_cpus is not None and r.prop(SERVER_CPUS) != self.server_cpus:
            return "other server CPUs"
        return ""


@dataclass(frozen=True, kw_only=True)
class PairNoises:
    """Per start-values name (``tok_s``, ``ttft_probe_ms``, ``ttft_part.prefill_ms``, ...) and pairing level, one
    start's noise; and the stack-pair records left out, by reason."""

    noise: dict[tuple[str, str], PairNoise] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)

    def get(self, level: str, name: str) -> PairNoise | None:
        return self.noise.get((level, name))

    def at(self, level: str) -> dict[str, tuple[float, float]]:
        """What the judge takes at one pairing level: per values name, (one start's cv, its df)."""
        return {name: (n.cv, float(n.df)) for (lv, name), n in self.noise.items() if lv == level}

    def text(self, level: str) -> str:
        """The noise measured at ``level``, each name's, and the records left out by reason, in one line."""
        what = "; ".join(f"{name} {n.text()}" for (lv, name), n in sorted(self.noise.items()) if lv == level)
        left = ", ".join(f"{n} {why}" for why, n in sorted(self.left_out.items()))
        return (what or "no paired run like this one") + (f" (records left out: {left})" if left else "")


def level_of(r: Record) -> str:
    """The pairing of a stack-pair record's starts: ``side-by-side`` (co-resident arms) or ``starts``."""
    return "side-by-side" if (r.num(CO_RESIDENT_STARTS) or 0) > 0 else "starts"


def paired_values(r: Record) -> dict[str, tuple[list[float], list[float]]]:
    """The per-start values a stack-pair record carries for both arms (``start_values.<name>`` and
    ``candidate.start_values.<name>``, the same number of starts), the pairs measured disturbed left out."""
    bad = {int(x) for x in r.prop(PAIR_DISTURBED).split(",") if x.strip().isdigit()}
    out = {}
    prefix = f"{START_VALUES}."
    for key, _ in r.properties:
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        a, b = start_values(r, name), start_values(r, name, arm=CANDIDATE_PREFIX)
        if len(a) == len(b) >= 2 and r.prop(f"{CANDIDATE_PREFIX}{prefix}{name}"):
            keep = [i for i in range(len(a)) if i + 1 not in bad]
            out[name] = ([a[i] for i in keep], [b[i] for i in keep])
    return out


def pair_noise(reports: Iterable[Report], match: Match | None = None) -> PairNoises:
    """One start's noise per (level, start-values name) from the stack-pair records of ``reports`` that ``match``
    (every record with ``pair_n``: the others are no paired runs and are not counted): the pooled sd of each record's
    log start-pair ratios around its own mean, over sqrt(2), where a record has two pairs or more."""
    match = match or Match()
    sums: dict[tuple[str, str], list[float]] = {}
    left_out: Counter[str] = Counter()
    for report in reports:
        for r in report.records:
            if not r.prop(PAIR_N):
                continue
            why = match.problem(r)
            if why:
                left_out[why] += 1
                continue
            for name, (a, b) in paired_values(r).items():
                logs = [math.log(y / x) for x, y in zip(a, b) if x > 0 and y > 0]
                if len(logs) < 2:
                    continue
                mean = statistics.fmean(logs)
                acc = sums.setdefault((level_of(r), name), [0.0, 0, 0, 0])
                acc[0] += sum((v - mean) ** 2 for v in logs)
                acc[1] += len(logs) - 1
                acc[2] += 1
                acc[3] += len(logs)
    noise = {k: PairNoise(cv=math.sqrt(ss / df / 2), df=int(df), records=int(n), pairs=int(p))
             for k, (ss, df, n, p) in sums.items() if df > 0}
    return PairNoises(noise=noise, left_out=dict(left_out))
