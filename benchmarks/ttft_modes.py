"""Which per-start TTFT statistic holds on a host that flips between two levels inside a start (issue 40 item 3).

    python benchmarks/ttft_modes.py                  # 400 replicates per cell, about ten minutes on 2 cores
    python benchmarks/ttft_modes.py --replicates 500
    python benchmarks/ttft_modes.py --false-rate     # perfgate.measuring.modes on unimodal and two-level samples

A simulated host serves batch-1 TTFT at a fast level (28 ms) or a slow one (45 ms, x1.6), each request 3 %
lognormal around its level (a real H200's two levels, issue 40). Inside one server start the level is a two-state
Markov process in time: the fast level's stationary share ``p`` and a mean stay ``D`` in each (as a fraction of the
start's measured span: 0.05 flips some 20 times a start, 2 about once every other start). Each start measures:

- **trials (today)**: the median of the 5 trials' TTFTs (at batch 1 one request a trial, at 5 points in time);
- **probes**: 36 probes (:data:`perfgate.profiles.DEFAULT_TTFT_PROBES`) in 6 blocks of 6 consecutive requests, one
  block before each trial and one after the last (perfgate.procedure.closed), judged by

  - ``probe median``: their median,
  - ``probe mean``: their mean,
  - ``lower mode``: :func:`perfgate.measuring.modes.start_estimate` (the lower mode's location where
    :func:`~perfgate.measuring.modes.find_modes` calls them multi-modal, else their median).

Printed per estimator and host: the A/A ratio of two starts (5th-95th percentile and the sd of its logarithm);
the paired gate's share *regressed* on A/A and its power on a +10 % host-side delay (2.8 ms added to every request of
the candidate, both levels), each as :func:`perfgate.measuring.judge.paired` decides it with start pairs added while
undecided, from 2 up to 6 (the default budget): on the real first-token prior (16 %, perfgate.profiles.noise), and
on a prior that is the estimator's own one-start noise on that host (the A/A sd of the log ratio / sqrt 2: what a
history of such starts would measure), with the mean pairs the +10 % run took.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence

from perfgate.measuring.judge import Decision, Sequential, default_min_effect, paired
from perfgate.measuring.modes import find_modes, start_estimate
from perfgate.profiles.noise import prior_cv

FAST, SLOW, SPREAD = 28.0, 45.0, 0.03
TRIALS, PROBES = 5, 36
DELAY_MS = 2.8  # +10 % of the fast level, added before prefill on every request


def levels_at(rng: random.Random, times: Sequence[float], p: float, dwell: float) -> list[bool]:
    """Whether the host is at the slow level at each of ``times`` (ascending, in [0, 1]): a two-state Markov
    process started from its stationary law, mean stays 2 dwell p (fast) and 2 dwell (1 - p) (slow)."""
    if p >= 1.0:
        return [False] * len(times)
    slow = rng.random() >= p
    t, out, i = 0.0, [], 0
    while i < len(times):
        stay = rng.expovariate(1.0 / (2 * dwell * ((1 - p) if slow else p)))
        while i < len(times) and times[i] < t + stay:
            out.append(slow)
            i += 1
        t += stay
        slow = not slow
    return out


def one_start(rng: random.Random, p: float, dwell: float, delay: float) -> dict[str, float]:
    """One start's TTFT by every estimator."""
    def ttft(slow: bool) -> float:
        return (SLOW if slow else FAST) * math.exp(rng.gauss(0.0, SPREAD)) + delay

    blocks = TRIALS + 1
    block_times = [b / TRIALS for b in range(blocks)]  # before each trial, after the last
    trial_times = [(t + 0.5) / TRIALS for t in range(TRIALS)]
    times = sorted([*block_times, *trial_times])
    states = dict(zip(times, levels_at(rng, times, p, dwell)))
    trials = [ttft(states[t]) for t in trial_times]
    per = PROBES // blocks
    probes = [ttft(states[t]) for t in block_times for _ in range(per)]
    est = start_estimate(probes, find_modes(probes))
    assert est is not None
    return {"trials (today)": statistics.median(trials), "probe median": statistics.median(probes),
            "probe mean": statistics.fmean(probes), "lower mode": est}


ESTIMATORS = ("trials (today)", "probe median", "probe mean", "lower mode")


def gate(rng: random.Random, p: float, dwell: float, delay: float, est: str, plan: Sequential,
         prior: float, draw: Callable[..., dict[str, float]] = one_start) -> tuple[Decision, int]:
    up = False
    ratios: list[float] = []
    while True:
        a, b = draw(rng, p, dwell, 0.0), draw(rng, p, dwell, delay)
        ratios.append(b[est] / a[est])
        if len(ratios) < plan.first_pairs:
            continue
        j = paired(ratios, higher_is_better=up, min_effect=default_min_effect("ttft_ms", higher_is_better=up),
                   prior_cv=prior, plan=plan, metric="ttft_ms")
        if j.decision is not Decision.UNDECIDED or len(ratios) >= plan.max_pairs:
            return j.decision, len(ratios)


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


HOSTS = (  # (label, fast share p, mean stay D as a fraction of the start)
    ("one level", 1.0, 1.0),
    ("p 0.5, D 0.05", 0.5, 0.05),
    ("p 0.5, D 0.3", 0.5, 0.3),
    ("p 0.7, D 0.3", 0.7, 0.3),
    ("p 0.5, D 2", 0.5, 2.0),
)


def table(replicates: int, seed: int) -> None:
    rng = random.Random(seed)
    plan = Sequential(first_pairs=2, max_pairs=6)
    print(f"TTFT per start, {replicates} replicates per cell; levels {FAST:g} / {SLOW:g} ms, {SPREAD:.0%} spread; "
          f"{PROBES} probes in {TRIALS + 1} blocks; gate: paired, pairs 2..6, +{DELAY_MS:g} ms for power")
    print(f"{'host':<15} {'estimator':<15} {'A/A ratio p5-p95':>18} {'sd log':>7} | prior 16 %: {'A/A':>5} "
          f"{'+10 %':>6} | prior its own: {'A/A':>5} {'+10 %':>6} {'pairs':>5}")
    for label, p, dwell in HOSTS:
        for est in ESTIMATORS:
            ratios = []
            for _ in range(replicates):
                a, b = one_start(rng, p, dwell, 0.0), one_start(rng, p, dwell, 0.0)
                ratios.append(b[est] / a[est])
            logs = [math.log(r) for r in ratios]
            runs = max(100, replicates // 4)
            sd = statistics.stdev(logs)
            cells = []
            for prior in (prior_cv("ttft_ms", "starts"), max(0.001, sd / math.sqrt(2))):
                aa = [gate(rng, p, dwell, 0.0, est, plan, prior) for _ in range(runs)]
                pw = [gate(rng, p, dwell, DELAY_MS, est, plan, prior) for _ in range(runs)]
                cells.append((sum(d is Decision.REGRESSED for d, _ in aa) / runs,
                              sum(d is Decision.REGRESSED for d, _ in pw) / runs, statistics.fmean(n for _, n in pw)))
            (a16, p16, _), (aown, pown, pairs) = cells
            print(f"{label:<15} {est:<15} {pct(ratios, 0.05):>8.3f}-{pct(ratios, 0.95):<9.3f} {sd:>7.3f} | "
                  f"{'':>11} {a16:>5.1%} {p16:>6.1%} | {'':>14} {aown:>5.1%} {pown:>6.1%} {pairs:>5.2f}")


def false_rate(replicates: int, seed: int) -> None:
    """perfgate.measuring.modes.find_modes: the share of unimodal samples called multi-modal, and of two-level
    samples (28 / 45 ms, 3 %) found with both levels."""
    import numpy as np

    rng = np.random.default_rng(seed)
    print(f"find_modes, {replicates} samples per cell")
    print(f"{'sample':<28} {'n':>4} {'called multi-modal':>18}")
    for n in (20, 36, 50, 100, 400):
        for name, draw in (("normal, cv 3 %", lambda k: rng.normal(30, 0.9, k)),
                           ("normal, cv 10 %", lambda k: rng.normal(30, 3.0, k)),
                           ("lognormal, sd 0.3", lambda k: rng.lognormal(math.log(30), 0.3, k))):
            hits = sum(find_modes(draw(n)).multimodal for _ in range(replicates))
            print(f"{name:<28} {n:>4} {hits / replicates:>18.2%}")
    print(f"{'two levels 28/45 ms, 3 %':<28} {'n':>4} {'weight':>6} {'found, locations within 5 %':>28}")
    for n in (20, 36, 100):
        for w in (0.2, 0.5, 0.8):
            hits = 0
            for _ in range(replicates):
                k = round(w * n)
                xs = np.concatenate([FAST * np.exp(rng.normal(0, SPREAD, k)),
                                     SLOW * np.exp(rng.normal(0, SPREAD, n - k))])
                m = find_modes(xs)
                hits += (len(m.modes) == 2 and m.multimodal and abs(m.modes[0].location / FAST - 1) < 0.05
                         and abs(m.modes[1].location / SLOW - 1) < 0.05)
            print(f"{'':<28} {n:>4} {w:>6.0%} {hits / replicates:>28.2%}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=400)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--false-rate", action="store_true", help="the mode detector's rates instead of the gate table")
    a = ap.parse_args(argv)
    (false_rate if a.false_rate else table)(a.replicates, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
