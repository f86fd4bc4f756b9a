"""What a noise measured on this machine buys a paired TTFT gate (``--perfgate-noise-from``; perfgate.report.pairnoise).

    python benchmarks/measured_noise_power.py                 # 1000 runs a cell, about a minute
    python benchmarks/measured_noise_power.py --runs 300 --change 0.2

Each run is one paired TTFT comparison as ``perfgate.plugin.compare`` drives it: start pairs added while undecided,
judged by :func:`perfgate.measuring.judge.paired` at the looks of a :class:`~perfgate.measuring.judge.Sequential`
plan of 6 pairs, TTFT's share of the record's false alarms (``1 - 0.05 / 6``: six metrics share one budget beside
decode tok/s) and its practical floor (2 %). A start's TTFT is drawn around its machine's with the box's true noise
between starts; the noise the judge is given is what :func:`~perfgate.report.pairnoise.pair_noise` would measure
from one earlier A/A record of ``H`` pairs on the same box (drawn afresh for every run, so its own error counts), or,
in the last column, the documented real first-token prior (16 %, 4 df). Printed per true noise and ``H``:

- **power**: the share of runs with a TTFT change of ``--change`` (default +10 %) called *regressed* within
  ``--max-pairs`` (default 4) pairs, and the mean pairs it took;
- **A/A FA**: identical arms called *regressed* within 6 pairs; **A/A FA, run 3x noisier**: the same with the run's
  starts three times noisier than the history they are judged against (a box that got noisier since).

Not a unit test (tests/test_pair_noise.py pins the decisions on a fixed seed). Its table is in docs/power.md.
"""

from __future__ import annotations

import argparse
import math
import random
import sys

from perfgate.measuring.judge import Decision, Sequential, paired

PLAN = Sequential(first_pairs=1, max_pairs=6)
#: TTFT's share of a record's false alarms in a stack pair (perfgate.measuring.stackpair.pair_judgements)
CONFIDENCE = 1 - 0.05 / 6
#: the real first-token prior at the starts level (perfgate.profiles.noise)
PRIOR = 0.16


def history(rng: random.Random, noise: float, pairs: int) -> tuple[float, float]:
    """What pair_noise measures from one A/A record of ``pairs`` pairs at this noise: (one start's cv, df)."""
    logs = [rng.gauss(0, noise) - rng.gauss(0, noise) for _ in range(pairs)]
    mean = sum(logs) / pairs
    return math.sqrt(sum((v - mean) ** 2 for v in logs) / (pairs - 1) / 2), float(pairs - 1)


def run(rng: random.Random, *, change: float, noise: float, measured: tuple[float, float] | None,
        max_pairs: int = 4) -> tuple[Decision, int]:
    """One paired TTFT run: (its decision, the pairs it took), judged on ``measured`` (cv, df) or the prior."""
    shift = math.log(1 + change)
    ratios: list[float] = []
    while True:
        ratios.append(math.exp(rng.gauss(0, noise) + shift - rng.gauss(0, noise)))
        cv, df, name = (*measured, "history") if measured is not None else (PRIOR, None, "prior")
        j = paired(ratios, higher_is_better=False, min_effect=0.02, confidence=CONFIDENCE, plan=PLAN, metric="ttft_ms",
                   prior_cv=cv, prior_df=df, prior_name=name)
        if j.decision is not Decision.UNDECIDED or len(ratios) >= max_pairs:
            return j.decision, len(ratios)


def cell(rng: random.Random, runs: int, *, change: float, noise: float, history_pairs: int | None,
         max_pairs: int, history_noise: float | None = None) -> tuple[float, float]:
    """(share regressed, mean pairs of those) over ``runs`` runs; ``history_pairs`` None: judged on the prior."""
    hits, pairs = 0, 0
    for _ in range(runs):
        measured = (history(rng, history_noise or noise, history_pairs) if history_pairs else None)
        d, n = run(rng, change=change, noise=noise, measured=measured, max_pairs=max_pairs)
        if d is Decision.REGRESSED:
            hits, pairs = hits + 1, pairs + n
    return hits / runs, pairs / hits if hits else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--change", type=float, default=0.10)
    ap.add_argument("--max-pairs", type=int, default=4)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"TTFT +{args.change:.0%} within {args.max_pairs} pairs; A/A within 6; {args.runs} runs a cell")
    print(f"{'noise':>6} {'H':>3} {'power':>12} {'A/A FA':>7} {'A/A FA, run 3x noisier':>23} {'on the prior':>13}")
    for noise in (0.01, 0.02, 0.03, 0.04, 0.08):
        prior_power, _ = cell(rng, args.runs, change=args.change, noise=noise, history_pairs=None,
                              max_pairs=args.max_pairs)
        for h in (5, 9, 20):
            power, pairs = cell(rng, args.runs, change=args.change, noise=noise, history_pairs=h,
                                max_pairs=args.max_pairs)
            aa, _ = cell(rng, args.runs, change=0.0, noise=noise, history_pairs=h, max_pairs=6)
            wide, _ = cell(rng, args.runs, change=0.0, noise=3 * noise, history_pairs=h, max_pairs=6,
                           history_noise=noise)
            print(f"{noise:>6.0%} {h:>3} {power:>7.0%} {pairs:>3.1f}p {aa:>7.1%} {wide:>23.1%} {prior_power:>13.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
