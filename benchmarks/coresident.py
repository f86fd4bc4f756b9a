"""Co-resident arms against alternated starts, on a host whose TTFT level changes on its own clock (issue 40 item 6).

    python benchmarks/coresident.py                       # 10 runs a cell, about 15 minutes on 2 cores
    python benchmarks/coresident.py --runs 20 --json out.json

Each run is a real pytest session on the simulator (a throwaway project: the seed box with a 20 GB model, so that
two servers fit at ``--mem-fraction-static 0.4``; 3 trials and 36 TTFT probes a start) of the stack-pair record,
one start per arm first and start pairs added while undecided up to the default budget (6 pairs), judged by the
plugin's own paired judge. The host: ``PERFGATE_SIM_TTFT_MODES=1.0,1.6/<D>s``, a prefill level drawn anew every D
simulated seconds and the same for every simulated server at that moment (perfgate.sim.variation), with D about
one server start's measured span, so a level often lasts across one start and not the next; and, as the control,
one level. The candidate: identical (A/A), or a host-side delay before every prefill of 10 % of the fast level's
probe TTFT (``PERFGATE_SIM_PREFILL_DELAY_MS``, a TTFT-only slowdown). The arms: alternated starts (A B, B A, ...),
or co-resident (``--perfgate-co-resident 0.4``: both up at once, probes and trials interleaved).

Printed per cell: the share of runs the record blocked (any metric it judges regressed: the gate's verdict), the
share whose ``pair.ttft_ms`` itself was regressed, same / improved / undecided, and the mean start pairs the record
took (a record stops adding pairs once a metric regressed). The host watch is off (``PERFGATE_HOST_WATCH=off``):
on a shared 2-core runner it would discount pairs for the runner's own load, which is not what is compared here.
Not a unit test: its table is in evidence/sim-rtxpro6000-x8/coresident-2026-12-05/README.md
(docs/paired.md, co-resident arms).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOX = ROOT / "fixtures" / "sim" / "rtxpro6000-x8-pcie.toml"
PROMPTS = ROOT / "fixtures" / "prompts" / "random-ids-128.jsonl"
#: the fast level's probe TTFT of this project on the seed box (ms): the +10 % delay is a tenth of it
FAST_TTFT_MS = 103.0

PROFILE = f"""schema_version = 1
[hardware]
gpu = "RTX PRO 6000 Blackwell"
count = 8
sm = "12.0"
interconnect = "pcie"
[engine]
name = "sim"
sim_hardware = "BOX"
sim_startup_s = 0.1
startup_timeout_s = 60
[model]
path = "moonshotai/Kimi-K2.5"
layers = 61
hidden = 7168
[server]
tp-size = 8
mem-fraction-static = 0.88
cuda-graph-max-bs-decode = 128
random-seed = 1
[modes.baseline]
[workload]
prompts = "{PROMPTS}"
max_new_tokens = 16
warmup = 0
trials = 3
max_cv = 0.5
request_timeout_s = 60
[variants]
modes = ["baseline"]
"""


def project(root: Path, *, server_extra: str = "") -> Path:
    """The throwaway project: perftests/, the plugin, the variants file, the profile on a box with a small model
    (``server_extra``: more lines of its ``[server]`` table, e.g. ``enable-metrics = true``)."""
    shutil.copytree(ROOT / "perftests", root / "perftests", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "conftest.py").write_text('pytest_plugins = ["perfgate.plugin"]\n')
    (root / "baselines" / "b").mkdir(parents=True)
    shutil.copy(ROOT / "baselines" / "variants.toml", root / "baselines" / "variants.toml")
    box = root / "box.toml"
    box.write_text(BOX.read_text().replace("weights_gb = 590", "weights_gb = 20"))
    prof = root / "baselines" / "b" / "m.toml"
    prof.write_text(PROFILE.replace("BOX", str(box)).replace("random-seed = 1\n", "random-seed = 1\n" + server_extra))
    return prof


def one_run(root: Path, prof: Path, *, co_resident: bool, delay_ms: float, host: str, n: int,
            extra: list[str] | None = None) -> dict[str, str]:
    """One pytest session of the stack-pair record (``extra``: more pytest arguments); its record's properties."""
    xml = root / f"r{n}.xml"
    env = {**os.environ, "PERFGATE_HOST_WATCH": "off", "PERFGATE_SIM_TTFT_MODES": host}
    cand = f"env.PERFGATE_SIM_PREFILL_DELAY_MS={delay_ms:g}" if delay_ms else "env.PERFGATE_AA=1"
    cmd = [sys.executable, "-m", "pytest", "perftests/test_stack_pair.py", "-k", "baseline",
           f"--perfgate-profile={prof}", "--perfgate-candidate", cand, "--perfgate-starts", "1", f"--junitxml={xml}",
           "-p", "no:cacheprovider",
           "-p", "no:randomly", "-q", *(["--perfgate-co-resident", "0.4"] if co_resident else []), *(extra or [])]
    subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    for tc in ET.parse(xml).getroot().iter("testcase"):
        return {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per cell (default 10)")
    ap.add_argument("--dwell", type=float, default=10.0, help="simulated seconds per host level (default 10)")
    ap.add_argument("--json", help="write every run's decisions here")
    args = ap.parse_args(argv)
    rows, raw = [], []
    with tempfile.TemporaryDirectory(prefix="pg-coresident-") as tmp:
        root = Path(tmp)
        prof = project(root)
        n = 0
        for host_name, host in ((f"levels 1.0/1.6 every {args.dwell:g} s", f"1.0,1.6/{args.dwell:g}s"),
                                ("one level", "")):
            for cand_name, delay in (("A/A", 0.0), ("TTFT +10 %", FAST_TTFT_MODES_DELAY)):
                for arms in ("alternated", "co-resident"):
                    decisions, pairs, blocked = [], [], 0
                    for _ in range(args.runs):
                        n += 1
                        rec = one_run(root, prof, co_resident=arms == "co-resident", delay_ms=delay, host=host, n=n)
                        decisions.append(rec.get("pair.ttft_ms.decision", "missing"))
                        blocked += any(k.startswith("pair.") and k.endswith(".decision") and v == "regressed"
                                       for k, v in rec.items())
                        pairs.append(int(rec.get("pair_n", "0") or 0))
                        kept = ("pair", "co_resident", "start_values.ttft_probe", "candidate.start_values.ttft_probe")
                        raw.append({"host": host_name, "candidate": cand_name, "arms": arms,
                                    **{k: v for k, v in rec.items() if k.startswith(kept)}})
                    share = {d: decisions.count(d) / len(decisions) for d in ("regressed", "same", "improved",
                                                                             "undecided", "missing")}
                    rows.append((host_name, cand_name, arms, blocked / args.runs, share, statistics.fmean(pairs)))
                    ttft = "  ".join(f"{d} {v:4.0%}" for d, v in share.items() if v)
                    print(f"{host_name:32s} {cand_name:11s} {arms:12s} blocked {blocked / args.runs:4.0%}  TTFT {ttft}"
                          f"  pairs {statistics.fmean(pairs):.1f}", flush=True)
    print("\n| host | candidate | arms | record blocked | TTFT regressed | same | improved | undecided | mean pairs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for host_name, cand_name, arms, blk, share, mean_pairs in rows:
        print(f"| {host_name} | {cand_name} | {arms} | {blk:.0%} | {share['regressed']:.0%} | {share['same']:.0%} | "
              f"{share['improved']:.0%} | {share['undecided']:.0%} | {mean_pairs:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0


#: the +10 % candidate's delay before every prefill (ms)
FAST_TTFT_MODES_DELAY = round(FAST_TTFT_MS * 0.10, 1)

if __name__ == "__main__":
    sys.exit(main())
