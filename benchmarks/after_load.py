"""Does a server's history change a later record? The EAGLE-3 4-stream TTFT (perftests/test_latency.py) on a
fresh simulated server and on one that first served another workload.

    python benchmarks/after_load.py                      # fresh, then after each "before" workload
    python benchmarks/after_load.py --before levels      # only the crossover's closed-loop levels first

Starts perfgate's simulated seed box with the shipped profile's EAGLE-3 flags, one start seed for every
server (one simulated start, as a record's), at the records' default speed-up, and measures what the latency
record measures, through the record's own procedure (:func:`perfgate.procedure.run_trials`): one warm-up
request, then 5 trials of 16 requests, 4 streams, 64 tokens, the prefix cache flushed before each, prompts from
the profile's prompt set at the same offsets. The "before" workloads, each on its own fresh server, ahead of that
measurement:

- ``levels``: the crossover record's closed-loop levels (1..32 streams, 2 x streams requests a trial, 5
  trials, the [slo] max_new_tokens), the same prompts from offset 0;
- ``levels-shifted``: the same levels on prompts from offset 100,000 (none of the latency record's prompts);
- ``open``: one open-loop level of the goodput record (Poisson, 4 req/s, 3 trials, each after its warm-up at
  that rate) at speed-up 1, prompts from 100,000, as the record sends it (:class:`perfgate.procedure.OpenLoop`);
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
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.engines.sim import DEFAULT_SIM_SPEEDUP  # noqa: E402
from perfgate.procedure import PROMPT_BASE, OpenLoop, run_trials  # noqa: E402
from perfgate.profiles.load import load_profile  # noqa: E402
from perfgate.serving.simprocess import SimProcess  # noqa: E402

if TYPE_CHECKING:
    from perfgate.profiles import Workload

PROFILE = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
START_SEED = "after-load:0"


def _closed(url: str, w: Workload, *, streams: int, per: int, trials: int, tokens: int,
            offset: int = 0) -> list[float]:
    """One closed-loop measurement as the runner's (:func:`perfgate.procedure.run_trials`): a warm-up request,
    then ``trials`` flushed trials; each trial's TTFT median (ms)."""
    wl = replace(w, concurrency=streams, requests_per_trial=per, trials=trials, warmup=1, max_new_tokens=tokens,
                 request_timeout_s=60)
    m = run_trials(url, wl, config_key="after-load", config_name="eagle3", offset=offset).measurement
    assert not m.failures, m.errors
    out = [t.ttft_ms for t in m.trials]
    assert all(x is not None for x in out)
    return [x for x in out if x is not None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="none,levels,levels-shifted,open,repeat")
    ap.add_argument("--speedup", type=float, default=DEFAULT_SIM_SPEEDUP)
    args = ap.parse_args(argv)
    prof = load_profile(PROFILE)
    w = prof.workload_for("eagle3")
    slo = prof.slo["eagle3"]

    def latency(url: str) -> list[float]:
        return _closed(url, w, streams=4, per=16, trials=5, tokens=64)

    def levels(offset: int) -> Callable[[str], None]:
        def run(url: str) -> None:
            for c in slo.crossover_levels:
                _closed(url, w, streams=c, per=max(4, 2 * c), trials=5, tokens=slo.max_new_tokens or w.max_new_tokens,
                        offset=offset)
        return run

    def open_loop(url: str) -> None:
        wl = replace(w, max_new_tokens=slo.max_new_tokens or w.max_new_tokens, request_timeout_s=60)
        OpenLoop(url, wl, slo, offset=PROMPT_BASE)(4.0, 3)  # the simulator at speed-up 1 while each trial runs

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
