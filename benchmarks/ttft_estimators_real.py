"""Which statistic of a start's TTFT probes moves least, on a real server's probes (not a unit test).

    python benchmarks/ttft_estimators_real.py \
        evidence/h100-x1/prefill-paired-2026-12-07/ttft-levels-free-pin3/probes-*.csv

Each CSV is one server process probed one request at a time for a while (``ci/device/ttft_levels.py``: a row a probe,
``t_s`` and ``ttft_ms``). From it, ``--draws`` pseudo-starts are drawn as perfgate probes a start: ``--blocks`` blocks
of ``--per-block`` consecutive probes, one block in each equal stretch of the process's time (perfgate sends its 36
probes as 6 blocks of 6 between the trials). Each estimator is computed on every pseudo-start; printed per file: its
median and the sd of its logarithm across the draws, the noise that sampling one process's levels alone puts into a
start's TTFT (between processes the level moves more; benchmarks/ttft_modes.py simulates both).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence

from perfgate.measuring.modes import start_estimate

ESTIMATORS: dict[str, Callable[[Sequence[float]], float]] = {
    "median": statistics.median,
    "start_estimate (shipped)": start_estimate,
    "p25": lambda v: sorted(v)[len(v) // 4],
    "p10": lambda v: sorted(v)[len(v) // 10],
    "min": min,
}


def pseudo_starts(values: Sequence[float], rng: random.Random, draws: int, blocks: int,
                  per_block: int) -> list[list[float]]:
    n = len(values)
    out = []
    for _ in range(draws):
        picks: list[float] = []
        for b in range(blocks):
            lo, hi = int(b * n / blocks), int((b + 1) * n / blocks) - per_block
            s = rng.randint(lo, max(lo, hi))
            picks += values[s:s + per_block]
        out.append(picks)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--per-block", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"{'file':<40}{'probes':>7}  " + "".join(f"{name:>28}" for name in ESTIMATORS))
    for path in args.csv:
        with open(path, newline="") as f:
            values = [float(r["ttft_ms"]) for r in csv.DictReader(f) if r.get("ttft_ms")]
        starts = pseudo_starts(values, rng, args.draws, args.blocks, args.per_block)
        cells = []
        for est in ESTIMATORS.values():
            got = [est(s) for s in starts]
            sd = statistics.stdev(math.log(x) for x in got)
            cells.append(f"{statistics.median(got):.1f} ms, sd {sd:.1%}")
        print(f"{path.split('/')[-1]:<40}{len(values):>7}  " + "".join(f"{c:>28}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
