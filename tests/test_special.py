"""perfgate.measuring.special: the judge's quantiles, from scipy.stats, checked against printed tables (not against
scipy itself) and at the edges the sequential rule reaches (a confidence within double precision of 1)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.measuring.judge import paired
from perfgate.measuring.special import beta_quantile, chi2_quantile, t_quantile, t_two_sided

# Student's t, two-sided 95 % and 99 % (any statistics text's table), and the normal's
T_TABLE = [(0.95, 1, 12.706), (0.95, 4, 2.776), (0.95, 10, 2.228), (0.95, 30, 2.042),
           (0.99, 2, 9.925), (0.99, 5, 4.032), (0.95, math.inf, 1.960), (0.99, math.inf, 2.576)]
# chi-square, upper 1 % points (the judge's test of a prior against the pairs' own spread)
CHI2_TABLE = [(1, 6.635), (2, 9.210), (4, 13.277), (5, 15.086), (10, 23.209), (20, 37.566)]


@pytest.mark.parametrize("confidence, df, printed", T_TABLE)
def test_t_quantiles_match_the_printed_table(confidence, df, printed):
    assert t_two_sided(confidence, df) == pytest.approx(printed, abs=5e-4)


@pytest.mark.parametrize("df, printed", CHI2_TABLE)
def test_chi_square_quantiles_match_the_printed_table(df, printed):
    assert chi2_quantile(0.99, df) == pytest.approx(printed, abs=5e-4)


def test_a_clopper_pearson_bound_is_a_beta_quantile():
    # 0 of n: the upper bound solves (1 - p)^n = alpha, the Beta(1, n) quantile at 1 - alpha
    assert beta_quantile(0.95, 1, 20) == pytest.approx(1 - 0.05 ** (1 / 20), rel=1e-12)


@given(st.floats(0.5, 0.999999), st.floats(0.5, 0.999999), st.floats(1.0, 1e4))
def test_a_wider_confidence_never_narrows_the_interval(c1, c2, df):
    lo, hi = sorted((c1, c2))
    assert t_two_sided(lo, df) <= t_two_sided(hi, df)


@given(st.floats(0.01, 0.99), st.integers(1, 50))
def test_t_is_symmetric_and_tends_to_the_normal(p, df):
    assert t_quantile(p, df) == pytest.approx(-t_quantile(1 - p, df), abs=1e-9)
    assert abs(t_quantile(p, df)) >= abs(t_quantile(p, math.inf)) - 1e-12


@pytest.mark.parametrize("confidence", [1 - 1e-20, 1.0])
def test_a_confidence_within_double_precision_of_one_is_an_interval_at_the_cap_not_an_error(confidence):
    q = t_two_sided(confidence, 1.0)
    assert math.isfinite(q) and q > 1e6
    j = paired([0.99], min_effect=0.005, confidence=confidence, prior_cv=0.5)
    assert j.ci is not None and j.ci[0] > 0 and math.isfinite(j.ci[1])


@pytest.mark.parametrize("p, df", [(0.0, 3), (1.0, 3), (0.5, 0)])
def test_a_question_outside_the_distribution_is_refused(p, df):
    with pytest.raises(ValueError):
        t_quantile(p, df)
