"""TTFT judged by its legs, in real sessions on the simulator: a wait before the prefill that the levels hide in TTFT
shows in its leg (issue 40: measure TTFT where its noise lives).

    python benchmarks/ttft_legs.py                  # 10 runs a cell, about 15 minutes on 2 cores
    python benchmarks/ttft_legs.py --runs 20 --json out.json

Each run is a real pytest session of the stack-pair record on the simulator, in the throwaway project of
``benchmarks/coresident.py`` (the seed box with a 20 GB model, 3 trials and 36 TTFT probes a start) with the
servers stamping their responses (``enable-metrics``), one start per arm first and start pairs added while undecided
up to ``--max-pairs`` (default 4), alternated, judged by the plugin's own paired judge. The host:
``PERFGATE_SIM_TTFT_MODES=1.0,1.6/<D>s``, a prefill level drawn anew every D simulated seconds for every server (the
levels live in the ``prefill`` leg), D about one start's span, so a start often sits at one level and the next at
the other. The candidate: identical (A/A), or waiting 10 % of the fast level's probe TTFT before every prefill
(``PERFGATE_SIM_PREFILL_DELAY_MS``: the ``to_forward`` leg, where the H200 runs' injected scheduler sleep lands).

Printed per cell: the share of runs the record blocked (any metric it judges regressed, and which), the decisions of
``pair.ttft_ms`` and of each leg's ``pair.ttft_part.<leg>_ms``, and the mean pairs taken. The host watch is off, as
in ``benchmarks/coresident.py``. Not a unit test: its
table is in evidence/sim-rtxpro6000-x8/ttft-legs-2026-12-05/README.md (docs/paired.md, "TTFT by its legs").
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

try:
    from benchmarks.coresident import FAST_TTFT_MODES_DELAY, one_run, project
except ImportError:  # run as a script: benchmarks/ is its own directory
    from coresident import FAST_TTFT_MODES_DELAY, one_run, project  # type: ignore[no-redef]

from perfgate.measuring.ttft_parts import LEG_METRICS

DECISIONS = ("regressed", "same", "improved", "undecided", "missing")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per cell (default 10)")
    ap.add_argument("--dwell", type=float, default=10.0, help="simulated seconds per host level (default 10)")
    ap.add_argument("--max-pairs", type=int, default=4, help="the budget of start pairs (default 4)")
    ap.add_argument("--json", help="write every run's decisions here")
    args = ap.parse_args(argv)
    metrics = ("ttft_ms", *LEG_METRICS)
    rows, raw = [], []
    with tempfile.TemporaryDirectory(prefix="pg-legs-") as tmp:
        root = Path(tmp)
        prof = project(root, server_extra="enable-metrics = true\n")
        n = 0
        host = f"1.0,1.6/{args.dwell:g}s"
        for cand_name, delay in (("A/A", 0.0), ("TTFT +10 % before prefill", FAST_TTFT_MODES_DELAY)):
            decided: dict[str, list[str]] = {m: [] for m in metrics}
            pairs, blocked, blocked_on = [], 0, collections.Counter[str]()
            for _ in range(args.runs):
                n += 1
                rec = one_run(root, prof, co_resident=False, delay_ms=delay, host=host, n=n,
                              extra=["--perfgate-max-starts", str(args.max_pairs)])
                for m in metrics:
                    decided[m].append(rec.get(f"pair.{m}.decision", "missing"))
                worse = [k[len("pair."):-len(".decision")] for k, v in rec.items()
                         if k.startswith("pair.") and k.endswith(".decision") and v == "regressed"]
                blocked += bool(worse)
                blocked_on.update(worse)
                pairs.append(int(rec.get("pair_n", "0") or 0))
                raw.append({"candidate": cand_name, **{k: v for k, v in rec.items()
                                                       if k.startswith(("pair", "start_values.ttft",
                                                                        "candidate.start_values.ttft"))}})
            rows.append((cand_name, blocked / args.runs, decided, statistics.fmean(pairs)))
            print(f"{cand_name}: blocked {blocked / args.runs:.0%} (on {dict(blocked_on)}), pairs "
                  f"{statistics.fmean(pairs):.1f}", flush=True)
            for m in metrics:
                share = "  ".join(f"{d} {decided[m].count(d) / args.runs:.0%}" for d in DECISIONS
                                  if decided[m].count(d))
                print(f"   {m:28s} {share}", flush=True)
    print("\n| candidate | record blocked | mean pairs | " + " | ".join(f"`{m}` regressed / undecided" for m in metrics)
          + " |")
    print("|---|---|---|" + "---|" * len(metrics))
    for cand_name, blk, decided, mean_pairs in rows:
        cells = " | ".join(f"{decided[m].count('regressed') / args.runs:.0%} / "
                           f"{decided[m].count('undecided') / args.runs:.0%}" for m in metrics)
        print(f"| {cand_name} | {blk:.0%} | {mean_pairs:.1f} | {cells} |")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
