"""Capture SGLang's own decode-step traces for a profile's modes (real GPU), for reading kernel names.

Starts each mode's server through perfgate's own lifecycle, captures ``--steps`` decode steps with
perfgate.serving.capture (``POST /start_profile``), copies the trace files to OUT and prints, per file, the
step spans and the 25 kernels with the most GPU time (name, count, total us), so a run shows what
SGLang's trace holds before the parser relies on it.

    python ci/device/trace_probe.py OUT h200-x1/llama-3.1-8b-dummy baseline eagle3-acc2
"""

from __future__ import annotations

import collections
import gzip
import json
import sys
import time
from pathlib import Path

from perfgate import load_profile
from perfgate.client import GenRequest
from perfgate.engines import get_engine
from perfgate.measuring.workload import load_prompts
from perfgate.serving.capture import capture
from perfgate.serving.server import Server


def summarize(path: Path) -> None:
    with gzip.open(path, "rb") as f:
        doc = json.load(f)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    cats = collections.Counter(e.get("cat") for e in ev)
    print(f"-- {path.name}: {len(ev)} events; cats {dict(cats.most_common(12))}")
    spans = collections.Counter(e["name"] for e in ev if e.get("cat") in ("user_annotation", "gpu_user_annotation")
                                and e.get("name", "").startswith("step["))
    print("   step spans:", dict(spans))
    k = collections.defaultdict(lambda: [0, 0.0])
    for e in ev:
        if e.get("cat") == "kernel":
            k[e["name"]][0] += 1
            k[e["name"]][1] += float(e.get("dur", 0))
    for name, (n, us) in sorted(k.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"   {n:6d} {us:10.1f} us  {name[:160]}")
    print("   other cats sample:", [(e.get("cat"), e.get("name"))[:2] for e in ev if e.get("cat") in
                                    ("cuda_runtime", "gpu_user_annotation")][:6])


def main() -> int:
    out = Path(sys.argv[1])
    prof = load_profile(f"baselines/{sys.argv[2]}.toml")
    modes = sys.argv[3:]
    prompts = load_prompts(Path(prof.workload.prompts))
    engine = get_engine("sglang", launcher=prof.engine.launcher)
    for mode in modes:
        cfg = prof.config(mode)
        t0 = time.monotonic()
        with Server(cfg, engine, out / "logs", startup_timeout_s=540,
                    on_progress=lambda ev: print("  ", ev, flush=True)) as s:
            print(f"== {mode}: ready in {time.monotonic() - t0:.0f} s", flush=True)
            req = GenRequest(input_ids=prompts[0], max_new_tokens=64)
            from perfgate.client import stream_generate
            stream_generate(s.url, req)  # warm
            cap = capture(s.url, out / "traces" / mode, GenRequest(input_ids=prompts[1], max_new_tokens=200),
                          profile_id=f"probe-{mode}", num_steps=12, tp=int(cfg.flag_dict.get("tp-size", 1)))
            print(f"   captured in {cap.wall_s:.1f} s: {[p.name for p in cap.decode + cap.extend]}; request "
                  f"{cap.request.completion_tokens} tokens", flush=True)
            for p in cap.decode + cap.extend:
                print(f"   {p.name}: {p.stat().st_size} bytes")
                summarize(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
