"""One goodput level on the simulated seed box, decided as the goodput record decides it: does the level's
answer depend on which Poisson draw its trials follow?

    python benchmarks/goodput_level.py                          # 2 req/s, 2 trials of 150 requests
    python benchmarks/goodput_level.py --rate 2.83 --requests 100 --trials 3

Starts perfgate's simulated server for the seed box's baseline (``baselines/sim-rtxpro6000-x8/kimi-k2.5.toml``),
then runs ``--trials`` open-loop trials of ``--requests`` at ``--rate`` through the record's own procedure
(:class:`perfgate.procedure.OpenLoop`: the workload's warm-up once, then each trial on its own seed, seed + 2i,
after the profile's warm-up at that rate, the simulator at speed-up 1 while the schedule runs), and prints per trial
the good requests and the misses, and the level's decision over the pooled requests
(:func:`perfgate.measuring.goodput.judge_level`). Not a unit test: a few minutes in real time (docs/load.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.measuring.goodput import judge_level  # noqa: E402
from perfgate.procedure import OpenLoop  # noqa: E402
from perfgate.profiles.load import load_profile  # noqa: E402
from perfgate.serving.simprocess import SimProcess  # noqa: E402

PROFILE = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--requests", type=int, default=150)
    ap.add_argument("--trials", type=int, default=2)
    a = ap.parse_args(argv)
    prof = load_profile(PROFILE)
    slo = prof.slo["baseline"]
    w = replace(prof.workload_for("baseline"), max_new_tokens=slo.max_new_tokens or 32)
    trials = []
    with tempfile.TemporaryDirectory() as tmp:
        with SimProcess.for_mode(prof, "baseline", log_path=Path(tmp) / "sim.log", start_seed="goodput-level:1",
                                 speedup=4) as sim:
            sim.wait_ready()
            level = OpenLoop(sim.url, w, slo)
            for i in range(a.trials):
                (t,) = level(a.rate, 1, a.requests)
                trials.append(t)
                print(f"trial {i} (seed {slo.seed + 2 * i}): {t.good}/{t.requests} good, missed {t.missed}, "
                      f"TPOT p99 {t.p99.get('tpot_ms_p99', 0):.1f} ms, TTFT p99 {t.p99.get('ttft_ms_p99', 0):.1f} ms")
    lv = judge_level(a.rate, trials, slo)
    print(f"level: {lv.decision}, {lv.good}/{lv.requests}, attainment bounds {lv.attainment_low:.4f}-"
          f"{lv.attainment_high:.4f}; {lv.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
