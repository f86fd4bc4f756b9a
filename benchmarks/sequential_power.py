"""The paired gate's false alarms and power per metric, with the sequential rule (issue: verdicts with power).

    python benchmarks/sequential_power.py                   # 2000 replicates per cell, about two minutes
    python benchmarks/sequential_power.py --boundary obf    # O'Brien-Fleming's shape for every metric (2026-12-04)
    python benchmarks/sequential_power.py --boundary even   # the even (Bonferroni) split it replaced
    python benchmarks/sequential_power.py --replicates 500 --json out.json
    python benchmarks/sequential_power.py --noise-from evidence/h200-x1/latency-*/paired-*.xml   # real noise

Each replicate is one paired run as ``perfgate.plugin.compare.until_decided`` drives it: one interleaved start pair
(current, candidate), judged by :func:`perfgate.measuring.judge.paired` at the look of the session's
:class:`~perfgate.measuring.judge.Sequential` plan (each metric's error-spending shape, ``--boundary metric``; one
shape for all, ``obf`` or ``hsd:GAMMA``; or the even split it replaced, ``--boundary even``) on the metric's own
prior (perfgate.profiles.noise), then one more pair while it is undecided, up to ``--max-pairs`` (the default of
``--perfgate-max-starts``). A start's figure is drawn around its machine's with the metric's *true* noise between
starts (the spread measured for it: :data:`TRUE_NOISE`), so the rates printed are the judge's on noise like the
measured, not a formula's:

- **A/A false alarms**: identical arms; the share called *regressed* (blocks), and the mean pairs it took;
- **prior too narrow**: the same with the true noise three times the measured (a machine noisier than any seen);
- **power**: a change of d injected into the candidate (worse in the metric's direction); the share called
  *regressed* within the budget and the mean pairs taken; the smallest d caught in >= 95 %.
- **across machines**: two single-start reports of two machines (``perfgate gate`` on them,
  :func:`perfgate.report.diff.compare_metric`): the share *regressed* on A/A.

``--noise-from JUNIT...`` replaces the H200 rows' noise with the spread that paired runs' stack-pair records
measured (:func:`noise_from_reports`): per metric the pooled sd of the log candidate/current start-pair ratios
around each record's own mean, over sqrt(2) (one start's), alternated pairs and co-resident ones apart (the latter
as rows of their own, ``H200 side by side``, judged against the side-by-side prior), and adds a row per TTFT leg
the records measured (``--enable-metrics`` probes, perfgate.measuring.ttft_parts): its noise as measured, its
changes TTFT's landing in that leg (a +10 % TTFT in a leg that is 3 % of TTFT is a leg x4.3), its floor TTFT's
over its share (:func:`leg_shares`), as the stack pair judges a leg.

Not a unit test (tests/test_gate_power.py pins the decisions on a fixed seed). Its table is in docs/power.md.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass

from perfgate.measuring.judge import Decision, Level, Sequential, default_min_effect, paired
from perfgate.measuring.metrics import METRICS, RECORD_METRICS
from perfgate.measuring.stackpair import PAIR_METRICS, leg_floor, metric_confidence
from perfgate.measuring.ttft_parts import LEG_METRICS
from perfgate.profiles.noise import prior_cv
from perfgate.report.pairnoise import PairNoise

#: (engine, metric) -> the relative sd between starts measured for it (docs/gate.md "Deciding"): sim on a 2-core
#: runner (six A/A start pairs of the simulated seed box: tok/s 0.05 %, TTFT 1.0 %, ITL p99 3 % over a user's
#: 19 runs; goodput: one bisection step in 32 is 3 %), real SGLang on H200s (tok/s 0.03 % pooled over machines A
#: and B; TTFT, ITL p99 and output tok/s: the rms of four same-config start pairs of the paired runs of 2026-12-01
#: and the upgrade of 2026-12-02, 12 %, 1.7 % and 0.28 %; goodput 42.75 / 42.75 / 36.97 req/s, 8 %, and five starts of
#: the interval record on 2026-12-03, 7.3 %: the wider kept)
TRUE_NOISE: dict[tuple[str, str], float] = {
    ("sim", "tok_s"): 0.0005, ("sim", "ttft_ms"): 0.01, ("sim", "itl_ms_p99"): 0.03, ("sim", "goodput_rps"): 0.03,
    ("real", "tok_s"): 0.0003, ("real", "output_tok_s"): 0.0028, ("real", "ttft_ms"): 0.12,
    ("real", "itl_ms_p99"): 0.017, ("real", "goodput_rps"): 0.08,
}
#: the GPU :data:`TRUE_NOISE`'s real rows were measured on, and whose priors judge them unless ``--gpu`` names another
GPU = "H200"
#: the metrics a stack-pair record carries per start for both arms, and the property holding each one's judged values
PAIRED_VALUES = {"tok_s": "tok_s", "output_tok_s": "output_tok_s", "ttft_ms": "ttft_probe_ms",
                 "itl_ms_p99": "itl_ms_p99",
                 # the probes' TTFT in legs (perfgate.measuring.ttft_parts; servers with --enable-metrics): a row each,
                 # its changes a share of TTFT landing in that leg (:func:`leg_shares`)
                 **{leg: leg for leg in LEG_METRICS}}
CHANGES = (0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3)
#: the record's confidence (a profile's ``[workload] confidence``, 0.95 unless it names one): each row is judged at
#: its metric's share of it in a baseline stack pair (its PAIR_METRICS but the acceptance length, with its TTFT legs),
#: as perfgate.measuring.stackpair.pair_judgements judges it
CONFIDENCE = 0.95
BASELINE_METRICS = len([m for m in PAIR_METRICS if m != "accept_len"])


@dataclass(frozen=True)
class Cell:
    rate: float  # share called regressed
    pairs: float  # mean pairs taken
    same: float  # share called same


def noise_from_reports(paths: list[str]) -> dict[tuple[str, str], PairNoise]:
    """Per (level, metric) of :data:`PAIRED_VALUES`: one start's noise from the stack-pair records of paired runs
    (:func:`perfgate.report.pairnoise.pair_noise`, every record counted: several machines' records pool). ``level``:
    ``starts`` (alternated pairs) or ``side-by-side`` (``co_resident_starts``). A TTFT's values are the probes'
    (``ttft_probe_ms``), as the judge's."""
    from perfgate.report.junit_read import read_reports
    from perfgate.report.pairnoise import pair_noise

    got = pair_noise(read_reports(paths))
    return {(level, metric): n for metric, name in PAIRED_VALUES.items() for level in ("starts", "side-by-side")
            if (n := got.get(level, name)) is not None}


def leg_shares(paths: list[str]) -> dict[str, float]:
    """Per leg of :data:`LEG_METRICS`: its share of the probes' TTFT on the current arms of the stack-pair records
    in ``paths`` (the median over records of each record's median leg over its median probe TTFT)."""
    from perfgate.report.junit_read import read_reports
    from perfgate.report.noise import start_values

    shares: dict[str, list[float]] = {}
    for report in read_reports(paths):
        for r in report.records:
            ttft = start_values(r, "ttft_probe_ms")
            for leg in LEG_METRICS:
                if ttft and (v := start_values(r, leg)):
                    shares.setdefault(leg, []).append(statistics.median(v) / statistics.median(ttft))
    return {leg: statistics.median(v) for leg, v in shares.items()}


def run_once(rng: random.Random, *, metric: str, engine: str, change: float, noise: float, plan: Sequential,
             first: int = 1, level: str = "starts", share: float = 1.0, gpu: str = GPU) -> tuple[Decision, int]:
    """One paired run: pairs added while undecided; (the decision, the pairs it took). ``share``: a TTFT leg's
    share of TTFT, where ``metric`` is a leg: ``change`` is then TTFT's (that much of TTFT added to the leg), and the
    leg's floor is TTFT's over its share, as the stack pair judges a leg (perfgate.measuring.stackpair). ``gpu``: the
    GPU whose priors judge a real row (perfgate.profiles.noise.gpu_kind)."""
    leg = metric in LEG_METRICS
    spec = METRICS.get("ttft_ms" if leg else metric) or RECORD_METRICS[metric]
    up = spec.higher_is_better
    shift = math.log(1 - change) if up else math.log(1 + change / share)  # worse in the metric's direction
    prior = prior_cv(metric, level, simulated=engine == "sim", gpu=gpu)
    floor = leg_floor(share) if leg else default_min_effect(metric, higher_is_better=up)
    conf = (metric_confidence(metric, CONFIDENCE, metrics=BASELINE_METRICS, legs=len(LEG_METRICS))
            if metric in PAIR_METRICS or leg else CONFIDENCE)  # goodput: a record of its own, at its confidence
    ratios = [math.exp(rng.gauss(0, noise) + shift - rng.gauss(0, noise)) for _ in range(first)]
    while True:
        j = paired(ratios, higher_is_better=up, min_effect=floor, prior_cv=prior, plan=plan, metric=metric,
                   level=Level(level), confidence=conf)
        if j.decision is not Decision.UNDECIDED or len(ratios) >= plan.max_pairs:
            return j.decision, len(ratios)
        ratios.append(math.exp(rng.gauss(0, noise) + shift - rng.gauss(0, noise)))


def cell(rng: random.Random, replicates: int, **kw: object) -> Cell:
    out = [run_once(rng, **kw) for _ in range(replicates)]  # type: ignore[arg-type]
    return Cell(rate=sum(d is Decision.REGRESSED for d, _ in out) / replicates,
                pairs=statistics.fmean(n for _, n in out),
                same=sum(d is Decision.SAME for d, _ in out) / replicates)


#: the true spread of machines' means (four H200s' tok/s: 1.6 %); a latency's is taken as the wider of that and its
#: start noise (no fleet of latencies measured)
MACHINE_SD = 0.016


def across_machines(rng: random.Random, replicates: int, *, metric: str, engine: str, noise: float,
                    gpu: str = GPU) -> float:
    """The share of A/A pairs of single-start reports from two machines that ``perfgate gate`` calls regressed."""
    try:
        from benchmarks.gate_power import record
    except ImportError:  # run as a script: benchmarks/ is its own directory
        from gate_power import record  # type: ignore[no-redef]
    from perfgate.report.diff import compare_metric

    machine = max(MACHINE_SD, noise)
    hits = 0
    for i in range(replicates):
        v = [100.0 * math.exp(rng.gauss(0, machine) + rng.gauss(0, noise)) for _ in range(2)]
        a, b = (record(f"m{i}{side}", [(x, 0.0005 * x)], metric=metric, engine=engine, gpu=gpu)
                for side, x in zip("ab", v))
        hits += compare_metric(a, b).verdict == Decision.REGRESSED  # type: ignore[union-attr]
    return hits / replicates


#: the rows --noise-from replaces by default: the latencies the paired runs' probes and trials measure; decode and
#: output tok/s keep :data:`TRUE_NOISE`, which pools many more baseline pairs over machines
REPLACED = ("ttft_ms", "itl_ms_p99")


def rows(measured: dict[tuple[str, str], PairNoise] | None = None, replace: tuple[str, ...] = REPLACED,
         shares: dict[str, float] | None = None) -> list[tuple[str, str, float, str, float]]:
    """(engine, metric, true noise, level, share) of each row: :data:`TRUE_NOISE`, the real rows of ``replace`` with
    the noise measured at ``starts``, side-by-side rows of ``replace`` added where ``measured`` has them, and a row
    for each TTFT leg measured at ``starts`` whose share of TTFT ``shares`` has (its changes TTFT's)."""
    legs = {leg: m for (level, leg), m in (measured or {}).items() if level == "starts" and leg in (shares or {})}
    measured = {k: m for k, m in (measured or {}).items() if k[1] in replace}
    out = [(engine, metric, measured[("starts", metric)].cv if engine == "real" and ("starts", metric) in measured
            else noise, "starts", 1.0) for (engine, metric), noise in TRUE_NOISE.items()]
    out += [("real", metric, m.cv, level, 1.0) for (level, metric), m in sorted(measured.items())
            if level != "starts"]
    out += [("real", leg, m.cv, "starts", (shares or {})[leg]) for leg, m in sorted(legs.items())]
    return out


def table(replicates: int, seed: int, max_pairs: int, boundary: str = "metric",
          measured: dict[tuple[str, str], PairNoise] | None = None,
          replace: tuple[str, ...] = REPLACED, shares: dict[str, float] | None = None,
          gpu: str = GPU) -> dict[str, dict[str, object]]:
    rng = random.Random(seed)
    plan = Sequential(first_pairs=1, max_pairs=max_pairs, boundary=boundary)
    out: dict[str, dict[str, object]] = {}
    for engine, metric, noise, level, share in rows(measured, replace, shares):
        kw = {"metric": metric, "engine": engine, "plan": plan, "level": level, "share": share, "gpu": gpu}
        aa = cell(rng, replicates, change=0.0, noise=noise, **kw)
        wide = cell(rng, replicates, change=0.0, noise=3 * noise, **kw)
        power = {d: cell(rng, max(200, replicates // 4), change=d, noise=noise, **kw) for d in CHANGES}
        smallest = next((d for d in CHANGES if power[d].rate >= 0.95), None)
        prior = prior_cv(metric, level, simulated=engine == "sim", gpu=gpu)
        where = gpu if engine == "real" else engine  # a real row by the GPU whose priors judged it
        name = f"{where} {metric}" if level == "starts" else f"{where} {level} {metric}"
        if metric in LEG_METRICS:
            name += f" ({share:.1%} of TTFT)"
        out[name] = {"true_noise": noise, "prior": prior, "share": share,
                     "aa": aa, "aa_prior_3x_too_narrow": wide, "power": power,
                     "smallest_95": smallest,
                     # a leg is judged in paired runs only: two machines' single reports carry TTFT, not legs
                     "aa_two_machines": math.nan if metric in LEG_METRICS else across_machines(
                         rng, replicates, metric=metric, engine=engine, noise=noise, gpu=gpu)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-pairs", type=int, default=6, help="the budget (--perfgate-max-starts)")
    ap.add_argument("--boundary", default="metric",
                    help="the looks' boundary: metric = each metric's own spending shape (the judge's: "
                         "perfgate.profiles.noise.SPENDING), obf or hsd:GAMMA = that shape for every metric, even = "
                         "the Bonferroni split before")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--noise-from", nargs="+", metavar="JUNIT", default=[],
                    help="paired runs' JUnit files: the H200 rows' noise as their stack-pair records measured it")
    ap.add_argument("--gpu", default=GPU,
                    help=f"the GPU whose priors judge the real rows (perfgate.profiles.noise.gpu_kind; default {GPU}, "
                         "where TRUE_NOISE was measured): give the one --noise-from's runs ran on")
    ap.add_argument("--replace", nargs="+", metavar="METRIC", default=list(REPLACED),
                    help=f"the rows --noise-from replaces (default: {' '.join(REPLACED)})")
    args = ap.parse_args(argv)
    measured = noise_from_reports(args.noise_from) if args.noise_from else None
    for (level, metric), m in sorted((measured or {}).items()):
        print(f"measured at {level}: {metric} {m.text()}")
    shares = leg_shares(args.noise_from) if args.noise_from else None
    for leg, share in sorted((shares or {}).items()):
        print(f"share of TTFT: {leg} {share:.1%}")
    t = table(args.replicates, args.seed, args.max_pairs, args.boundary, measured, tuple(args.replace), shares,
              args.gpu)
    print(f"sequential paired runs: first look after 1 pair, at most {args.max_pairs}; {args.replicates} replicates; "
          f"boundary {args.boundary}; real rows on {args.gpu}'s priors")
    print(f"{'metric':<44}{'noise':>7}{'prior':>7}{'A/A FA':>8}{'pairs':>6}{'3x FA':>7}{'2 mach':>8}  "
          + "".join(f"{d:>11.1%}" for d in CHANGES) + "   >=95 % from")
    for name, row in t.items():
        aa, wide, power = row["aa"], row["aa_prior_3x_too_narrow"], row["power"]
        assert isinstance(aa, Cell) and isinstance(wide, Cell) and isinstance(power, dict)
        s = row["smallest_95"]
        two = row["aa_two_machines"]
        assert isinstance(two, float)
        print(f"{name:<44}{row['true_noise']:>7.2%}{row['prior']:>7.2%}{aa.rate:>8.2%}{aa.pairs:>6.1f}"
              f"{wide.rate:>7.2%}{'-' if math.isnan(two) else f'{two:.2%}':>8}  "
              + "".join(f"{power[d].rate:>6.0%} {power[d].pairs:>3.1f}p" for d in CHANGES)
              + (f"   {s:.1%}" if s else "   none"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: {**{kk: None if isinstance(vv, float) and math.isnan(vv) else vv for kk, vv in v.items()
                              if kk not in ("aa", "aa_prior_3x_too_narrow", "power")},
                           "aa": vars(v["aa"]), "aa_prior_3x_too_narrow": vars(v["aa_prior_3x_too_narrow"]),
                           "power": {str(d): vars(c) for d, c in v["power"].items()}}  # type: ignore[union-attr]
                       for k, v in t.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
