"""--sim-speedup is transparent: the simulator at its default speed-up and at real time, side by side.

The same workloads, measured by perfgate's client and reduced by the records' own pure function
(:func:`perfgate.measuring.metrics.compute_trial`), on two simulated seed boxes started with the shipped profile's flags
and the same start seed (as a record's start n of a config is seeded ``<seed key>:<n>`` at any speed-up), one at
``--sim-speedup 4`` (the default) and one at 1: each metric a built-in record or the latency example
(perftests/test_latency.py) uses agrees. The client adds the lead the simulated clock gained over each duration
(``X-Perfgate-Sim-Ahead`` and ``meta_info.perfgate_sim_ahead_s``), so its own time and the network's count once;
multiplying whole durations by the speed-up, as before, made the single-stream TTFT 3 % long.

Shorter than the records' workloads (the real-time side costs real seconds), in the same shapes: one stream
(the floor, acceptance and speculation records: tok/s, TTFT, ITL, acceptance) and four streams (the latency
example: TTFT, output tok/s, tok/s, ITL and the two 99th percentiles), the two servers measured back to back in
each of :data:`ROUNDS` rounds; a metric's difference is the median of the rounds' differences. Every median
agrees within 0.2 % (:data:`TOLERANCE`) but TTFT, held at 0.3 % (:data:`TTFT_TOLERANCE`: this machine delivers
a first token quicker after a shorter sleep, which no lead can add back), or within speed-up 1's own range over
its rounds where that is wider: the machine's noise in this very run (the 99th percentiles, :data:`TAIL_METRICS`,
are not reproducible at speed-up 1 itself, a tail of this machine's scheduling delays: the 4-stream ones moved by
up to 0.5 % between rounds; under the full suite's load the 4-stream medians spread 0.4-0.6 % too).
docs/measurement.md has the figures.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfgate.client import GenRequest, flush_cache, run_batch
from perfgate.engines.sim import DEFAULT_SIM_SPEEDUP
from perfgate.measuring.metrics import Trial, compute_trial
from perfgate.measuring.workload import load_prompts
from perfgate.profiles.load import load_profile
from perfgate.serving.simprocess import SimProcess

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
# Both sides run the same code on the same simulated start. What still differs is wall time this machine spends
# around a token: a thread woken after a long sleep wakes slower (docs/measurement.md), and the first token comes
# after the prefill's sleep, 102 ms at speed-up 1 and 25.6 ms at 4, so it reaches the client 0.07-0.11 ms sooner
# at speed-up 4 (ITL and tok/s are differences of two deliveries alike: it cancels there). That is up to 0.22 % of
# a one-stream TTFT on this 2-core VM: the lead cannot add it (it is not simulated time), so TTFT gets
# TTFT_TOLERANCE and every other median TOLERANCE.
TOLERANCE = 0.002
TTFT_TOLERANCE = 0.003
ROUNDS = 5  # per workload and speed-up: the two servers measured back to back in each
START_SEED = "test-sim-speedup:0"  # both servers: one simulated start (its jitter), as a record's at either speed-up
# (mode, streams, requests, tokens): the shapes of the records, shortened
WORKLOADS = {"baseline": [(1, 5, 24), (4, 8, 16)], "eagle3": [(1, 5, 32)]}
METRICS = {1: ("tok_s", "ttft_ms", "itl_ms", "accept_len"), 4: ("ttft_ms", "output_tok_s", "tok_s", "itl_ms")}
# the latency example's 99th percentiles: a tail of this machine's scheduling delays, not reproducible at speed-up 1
# itself, so each is held against speed-up 1's own range over its rounds (at least the medians' tolerance)
TAIL_METRICS = {1: (), 4: ("ttft_ms_p99", "itl_ms_p99")}


def _measure(sim: SimProcess, streams: int, requests: int, tokens: int, prompts: list[tuple[int, ...]]) -> Trial:
    url = f"http://127.0.0.1:{sim.port}"
    flush_cache(url)
    reqs = [GenRequest(input_ids=prompts[i], max_new_tokens=tokens) for i in range(requests)]
    outs, wall = run_batch(url, reqs, concurrency=streams, timeout_s=60)
    assert all(o.success for o in outs), [o.error for o in outs if not o.success]
    return compute_trial(outs, wall)


@contextlib.contextmanager
def _sim(mode: str, speedup: float, tmp: Path) -> Iterator[SimProcess]:
    with SimProcess.for_mode(load_profile(PROFILE), mode, log_path=tmp / f"{mode}-{speedup:g}.log",
                             start_seed=START_SEED, speedup=speedup) as sim:
        sim.wait_ready()
        yield sim


def _rounds(mode: str, tmp: Path) -> dict[float, dict[tuple[int, int, int], list[Trial]]]:
    """Both servers up at once, measured in turn (slow, fast) for ROUNDS rounds: a burst of load from elsewhere
    on the machine falls on both sides alike, and on one round of each at most."""
    prompts = load_prompts(load_profile(PROFILE).workload.prompts)
    speeds = (1.0, DEFAULT_SIM_SPEEDUP)
    out: dict[float, dict[tuple[int, int, int], list[Trial]]] = {s: {w: [] for w in WORKLOADS[mode]} for s in speeds}
    with _sim(mode, speeds[0], tmp) as slow, _sim(mode, speeds[1], tmp) as fast:
        for sim in (slow, fast):  # warm-up: the first connection and the first request of each server
            run_batch(f"http://127.0.0.1:{sim.port}", [GenRequest(input_ids=prompts[-1], max_new_tokens=4)])
        for _ in range(ROUNDS):
            for shape in WORKLOADS[mode]:
                for speed, sim in zip(speeds, (slow, fast)):
                    out[speed][shape].append(_measure(sim, *shape, prompts))
    return out


def _paired(slow: list[Trial], fast: list[Trial], metric: str) -> float | None:
    """The median over rounds of each round's relative difference (fast - slow) / slow: both servers are measured
    back to back in a round, so load from elsewhere on the machine that spoils one round spoils it on both sides."""
    diffs = [(getattr(f, metric) - getattr(s, metric)) / getattr(s, metric) for s, f in zip(slow, fast)
             if getattr(s, metric) and getattr(f, metric) is not None]
    return statistics.median(diffs) if diffs else None


def _spread(xs: list[float]) -> float:
    """Range over median: how far one side's rounds disagree among themselves."""
    return (max(xs) - min(xs)) / statistics.median(xs)


@pytest.mark.parametrize("mode", sorted(WORKLOADS))
def test_the_default_speedup_measures_what_real_time_measures(mode, tmp_path):
    got = _rounds(mode, tmp_path)
    slow, fast = got[1.0], got[DEFAULT_SIM_SPEEDUP]
    rows, bad = [], []
    for shape, trials in slow.items():
        for metric in METRICS[shape[0]] + TAIL_METRICS[shape[0]]:
            values = [getattr(t, metric) for t in trials]
            if metric == "accept_len" and mode == "baseline":
                assert all(v is None for v in values + [getattr(t, metric) for t in fast[shape]])
                continue  # no speculation, no acceptance
            diff = _paired(trials, fast[shape], metric)
            assert diff is not None and None not in values, (shape, metric, values)
            own = _spread(values)
            # each metric is held at its tolerance or speed-up 1's own range over its rounds, whichever is wider:
            # the range is this run's measure of the machine's noise. Five rounds of a 16-request p99 can by chance
            # span 0.06 % (CI read +0.09 % at 4x against that, a false alarm), and under the full suite's load the
            # four-stream tok/s rounds spanned 0.57 % at speed-up 1 alone (CI read -0.28 % at 4x against 0.2 %).
            # A bias of the speed-up (the single-stream TTFT's 3 % before the lead was added) stays well outside.
            limit = max(own, TTFT_TOLERANCE if metric == "ttft_ms" else TOLERANCE)
            rows.append(f"{shape[0]} stream(s) {metric}: median {statistics.median(values):.4f} at speed-up 1, "
                        f"{diff:+.3%} at {DEFAULT_SIM_SPEEDUP:g} (speed-up 1's own range {own:.3%}; limit {limit:.3%})")
            if abs(diff) > limit:
                bad.append(rows[-1])
    assert not bad, "\n".join(["off:", *bad, "all:", *rows])
