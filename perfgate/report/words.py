"""What the report says about a judged change, in words drawn from its numbers (never a decision of its own).

The judge (:mod:`perfgate.measuring.judge`) decides and writes one line of figures (``why``) and what would decide
an undecided change (``needs``). Three of its phrasings mislead a reader, and the views say instead:

- an undecided change whose interval excludes 1 *moved*: "slower by 0.3-0.6 %; the 0.5 % floor is not decided",
  not "the two arms are indistinguishable";
- an undecided change whose interval holds 1 did *not* move beyond its noise: it is not listed as moved
  (:func:`moved`);
- advice is given only where a run can follow it: "about 740 starts per side (--perfgate-starts 740)" becomes what
  a run can do instead (:data:`MAX_STARTS_ADVICE`).
"""

from __future__ import annotations

import re

from perfgate.report.diff import UNDECIDED, MetricChange

__all__ = ["MAX_STARTS_ADVICE", "moved", "interval_words", "needs_words", "judged_words"]

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
    if a > 0:
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
    if _SAME in needs:  # the judge found no count that decides it within what it would run
        what = "start pairs" if "paired" in j.detail else "starts"
        return (f"no number of {what} perfgate would run decides it at this noise "
                f"(sd {j.noise_cv * 100:.2g} % from {j.noise_source})" if j.noise_cv is not None else
                f"no number of {what} perfgate would run decides it at this noise")
    m = _STARTS.search(needs)
    if m and int(m.group(1)) > MAX_STARTS_ADVICE:
        return (f"about {m.group(1)} starts per side would decide it, more than a run takes (advised up to "
                f"{MAX_STARTS_ADVICE}); a paired run on one machine (--perfgate-candidate, interleaved starts) "
                f"resolves smaller changes")
    return needs


def judged_words(tp: MetricChange) -> str:
    """One line for a judged change: the judge's figures, the interval in words (undecided), what would decide it."""
    parts = [tp.why] if tp.why else []
    if tp.verdict == UNDECIDED:
        words = interval_words(tp)
        if words:
            parts.append(words)
    needs = needs_words(tp)
    if needs:
        parts.append(needs)
    return "; ".join(parts)
