"""Where each SGLang process's threads ran, sampled while a device session runs (issue 53 item 1).

Every INTERVAL seconds, one JSON line: the time; per SGLang process (its title, ``sglang::scheduler`` and the like, or
the launch_server command line) and per thread that used CPU since the last sample, the CPU it last ran on (field 39 of
``/proc/PID/task/TID/stat``) and the CPU seconds it used; each CPU's clock (``scaling_cur_freq``, else
``/proc/cpuinfo``). Once at the start: each CPU's SMT siblings and NUMA node, and the GPU's NUMA node and local CPUs
(``nvidia-smi topo``). ``--summary FILE`` reads such a file and prints, per scheduler process, the CPUs its busy
threads ran on, whether a sibling of theirs was busy too, and the clock of those CPUs.
Usage: python3 proc_cpus.py OUT.jsonl [INTERVAL]   |   python3 proc_cpus.py --summary OUT.jsonl
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def topology() -> dict:
    cpus = {}
    for d in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*")):
        c = int(d.name[3:])
        node = next((int(n.name[4:]) for n in d.glob("node[0-9]*")), None)
        cpus[c] = {"siblings": _read(d / "topology/thread_siblings_list").strip(), "node": node}
    try:
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        topo = ""
    return {"cpus": cpus, "nvidia_smi_topo": topo}


def clocks() -> dict[int, float]:
    out = {}
    for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        f = _read(d / "cpufreq/scaling_cur_freq").strip()
        if f:
            out[int(d.name[3:])] = round(int(f) / 1000.0, 1)
    if not out:
        c = None
        for line in _read(Path("/proc/cpuinfo")).splitlines():
            if line.startswith("processor"):
                c = int(line.split(":")[1])
            elif line.startswith("cpu MHz") and c is not None:
                out[c] = round(float(line.split(":")[1]), 1)
    return out


def sglang_pids() -> dict[int, str]:
    found = {}
    for p in Path("/proc").glob("[0-9]*"):
        cmd = _read(p / "cmdline").replace("\0", " ").strip()
        if cmd.startswith("sglang::") or "sglang.launch_server" in cmd:
            found[int(p.name)] = cmd.split(" ")[0] if cmd.startswith("sglang::") else "launch_server"
    return found


def sample(path: str, interval: float) -> None:
    from perfgate.host.placement import sample as thread_sample  # each thread's CPU seconds and last CPU

    last: dict[tuple[int, int], float] = {}
    with open(path, "a") as fh:
        fh.write(json.dumps({"t": time.time(), "topology": topology()}) + "\n")
        while True:
            titles = sglang_pids()
            now = thread_sample(titles)
            procs: dict[int, dict] = {pid: {"title": title, "threads": {}} for pid, title in titles.items()}
            for (pid, tid), (secs, cpu) in now.threads.items():
                used = secs - last.get((pid, tid), 0.0)
                last[(pid, tid)] = secs
                if used > 0:
                    procs[pid]["threads"][tid] = ["", cpu, round(used, 3)]
            fh.write(json.dumps({"t": round(time.time(), 2), "procs": procs, "mhz": clocks()}) + "\n")
            fh.flush()
            time.sleep(interval)


def summary(path: str) -> None:
    lines = [json.loads(x) for x in open(path) if x.strip()]
    topo = lines[0].get("topology", {})
    sib = {int(c): v["siblings"] for c, v in topo.get("cpus", {}).items()}
    node = {int(c): v["node"] for c, v in topo.get("cpus", {}).items()}
    per: dict[str, dict] = {}
    for s in lines[1:]:
        busy_cpus = {}
        for p in s["procs"].values():
            for _comm, cpu, used in p["threads"].values():
                busy_cpus[cpu] = busy_cpus.get(cpu, 0.0) + used
        for pid, p in s["procs"].items():
            r = per.setdefault(pid, {"title": p["title"], "first": s["t"], "cpus": {}, "mhz": [], "sibling_busy": 0,
                                     "samples": 0})
            r["last"] = s["t"]
            for _comm, cpu, used in p["threads"].values():
                if used < 0.05:
                    continue
                r["cpus"][cpu] = r["cpus"].get(cpu, 0.0) + used
                r["samples"] += 1
                if str(cpu) in map(str, s["mhz"]):
                    r["mhz"].append(s["mhz"].get(str(cpu), s["mhz"].get(cpu)))
                others = [int(x) for x in _expand(sib.get(cpu, ""))if int(x) != cpu]
                if any(busy_cpus.get(o, 0.0) >= 0.05 for o in others):
                    r["sibling_busy"] += 1
    print(topo.get("nvidia_smi_topo", "").strip())
    for pid, r in per.items():
        top = sorted(r["cpus"].items(), key=lambda kv: -kv[1])[:4]
        mhz = sorted(r["mhz"])
        med = mhz[len(mhz) // 2] if mhz else None
        print(f"{r['title']} {pid}: {r['last'] - r['first']:.0f} s; busy threads' CPUs (cpu: s) "
              + ", ".join(f"{c} (node {node.get(int(c))}): {u:.1f}" for c, u in top)
              + f"; a sibling busy in {r['sibling_busy']}/{r['samples']} thread samples; their clock median {med} MHz"
              + (f" [{mhz[0]}-{mhz[-1]}]" if mhz else ""))


def _expand(spec: str) -> list[str]:
    out = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += [str(i) for i in range(int(a), int(b) + 1)]
        elif part:
            out.append(part)
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2])
    else:
        sample(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 2.0)
