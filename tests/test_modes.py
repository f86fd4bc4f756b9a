"""perfgate.measuring.modes: a latency sample's modes (one, or two levels named with their locations and weights),
and the per-start TTFT estimator that holds when a host flips between two levels (issue 40 item 3)."""

from __future__ import annotations

import math
import statistics
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from perfgate.measuring.modes import MIN_SAMPLES, Mode, Modes, find_modes, start_estimate, thin


def _quantiles(n: int) -> list[float]:
    """n standard normal quantiles at (i + 0.5) / n: a sample with no accident in it."""
    return [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]


@given(n=st.integers(min_value=MIN_SAMPLES, max_value=400), level=st.floats(min_value=1.0, max_value=500.0),
       cv=st.floats(min_value=0.005, max_value=0.3), lognormal=st.booleans())
def test_a_smooth_unimodal_sample_is_one_mode_at_its_median(n: int, level: float, cv: float, lognormal: bool) -> None:
    z = _quantiles(n)
    xs = [level * math.exp(cv * q) for q in z] if lognormal else [level * (1 + cv * q) for q in z if 1 + cv * q > 0]
    m = find_modes(xs)
    assert m.judged and not m.multimodal and len(m.modes) == 1
    assert m.lower.location == pytest.approx(statistics.median(xs)) and m.lower.weight == 1.0
    assert start_estimate(xs) == pytest.approx(statistics.median(xs))


# Where the rule promises two levels. It keeps two neighbours apart only where the density dips to half the lower peak
# between them, and Silverman's bandwidth comes from the whole sample's sd, the step between the levels included: at
# small n it blurs two levels into one. Measured on these quantile samples (every share of 20-80 %): two levels are
# separated from 8.3 spreads apart (log ratio / spread) at n 20, from 6.6 at n 31, and at every ratio >= 1.3 with
# spread <= 4 % from n 32. Below SMALL_N values (the default 36 probes) the draws are at least SMALL_N_SPREADS
# spreads apart (the documented 28 / 45 ms at 3 % are 15.8); from SMALL_N the whole range.
SMALL_N, SMALL_N_SPREADS = 36, 9.0


# derandomized: the same draws every run (a new draw at the edge of the promise would fail the PR gate with no fault)
@settings(derandomize=True)
# 8.2 spreads apart at n 20, 14 + 6 values: the density at the cut is 0.501 of the lower peak (MAX_DIP 0.5), so one
# mode by the rule; it was drawn once and failed the gate when the strategy reached below the promise
@example(n=20, weight=0.6875, low=28.0, ratio=1.375, spread=0.039, found=1)
@given(n=st.integers(min_value=MIN_SAMPLES, max_value=300), weight=st.floats(min_value=0.2, max_value=0.8),
       low=st.floats(min_value=5.0, max_value=200.0), ratio=st.floats(min_value=1.3, max_value=2.5),
       spread=st.floats(min_value=0.02, max_value=0.04), found=st.just(2))
def test_two_separated_levels_are_found_with_their_locations_and_weights(n: int, weight: float, low: float,
                                                                          ratio: float, spread: float,
                                                                          found: int) -> None:
    """Two levels where the rule promises them (above) are two modes at their levels with their values; ``found``
    is 1 only in an explicit example below the promise, which pins what the rule says there."""
    assume(found == 1 or n >= SMALL_N or math.log(ratio) >= SMALL_N_SPREADS * spread)
    k = round(weight * n)
    xs = [low * math.exp(spread * q) for q in _quantiles(k)] + \
         [low * ratio * math.exp(spread * q) for q in _quantiles(n - k)]
    m = find_modes(xs)
    assert m.judged and len(m.modes) == found and m.multimodal == (found == 2)
    if found == 1:  # one mode, the median: the start's TTFT is the median too
        assert m.lower.location == pytest.approx(statistics.median(xs)) and m.lower.weight == 1.0
        assert start_estimate(xs) == pytest.approx(statistics.median(xs))
        return
    (a, b) = m.modes
    assert a.location == pytest.approx(low, rel=0.01) and b.location == pytest.approx(low * ratio, rel=0.01)
    assert (a.n, b.n) == (k, n - k) and a.weight == pytest.approx(k / n)
    assert start_estimate(xs) == a.location  # the lower mode, whatever its share


# derandomized: the same five seeds every run (a rate of 1.6 % over 80 samples passes the 5 % bar but for about 1 %
# of seeds; a random seed would fail CI that often with no fault)
@settings(max_examples=5, derandomize=True)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), n=st.sampled_from([20, 36, 50, 100, 200]))
def test_random_unimodal_samples_are_rarely_called_multimodal(seed: int, n: int) -> None:
    """The false rate on random normal and lognormal samples, 40 of each kind per example: at most 5 % (measured
    by benchmarks/ttft_modes.py --false-rate: 1.0-1.6 % at n 20, <= 0.4 % at 36, 0 from 100)."""
    rng = np.random.default_rng(seed)
    called = sum(find_modes(rng.normal(30, 30 * cv, n)).multimodal for cv in (0.03, 0.1) for _ in range(20))
    called += sum(find_modes(rng.lognormal(math.log(30), 0.3, n)).multimodal for _ in range(40))
    assert called / 80 <= 0.05


@settings(max_examples=5, derandomize=True)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), n=st.sampled_from([20, 36, 100]),
       weight=st.sampled_from([0.2, 0.5, 0.8]))
def test_random_two_level_samples_are_found(seed: int, n: int, weight: float) -> None:
    """28 / 45 ms, 3 % each (a real H200's two TTFT levels): found with both locations within 5 % in >= 90 % of
    40 samples (measured: 99-100 %)."""
    rng = np.random.default_rng(seed)
    k = round(weight * n)
    found = 0
    for _ in range(40):
        xs = np.concatenate([28 * np.exp(rng.normal(0, 0.03, k)), 45 * np.exp(rng.normal(0, 0.03, n - k))])
        m = find_modes(xs)
        found += (m.multimodal and len(m.modes) == 2 and abs(m.modes[0].location / 28 - 1) < 0.05
                  and abs(m.modes[1].location / 45 - 1) < 0.05)
    assert found / 40 >= 0.9


def test_the_rate_on_a_fixed_seed() -> None:
    """The false rate on one fixed seed, 300 lognormal samples a cell, at most 2 % (measured 1.0 % at n 20)."""
    rng = np.random.default_rng(40)
    for n in (20, 36):
        called = sum(find_modes(rng.lognormal(math.log(30), 0.3, n)).multimodal for _ in range(300))
        assert called / 300 <= 0.02


def test_too_few_values_are_not_judged() -> None:
    m = find_modes([28.0] * 10 + [45.0] * 9)
    assert not m.judged and not m.multimodal and m.modes == (Mode(location=28.0, weight=1.0, n=19),)
    assert find_modes([]) == Modes(modes=(), n=0, judged=False)
    assert start_estimate([]) is None and start_estimate([0.0, -1.0, math.nan]) is None
    assert find_modes([30.0] * 40).modes[0].location == 30.0  # no spread at all: one mode


def test_a_small_or_a_tight_step_is_not_a_mode() -> None:
    """Two levels 2 % apart are below MIN_SEPARATION; 10 % apart with 8 % spread are not separated (the sd rule)."""
    z = _quantiles(30)
    close = [28 * math.exp(0.003 * q) for q in z] + [28.56 * math.exp(0.003 * q) for q in z]
    assert not find_modes(close).multimodal
    blurred = [28 * math.exp(0.08 * q) for q in z] + [30.8 * math.exp(0.08 * q) for q in z]
    assert not find_modes(blurred).multimodal


def test_a_minor_level_under_ten_percent_is_not_a_mode() -> None:
    xs = [28 * math.exp(0.03 * q) for q in _quantiles(46)] + [45.0, 45.5, 46.0, 44.5]  # 4 of 50: 8 %
    m = find_modes(xs)
    assert not m.multimodal and start_estimate(xs) == pytest.approx(statistics.median(xs))


def test_the_text_names_each_mode() -> None:
    m = Modes(modes=(Mode(location=28.21, weight=0.55, n=11), Mode(location=45.66, weight=0.45, n=9)), n=20)
    assert m.text() == "28.21 ms 55% | 45.66 ms 45%" and m.text("") == "28.21 55% | 45.66 45%"


@given(st.lists(st.floats(min_value=0, max_value=1), max_size=50), st.integers(min_value=1, max_value=20))
def test_thin_keeps_at_most_most_in_order(xs: list[float], most: int) -> None:
    out = thin(xs, most)
    assert len(out) == min(len(xs), most)
    it = iter(xs)
    assert all(any(x == y for y in it) for x in out)  # a subsequence: the order kept
