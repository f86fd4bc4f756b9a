"""The order of the arms within start pairs (pure; no I/O): alternated, A B then B A (ABBA), and recorded.

A paired comparison starts both configs once per pair. Anything that favours the first or the second start of a
pair (a cache warmed by the start before, the host's state, the GPU's temperature) lands on whichever arm has
that place; with the order fixed (current first in every pair) it lands on the same arm in every pair, and the
pairs' mean ratio carries it as if it were the change being judged: identical arms are called regressed. With
the order alternated (pair 1 current first, pair 2 candidate first, ...) such an effect enters half the pairs
with one sign and half with the other, and cancels in the mean over each two pairs (vLLM's A/B runs A1 B1 B2 A2
for this reason). The record says the order of each pair (``pair_order``, :func:`pair_order`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["first_is_reversed", "in_pair_order", "pair_order", "FIRST", "SECOND"]

T = TypeVar("T")

#: a pair whose first arm (the current / baseline) started first
FIRST = "AB"
#: a pair whose second arm (the candidate / variant) started first
SECOND = "BA"


def first_is_reversed(pair: int) -> bool:
    """Whether pair number ``pair`` (0-based) starts its arms in reverse: 0, 2, 4 ... as given, 1, 3 ... reversed."""
    if pair < 0:
        raise ValueError(f"a pair number is >= 0, got {pair}")
    return pair % 2 == 1


def in_pair_order(arms: Sequence[T], pair: int) -> list[T]:
    """The arms (configs of one comparison, the current's or baseline's first) in the order pair ``pair`` (0-based)
    starts them: as given for even pairs, reversed for odd ones (with three or more arms, every arm's place is
    mirrored: each pair of them alternates)."""
    return list(reversed(arms)) if first_is_reversed(pair) else list(arms)


def pair_order(first_starts: Sequence[int], second_starts: Sequence[int]) -> str:
    """The order of each pair from the session's start numbers of each arm's starts (in pair order): ``AB`` where
    the first arm (current, baseline) started before the second (candidate, variant), ``BA`` where after; ``?``
    where a start number is unknown (0: an attached server). Comma-separated, one per pair."""
    out = []
    for a, b in zip(first_starts, second_starts):
        out.append("?" if a <= 0 or b <= 0 or a == b else FIRST if a < b else SECOND)
    return ",".join(out)
