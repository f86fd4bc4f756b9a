"""The one decision -> outcome mapping and the one noise gate (perfgate.measuring.outcomes): pure."""

import pytest

from perfgate.categories import Category, Outcome
from perfgate.measuring.judge import Decision
from perfgate.measuring.metrics import stat
from perfgate.measuring.outcomes import Claim, noise_gate, outcome_of

P, F, N = Outcome.PASS, Outcome.FAIL, Outcome.INCONCLUSIVE  # N: no verdict


@pytest.mark.parametrize(("claim", "regressed", "improved", "same", "undecided"), [
    (Claim.FASTER, F, P, N, N),  # a variant, speculation: the same is no verdict ("within noise" for a variant)
    (Claim.NOT_SLOWER, F, P, P, N),  # a stack pair
    (Claim.AGREES, F, F, P, N),  # SGLang's benchmark against perfgate's figure
])
def test_each_claim_maps_each_decision(claim, regressed, improved, same, undecided):
    got = [outcome_of(d, claim) for d in (Decision.REGRESSED, Decision.IMPROVED, Decision.SAME, Decision.UNDECIDED)]
    assert got == [regressed, improved, same, undecided]
    assert outcome_of(Decision.NOT_COMPARABLE, claim) is N


def test_the_noise_gate():
    few, quiet, noisy = stat([10.0, 10.1]), stat([10.0, 10.1, 9.9]), stat([10.0, 14.0, 7.0])
    assert noise_gate(few, 0.05) is Category.NOISE_UNKNOWN  # fewer than MIN_TRIALS: no interval
    assert noise_gate(quiet, 0.05) is None
    assert noise_gate(noisy, 0.05) is Category.NOISY
    assert noise_gate(noisy, None) is None and noise_gate(None, 0.05) is None  # no bar; a value with its own CI
