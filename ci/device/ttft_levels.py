"""Where batch-1 TTFT's two levels live, on a GPU box: one server per phase, TTFT probes spread over time, each probe
split at the server's own timestamps (perfgate.measuring.ttft_parts) and stamped with the CPU every process of the
server last ran on.

On an H200 (SGLang 0.5.17) two servers side by side sat on different TTFT levels in the same minute (docs/gate.md,
"Latency on an H200"), so the level belongs to the server process. This script tells which leg of the request
carries it (dispatch, to_forward, prefill, rest) and whether it follows where the server's processes run: a phase
``free`` launches the server as perfgate does; ``pin:CPUS`` launches it as ``--perfgate-server-cpus CPUS`` does
(``2-5``, ``0,2,4``, ``auto``: inherited by every process and thread it starts), so if pinning removes a level, the
placement is the cause. A scheduler beside a busy hyper-thread sibling launches its kernels slower, so each probe also
says which of the server's processes shared a physical core (``shared``), and the machine's core layout is written
beside the probes.

    python ci/device/ttft_levels.py OUT h200-x1/llama-3.1-8b-dummy [--seconds 120 | --probes N] [--gap-ms 40] \
        [--phase free] [--phase pin:auto]

OUT gets ``probes-<phase>.csv`` (``probes-<phase>.runN.csv`` for the Nth phase of a name; one row a probe: seconds
since the first, TTFT, each part, each process's CPU),
``summary.txt`` (what is printed: per phase the TTFT modes, each part's median per mode, the CPUs each process
ran on per mode and how often processes shared a core), ``topology.txt`` (the physical cores: each one's hyper-threads,
and the CPUs local to the GPU) and ``logs/`` (the server logs). The profile's server must stamp its responses
(``enable-metrics = true`` in its ``[server]``; the h200 profiles have it), else the parts are empty and it says so.
"""

from __future__ import annotations

import argparse
import collections
import csv
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil

from perfgate import load_profile
from perfgate.client import GenRequest, run_batch
from perfgate.engines import get_engine
from perfgate.host import gpu
from perfgate.host.affinity import core_groups, cpus_text, parse_cpus
from perfgate.host.procs import group_pids
from perfgate.measuring.modes import find_modes
from perfgate.measuring.ttft_parts import PARTS, parts_ms
from perfgate.measuring.workload import load_prompts
from perfgate.serving.server import Server


def shared_cores(cpus: dict[str, int], core_of: dict[int, tuple[int, ...]]) -> str:
    """The processes (by name) that ran on one physical core at the probe, ``a+b`` per core, ``;`` between cores."""
    by_core: dict[tuple[int, ...], list[str]] = {}
    for name, cpu in cpus.items():
        by_core.setdefault(core_of.get(cpu, (cpu,)), []).append(name)
    return ";".join("+".join(sorted(names)) for names in by_core.values() if len(names) > 1)


def placement(pgid: int) -> dict[str, int]:
    """Each live process of the server's group: its name -> the CPU it last ran on."""
    out = {}
    for pid in group_pids(pgid):
        try:
            p = psutil.Process(pid)
            name = p.name().replace("sglang::", "")
            out[name if name not in out else f"{name}.{pid}"] = p.cpu_num()
        except psutil.Error:
            continue
    return out


def run_phase(phase: str, cfg, engine, prompts, out: Path, seconds: float, gap_s: float,
              core_of: dict[int, tuple[int, ...]], probes: int | None = None) -> list[dict[str, object]]:
    # pin:CPUS launches the server as --perfgate-server-cpus does (perfgate.host.affinity): inherited by every
    # process it starts; the client runs where it did
    server = Server(cfg, engine, out / "logs", startup_timeout_s=600,
                    on_progress=lambda ev: print(f"   {ev.phase} ({ev.elapsed_s:.0f} s)", flush=True),
                    cpus=parse_cpus(phase[4:]) if phase.startswith("pin:") else None)
    rows: list[dict[str, object]] = []
    try:
        server.launch()
        run_batch(server.url, [GenRequest(input_ids=prompts[0], max_new_tokens=8)] * 2, concurrency=1)  # warm-up
        assert server.pgid is not None
        t0 = time.monotonic()
        i = 1
        # a count of probes where given (a test's: the same number on a loaded runner as on an idle one), else seconds
        while len(rows) < probes if probes is not None else time.monotonic() - t0 < seconds:
            outs, _ = run_batch(server.url, [GenRequest(input_ids=prompts[i % len(prompts)], max_new_tokens=1)],
                                concurrency=1, timeout_s=60)
            o = outs[0]
            i += 1
            if not o.success or o.ttft_s is None:
                print(f"   probe {i} failed: {o.error}", flush=True)
                continue
            row: dict[str, object] = {"t_s": round(time.monotonic() - t0, 3), "ttft_ms": o.ttft_s * 1000}
            row.update(parts_ms(o.ttft_s, o.meta_info) or {})
            where = placement(server.pgid)
            row.update({f"cpu.{k}": v for k, v in where.items()})
            row["shared"] = shared_cores(where, core_of)
            rows.append(row)
            time.sleep(gap_s)
    finally:
        server.stop()
    return rows


def summarize(phase: str, rows: list[dict[str, object]]) -> list[str]:
    ttft = [float(r["ttft_ms"]) for r in rows]  # type: ignore[arg-type]
    modes = find_modes(ttft)
    lines = [f"== {phase}: {len(rows)} probes; TTFT median {statistics.median(ttft):.2f} ms; modes "
             f"{modes.text('ms') if modes.judged else 'too few to judge'}"]
    if not any(r.get(PARTS[0]) not in (None, "") for r in rows):  # a probe or two may come back unstamped
        lines.append("   no parts: the server did not stamp its responses (enable-metrics = true in [server])")
        return lines
    # split the probes at the midpoint between the lowest and the highest mode (one group where unimodal)
    cut = (modes.modes[0].location + modes.modes[-1].location) / 2 if modes.judged and modes.multimodal else None
    groups = {"all": rows} if cut is None else {
        f"fast (< {cut:.1f} ms)": [r for r in rows if float(r["ttft_ms"]) < cut],  # type: ignore[arg-type]
        f"slow (>= {cut:.1f} ms)": [r for r in rows if float(r["ttft_ms"]) >= cut]}  # type: ignore[arg-type]
    for name, rs in groups.items():
        if not rs:
            continue
        med = {p: statistics.median(float(r[p]) for r in rs if p in r) for p in ("ttft_ms", *PARTS)}  # type: ignore[arg-type]
        lines.append(f"   {name}: {len(rs)} probes; " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()))
        for proc in sorted({k for r in rs for k in r if k.startswith("cpu.")}):
            seen = collections.Counter(r[proc] for r in rs if proc in r)
            lines.append(f"      {proc[4:]} on CPUs {dict(seen.most_common(8))}")
        shared = collections.Counter(str(r.get("shared") or "none") for r in rs)
        lines.append(f"      one physical core shared by: {dict(shared.most_common(6))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("profile", help="HW/MODEL under baselines/ (its baseline mode is served)")
    ap.add_argument("--seconds", type=float, default=120.0, help="how long each phase probes (default 120)")
    ap.add_argument("--probes", type=int, default=None,
                    help="probe this many times a phase instead of for --seconds (a count, whatever the host's load)")
    ap.add_argument("--gap-ms", type=float, default=40.0, help="the pause between probes (default 40)")
    ap.add_argument("--phase", action="append", default=None, help="free (default) or pin:CPUS; repeatable")
    args = ap.parse_args(argv)
    prof = load_profile(f"baselines/{args.profile}.toml")
    cfg = prof.config("baseline")
    if "enable-metrics" not in cfg.flag_dict:
        cfg = replace(cfg, flags=(*cfg.flags, ("enable-metrics", True)))
    engine = (get_engine("sim") if cfg.engine == "sim" else
              get_engine("sglang", python=prof.engine.python, launcher=prof.engine.launcher,
                         sglang_version=prof.engine.sglang_version))
    prompts = load_prompts(Path(prof.workload.prompts))
    args.out.mkdir(parents=True, exist_ok=True)
    cores = core_groups(psutil.Process().cpu_affinity() or range(psutil.cpu_count() or 1))
    core_of = {c: g for g in cores for c in g}
    local = gpu.local_cpus()
    (args.out / "topology.txt").write_text(
        f"physical cores: {len(cores)} ({len(core_of)} CPUs); hyper-threads per core: "
        + " ".join(cpus_text(g) for g in cores)
        + f"\nCPUs local to the GPU (NVML): {cpus_text(local) if local else 'cannot tell'}\n")
    print((args.out / "topology.txt").read_text(), end="", flush=True)
    summary: list[str] = []
    seen: dict[str, int] = {}
    for phase in args.phase or ["free"]:
        rows = run_phase(phase, cfg, engine, prompts, args.out, args.seconds, args.gap_ms / 1000, core_of, args.probes)
        name = phase.replace(":", "-").replace(",", "_")
        seen[name] = seen.get(name, 0) + 1  # a phase named again (another server process) keeps its own file
        name += f".run{seen[name]}" if seen[name] > 1 else ""
        cols = list(dict.fromkeys(k for r in rows for k in r))
        with open(args.out / f"probes-{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
        lines = summarize(phase, rows)
        print("\n".join(lines), flush=True)
        summary += lines
    (args.out / "summary.txt").write_text("\n".join(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
