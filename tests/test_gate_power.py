"""The gate's false alarms and power on the simulator's fleet model (benchmarks/gate_power.py), on a fixed seed.

Pins decisions, not timings: A/A runs block at most 5 % of the time on one machine and across machines, and a
1 % regression is caught in at least 95 % of paired runs at 1, 3 and 5 starts per arm (issue 22's goals).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.gate_power import Fleet, aa, power

if TYPE_CHECKING:
    from perfgate.measuring.judge import Decision


def test_aa_false_alarms_stay_under_five_percent() -> None:
    rates = aa(Fleet(random.Random(7)), machines=20, replicates=400)
    assert rates["same machine"]["regressed"] <= 0.05
    assert rates["two machines"]["regressed"] <= 0.05
    # across machines the honest answer is mostly "undecided", never a confident "same"
    assert rates["two machines"]["undecided"] >= 0.85
    assert rates["same machine"]["same"] >= 0.95


def test_one_percent_is_caught_by_paired_runs() -> None:
    p = power(Fleet(random.Random(11)), replicates=200)
    for n in (1, 3, 5):
        row = p[f"paired, {n} start(s) per arm"]
        assert row[0.01] >= 0.95, (n, row)
        assert row[0.001] <= 0.05, (n, row)  # below the practical floor: not a regression


def test_sequential_paired_runs_keep_false_alarms_under_one_percent_per_metric() -> None:
    """benchmarks/sequential_power.py on a fixed seed: identical arms, pairs added while undecided (at most 6), each
    metric against its own prior, on the simulator's and the H200's noise: the share called regressed is consistent
    with at most 1 % (the error-spending boundary spends up to 2.5 % a side, and 300 runs cannot tell 0.75 % from
    1 %: no more than the 99th percentile of 300 draws at 1 %, 8 hits; the benchmark's 2000 runs measure 0-0.75 %)."""
    from scipy.stats import binom

    from benchmarks.sequential_power import TRUE_NOISE, cell
    from perfgate.measuring.judge import Sequential

    rng = random.Random(3)
    plan = Sequential(first_pairs=1, max_pairs=6)
    n = 300
    for (engine, metric), noise in TRUE_NOISE.items():
        c = cell(rng, n, metric=metric, engine=engine, change=0.0, noise=noise, plan=plan)
        assert round(c.rate * n) <= binom.ppf(0.99, n, 0.01), (engine, metric, c)


def test_sequential_paired_runs_decide_one_and_ten_percent_on_tok_s() -> None:
    """The goals: 1 % on decode tok/s caught in >= 95 % within 6 pairs on average, 10 % within 2."""
    from benchmarks.sequential_power import cell
    from perfgate.measuring.judge import Sequential

    rng = random.Random(5)
    plan = Sequential(first_pairs=1, max_pairs=6)
    for engine, noise in (("sim", 0.0005), ("real", 0.0003)):
        one = cell(rng, 300, metric="tok_s", engine=engine, change=0.01, noise=noise, plan=plan)
        ten = cell(rng, 300, metric="tok_s", engine=engine, change=0.10, noise=noise, plan=plan)
        assert one.rate >= 0.95 and one.pairs <= 6, (engine, one)
        assert ten.rate >= 0.99 and ten.pairs <= 2, (engine, ten)
        aa = cell(rng, 300, metric="tok_s", engine=engine, change=0.0, noise=noise, plan=plan)
        assert aa.same >= 0.95 and aa.pairs <= 3, (engine, aa)  # identical arms end "same", not at the budget


def test_a_noisy_candidate_is_decided_by_more_pairs_not_by_two() -> None:
    """Issue 30's real case: two pairs 0.65 and 0.77 (a 29 % slowdown with an 8 % spread between starts) is
    undecided at 2 pairs and says how many would decide it; the pairs that follow decide it regressed."""
    from perfgate.measuring.judge import Decision, Sequential, paired

    plan = Sequential(first_pairs=2, max_pairs=6)
    two = paired([0.65, 0.77], min_effect=0.005, plan=plan)
    assert two.decision is Decision.UNDECIDED and "pairs in all would decide it" in two.needs
    more = [0.65, 0.77, 0.72, 0.70, 0.74]
    j = next(paired(more[:n], min_effect=0.005, plan=plan) for n in range(3, 6)
             if paired(more[:n], min_effect=0.005, plan=plan).decision is not Decision.UNDECIDED)
    assert j.decision is Decision.REGRESSED and j.ci is not None and j.ci[1] < 0.9


def test_what_an_undecided_record_says_would_decide_it_is_right_within_one_pair() -> None:
    """On the simulator's tok/s noise: the pairs an undecided judgement names ("about N interleaved start pairs in
    all") against the pairs the sequential run then took, for identical arms and a 0.7 % slowdown."""
    import math
    import re

    from perfgate.measuring.judge import Decision, Sequential, paired
    from perfgate.profiles.noise import prior_cv

    plan = Sequential(first_pairs=1, max_pairs=12)
    rng = random.Random(13)
    for change in (0.0, 0.007):
        right = total = 0
        for _ in range(200):
            def pair() -> float:
                return math.exp(rng.gauss(0, 0.0005) + math.log(1 - change) - rng.gauss(0, 0.0005))  # noqa: B023

            ratios, said = [pair()], None
            while True:
                j = paired(ratios, min_effect=0.005, prior_cv=prior_cv("tok_s", "starts", simulated=True), plan=plan)
                if j.decision is not Decision.UNDECIDED or len(ratios) >= plan.max_pairs:
                    break
                if said is None:
                    m = re.search(r"about (\d+) interleaved", j.needs)
                    said = int(m.group(1)) if m else None
                ratios.append(pair())
            if said is not None and j.decision is not Decision.UNDECIDED:
                total += 1
                right += abs(said - len(ratios)) <= 1
        assert total >= 50 and right / total >= 0.95, (change, right, total)


def test_the_error_spending_boundary_catches_more_than_the_even_split_it_replaced() -> None:
    """The same runs (seed, noise, change) judged with each boundary: on the H200's TTFT and goodput noise the
    spending boundary calls a 30 % / 10 % regression in several times as many runs as the even split. TTFT is judged
    at its share of a baseline stack pair's second false-alarm budget (perfgate.measuring.stackpair.metric_confidence:
    99.5 %, as the stack pair judges it; before 2026-12-07 the benchmark judged every row at 95 % and printed 49 % for
    a +20 % TTFT, which the record's own rule catches in about 8 %)."""
    from benchmarks.sequential_power import cell
    from perfgate.measuring.judge import Sequential

    for metric, change in (("ttft_ms", 0.30), ("goodput_rps", 0.10)):
        rates = {}
        for boundary in ("obf", "even"):
            plan = Sequential(first_pairs=1, max_pairs=6, boundary=boundary)
            noise = {"ttft_ms": 0.12, "goodput_rps": 0.08}[metric]
            rates[boundary] = cell(random.Random(11), 200, metric=metric, engine="real", change=change, noise=noise,
                                   plan=plan).rate
        assert rates["obf"] >= 2 * rates["even"] and rates["obf"] >= 0.25, (metric, rates)


def test_noise_from_reports_pools_each_records_spread_around_its_own_mean(tmp_path) -> None:
    """benchmarks/sequential_power.py --noise-from: one start's noise from real stack-pair records is the pooled sd
    of their log start-pair ratios around each record's own mean (a real change moves the mean, not the spread),
    over sqrt(2); co-resident records are a level of their own; a record of one pair has no spread to give."""
    import math

    from benchmarks.sequential_power import noise_from_reports
    from tests.report_factory import Case, write_report

    def case(name: str, cur: list[float], cand: list[float], **extra: str) -> Case:
        vals = {"start_values.ttft_probe_ms": ",".join(map(str, cur)),
                "candidate.start_values.ttft_probe_ms": ",".join(map(str, cand))}
        return Case(name=name, kind="stack-pair", extra={"pair_n": str(len(cur)), **vals, **extra})

    e = math.exp
    path = write_report(tmp_path / "paired.xml", [
        case("aa", [30.0, 30.0, 30.0], [30 * e(0.01), 30 * e(-0.01), 30.0]),  # logs +-0.01, 0: ss 2e-4, 2 df
        case("slowed", [28.0, 40.0], [28 * e(0.1), 40 * e(0.12)]),  # a +10 % change, spread +-0.01: ss 2e-4, 1 df
        case("one-pair", [28.0], [35.0]),  # no spread
        case("side", [30.0, 30.0], [30 * e(0.002), 30 * e(-0.002)], co_resident_starts="2"),
    ])
    got = noise_from_reports([str(path)])
    starts = got[("starts", "ttft_ms")]
    assert (starts.df, starts.records, starts.pairs) == (3, 2, 5)
    assert math.isclose(starts.cv, math.sqrt(4e-4 / 3 / 2), rel_tol=1e-6)
    side = got[("side-by-side", "ttft_ms")]
    assert (side.df, side.records) == (1, 1)
    assert math.isclose(side.cv, math.sqrt(8e-6 / 1 / 2), rel_tol=1e-6)
    assert ("starts", "tok_s") not in got  # no record carried both arms' tok/s per start


def test_noise_from_reports_measures_each_ttft_leg(tmp_path) -> None:
    """With stamped probes a stack-pair record carries each start's legs (start_values.ttft_part.<leg>_ms): their
    noise between starts is measured as a TTFT's is, so one command says which leg is calm; a leg at 0 ms (no
    tokenizer in the simulator) has no ratio and is left out."""
    import math

    from benchmarks.sequential_power import noise_from_reports, rows
    from tests.report_factory import Case, write_report

    def vals(name: str, cur: list[float], cand: list[float]) -> dict[str, str]:
        return {f"start_values.{name}": ",".join(map(str, cur)), f"candidate.start_values.{name}": ",".join(map(str, cand))}

    e = math.exp
    extra = {"pair_n": "2", **vals("ttft_part.prefill_ms", [15.0, 15.0], [15 * e(0.001), 15 * e(-0.001)]),
             **vals("ttft_part.rest_ms", [2.0, 17.0], [17.0, 2.0]), **vals("ttft_part.dispatch_ms", [0.0, 0.0], [0.0, 0.0])}
    got = noise_from_reports([str(write_report(tmp_path / "p.xml", [Case(name="r", kind="stack-pair", extra=extra)]))])
    assert math.isclose(got[("starts", "ttft_part.prefill_ms")].cv, 0.001, rel_tol=1e-6)
    assert got[("starts", "ttft_part.rest_ms")].cv > 1.0  # the levels: ratios 8.5 and 1/8.5
    assert ("starts", "ttft_part.dispatch_ms") not in got
    assert all(not row[1].startswith("ttft_part.") for row in rows(got))  # no share of TTFT given: no leg rows
    legs = {row[1]: row for row in rows(got, shares={"ttft_part.prefill_ms": 0.8, "ttft_part.rest_ms": 0.1})}
    assert legs["ttft_part.prefill_ms"][2:] == (got[("starts", "ttft_part.prefill_ms")].cv, "starts", 0.8)
    assert legs["ttft_part.rest_ms"][4] == 0.1 and "ttft_part.dispatch_ms" not in legs


def test_a_calm_leg_catches_a_ttft_change_the_levels_hide(tmp_path) -> None:
    """The H200's case (docs/gate.md, 2026-12-05): TTFT moves 16 % a start, its to_forward leg is 3 % of it and moves
    16 % of itself. +10 % of TTFT landing in that leg is a leg x4.3, caught within 4 pairs in nearly every run, where
    TTFT itself is caught in few; identical arms' leg is never called regressed more than TTFT's 1 %. The leg's share
    comes from the records (its median over the probes' TTFT on the current arm)."""
    from benchmarks.sequential_power import cell, leg_shares
    from perfgate.measuring.judge import Sequential
    from tests.report_factory import Case, write_report

    plan = Sequential(first_pairs=1, max_pairs=4)
    kw = {"engine": "real", "plan": plan, "noise": 0.16}
    leg = cell(random.Random(3), 300, metric="ttft_part.to_forward_ms", change=0.10, share=0.033, **kw)
    whole = cell(random.Random(3), 300, metric="ttft_ms", change=0.10, **kw)
    aa = cell(random.Random(4), 1000, metric="ttft_part.to_forward_ms", change=0.0, share=0.033, **kw)
    assert leg.rate >= 0.95 and whole.rate <= 0.25, (leg, whole)
    assert aa.rate <= 0.01, aa

    extra = {"pair_n": "2", "start_values.ttft_probe_ms": "30,40", "candidate.start_values.ttft_probe_ms": "30,40",
             "start_values.ttft_part.to_forward_ms": "1.0,1.2", "candidate.start_values.ttft_part.to_forward_ms": "1,1"}
    shares = leg_shares([str(write_report(tmp_path / "p.xml", [Case(name="r", kind="stack-pair", extra=extra)]))])
    assert shares == {"ttft_part.to_forward_ms": 1.1 / 35}


def test_the_real_decode_runs_replayed_on_the_shipped_rule() -> None:
    """Every real paired decode run kept under evidence/, its per-start tok/s judged again at each look as the stack
    pair judges decode tok/s (its prior, its spending shape): the identical arms (two A/As and a TTFT-only slowdown,
    H200) are never regressed and end same by their second pair; the 0.5.16 -> 0.5.17 upgrade on the H100 is never
    regressed; the real slowdowns (600 and 100 us a CUDA graph replay on an H200, 2026-12-01; 300 us planted in
    FlashInfer on an H100, the bisect's two steps of 2026-12-05; 300 us a replay on an H100, 2026-12-06) are never
    called same or improved. Each run is judged
    on its own GPU's prior (perfgate.profiles.noise.GPU_PRIORS): the bisect's steps, regressed after one pair on the
    H200's prior as they were on the H100 then, are undecided after one on the H100's own."""
    from perfgate.measuring.judge import Decision, Sequential, default_min_effect, paired
    from perfgate.profiles.noise import prior_cv

    h200, h100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"  # each run's stack.gpu: its kind's prior

    def looks(current: list[float], candidate: list[float], gpu: str, max_pairs: int = 6) -> list[Decision]:
        ratios = [b / a for a, b in zip(current, candidate)]
        plan = Sequential(first_pairs=1, max_pairs=max_pairs)
        prior = prior_cv("tok_s", "starts", gpu=gpu)
        return [paired(ratios[:n], min_effect=default_min_effect("tok_s"), prior_cv=prior,
                       plan=plan, metric="tok_s").decision for n in range(1, len(ratios) + 1)]

    identical = {  # power-2026-12-01/call2/paired-0.xml, latency-paired-2026-12-05/paired-{0-4-fix,p2.8-4}.xml
        "A/A 12-01": ([210.351, 210.447], [210.428, 210.291]),
        "A/A 12-05": ([210.06, 210.099, 210.235, 209.969], [210.107, 210.127, 210.116, 210.151]),
        "TTFT-only": ([210.15, 210.087, 210.132], [210.109, 210.165, 210.08]),
    }
    for name, (cur, cand) in identical.items():
        ds = looks(cur, cand, h200)
        assert Decision.REGRESSED not in ds and ds[1] is Decision.SAME, (name, ds)
    # h100-x1/upgrade-bisect-2026-12-05/paired-baseline: its starts moved 0.13 % and 0.50 % (the H100's prior, 0.5 %)
    upgrade = looks([155.071, 154.638, 154.898, 155.059], [156.394, 155.194, 154.539, 155.203], h100)
    assert Decision.REGRESSED not in upgrade and upgrade[-1] is Decision.UNDECIDED, upgrade
    slowed = {  # evidence/h200-x1/power-2026-12-01/call2/paired-{600,100}.xml, evidence/h100-x1/upgrade-bisect-*/bisect
        "600 us": ([210.5], [186.7], h200), "100 us": ([210.3], [206.0], h200),
        "bisect step 1": ([155.1], [149.3], h100), "bisect step 2": ([156.0], [149.4], h100),
    }
    for name, (cur, cand, gpu) in slowed.items():
        assert looks(cur, cand, gpu)[0] in (Decision.REGRESSED, Decision.UNDECIDED), name
    for name in ("bisect step 1", "bisect step 2"):
        cur, cand, gpu = slowed[name]
        # regressed after their one pair on the H200's 0.1 % prior, as the H100 judged them then; on the H100's own
        # 0.5 % a first look (one order of the arms) does not decide -3.7 %: such a step takes a second pair
        assert looks(cur, cand, h200, max_pairs=4) == [Decision.REGRESSED], name
        assert looks(cur, cand, gpu, max_pairs=4) == [Decision.UNDECIDED], name
    # h100-x1/power-2026-12-06/paired-300-3.xml: 300 us a decode step (-4.4 %) on an H100, arms AB, BA: the first
    # look (one order) does not decide it, the second, the order reversed, does, as the record did
    assert looks([158.019, 157.989], [151.087, 151.154], h100, max_pairs=3) == [Decision.UNDECIDED, Decision.REGRESSED]


def test_an_h100_on_its_own_priors_keeps_false_alarms_under_one_percent() -> None:
    """The H100's paired run (4 alternated start pairs of 0.5.16 / 0.5.17, 2026-12-05), its decode and ITL p99 noise
    as measured, identical arms judged sequentially, each at the confidence the stack pair judges it at
    (perfgate.measuring.stackpair.metric_confidence): on the H100's own priors the share called regressed is
    consistent with at most 1 %; on the H200's decode prior (0.1 %: five times too calm for this card) it is not, which
    is why the H100 has its own (perfgate.profiles.noise.GPU_PRIORS; docs/gate.md "Each GPU its own priors"). ITL p99,
    judged at its 99 % share, stays within 1 % even on the H200's 8 % (the benchmark's 3.05 % of 2026-12-05 judged it
    at 95 %); the H100's 18 % halves it."""
    from scipy.stats import binom

    from benchmarks.sequential_power import cell, noise_from_reports
    from perfgate.measuring.judge import Sequential

    run = "evidence/h100-x1/upgrade-bisect-2026-12-05/paired-baseline/junit.xml"
    measured = noise_from_reports([str(Path(__file__).parents[1] / run)])
    plan, n = Sequential(first_pairs=1, max_pairs=6), 600
    for metric in ("tok_s", "itl_ms_p99"):
        noise = measured[("starts", metric)].cv
        own = cell(random.Random(8), n, metric=metric, engine="real", change=0.0, noise=noise, plan=plan,
                   gpu="NVIDIA H100 80GB HBM3")
        calm = cell(random.Random(8), n, metric=metric, engine="real", change=0.0, noise=noise, plan=plan,
                    gpu="NVIDIA H200")
        assert round(own.rate * n) <= binom.ppf(0.99, n, 0.01), (metric, noise, own)
        if metric == "tok_s":
            assert round(calm.rate * n) > binom.ppf(0.99, n, 0.01), (metric, noise, calm)
        else:
            assert calm.rate >= own.rate, (metric, noise, own, calm)


def _part_looks(ttft: float, parts: dict[str, tuple[list[float], list[float]]],
                gpu: str = "NVIDIA H100 80GB HBM3") -> dict[str, list[Decision]]:
    """Each TTFT part's decision at each look of its (current, candidate) start values, as the stack pair judges a
    leg (perfgate.measuring.stackpair.pair_judgements): its share of the confidence, its floor TTFT's over the
    part's median share of ``ttft`` (the current arm's probe TTFT), the GPU's prior; at most 4 pairs."""
    import statistics

    from perfgate.measuring.judge import Sequential, paired
    from perfgate.measuring.stackpair import PAIR_METRICS, leg_floor, metric_confidence
    from perfgate.measuring.ttft_parts import LEG_METRICS
    from perfgate.profiles.noise import prior_cv

    plan = Sequential(first_pairs=1, max_pairs=4)
    seen = {}
    for metric, (cur, cand) in parts.items():
        ratios = [b / a for a, b in zip(cur, cand)]
        conf = metric_confidence(metric, 0.95, metrics=len(PAIR_METRICS) - 1, legs=len(LEG_METRICS))
        floor = leg_floor(statistics.median(cur) / ttft)
        seen[metric] = [paired(ratios[:n], higher_is_better=False, min_effect=floor, confidence=conf, plan=plan,
                               metric=metric, prior_cv=prior_cv(metric, "starts", gpu=gpu)).decision
                        for n in range(1, len(ratios) + 1)]
    return seen


def test_the_real_prefill_gpu_slowdown_replayed_on_the_shipped_rule() -> None:
    """evidence/h100-x1/prefill-paired-2026-12-07: 3000 us of GPU spin before each prefill forward on an H100, 4
    alternated start pairs. Replayed at each look as the stack pair judges a TTFT part (its share of the confidence,
    its floor TTFT's over its share, the H100's priors): the GPU part is regressed by the second look and stays so;
    the host part, where the box's level lives (20 % a start), is never decided either way."""
    from perfgate.measuring.judge import Decision

    ttft = 36.0  # the current arm's probe TTFT, ms (the record's ttft_probe_ms, rounded)
    seen = _part_looks(ttft, {
        "ttft_part.prefill_gpu_ms": ([6.83099, 6.83468, 6.82588, 6.84329], [9.83938, 9.85784, 9.85436, 9.83907]),
        "ttft_part.prefill_host_ms": ([26.8857, 19.2934, 19.5004, 29.0056], [23.4199, 14.5537, 20.6576, 27.7904])})
    gpu, host = seen["ttft_part.prefill_gpu_ms"], seen["ttft_part.prefill_host_ms"]
    assert gpu[0] is Decision.UNDECIDED and gpu[1:] == [Decision.REGRESSED] * 3, gpu
    assert host == [Decision.UNDECIDED] * 4, host


def test_the_real_host_side_prefill_slowdown_and_the_a_a_replayed_on_the_shipped_rule() -> None:
    """evidence/h100-x1/prefill-paired-2026-12-07, (b) and (c), another H100 (GPU-32f3e193): a 3 ms sleep at the start
    of each prefill forward (13 % of that card's ~23 ms probe TTFT), 4 alternated start pairs; and identical arms, 3
    pairs. Replayed look by look as the stack pair judges a TTFT part: the host part (and the prefill leg holding it)
    regressed at the fourth look, the GPU part same; in the A/A no part is ever regressed."""
    from perfgate.measuring.judge import Decision

    runs = {  # (current, candidate) per part, the records' start_values; the current arm's median probe TTFT
        "host-3ms": (23.29, {
            "ttft_part.prefill_gpu_ms": ([7.1152, 7.10726, 7.11065, 7.11388], [7.11133, 7.1139, 7.11098, 7.1137]),
            "ttft_part.prefill_host_ms": ([10.387, 10.3061, 9.73386, 9.96845], [13.1235, 13.4395, 13.0661, 13.1524]),
            "ttft_part.prefill_ms": ([17.5022, 17.4134, 16.8445, 17.0823], [20.2348, 20.5534, 20.1771, 20.2661])}),
        "a-a": (24.73, {
            "ttft_part.prefill_gpu_ms": ([7.11629, 7.10482, 7.10965], [7.11146, 7.09944, 7.11236]),
            "ttft_part.prefill_host_ms": ([9.98988, 13.1354, 11.4531], [10.2045, 13.8925, 10.178]),
            "ttft_part.prefill_ms": ([17.1062, 20.2402, 18.5628], [17.316, 20.9919, 17.2904])}),
    }
    seen = {run: _part_looks(ttft, parts) for run, (ttft, parts) in runs.items()}
    slow = seen["host-3ms"]
    assert slow["ttft_part.prefill_host_ms"] == [Decision.UNDECIDED] * 3 + [Decision.REGRESSED]
    assert slow["ttft_part.prefill_ms"][-1] is Decision.REGRESSED
    assert Decision.REGRESSED not in slow["ttft_part.prefill_gpu_ms"] and slow["ttft_part.prefill_gpu_ms"][-1] is \
        Decision.SAME
    assert all(Decision.REGRESSED not in looks for looks in seen["a-a"].values()), seen["a-a"]


def test_the_real_upgrade_s_prefill_parts_replayed_on_the_shipped_rule() -> None:
    """evidence/h100-x1/prefill-upgrade-2026-12-08/upgrade: SGLang 0.5.16 -> 0.5.17 on an H100, 4 alternated start
    pairs. Replayed look by look as the stack pair judges a TTFT part: the prefill's GPU time is same from the second
    look (0.5.17's kernels 0.12 % faster, within its floor); the host part, higher on 0.5.17 in all four pairs
    (x1.12-1.37), and the prefill leg holding it stay undecided: never called same while the pairs point one way."""
    from perfgate.measuring.judge import Decision

    seen = _part_looks(36.7, {  # the current arm's median probe TTFT (start_values.ttft_probe_ms), ms
        "ttft_part.prefill_gpu_ms": ([6.83767, 6.83869, 6.83563, 6.83813], [6.82982, 6.83036, 6.82854, 6.82929]),
        "ttft_part.prefill_host_ms": ([26.4024, 20.7703, 26.6095, 19.7094], [29.575, 26.0474, 28.0442, 27.0242]),
        "ttft_part.prefill_ms": ([33.2401, 27.609, 33.4451, 26.5476], [36.4048, 32.8778, 34.8728, 33.8535])})
    assert seen["ttft_part.prefill_gpu_ms"] == [Decision.UNDECIDED] + [Decision.SAME] * 3, seen
    assert seen["ttft_part.prefill_host_ms"] == [Decision.UNDECIDED] * 4, seen
    assert seen["ttft_part.prefill_ms"] == [Decision.UNDECIDED] * 4, seen
