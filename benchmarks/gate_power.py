"""How often does the gate cry wolf, and how small a regression does it catch? (issue: verdicts across machines)

    python benchmarks/gate_power.py                      # 2000 replicates per cell, a few seconds
    python benchmarks/gate_power.py --replicates 500 --json out.json

Draws runs from the simulator's own model of a fleet (:mod:`perfgate.sim.variation`: a per-machine speed factor
and a per-start jitter, their sds taken from real H200s) and judges them with the code the gate runs
(:func:`perfgate.report.diff.compare_metric` on records built like the reports', :func:`perfgate.measuring.judge.paired`
for paired runs), so the rates printed are the gate's, not a formula's:

- **A/A false alarms**: two runs of the same stack and config, (a) on one machine, (b) on two machines of one
  model; over ``--machines`` machine pairs (at least 20) and many replicates: how often the gate says
  *regressed* (blocks), *undecided* (does not block) or *same*;
- **power**: a regression of d % injected into the candidate (what ``PERFGATE_SIM_SCALE = 1 - d`` does to the
  simulated server); for paired runs of 1, 3 and 5 starts per arm on one machine, and for two unpaired
  reports of one machine, the share of replicates called *regressed*; the smallest d caught in >= 95 %.

Not a unit test (tests/test_gate_power.py pins the decisions on a fixed seed). Its table is in docs/power.md.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass

from perfgate.measuring.judge import Decision, paired
from perfgate.report.diff import compare_metric
from perfgate.report.records import Record

try:  # the simulator's fleet model (one home); the constants below only stand in where it is absent
    from perfgate.sim import variation as _variation
except ImportError:  # pragma: no cover
    _variation = None  # type: ignore[assignment]

#: relative sd of a machine's speed and of one start (perfgate.sim.variation's, where importable)
MACHINE_SD = getattr(_variation, "MACHINE_SD", 0.016)
START_SD = getattr(_variation, "START_SD", 0.0005)
#: the simulated seed box's baseline: 89.5 tok/s, 5 trials, a within-start 95 % CI about +-0.006 %
BASE_TOK_S = 89.5
TRIAL_SD = 0.00003
TRIALS = 5
REGRESSIONS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.02, 0.05)
STARTS = (1, 3, 5)


@dataclass(frozen=True)
class Fleet:
    """Machines of one model: each a speed factor, each start a jitter, each start's figure a little trial noise."""

    rng: random.Random

    def machine(self) -> float:
        return math.exp(self.rng.gauss(0.0, MACHINE_SD))

    def start(self, factor: float, scale: float = 1.0) -> tuple[float, float]:
        """One start's median and its within-start CI half-width (95 %)."""
        x = BASE_TOK_S * factor * scale * math.exp(self.rng.gauss(0.0, START_SD)) * math.exp(
            self.rng.gauss(0.0, TRIAL_SD))
        return x, 1.96 * TRIAL_SD * x * math.sqrt(math.pi / 2)


def record(machine: str, starts: list[tuple[float, float]], *, config: str = "940159e895", metric: str = "tok_s",
           engine: str = "sim", gpu: str = "") -> Record:
    """A floor record as a report carries it: its metric (median over starts), its CI, n, and the starts (``gpu``: its
    ``stack.gpu``, whose kind's priors judge it)."""
    vals = sorted(v for v, _ in starts)
    med = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
    half = max(h for _, h in starts)
    props = [("machine.id", machine), ("config", config), ("metric", metric), ("engine", engine)]
    if gpu:
        props.append(("stack.gpu", gpu))
    nums = [(metric, med), (f"{metric}_ci_low", med - half), (f"{metric}_ci_high", med + half), ("n", float(TRIALS))]
    if len(starts) > 1:
        props += [("start_values", ",".join(f"{v:.6g}" for v, _ in starts)), ("n_starts", str(len(starts)))]
        nums.append(("n_starts", float(len(starts))))
    rid = "perftests.test_baseline::test_decode_floor[kimi-k2.5-sim:baseline]"
    return Record(key=rid, id=rid, classname="perftests.test_baseline", name="test_decode_floor", outcome="pass",
                  outcome_source="property", properties=tuple(props) + tuple((k, f"{v:.9g}") for k, v in nums),
                  numbers=tuple(nums))


def _rates(decisions: list[str]) -> dict[str, float]:
    n = len(decisions)
    return {d.value: sum(1 for x in decisions if x == d.value) / n for d in Decision}


def aa(fleet: Fleet, machines: int, replicates: int) -> dict[str, dict[str, float]]:
    same, across = [], []
    for r in range(replicates):
        m = r % machines
        fa, fb = fleet.machine(), fleet.machine()
        a = record(f"m{m}", [fleet.start(fa)])
        same.append(compare_metric(a, record(f"m{m}", [fleet.start(fa)])).verdict)  # type: ignore[union-attr]
        across.append(compare_metric(a, record(f"m{m}b", [fleet.start(fb)])).verdict)  # type: ignore[union-attr]
    return {"same machine": _rates(same), "two machines": _rates(across)}


def power(fleet: Fleet, replicates: int) -> dict[str, dict[float, float]]:
    out: dict[str, dict[float, float]] = {}
    for n in STARTS:
        row = {}
        for d in REGRESSIONS:
            hits = 0
            for _ in range(replicates):
                f = fleet.machine()
                ratios = []
                for _ in range(n):  # A B A B ...: each pair's ratio
                    a, _h = fleet.start(f)
                    b, _h = fleet.start(f, 1 - d)
                    ratios.append(b / a)
                hits += paired(ratios, min_effect=0.005).decision is Decision.REGRESSED
            row[d] = hits / replicates
        out[f"paired, {n} start(s) per arm"] = row
    for n in (1, 3):
        row = {}
        for d in REGRESSIONS:
            hits = 0
            for _ in range(replicates):
                f = fleet.machine()
                old = record("m", [fleet.start(f) for _ in range(n)])
                new = record("m", [fleet.start(f, 1 - d) for _ in range(n)])
                hits += compare_metric(old, new).verdict == Decision.REGRESSED  # type: ignore[union-attr]
            row[d] = hits / replicates
        out[f"two reports of one machine, {n} start(s) each"] = row
    return out


def smallest(row: dict[float, float], at: float = 0.95) -> float | None:
    return next((d for d in sorted(row) if row[d] >= at), None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=2000)
    ap.add_argument("--machines", type=int, default=20, help="machine pairs the A/A runs cycle over (>= 20)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    if args.machines < 20:
        ap.error("--machines must be at least 20")
    fleet = Fleet(random.Random(args.seed))
    print(f"fleet model: machine sd {MACHINE_SD:.2%}, start sd {START_SD:.3%} "
          f"({'perfgate.sim.variation' if _variation else 'built-in constants'}); {args.replicates} replicates")
    a = aa(fleet, args.machines, args.replicates)
    print("\nA/A (same stack and config):       regressed (blocks)   undecided   same")
    for k, v in a.items():
        print(f"  {k:<32} {v['regressed']:>10.2%} {v['undecided']:>16.2%} {v['same']:>8.2%}")
    p = power(fleet, max(200, args.replicates // 4))
    print("\nshare called regressed, by injected regression:")
    print("  " + " " * 44 + "".join(f"{d:>8.2%}" for d in REGRESSIONS) + "   >=95 % from")
    for k, row in p.items():
        s = smallest(row)
        print(f"  {k:<44}" + "".join(f"{row[d]:>8.0%}" for d in REGRESSIONS) + f"   {s:.2%}" if s else "   none")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"aa": a, "power": {k: {str(d): x for d, x in row.items()} for k, row in p.items()},
                       "machine_sd": MACHINE_SD, "start_sd": START_SD, "replicates": args.replicates}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
