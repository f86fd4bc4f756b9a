"""The two rules every record's verdict goes through before its message is written (pure; no I/O).

- :func:`outcome_of`: the one decision -> outcome mapping. A comparison's :class:`~perfgate.measuring.judge.Decision`
  (``regressed``, ``improved``, ``same``, ``undecided``) means pass, fail or no verdict according to what the record
  asks of it (:class:`Claim`): a variant must be faster, a candidate stack no slower, SGLang's own benchmark the
  same as perfgate's figure.
- :func:`noise_gate`: the one noise gate. A figure over too few trials to know its noise, or with a CV above the
  profile's ``max_cv``, is not judged (inconclusive with the category this returns), and is not written as a floor.

Callers word their own messages; the rule is here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome, Word
from perfgate.measuring.judge import Decision

if TYPE_CHECKING:
    from perfgate.measuring.metrics import Stat

__all__ = ["Claim", "outcome_of", "noise_gate"]


class Claim(Word):
    """What a record asks a comparison's decision to show."""

    #: the candidate is faster (a variant or speculation against its baseline): improved passes, regressed fails,
    #: the same or undecided is no verdict (for a variant "within noise": verdict.within_noise_or_faster)
    FASTER = "faster"
    #: the candidate is no slower (a stack pair): the same or improved passes, regressed fails
    NOT_SLOWER = "not-slower"
    #: two tools measure the same figure (the cross-check with SGLang's benchmark): the same passes, a difference
    #: either way fails
    AGREES = "agrees"


_OUTCOMES: dict[Claim, dict[Decision, Outcome]] = {
    Claim.FASTER: {Decision.IMPROVED: Outcome.PASS, Decision.REGRESSED: Outcome.FAIL},
    Claim.NOT_SLOWER: {Decision.IMPROVED: Outcome.PASS, Decision.SAME: Outcome.PASS, Decision.REGRESSED: Outcome.FAIL},
    Claim.AGREES: {Decision.SAME: Outcome.PASS, Decision.IMPROVED: Outcome.FAIL, Decision.REGRESSED: Outcome.FAIL},
}


def outcome_of(decision: Decision, claim: Claim) -> Outcome:
    """PASS, FAIL or INCONCLUSIVE for ``decision`` under ``claim`` (the table above); ``undecided`` and
    ``not-comparable`` are INCONCLUSIVE under every claim."""
    return _OUTCOMES[claim].get(decision, Outcome.INCONCLUSIVE)


def noise_gate(noise: Stat | None, max_cv: float | None) -> Category | None:
    """Why the figure ``noise`` summarizes may not be judged, or None when it may: ``noise-unknown`` below
    :data:`~perfgate.measuring.metrics.MIN_TRIALS` trials, ``noisy`` with a CV above ``max_cv``. ``noise`` None (the
    value carries its own interval) or ``max_cv`` None (no bar) gate nothing of their own."""
    if noise is None:
        return None
    if not noise.noise_known:
        return Category.NOISE_UNKNOWN
    if noise.cv is not None and max_cv is not None and noise.cv > max_cv:
        return Category.NOISY
    return None
