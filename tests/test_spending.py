"""perfgate.measuring.spending: the O'Brien-Fleming-shaped Lan-DeMets boundary of the sequential paired rule, and
perfgate.measuring.judge.Sequential's looks on it. Pure."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from perfgate.measuring.judge import Sequential
from perfgate.measuring.spending import (
    boundaries,
    crossing_probabilities,
    hsd_spent,
    nominal_levels,
    obf_spent,
    spent,
    spent_by_look,
)

alphas = st.sampled_from([0.005, 0.01, 0.025, 0.05])
looks = st.integers(min_value=1, max_value=8)


@settings(max_examples=40)
@given(t1=st.floats(0.0, 1.0), t2=st.floats(0.0, 1.0), alpha=alphas)
def test_the_spending_function_rises_from_nothing_to_the_budget(t1, t2, alpha):
    lo, hi = sorted((t1, t2))
    assert 0.0 <= obf_spent(lo, alpha) <= obf_spent(hi, alpha) <= alpha
    assert obf_spent(0.0, alpha) == 0.0 and obf_spent(1.0, alpha) == alpha


@settings(max_examples=10, deadline=None)
@given(k=looks, alpha=alphas, shape=st.sampled_from(["obf", "hsd:-4", "hsd:-3", "hsd:-2"]), one_order=st.integers(0, 1))
@example(k=8, alpha=0.005, shape="hsd:-2", one_order=1)  # the catch-up look a random draw found
def test_the_boundary_is_stricter_first_and_spends_exactly_alpha_by_the_last_look(k, alpha, shape, one_order):
    ts = [i / k for i in range(1, k + 1)]
    b = boundaries(ts, alpha, shape, one_order_looks=one_order)
    levels = nominal_levels(ts, alpha, shape, one_order_looks=one_order)
    # monotone: each look looser than the one before. A first look of one arm order spends at most O'Brien-Fleming's
    # share, and the look after it spends what that left: that catch-up look may be looser than the next (k=8,
    # alpha 0.005, hsd:-2: 7.85, 3.286, 3.292, ...), so with one-order looks the order holds from the look after it
    assert b[0] == max(b) and levels[0] == min(levels)  # the first look is the strictest
    tail, tail_levels = (b[2:], levels[2:]) if one_order and k > 2 else (b, levels)
    assert all(x > y for x, y in zip(tail, tail[1:]))
    assert all(x < y for x, y in zip(tail_levels, tail_levels[1:]))
    assert levels[-1] <= alpha  # no look is looser than one test at the whole budget
    # each look spends the spending function's increment, and all of them together exactly alpha
    crossed = crossing_probabilities(ts, b)
    assert math.fsum(crossed) == pytest.approx(alpha, rel=1e-6)
    cum = [math.fsum(crossed[: i + 1]) for i in range(k)]
    assert cum == pytest.approx(list(spent_by_look(ts, alpha, shape, one_order_looks=one_order)), rel=1e-5, abs=1e-12)
    expected = [spent(shape, t, alpha) for t in ts[:-1]] + [alpha]
    if one_order and k > 1:  # the first look, one order of the arms, spends no more than O'Brien-Fleming's
        expected[0] = min(expected[0], obf_spent(ts[0], alpha))
    assert cum == pytest.approx(expected, rel=1e-5, abs=1e-12)


@settings(max_examples=40)
@given(t1=st.floats(0.0, 1.0), t2=st.floats(0.0, 1.0), alpha=alphas, gamma=st.floats(-8.0, 2.0))
def test_the_hwang_shih_decani_family_rises_from_nothing_to_the_budget(t1, t2, alpha, gamma):
    lo, hi = sorted((t1, t2))
    assert 0.0 <= hsd_spent(lo, alpha, gamma) <= hsd_spent(hi, alpha, gamma) * (1 + 1e-12) <= alpha * (1 + 1e-12)
    assert hsd_spent(0.0, alpha, gamma) == 0.0 and hsd_spent(1.0, alpha, gamma) == alpha


def test_a_shape_is_named_or_refused_and_decode_spends_earlier_than_latency():
    assert hsd_spent(0.5, 0.02, 0.0) == pytest.approx(0.01)  # gamma 0: linear in the information
    # gamma -3 spends more at the first of six looks than O'Brien-Fleming's shape, about as much by the last
    assert spent("hsd:-3", 1 / 6, 0.025) > 1000 * spent("obf", 1 / 6, 0.025)
    with pytest.raises(ValueError, match="'obf' or 'hsd:GAMMA'"):
        spent("pocock", 0.5, 0.025)
    with pytest.raises(ValueError, match="Sequential.boundary is 'metric', 'obf', 'hsd:GAMMA' or 'even'"):
        Sequential(boundary="pocock")
    plan = Sequential(first_pairs=1, max_pairs=6)  # each metric its own shape (perfgate.profiles.noise.SPENDING)
    assert plan.shape("tok_s") == "hsd:-3" and plan.shape("ttft_ms") == plan.shape(None) == "obf"
    assert plan.shape("ttft_part.prefill_ms") == plan.shape("goodput_rps") == "obf"
    # decode's later looks are looser than O'Brien-Fleming's; its first (one order of the arms only) is not
    assert plan.level(0.95, 2, "tok_s") < plan.level(0.95, 2, "ttft_ms")
    assert plan.level(0.95, 1, "tok_s") == plan.level(0.95, 1, "ttft_ms")
    assert Sequential(first_pairs=2, max_pairs=6).level(0.95, 2, "tok_s") < plan.level(0.95, 2, "ttft_ms")
    assert Sequential(max_pairs=6, boundary="obf").shape("tok_s") == "obf"  # one shape for all where named


def test_the_recursion_agrees_with_the_multivariate_normal():
    """An independent check: for identical arms the looks' z statistics are jointly normal with corr
    sqrt(t_i / t_j); the chance that none crosses is 1 - alpha (scipy's Genz integration, to its tolerance)."""
    import numpy as np
    from scipy.stats import multivariate_normal

    ts = [1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6, 1.0]
    b = boundaries(ts, 0.025)
    cov = np.array([[math.sqrt(min(a, c) / max(a, c)) for c in ts] for a in ts])
    none = multivariate_normal(mean=np.zeros(len(ts)), cov=cov).cdf(np.array(b))
    assert 1 - none == pytest.approx(0.025, abs=2e-4)
    # the textbook two-look O'Brien-Fleming-type boundary (Lan-DeMets, t = 0.5, 1; one-sided 2.5 %): 2.963, 1.969
    assert boundaries([0.5, 1.0], 0.025) == pytest.approx((2.963, 1.969), abs=1e-3)


def test_one_look_is_the_plain_level_and_a_bad_plan_is_refused():
    assert boundaries([1.0], 0.025)[0] == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError, match="must rise strictly"):
        boundaries([0.5, 0.5], 0.025)
    with pytest.raises(ValueError, match="0 < alpha < 1"):
        nominal_levels([1.0], 0.0)


def test_the_sequential_plan_spends_its_budget_where_the_even_split_did_not():
    plan = Sequential(first_pairs=1, max_pairs=6)
    levels = [plan.level(0.95, n) for n in range(1, 7)]
    assert all(x > y for x, y in zip(levels, levels[1:]))  # the first looks the strictest
    even = 1 - 0.05 / plan.looks  # what the even (Bonferroni) split gave every look: 99.17 %
    assert levels[0] > even > levels[-1] > 0.95  # stricter than it at first, looser at the last, never below 95 %
    assert plan.level(0.95, 9) == plan.level(0.95) == levels[-1]  # past the plan: the last look's
    assert plan.level(0.95, 0) == levels[0]
    one = Sequential(first_pairs=1, max_pairs=1)
    assert one.level(0.95) == one.level(0.95, 4) == 0.95  # one look: the plain confidence
    two_first = Sequential(first_pairs=2, max_pairs=6)  # looks after 2..6 pairs: information 2/6 .. 1
    assert two_first.level(0.95, 2) == pytest.approx(1 - 2 * nominal_levels([2 / 6, 3 / 6, 4 / 6, 5 / 6, 1], 0.025)[0])


def test_an_early_look_writes_an_interval_that_bounds_nothing_as_such_and_its_confidence_below_100():
    # the bisect's real first step (2026-12-05): TTFT at one pair of a 4-pair plan read "[0.0000, 485165195.4098]
    # (100% CI ...)": numbers that are the cap, not a bound, and a confidence that is not 100 %
    from perfgate.measuring.judge import Decision, paired
    from perfgate.measuring.notation import confidence_text, ratio_text

    j = paired([0.9386], higher_is_better=False, min_effect=0.1, prior_cv=0.25, prior_df=2,
               plan=Sequential(first_pairs=1, max_pairs=4), metric="ttft_ms")
    assert j.ci is not None and j.ci[0] < 1e-8 and j.ci[1] > 1e8  # at the cap
    assert ratio_text(j.ratio, j.ci) == "×0.9386 (0, ∞)"
    assert j.detail.startswith("×0.9386 (0, ∞) (99.998") and "100%" not in j.detail
    # a long plan's first look spends less than a double holds next to 1 (0.5 + confidence / 2 rounds to 1.0): an
    # interval at the cap, not a ValueError from the quantile (it was one at --perfgate-max-starts 24)
    for pairs in (24, 48):
        k = paired([0.9386], higher_is_better=False, min_effect=0.1, prior_cv=0.25, prior_df=2,
                   plan=Sequential(first_pairs=1, max_pairs=pairs), metric="ttft_ms")
        assert k.decision is Decision.UNDECIDED and ratio_text(k.ratio, k.ci) == "×0.9386 (0, ∞)"
        assert "> 99.99999999% CI" in k.detail
    assert ratio_text(0.9581, (0.92453, 0.99282)) == "×0.9581 [0.9245, 0.9928]"
    assert ratio_text(1.2, (0.0, 1.5)) == "×1.2000 (0, 1.5000]" and ratio_text(None, (1, 2)) == ""
    assert confidence_text(0.95) == "95%" and confidence_text(0.99) == "99%" and confidence_text(1.0) == "> 99.99999999%"
    assert confidence_text(0.9999999) == "99.999990%" and confidence_text(0.995) == "99.50%"


@given(c=st.floats(0.5, 1.0))
def test_a_confidence_is_never_written_as_100(c):
    from perfgate.measuring.notation import confidence_text

    text = confidence_text(c)
    assert text.endswith("%") and float(text.removeprefix("> ")[:-1]) < 100
