"""Does a server's history change a later record? The EAGLE-3 4-stream TTFT (perftests/test_latency.py) on a
fresh simulated server and on one that first served another workload.

    python benchmarks/after_load.py                      # fresh, then after each "before" workload
    python benchmarks/after_load.py --before levels      # only the crossover's closed-loop levels first

Starts perfgate's simulated seed box with the shipped profile's EAGLE-3 flags, one start seed for every
server (one simulated start, as a record's), at the records' default speed-up, and measures what the latency
record measures: one warm-up request, then 5 trials of 16 requests, 4 streams, 64 tokens, the prefix cache
flushed before each, prompts from the profile's prompt set at the same offsets (``requests_for``). The
"before" workloads, each on its own fresh server, ahead of that measurement:

- ``levels``: the crossover record's closed-loop levels (1..32 streams, 2 x streams requests a trial, 5
  trials, the [slo] max_new_tokens), the same prompts from offset 0;
- ``levels-shifted``: the same levels on prompts from offset 100,000 (none of the latency record's prompts);
- ``open``: one open-loop level of the goodput record (Poisson, 4 req/s, 3 trials) at speed-up 1, prompts
  from 100,000, as ``plugin.loadrun`` sends it;
- ``repeat``: the latency measurement itself (its prompts seen once before).

Prints each case's TTFT median (ms, the record's figure: the median over trials of each trial's median) and
its trials. Not a unit test (about two minutes); docs/load.md has what it found.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.client import Schedule, flush_cache, run_batch, run_open_loop  # noqa: E402
from perfgate.engines.sim import DEFAULT_SIM_SPEEDUP  # noqa: E402
from perfgate.measuring.metrics import compute_trial  # noqa: E402
from perfgate.measuring.workload import load_prompts, requests_for  # noqa: E402
from perfgate.plugin.loadrun import PROMPT_BASE, real_time  # noqa: E402
from perfgate.profiles.load import load_profile  # noqa: E402
from perfgate.serving.simprocess import SimProcess  # noqa: E402

PROFILE = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
START_SEED = "after-load:0"


def _closed(url: str, w: object, prompts: list[tuple[int, ...]], *, streams: int, per: int, trials: int,
            tokens: int, offset: int = 0) -> list[float]:
    """One closed-loop measurement as the runner's: a warm-up request, then ``trials`` flushed trials; each
    trial's TTFT median (ms)."""
    wl = replace(w, max_new_tokens=tokens)  # type: ignore[type-var]
    run_batch(url, requests_for(wl, prompts, 1, offset=offset + trials * per), concurrency=1, timeout_s=60)
    out = []
    for t in range(trials):
        flush_cache(url)
        outs, wall = run_batch(url, requests_for(wl, prompts, per, offset=offset + t * per), concurrency=streams,
                               timeout_s=60)
        assert all(o.success for o in outs), [o.error for o in outs if not o.success]
        tr = compute_trial(outs, wall)
        assert tr.ttft_ms is not None
        out.append(tr.ttft_ms)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="none,levels,levels-shifted,open,repeat")
    ap.add_argument("--speedup", type=float, default=DEFAULT_SIM_SPEEDUP)
    args = ap.parse_args(argv)
    prof = load_profile(PROFILE)
    w = prof.workload_for("eagle3")
    slo = prof.slo["eagle3"]
    prompts = load_prompts(w.prompts)

    def latency(url: str) -> list[float]:
        return _closed(url, w, prompts, streams=4, per=16, trials=5, tokens=64)

    def levels(offset: int) -> Callable[[str], None]:
        def run(url: str) -> None:
            for c in slo.crossover_levels:
                _closed(url, w, prompts, streams=c, per=max(4, 2 * c), trials=5, tokens=slo.max_new_tokens,
                        offset=offset)
        return run

    def open_loop(url: str) -> None:
        offsets = Schedule(rate=4.0, requests=slo.requests, arrival=slo.arrival, duration_s=slo.duration_s,
                           seed=slo.seed).offsets()
        off = PROMPT_BASE
        for _ in range(3):
            flush_cache(url)
            wl = replace(w, max_new_tokens=slo.max_new_tokens)
            with real_time(url, args.speedup):
                run_open_loop(url, requests_for(wl, prompts, len(offsets), offset=off), offsets, timeout_s=60)
            off += len(offsets)

    befores: dict[str, Callable[[str], None] | None] = {
        "none": None, "levels": levels(0), "levels-shifted": levels(PROMPT_BASE), "open": open_loop,
        "repeat": lambda url: None if latency(url) else None}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.before.split(","):
            before = befores[name]
            with SimProcess.for_mode(prof, "eagle3", log_path=Path(tmp) / f"{name}.log", start_seed=START_SEED,
                                     speedup=args.speedup) as sim:
                sim.wait_ready()
                if before is not None:
                    before(sim.url)
                ttfts = latency(sim.url)
            print(f"{name:16s} ttft_ms {statistics.median(ttfts):8.2f}   trials "
                  + " ".join(f"{x:.1f}" for x in ttfts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
