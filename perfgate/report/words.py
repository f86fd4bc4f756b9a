"""What the report says about a judged change, in words drawn from its numbers (never a decision of its own).

The judge (:mod:`perfgate.measuring.judge`) decides and writes one line of figures (``why``) and what would decide
an undecided change (``needs``). Three of its phrasings mislead a reader, and the views say instead:

- an undecided change whose interval excludes 1 *moved*: "slower by 0.3-0.6 %; the 0.5 % floor is not decided",
  and about how many start pairs would decide it (:func:`starts_to_decide`), not "the two arms are
  indistinguishable";
- an undecided change whose interval holds 1 did *not* move beyond its noise: it is not listed as moved
  (:func:`moved`);
- advice is given only where a run can follow it: "about 740 starts per side (--perfgate-starts 740)" becomes what
  a run can do instead (:data:`MAX_STARTS_ADVICE`).
"""

from __future__ import annotations

import math
import re

from perfgate.categories import WHY_SAID
from perfgate.measuring.notation import bounds, change_interval_text
from perfgate.report.diff import UNDECIDED, MetricChange

__all__ = ["MAX_STARTS_ADVICE", "moved", "interval_words", "needs_words", "starts_to_decide", "judged_words"]

#: the most server starts per side the report advises (a CI job of more starts than this is not a run anyone makes;
#: stack-pair's default budget is 6 pairs)
MAX_STARTS_ADVICE = 20

_STARTS = re.compile(r"about (\d+) starts per side \(--perfgate-starts \d+\)")
_SAME = "indistinguishable at this min effect"


def moved(tp: MetricChange) -> bool:
    """The change is beyond its noise: the judge's interval of new/old excludes 1 (no interval: as decided)."""
    j = tp.judgement
    if j is None or j.ci is None:
        return tp.verdict != "unchanged"
    lo, hi = j.ci
    return lo > 1 or hi < 1


def _worse(tp: MetricChange, ratio: float) -> float:
    """How much worse (slower) a new/old ratio is, as a fraction (negative: better)."""
    return 1 - ratio if tp.higher_is_better else ratio - 1


def interval_words(tp: MetricChange) -> str:
    """The interval in words: "slower by 0.3-0.6 %" / "faster by ..." / "between 0.2 % faster and 0.4 % slower"
    (it holds no change); for an undecided change, and the floor ("the 0.5 % floor is not decided"). "" without an
    interval."""
    j = tp.judgement
    if j is None or j.ci is None:
        return ""
    a, b = sorted((_worse(tp, j.ci[0]), _worse(tp, j.ci[1])))
    if not all(bounds(j.ci)):  # an end at the cap: "between 100.0 % faster and 4.9e+10 % slower" says nothing
        side = "either side" if not any(bounds(j.ci)) else "one side"
        text = f"{tp.metric} changed by {change_interval_text(j.ci)}: not bounded on {side} yet"
    elif a > 0:
        text = f"{tp.metric} slower by {a * 100:.1f}-{b * 100:.1f} %"
    elif b < 0:
        text = f"{tp.metric} faster by {-b * 100:.1f}-{-a * 100:.1f} %"
    else:
        text = f"{tp.metric} between {-a * 100:.1f} % faster and {b * 100:.1f} % slower: not moved beyond its noise"
    if tp.verdict == UNDECIDED:
        text += f"; the {j.min_effect * 100:g} % floor is not decided"
    return text


def needs_words(tp: MetricChange) -> str:
    """What would decide an undecided change, only where a run can do it."""
    j = tp.judgement
    if j is None or not j.needs:
        return ""
    needs = j.needs
    if _SAME in needs:  # the judge found no count within what it would run: how many, from the interval
        unit, where = ("start pairs", "in all") if "paired" in j.detail else ("starts", "per side")
        what = f"{unit} {where}"
        need = starts_to_decide(tp)
        if need is None:
            return f"it sits on the {j.min_effect * 100:g} % floor: no number of {unit} decides it"
        far = f", more than a run takes (advised up to {MAX_STARTS_ADVICE})" if need > MAX_STARTS_ADVICE else ""
        return f"about {need} {what} would decide it at this noise{far}"
    m = _STARTS.search(needs)
    if m and int(m.group(1)) > MAX_STARTS_ADVICE:
        return (f"about {m.group(1)} starts per side would decide it, more than a run takes (advised up to "
                f"{MAX_STARTS_ADVICE}); a paired run on one machine (--perfgate-candidate, interleaved starts) "
                f"resolves smaller changes")
    return needs


def starts_to_decide(tp: MetricChange) -> int | None:
    """About how many starts (pairs, for a paired record) would take the interval off the floor it straddles: its
    half-width shrinks as 1/sqrt(n), so ``n x (half-width / distance to the floor)^2``; None: it sits on the floor
    (or no interval)."""
    j = tp.judgement
    if j is None or j.ci is None or j.n < 1:
        return None
    lo, hi = j.ci
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    floors = [f for f in (1 - j.min_effect, 1 + j.min_effect) if lo <= f <= hi]
    if not floors or half <= 0:
        return None
    dist = min(abs(mid - f) for f in floors)
    if dist < 1e-6:
        return None
    return max(j.n + 1, math.ceil(j.n * (half / dist) ** 2))


def judged_words(tp: MetricChange) -> str:
    """One line for a judged change: the judge's figures, the interval in words (undecided), what would decide it."""
    parts = [tp.why] if tp.why else []
    if tp.verdict == UNDECIDED and tp.judgement is not None and tp.judgement.why is not None:
        parts.insert(0, f"undecided ({tp.judgement.why}): {WHY_SAID[tp.judgement.why]}")
    if tp.verdict == UNDECIDED:
        words = interval_words(tp)
        if words:
            parts.append(words)
    needs = needs_words(tp)
    if needs:
        parts.append(needs)
    return "; ".join(parts)
