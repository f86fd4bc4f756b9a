"""ci/device/ttft_levels.py against the simulated server (process tier): a server whose prefill steps flip between
two levels (PERFGATE_SIM_TTFT_MODES, factor 2.5) gives probes split into a fast and a slow group, the leg that
differs between them is ``prefill`` (the simulator's levels are its prefill steps), every probe row carries its parts
and the CPU of the server's process and the processes that shared a physical core, the machine's core layout is
written beside them, and a ``pin:auto:1`` phase runs the server on the one CPU ``auto`` chooses. Structure, not
time: a count of probes, not seconds of them (3 s of probes on a loaded runner held too few to see both levels)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from perfgate.host.affinity import auto_cpus

ROOT = Path(__file__).resolve().parents[1]


def test_the_levels_script_names_the_leg_and_the_cpus(tmp_path: Path) -> None:
    env = {**os.environ, "PERFGATE_SIM_TTFT_MODES": "1.0,2.5/6", "PERFGATE_SIM_START_SEED": "3"}
    r = subprocess.run([sys.executable, "ci/device/ttft_levels.py", str(tmp_path), "sim-rtxpro6000-x8/kimi-k2.5",
                        "--probes", "200", "--gap-ms", "10", "--phase", "free", "--phase", "pin:auto:1"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = (tmp_path / "summary.txt").read_text()
    assert "== free:" in summary and "== pin:auto:1:" in summary, summary
    assert "one physical core shared by: {'none':" in summary  # the simulator is one process
    topology = (tmp_path / "topology.txt").read_text()
    assert topology.startswith("physical cores: ") and "CPUs local to the GPU (NVML): cannot tell" in topology
    fast = next(ln for ln in summary.splitlines() if ln.strip().startswith("fast ("))
    slow = next(ln for ln in summary.splitlines() if ln.strip().startswith("slow ("))

    def leg(line: str, name: str) -> float:
        return float(line.split(f"{name} ")[1].split(",")[0])

    assert leg(slow, "prefill") > 1.8 * leg(fast, "prefill")  # the levels are the prefill steps'
    assert abs(leg(slow, "rest") - leg(fast, "rest")) < 0.5 * leg(fast, "prefill")
    with open(tmp_path / "probes-pin-auto-1.csv") as f:
        rows = list(csv.DictReader(f))
    cpus = [k for k in rows[0] if k.startswith("cpu.")] if rows else []
    assert cpus, rows[:1]  # the server's processes, by name (the simulator's interpreter)
    (chosen,) = auto_cpus(1)
    assert all(r["prefill"] and r["shared"] == "" and all(r[k] in (str(chosen), "") for k in cpus) for r in rows)


def test_processes_on_one_physical_core_are_named_together() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ttft_levels", ROOT / "ci" / "device" / "ttft_levels.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    core_of = {0: (0, 8), 8: (0, 8), 1: (1, 9), 9: (1, 9)}
    assert mod.shared_cores({"scheduler_TP0": 0, "detokenizer": 8, "python3": 1}, core_of) == "detokenizer+scheduler_TP0"
    assert mod.shared_cores({"scheduler_TP0": 0, "python3": 1, "detokenizer": 9}, core_of) == "detokenizer+python3"
    assert mod.shared_cores({"scheduler_TP0": 0, "python3": 1}, core_of) == ""
    assert mod.shared_cores({"a": 5, "b": 5}, {}) == "a+b"  # one CPU Linux does not describe: still one core
