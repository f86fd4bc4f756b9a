"""Deciding on a box people share (issue 52): the simulated seed box's gate, quiet and with a CPU kept busy.

    python benchmarks/shared_box.py                      # every scenario, quiet then loaded (~1 hour on 2 cores)
    python benchmarks/shared_box.py --only paired aa     # some scenarios
    python benchmarks/shared_box.py --loads 1 --aa-runs 20 --out DIR --json DIR/table.json

Each scenario runs the checkout's own perftests against the simulated seed box (baselines/sim-rtxpro6000-x8), as a
user runs them, once quiet and once with ``--loads`` processes of ``python3 -c "while True: pass"`` beside it (on a
2-core runner one busy core: every start measured "disturbed"). It prints, per condition, what the run decided and
what it took:

- **bisect**: ``perfgate bisect`` over the six changed simulated packages of docs/bisect.md, a 3 % slowdown planted in
  flashinfer 0.7.3 (``PERFGATE_SIM_PACKAGE_COST``): the culprit it names, its steps and server starts;
- **paired**: the stack pair against a 3 % decode slowdown (``env.PERFGATE_SIM_SCALE=0.97``), at most 3 pairs, and
  a TTFT-only one (``env.PERFGATE_SIM_PREFILL_DELAY_MS=5``, about +5 % of the probes' TTFT), at most 4 pairs: the
  metric's decision and the pairs;
- **aa**: ``--aa-runs`` paired runs of an identical candidate (``env.PERFGATE_AA=1``): how many called any metric
  regressed, and how each ended;
- **limits**: limits written by ``--perfgate-update-baselines`` on a quiet run (a copy of the profile), then
  ``--limit-runs`` identical plain runs checked against them: how many failed, and the outcomes;
- **load vs metric** (from the A/A runs): per start, the others' CPU it was measured under and how far each metric
  moved from its arm's median, pooled per metric (``--analyze DIR`` prints it for the A/A runs of an earlier
  ``--out``);
- **gate**: two reports of the decode floor, the second's box 3.4 % slower (``PERFGATE_SIM_SCALE=0.966``), gated
  (``perfgate gate --format md``) and drawn (``perfgate report``): whether a record undecided says why in both.

What a run printed, its JUnit and logs stay under ``--out``. Not a test: its figures depend on the runner
(tests/test_shared_box.py pins the rules on recorded starts); the table of 2026-12-07 is in docs/ and evidence/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
CANDIDATE_STACK = "cuda=13.0,torch=2.10.0,nccl=2.28.3,sglang=0.5.24,sgl_kernel=0.4.10,flashinfer=0.7.3"
SCENARIOS = ("bisect", "paired", "aa", "limits", "gate")


@contextlib.contextmanager
def load(n: int) -> Iterator[None]:
    """``n`` busy loops beside the block (none for 0), killed after it."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def env(**extra: str) -> dict[str, str]:
    """The environment of a run: the host watch on (the suite's own tests turn it off), no stray simulator knobs."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PERFGATE_SIM_") and k != "PERFGATE_HOST_WATCH"}
    e.update(extra)
    return e


def pytest_run(out: Path, name: str, *args: str, extra_env: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """``pytest perftests/ ARGS`` in the checkout, its JUnit at ``out/name.xml``; the records' properties by name."""
    xml = out / f"{name}.xml"
    cmd = [sys.executable, "-m", "pytest", "perftests/", "-p", "no:cacheprovider", f"--junitxml={xml}",
           "--perfgate-log-dir", str(out / f"logs-{name}"), *args]
    with open(out / f"{name}.log", "w") as log:
        subprocess.run(cmd, cwd=ROOT, env=env(**(extra_env or {})), stdout=log, stderr=subprocess.STDOUT, check=False)
    return records(xml)


def records(xml: Path) -> dict[str, dict[str, str]]:
    if not xml.is_file():
        return {}
    out = {}
    for case in ET.parse(xml).iter("testcase"):
        out[case.get("name", "")] = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    return out


def paired(out: Path, name: str, spec: str, max_pairs: int) -> dict[str, str]:
    recs = pytest_run(out, name, "-m", "stack_pair", "-k", "baseline", "--perfgate-candidate", spec,
                      "--perfgate-starts", "1", "--perfgate-max-starts", str(max_pairs))
    return next(iter(recs.values()), {})


def regressed_metrics(rec: dict[str, str]) -> list[str]:
    return [k.removeprefix("pair.").removesuffix(".decision") for k, v in rec.items()
            if k.startswith("pair.") and k.endswith(".decision") and v == "regressed"]


def run_bisect(out: Path) -> dict[str, object]:
    d = out / "bisect"
    shutil.rmtree(d, ignore_errors=True)
    cmd = ["perfgate", "bisect", "--profile", str(PROFILE), "--mode", "baseline", "--candidate-sim-stack",
           CANDIDATE_STACK, "--out", str(d), "--format", "json"]
    with open(out / "bisect.log", "w") as log:
        p = subprocess.run(cmd, cwd=ROOT, env=env(PERFGATE_SIM_PACKAGE_COST="flashinfer=0.7.3:0.97"), stdout=log,
                           stderr=subprocess.STDOUT, check=False)
    try:
        got = json.loads((d / "bisect.json").read_text())
    except (OSError, ValueError):
        return {"exit": p.returncode, "named": "", "steps": None, "starts": None}
    return {"exit": p.returncode, "status": got.get("status"), "named": ",".join(got.get("culprit") or []),
            "steps": len(got.get("steps", [])), "starts": got.get("starts"), "notes": got.get("notes", [])}


def run_paired(out: Path) -> dict[str, object]:
    dec = paired(out, "paired-decode", "env.PERFGATE_SIM_SCALE=0.97", 3)
    ttft = paired(out, "paired-ttft", "env.PERFGATE_SIM_PREFILL_DELAY_MS=5", 4)
    return {"decode 3 %": {"decision": dec.get("pair.tok_s.decision"), "pairs": dec.get("pair_n"),
                           "why": dec.get("why_undecided", ""), "shared": dec.get("pair_shared_load", ""),
                           "left_out": dec.get("pair_disturbed", "")},
            "TTFT +5 %": {"decision": ttft.get("pair.ttft_ms.decision"), "pairs": ttft.get("pair_n"),
                          "why": ttft.get("why_undecided", ""), "ratio": ttft.get("pair.ttft_ms.ratio"),
                          "shared": ttft.get("pair_shared_load", ""), "left_out": ttft.get("pair_disturbed", "")}}


def run_aa(out: Path, runs: int) -> dict[str, object]:
    ends: Counter[str] = Counter()
    false_alarms, pairs = [], []
    for i in range(runs):
        rec = paired(out, f"aa-{i}", "env.PERFGATE_AA=1", 6)
        bad = regressed_metrics(rec)
        if bad:
            false_alarms.append(f"run {i}: {','.join(bad)}")
        ends[rec.get("pair.tok_s.decision", "none")] += 1
        pairs.append(int(rec.get("pair_n", "0") or 0))
    return {"runs": runs, "regressed": len(false_alarms), "which": false_alarms, "ends": dict(ends),
            "mean pairs": sum(pairs) / max(1, len(pairs))}


def profile_copy(into: Path) -> Path:
    """The shipped simulated profile and the profile it extends, copied with their relative layout."""
    for rel in ("sim-rtxpro6000-x8/kimi-k2.5.toml", "rtxpro6000-x8/kimi-k2.5.toml", "variants.toml"):
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "baselines" / rel, into / rel)
    return into / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"


def run_limits(out: Path, runs: int, loads: int) -> dict[str, object]:
    prof = profile_copy(out / "profile")
    pytest_run(out, "limits-write", "-m", "baseline", "--perfgate-profile", str(prof), "--perfgate-update-baselines")
    outcomes: Counter[str] = Counter()
    with load(loads):
        for i in range(runs):
            for rec in pytest_run(out, f"limits-{i}", "-m", "baseline", "--perfgate-profile", str(prof)).values():
                outcomes[rec.get("outcome", "none")] += 1
    return {"runs": runs, "outcomes": dict(outcomes), "failed": outcomes.get("fail", 0)}


def run_gate(out: Path) -> dict[str, object]:
    pytest_run(out, "gate-old", "-m", "baseline", "-k", "decode_floor")
    pytest_run(out, "gate-new", "-m", "baseline", "-k", "decode_floor", extra_env={"PERFGATE_SIM_SCALE": "0.966"})
    md = subprocess.run(["perfgate", "gate", str(out / "gate-old.xml"), str(out / "gate-new.xml"), "--format", "md"],
                        cwd=ROOT, env=env(), capture_output=True, text=True, check=False)
    (out / "gate.md").write_text(md.stdout + md.stderr)
    subprocess.run(["perfgate", "report", str(out / "gate-old.xml"), str(out / "gate-new.xml"), "-o",
                    str(out / "report.html")], cwd=ROOT, env=env(), capture_output=True, check=False)
    html = (out / "report.html").read_text() if (out / "report.html").is_file() else ""
    said = "undecided (" in md.stdout
    return {"gate exit": md.returncode, "md says why": said, "html says why": "undecided (" in html,
            "decision": "undecided" if "undecided" in md.stdout else "decided"}


#: the metrics whose per-start move is read against the load each start saw
MOVE_METRICS = ("tok_s", "output_tok_s", "ttft_probe_ms", "ttft_part.prefill_gpu_ms", "ttft_part.prefill_host_ms",
                "itl_ms_p99")


def load_vs_metric(aa: Path) -> dict[str, dict[str, object]]:
    """Per start of the A/A runs' records: the others' CPU it was measured under (``start_values.host.others_cpu``)
    and how far each metric moved from its arm's median over the record's starts (|log ratio|), pooled; per metric
    the starts, the load's median and max, and the move's median and 90th percentile in percent."""
    rows: list[tuple[str, float, float]] = []
    for f in sorted(aa.glob("aa-*.xml")):
        for case in ET.parse(f).iter("testcase"):
            p = {q.get("name", ""): q.get("value", "") for q in case.iter("property")}
            for arm in ("", "candidate."):
                load_text = p.get(f"{arm}start_values.host.others_cpu")
                if not load_text:
                    continue
                loads = [float(x) for x in load_text.split(",")]
                for metric in MOVE_METRICS:
                    vals = [float(x) for x in p.get(f"{arm}start_values.{metric}", "").split(",") if x]
                    if len(vals) != len(loads) or len(vals) < 2:
                        continue
                    med = statistics.median(vals)
                    rows += [(metric, ld, abs(math.log(x / med))) for ld, x in zip(loads, vals) if x > 0 and med > 0]
    table: dict[str, dict[str, object]] = {}
    for metric in MOVE_METRICS:
        loads = [r[1] for r in rows if r[0] == metric]
        moves = [r[2] for r in rows if r[0] == metric]
        if len(moves) < 3:
            continue
        table[metric] = {"starts": len(moves), "others_cpu median": round(statistics.median(loads), 2),
                         "others_cpu max": round(max(loads), 2),
                         "move median %": round(100 * statistics.median(moves), 3),
                         "move p90 %": round(100 * statistics.quantiles(moves, n=10)[-1], 3)}
    return table


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    ap.add_argument("--loads", type=int, default=1, help="busy loops in the loaded condition (default 1)")
    ap.add_argument("--conditions", nargs="+", choices=("quiet", "loaded"), default=["quiet", "loaded"])
    ap.add_argument("--aa-runs", type=int, default=20)
    ap.add_argument("--limit-runs", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--analyze", type=Path, default=None, metavar="DIR",
                    help="run nothing: print the load-vs-metric table of DIR/<condition>/aa (an earlier --out)")
    a = ap.parse_args(argv)
    if a.analyze is not None:
        print(json.dumps({c: load_vs_metric(a.analyze / c / "aa") for c in a.conditions}, indent=1))
        return 0
    base = a.out or Path(tempfile.mkdtemp(prefix="perfgate-shared-box-"))
    table: dict[str, dict[str, object]] = {}
    for cond in a.conditions:
        n = a.loads if cond == "loaded" else 0
        table[cond] = {}
        for sc in a.only:
            out = base / cond / sc
            out.mkdir(parents=True, exist_ok=True)
            t0 = time.monotonic()
            if sc == "limits":  # the limits are written quiet; the checks run under the condition's load
                got: object = run_limits(out, a.limit_runs, n)
            else:
                with load(n):
                    got = (run_bisect(out) if sc == "bisect" else run_paired(out) if sc == "paired"
                           else run_aa(out, a.aa_runs) if sc == "aa" else run_gate(out))
            table[cond][sc] = got
            print(f"[{cond}, {n} busy loop(s)] {sc} ({time.monotonic() - t0:.0f} s): {json.dumps(got)}", flush=True)
            if sc == "aa":
                table[cond]["load vs metric"] = moved = load_vs_metric(out)
                print(f"[{cond}, {n} busy loop(s)] load vs metric: {json.dumps(moved)}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(table, indent=1))
    print(f"\nruns kept in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
