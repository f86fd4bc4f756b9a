"""Noise per metric and level: how much one observation of a metric moves, and where that figure came from (pure).

A p99 latency moves more than a median, a TTFT more than a decode step, goodput with the arrival draw, so no
metric borrows decode tok/s's noise. Each metric belongs to a :class:`MetricClass`; each class has a prior per
level (:class:`~perfgate.measuring.judge.Level` ``starts`` and ``machines``; the ``trials`` level is always
measured, from every record's own trials) and per engine (real SGLang on a GPU, or the simulator on a shared
CPU runner, whose latencies carry the runner's scheduling noise). A prior is used only where nothing was
measured, and a measured noise wider than the prior always wins (:func:`noise_for`): a prior never claims
more calm than was seen.

The priors (relative sd of one observation: one start's figure around its machine's mean, or one machine's
mean around the model's), each at least the widest spread measured for its class:

============== =============================================================== ========= ========= =========
class          metrics                                                         starts    starts    machines
                                                                               (real)    (sim)
============== =============================================================== ========= ========= =========
throughput     tok_s (decode)                                                   0.1 %     0.1 %     1.6 %
output         output_tok_s (completion tokens over the wall time: prefill in)  0.5 %     0.5 %     1.6 %
step           itl_ms, tpot_ms (medians: one decode step)                       0.1 %     0.2 %     1.6 %
first-token    ttft_ms and its tails (ttft_ms_p90, ttft_ms_p99), e2e            16 %      1 %       16 %
ttft-leg       a TTFT probe's legs (ttft_part.<leg>_ms, perfgate.measuring      25 %      10 %      25 %
               .ttft_parts), the prefill's host time (prefill_host)
prefill-gpu    the prefill's GPU time (ttft_part.prefill_gpu_ms, perfgate       5 %       1 %       5 %
               .measuring.prefill_gpu)
tail           any other ``*_p90`` / ``*_p99`` latency (itl_ms_p99, ...)        8 %       20 %      10 %
goodput        goodput_rps, crossover                                           10 %      5 %       10 %
acceptance     accept_len                                                       1 %       1 %       1 %
============== =============================================================== ========= ========= =========

Where they come from (real: SGLang 0.5.17 on H200s, Llama-3.1-8B dummy weights, docs/gate.md; sim: this
project's simulated seed box on a 2-core shared runner, measured 2026-12-07 by two paired A/A runs of 6 alternated
start pairs (``pytest perftests/ -m stack_pair -k baseline --perfgate-candidate env.PERFGATE_AA=1 --perfgate-starts
6``), one quiet, one beside other work using up to 1.78 of the 2 cores; each sim prior is the wider of the two, rounded
up (benchmarks/shared_box.py prints the table; evidence/sim-rtxpro6000-x8/shared-box-2026-12-07/): one start's sd
quiet / loaded: tok/s 0.05 / 0.14 %, output tok/s 0.06 / 0.34 %, ITL 0.08 / 0.06 %, TTFT from the probes 0.10 /
0.79 % (the trials' TTFT 0.12 / 1.51 %), ITL p99 0.66 / 16.8 %, the to_forward and rest legs 9.5 % and 6.1 % quiet
(a fraction of a millisecond: the runner's wake-up), the prefill leg and its GPU and host parts 0.04-0.08 %. The
first-token prior was 3 %, and a TTFT +4.8 % that read the same in five pairs stayed undecided on it (issue 52);
the tail prior was 5 %, a third of ITL p99's loaded spread. Decode tok/s keeps 0.1 %: its loaded 0.14 % is one
run of six pairs beside the suite's own tests, and a prior of 0.15 % already cost the unpaired same-machine gate its
"same" in 23 % of A/A runs (tests/test_gate_power.py); a wider spread the pairs measure wins over the prior anyway):

- throughput, real: between-start sd 0.011 % (machine A, 5 starts) and 0.047 % (B, 3 starts); 0.1 % is
  twice the wider. Machines: the four H200s' means, 1.6 %. Sim: the simulator's start jitter is 0.05 %
  (perfgate.sim.variation); six A/A start pairs of the simulated seed box on a 2-core runner spread 0.05 %
  (tok/s 89.69-89.80): twice that, the same as the real prior.
- output, real: output tok/s carries each request's TTFT (~30 ms of a 1.2 s request at batch 1), so it moves
  with the first token: two starts of one config read 206.32 / 205.54, 206.45 / 206.94, 205.53 / 206.73 and
  203.82 / 203.27 tok/s (the paired runs of 2026-12-01 and the upgrade of 2026-12-02, evidence/h200-x1/), a
  between-start sd of 0.17-0.41 %: 0.5 %. Sim: the same share of a TTFT that moves 3 %.
- step, real: at batch 1 a decode step is 1 / tok/s, so the same 0.1 %. Sim: the client times each token on a
  shared runner, where a step of a few ms moves with the scheduler.
- first-token, real: each start's TTFT is the median of its trials' (at batch 1, one request a trial), and two
  starts of one config read 27.11 / 32.63, 27.48 / 23.12, 32.71 / 26.04 and 42.54 / 46.33 ms (the same runs):
  a between-start sd of 6-16 %: 16 %. Its tails take it too: over five requests a start, a p99 is their
  largest. Sim: TTFT is a modelled prefill plus the runner's wake-up.
- ttft-leg, real: the legs of the probes of 7 alternated start pairs on one H200 (2026-12-05, the paired A/A and TTFT
  runs, evidence/h200-x1/latency-paired-2026-12-05/): one start's sd dispatch 8.9 %, to_forward 16.1 %, rest 9.5 %,
  prefill 25.0 % (the leg the levels live in: a start's prefill median 18-34 ms): 25 %, the widest. Judged on the
  first-token prior, the prefill leg of identical arms was called regressed in 3 % of simulated runs. Sim: the
  first-token prior.
- prefill-gpu: the GPU's busy time of a prefill's kernels (SGLang's own trace of a start's prefills) does not depend
  on where the host's threads run. Measured on an H100 (2026-12-07, 4 alternated start pairs, 8 traced prefills a
  start, evidence/h100-x1/prefill-paired-2026-12-07/): a start's median read 6.826-6.843 ms on one arm and
  9.839-9.858 ms on the other (sd 0.10 % and 0.11 %), while the same starts' prefill host time moved 20 %; another
  H100 read 7.03-7.06 ms that morning (a card's level: the machines level). The H100's prior is 1 % a start, ten times
  the measured; the real column keeps 5 % (a fifth of the leg it splits) until an H200's pairs measure it, and so does
  a GPU of no measured kind. Sim: the kernels are the cost model's at the start's speed (0.05 % a start): 1 %.
- tail, real: ITL p99 of two starts of one config read 5.12 / 5.20, 5.22 / 5.28, 5.11 / 5.20 and 5.25 /
  5.47 ms (the same runs): sd 0.6-2.9 %; then the paired A/A and TTFT runs of 2026-12-05 (7 alternated pairs, one
  H200, evidence/h200-x1/latency-paired-2026-12-05/): one quiet start read 7.08 ms among 5.15-5.41, a start's sd
  7.7 % over those pairs (5.8 % pooled with the 7 pairs before): 8 %. Sim: ITL p99 of a user's suite over 19
  runs on a 2-core runner spanned 36.2-40.4 ms (sd ~3 %); 5 %.
- goodput, real: three starts of one H200 served 42.75, 42.75 and 36.97 req/s within the SLOs (sd of the logs
  8 %): 10 %.
- acceptance: SGLANG_SIMULATE_ACC_LEN fixes the mean; the draws over a trial's requests move it ~0.5 %.

Each GPU its own (:data:`GPU_PRIORS`, :func:`prior_cv`'s ``gpu``): the real column was measured on H200s. An H100's
starts moved more (its paired run of 2026-12-05, 4 alternated start pairs of SGLang 0.5.16 / 0.5.17,
evidence/h100-x1/upgrade-bisect-2026-12-05/paired-baseline/): one arm's decode tok/s 0.13 % and 0.50 % a start, output
tok/s 0.19 % and 0.53 %, ITL p99 4.2 % and 17.8 % (one quiet start at 8.55 ms among 12.2-13.2), so its throughput
prior is 0.5 %, output 0.6 % and tail 18 %; its TTFT (3.2-11.4 %), legs (5-16 %) and steps (0.06 %) stayed within the
real column; its prefill GPU time is its own, 1 % (above).
Judged on the H200's priors at the H100's measured noise, identical arms were called regressed in 2.55 %
(decode) and 3.05 % (ITL p99) of 2000 sequential runs, each judged at 95 %; on its own, 0.20 % and 0.15 %
(benchmarks/sequential_power.py ``--gpu``; docs/gate.md "Each GPU its own priors"). At the share of the confidence a
stack pair gives ITL p99 (99 %, perfgate.measuring.stackpair.metric_confidence) the H200's prior gives 1.0 % and the
H100's 0.6 % (1000 runs, 2026-12-07): decode's 2.55 % is what needs the H100's own priors.
A GPU of no measured kind takes the widest of all, class by class.

Side by side (co-resident arms, ``--perfgate-co-resident``: both servers up at once, their requests interleaved,
perfgate.serving.coresident) a pair's two starts meet the host's state at the same moments, so a pair's ratio moves
less than two starts apart do. Its prior is the ``starts`` level's for every class but first-token: on the
simulator 1 %, the probe TTFT ratios of side-by-side A/A pairs of the simulated seed box spread 0.03-0.1 %
(benchmarks/coresident.py; 102.77 / 102.92, 103.46 / 103.50, 102.85 / 102.89 ms), on one host level and on a host
whose level changes every 10 simulated seconds alike, ten times that; on real SGLang 20 %: on an
H200 (2026-12-05, evidence/h200-x1/latency-2026-12-05/README.md) three side-by-side pairs' probe TTFT ratios were
0.718, 1.126 and 0.984, one start's sd 16.4 % around their mean: the level of batch-1 TTFT belongs to the server
process, not to the host's moment, so two servers side by side do not share it, and the real prior is the widest
measured, rounded up.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.categories import Word
from perfgate.record import TTFT_PART_PREFIX

#: the prefill's GPU time (perfgate.measuring.prefill_gpu), the one TTFT part with a class of its own
PREFILL_GPU_METRIC = f"{TTFT_PART_PREFIX}prefill_gpu_ms"

__all__ = ["MetricClass", "Noise", "metric_class", "prior_cv", "noise_for", "limit_tolerance", "spending_shape",
           "gpu_kind", "priors_said", "PRIORS", "GPU_PRIORS", "REAL_MEASURED_ON", "PRIOR_DF", "SPENDING",
           "LIMIT_PASS_PROBABILITY"]


class MetricClass(Word):
    """How a metric moves: the class its priors come from."""

    THROUGHPUT = "throughput"
    OUTPUT = "output"
    STEP = "step"
    FIRST_TOKEN = "first-token"
    TTFT_LEG = "ttft-leg"
    PREFILL_GPU = "prefill-gpu"
    TAIL = "tail"
    GOODPUT = "goodput"
    ACCEPTANCE = "acceptance"


#: (class) -> {(level, engine): relative sd}; engine "real" (SGLang on a GPU) or "sim" (the simulator)
PRIORS: dict[MetricClass, dict[tuple[str, str], float]] = {
    MetricClass.THROUGHPUT: {("starts", "real"): 0.001, ("starts", "sim"): 0.001,
                             ("machines", "real"): 0.016, ("machines", "sim"): 0.016},
    MetricClass.OUTPUT: {("starts", "real"): 0.005, ("starts", "sim"): 0.005,
                         ("machines", "real"): 0.016, ("machines", "sim"): 0.016},
    MetricClass.STEP: {("starts", "real"): 0.001, ("starts", "sim"): 0.002,
                       ("machines", "real"): 0.016, ("machines", "sim"): 0.016},
    MetricClass.FIRST_TOKEN: {("starts", "real"): 0.16, ("starts", "sim"): 0.01, ("side-by-side", "sim"): 0.01,
                              ("side-by-side", "real"): 0.20,
                              ("machines", "real"): 0.16, ("machines", "sim"): 0.03},
    MetricClass.TTFT_LEG: {("starts", "real"): 0.25, ("starts", "sim"): 0.10, ("side-by-side", "sim"): 0.10,
                           ("machines", "real"): 0.25, ("machines", "sim"): 0.10},
    MetricClass.PREFILL_GPU: {("starts", "real"): 0.05, ("starts", "sim"): 0.01,
                              ("machines", "real"): 0.05, ("machines", "sim"): 0.016},
    MetricClass.TAIL: {("starts", "real"): 0.08, ("starts", "sim"): 0.20,
                       ("machines", "real"): 0.10, ("machines", "sim"): 0.20},
    MetricClass.GOODPUT: {("starts", "real"): 0.10, ("starts", "sim"): 0.05,
                          ("machines", "real"): 0.10, ("machines", "sim"): 0.05},
    MetricClass.ACCEPTANCE: {("starts", "real"): 0.01, ("starts", "sim"): 0.01,
                             ("machines", "real"): 0.01, ("machines", "sim"): 0.01},
}

#: the GPU kinds :data:`PRIORS`' real entries were measured on
REAL_MEASURED_ON: tuple[str, ...] = ("H200",)

#: (GPU kind) -> (class) -> {level: relative sd}: a kind whose own starts moved more than :data:`PRIORS`' real
#: entries allow, its own priors (each at least the widest spread its runs measured); a class or level it does not
#: name takes the real entry. A GPU of no kind here nor in :data:`REAL_MEASURED_ON` takes, per class and level, the
#: widest of them all (:func:`prior_cv`): a prior never claims more calm than some GPU has shown.
GPU_PRIORS: dict[str, dict[MetricClass, dict[str, float]]] = {
    "H100": {MetricClass.THROUGHPUT: {"starts": 0.005}, MetricClass.OUTPUT: {"starts": 0.006},
             MetricClass.TAIL: {"starts": 0.18}, MetricClass.PREFILL_GPU: {"starts": 0.01}},
}

#: (class) -> how a sequential paired comparison of the class spends its false-alarm budget over its looks
#: (:mod:`perfgate.measuring.spending`; every shape spends the whole budget and no more): the O'Brien-Fleming shape
#: (``obf``: next to nothing at the first looks, most at the last) unless named here. Decode throughput's looks stand on
#: a prior every measured start has stayed within (0.1 % against 0.01-0.05 %), so from its second look on it spends more
#: (Hwang-Shih-DeCani, ``hsd:-3``); its first look, one order of the arms only, spends no more than O'Brien-Fleming's
#: (:func:`perfgate.measuring.spending.spent_by_look`). A 0.5 % decode change is caught in 76 % of runs within 6 pairs
#: (3.4 on average) instead of 66 % (4.3), as under the even split before the error spending (77 %, 3.4), with no false
#: alarm on identical arms or on a machine three times noisier than measured (benchmarks/sequential_power.py, 2000
#: replicates; docs/gate.md "Decode's own shape"). The noisy classes keep ``obf``: early spending there trusts a prior
#: that real starts have exceeded (the first-token, leg and tail priors were each raised after a real run), and buys
#: them no power (TTFT +20 % / +30 % caught in 47 % / 83 % of runs at ``hsd:-3``, 49 % / 82 % at ``obf``).
SPENDING: dict[MetricClass, str] = {MetricClass.THROUGHPUT: "hsd:-3"}

#: how many degrees of freedom a prior is worth when it is pooled with measured starts
#: (:func:`perfgate.measuring.judge.paired`): a handful, so that two or three measured starts still count
PRIOR_DF = 4


def spending_shape(metric: str | None) -> str:
    """The error-spending shape of ``metric``'s sequential looks (:data:`SPENDING`; ``obf`` for a class not named
    there, and where no metric is given)."""
    return SPENDING.get(metric_class(metric), "obf") if metric else "obf"


def metric_class(metric: str) -> MetricClass:
    """The class of a metric name (a record's ``metric``, a ``[floors]`` key, a user's own ``*_ms`` name)."""
    m = metric.lower()
    if m.startswith("accept"):
        return MetricClass.ACCEPTANCE
    if m.startswith(("goodput", "crossover")):
        return MetricClass.GOODPUT
    if m == PREFILL_GPU_METRIC:
        return MetricClass.PREFILL_GPU
    if m.startswith(TTFT_PART_PREFIX):
        return MetricClass.TTFT_LEG
    if m.startswith("ttft") or m.startswith("e2e"):
        return MetricClass.FIRST_TOKEN
    if "_p9" in m or m.endswith(("_max", "_p95")):
        return MetricClass.TAIL
    if m.startswith("output"):
        return MetricClass.OUTPUT
    if m.startswith(("itl", "tpot")) or m.endswith("_ms"):
        return MetricClass.STEP
    return MetricClass.THROUGHPUT


def gpu_kind(gpu: str | None) -> str | None:
    """The kind of priors a GPU name takes (``NVIDIA H100 80GB HBM3`` -> ``H100``): one of
    :data:`REAL_MEASURED_ON` or :data:`GPU_PRIORS`, matched as a word of the name (as a profile's
    ``hardware.gpu`` is); None for a GPU of no measured kind, or none named."""
    words = str(gpu or "").upper().replace("-", " ").split()
    return next((k for k in (*REAL_MEASURED_ON, *GPU_PRIORS) if k in words), None)


def priors_said(gpu: str | None) -> str:
    """Which priors a real run on ``gpu`` is judged on, in words (the session's banner)."""
    kind = gpu_kind(gpu)
    if kind in REAL_MEASURED_ON:
        return f"noise priors of the {kind}, measured on its runs (docs/gate.md \"Noise per metric\")"
    if kind is not None:
        return f"noise priors of the {kind}, measured on its runs (docs/gate.md \"Each GPU its own priors\")"
    kinds = ", ".join((*REAL_MEASURED_ON, *GPU_PRIORS))
    return (f"noise priors: no run of GPU '{gpu or 'unknown'}' measured its own, so the widest of the GPUs that "
            f"did ({kinds}), class by class; a paired A/A run on this box, passed as --perfgate-noise-from, judges "
            f"against its own noise (docs/gate.md \"Noise measured on this box\")")


def prior_cv(metric: str, level: str, *, simulated: bool = False, gpu: str | None = None) -> float:
    """The documented prior of ``metric``'s noise at ``level`` (``starts``, ``side-by-side`` or ``machines``; see the
    module table) on ``gpu`` (a GPU name, e.g. a record's ``stack.gpu``; :func:`gpu_kind`): the real entries on a kind
    they were measured on, the kind's own (:data:`GPU_PRIORS`) where it has them, and on any other GPU the widest of
    all; the simulator's own where ``simulated``. ``side-by-side`` is the ``starts`` prior where none was measured
    apart for the class."""
    lv = str(level)
    if lv not in ("starts", "side-by-side", "machines"):
        raise ValueError(f"no prior at level {lv!r}: the trials level is always measured from the record's trials")
    cls = metric_class(metric)
    priors = PRIORS[cls]
    if simulated:
        return priors.get((lv, "sim")) or priors[("starts", "sim")]

    def on(kind: str) -> float:
        own = GPU_PRIORS.get(kind, {}).get(cls, {})
        return own.get(lv) or priors.get((lv, "real")) or own.get("starts") or priors[("starts", "real")]

    kind = gpu_kind(gpu)
    if kind is not None:
        return on(kind)
    return max(on(k) for k in (*REAL_MEASURED_ON, *GPU_PRIORS))


@dataclass(frozen=True, kw_only=True)
class Noise:
    """One metric's noise at one level: the relative sd of one observation and where it came from."""

    cv: float
    source: str  # "measured" (this record's starts), "history", "prior"
    df: float  # degrees of freedom behind it (a prior: :data:`PRIOR_DF`, what it is worth pooled with measured pairs)


def noise_for(metric: str, level: str, *, measured: float | None = None, measured_df: int = 0,
              history: float | None = None, history_df: int = 0, simulated: bool = False,
              gpu: str | None = None) -> Noise:
    """The noise to judge ``metric`` at ``level`` against, and to write a limit's tolerance from: a history of runs
    (``history``, learnt by :mod:`perfgate.report.noise` or :mod:`perfgate.report.pairnoise`) replaces the prior,
    measured starts wider than either always win, and with neither the prior stands, worth :data:`PRIOR_DF`
    degrees of freedom where :func:`perfgate.measuring.judge.paired` pools it with a comparison's own pairs. The one
    rule for the limits a session writes (:func:`limit_tolerance`, perfgate.measuring.ledger)."""
    base = Noise(cv=history, source="history", df=float(history_df)) if history is not None else \
        Noise(cv=prior_cv(metric, level, simulated=simulated, gpu=gpu), source="prior", df=float(PRIOR_DF))
    if measured is not None and measured > base.cv:
        return Noise(cv=measured, source="measured", df=float(measured_df))
    return base


#: the chance that the next identical run on the same machine passes a limit just written (one-sided)
LIMIT_PASS_PROBABILITY = 0.99


def limit_tolerance(metric: str, *, simulated: bool = False, gpu: str | None = None, start_cv: float | None = None,
                    n_starts: int = 1, within_cv: float = 0.0, p: float = LIMIT_PASS_PROBABILITY) -> float:
    """The tolerance to write beside a limit measured now, so that the next identical run on this machine passes it
    with probability ``p``: the next run's figure differs from the limit (the mean of ``n_starts`` starts) by one
    start's noise plus the limit's own, ``sd = sqrt(s^2 (1 + 1/n_starts) + w^2)``, where ``s`` is the metric's
    noise between starts (the prior of its class, or the measured one where wider) and ``w`` the within-start sd
    of one figure (its trials); the tolerance is ``z_p x sd``, rounded up to 0.1 %. Between machines a floor is
    the fleet's business (``perfgate floors``)."""
    import math
    import statistics

    s = noise_for(metric, "starts", measured=start_cv, simulated=simulated, gpu=gpu).cv
    sd = math.sqrt(s * s * (1 + 1 / max(1, n_starts)) + within_cv * within_cv)
    z = statistics.NormalDist().inv_cdf(p)
    return math.ceil(z * sd * 1000) / 1000
