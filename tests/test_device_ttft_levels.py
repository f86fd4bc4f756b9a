"""ci/device/ttft_levels.py against the simulated server (process tier): a server whose prefill steps flip between
two levels (PERFGATE_SIM_TTFT_MODES, factor 2.5) gives probes split into a fast and a slow group, the leg that
differs between them is ``prefill`` (the simulator's levels are its prefill steps), every probe row carries its parts
and the CPU of the server's process, and a ``pin:0`` phase runs the server on CPU 0 only. Structure, not time."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_levels_script_names_the_leg_and_the_cpus(tmp_path: Path) -> None:
    env = {**os.environ, "PERFGATE_SIM_TTFT_MODES": "1.0,2.5/6", "PERFGATE_SIM_START_SEED": "3"}
    r = subprocess.run([sys.executable, "ci/device/ttft_levels.py", str(tmp_path), "sim-rtxpro6000-x8/kimi-k2.5",
                        "--seconds", "3", "--gap-ms", "10", "--phase", "free", "--phase", "pin:0"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = (tmp_path / "summary.txt").read_text()
    assert "== free:" in summary and "== pin:0:" in summary, summary
    fast = next(ln for ln in summary.splitlines() if ln.strip().startswith("fast ("))
    slow = next(ln for ln in summary.splitlines() if ln.strip().startswith("slow ("))

    def leg(line: str, name: str) -> float:
        return float(line.split(f"{name} ")[1].split(",")[0])

    assert leg(slow, "prefill") > 1.8 * leg(fast, "prefill")  # the levels are the prefill steps'
    assert abs(leg(slow, "rest") - leg(fast, "rest")) < 0.5 * leg(fast, "prefill")
    with open(tmp_path / "probes-pin-0.csv") as f:
        rows = list(csv.DictReader(f))
    cpus = [k for k in rows[0] if k.startswith("cpu.")] if rows else []
    assert cpus, rows[:1]  # the server's processes, by name (the simulator's interpreter)
    assert all(r["prefill"] and all(r[k] in ("0", "") for k in cpus) for r in rows)
