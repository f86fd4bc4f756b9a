"""perfgate.measuring.order: the arms of a paired comparison alternate within pairs (A B, B A, A B ...), and that
cancels what favours one place in a pair. Pure: the pairing logic, then sequential paired runs on drawn noise with a
planted penalty on the second start of every pair, judged by the code the plugin runs (perfgate.measuring.judge)."""

from __future__ import annotations

import math
import random

import pytest

from perfgate.measuring.judge import Decision, Sequential, default_min_effect, paired
from perfgate.measuring.order import first_is_reversed, in_pair_order, pair_order
from perfgate.profiles.noise import prior_cv


def test_pairs_alternate_their_order_and_mirror_every_arm_of_a_group():
    assert [in_pair_order(["A", "B"], k) for k in range(4)] == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]
    assert [first_is_reversed(k) for k in range(4)] == [False, True, False, True]
    # a baseline with two variants: each variant's place against the baseline flips every round
    assert in_pair_order(["base", "v1", "v2"], 1) == ["v2", "v1", "base"]
    with pytest.raises(ValueError, match="a pair number is >= 0"):
        in_pair_order(["A", "B"], -1)


def test_the_order_recorded_comes_from_the_start_numbers():
    assert pair_order([1, 4, 5], [2, 3, 6]) == "AB,BA,AB"
    assert pair_order([0], [2]) == "?"  # an attached server has no start number
    assert pair_order([1, 3], [2]) == "AB"  # pairs only as far as both arms go


def _run(rng: random.Random, *, alternate: bool, penalty: float, noise: float, metric: str, simulated: bool,
         plan: Sequential) -> tuple[Decision, int]:
    """One sequential paired run of identical arms (pairs added while undecided, as until_decided adds them) where
    the second start of every pair is worse by ``penalty``: a cache, host or thermal state that favours the first."""
    up = not metric.startswith(("ttft", "itl"))
    ratios: list[float] = []
    while True:
        log = {}
        for place, arm in enumerate(in_pair_order(["current", "candidate"], len(ratios) if alternate else 0)):
            worse = (math.log(1 - penalty) if up else math.log(1 + penalty)) if place == 1 else 0.0
            log[arm] = rng.gauss(0, noise) + worse
        ratios.append(math.exp(log["candidate"] - log["current"]))
        j = paired(ratios, higher_is_better=up, min_effect=default_min_effect(metric, higher_is_better=up),
                   prior_cv=prior_cv(metric, "starts", simulated=simulated), plan=plan, metric=metric)
        if j.decision is not Decision.UNDECIDED or len(ratios) >= plan.max_pairs:
            return j.decision, len(ratios)


@pytest.mark.parametrize(("metric", "noise", "penalty", "simulated", "fixed_at_least"), [
    ("ttft_ms", 0.12, 0.20, False, 0.30),  # the H200's TTFT noise between starts, a 20 % second-start penalty
    ("tok_s", 0.0005, 0.01, True, 0.99),  # the simulator's decode noise, a 1 % penalty
])
def test_a_second_start_penalty_biases_a_fixed_order_and_cancels_alternated(metric, noise, penalty, simulated,
                                                                            fixed_at_least):
    plan = Sequential(first_pairs=1, max_pairs=6)
    n = 150
    fixed = [_run(random.Random(i), alternate=False, penalty=penalty, noise=noise, metric=metric,
                  simulated=simulated, plan=plan)[0] for i in range(n)]
    alternated = [_run(random.Random(i), alternate=True, penalty=penalty, noise=noise, metric=metric,
                       simulated=simulated, plan=plan)[0] for i in range(n)]
    fixed_rate = sum(d is Decision.REGRESSED for d in fixed) / n
    alt_rate = sum(d is Decision.REGRESSED for d in alternated) / n
    # current first in every pair: the penalty always lands on the candidate, and identical arms are "regressed"
    assert fixed_rate >= fixed_at_least, fixed_rate
    # alternated, it lands on each arm in turn and cancels: regressed (or improved) no more often than the rule's
    # own one-sided false-alarm budget on identical arms, 2.5 % (the order's effect widens the spread instead, so
    # most runs end undecided at the budget, which blocks nothing)
    alt_better = sum(d is Decision.IMPROVED for d in alternated) / n
    assert alt_rate <= 0.025 and alt_better <= 0.025, (alt_rate, alt_better)
