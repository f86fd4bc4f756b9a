"""Goodput's floor: the interval a goodput record is judged on (one start's :class:`~perfgate.measuring.goodput.Search`,
or the starts' :class:`AcrossStarts`) and its verdict against ``[floors.<mode>] goodput_rps`` (pure; no I/O).

The search finds one start's interval (:mod:`perfgate.measuring.goodput`); this module judges it, at the level
the floor must repeat: with ``--perfgate-starts N`` the starts' means of both ends (docs/load.md, "Its floor").
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Protocol

from perfgate.measuring.goodput import LoadLevel, Search
from perfgate.measuring.verdict import Verdict

__all__ = ["AcrossStarts", "Interval", "interval_text", "floor_verdict"]


# -- over server starts ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AcrossStarts:
    """Goodput of one config over its server starts (``--perfgate-starts N``): each start's own search, and the
    starts level's interval, the mean of the starts' low ends to the mean of their high ends. A start is the unit
    a goodput floor must repeat: within a start a level every trial meets varies by under 0.01 %, between starts
    the knee moved a whole bisection step on an H200 (docs/load.md), so the floor is judged on the starts' means
    (:func:`floor_verdict`), and their spread is the record's goodput noise (``start_cv``)."""

    searches: tuple[Search, ...]

    @property
    def lows(self) -> tuple[float, ...]:
        return tuple(s.low for s in self.searches)

    @property
    def highs(self) -> tuple[float | None, ...]:
        return tuple(s.high for s in self.searches)

    @property
    def low(self) -> float:
        """The mean of the starts' low ends (good requests per second shown within the SLOs)."""
        return statistics.fmean(self.lows) if self.searches else 0.0

    @property
    def high(self) -> float | None:
        """The mean of the starts' high ends; None when a start found no level failing (its high end is open)."""
        hs = self.highs
        if not hs or any(h is None for h in hs):
            return None
        return statistics.fmean(h for h in hs if h is not None)

    @property
    def unresolved(self) -> tuple[LoadLevel, ...]:
        """Every start's unresolved levels between its ends."""
        return tuple(lv for s in self.searches for lv in s.unresolved)

    @property
    def inconclusive(self) -> LoadLevel | None:
        return next((s.inconclusive for s in self.searches if s.inconclusive is not None), None)

    @property
    def cv(self) -> float | None:
        """The relative sd of one start's low end around their mean (None below 2 starts or at 0)."""
        lows = self.lows
        if len(lows) < 2 or statistics.fmean(lows) <= 0:
            return None
        return statistics.stdev(lows) / statistics.fmean(lows)


class Interval(Protocol):
    """Goodput as an interval: one start's :class:`Search` or the starts' :class:`AcrossStarts`."""

    @property
    def low(self) -> float: ...

    @property
    def high(self) -> float | None: ...

    @property
    def unresolved(self) -> tuple[LoadLevel, ...]: ...


# -- the floor -------------------------------------------------------------------------------------------------


def interval_text(s: Interval) -> str:
    """The interval as the record's message and the terminal show it: ``[low, high) req/s``, the unresolved
    levels after it."""
    hi = f"{s.high:.4g}" if s.high is not None else "-"
    out = f"[{s.low:.4g}, {hi}) req/s"
    if s.unresolved:
        rates = sorted({lv.rate for lv in s.unresolved})
        out += f", unresolved at {', '.join(f'{r:g}' for r in rates)} req/s"
    return out


def floor_verdict(s: Interval, floor: float | None, tolerance: float, *, where: str, update_hint: str,
                  what: str) -> Verdict:
    """The goodput interval against ``[floors.<mode>] goodput_rps`` (higher is better), through the one limit
    judge (:func:`perfgate.measuring.verdict.judge_limit`) at each end; the bound is ``floor x (1 - tolerance)``:

    - **pass** when the low end (good requests per second at the highest level passed) clears the bound: the
      server was shown to serve that within the SLOs;
    - **fail** when the high end (the rate of the lowest level failed) is below the bound: the server was shown
      to miss the SLOs at a rate below it, so its goodput is below the floor;
    - else **inconclusive** (category ``unresolved``): the interval straddles the bound; more requests at its
      unresolved levels (``[slo] max_requests``) or a finer ``resolution`` decide it.

    No floor: a skip saying how to record one. The value carries its own interval (the levels' binomial
    decisions), so no noise over trials is asked of it. Over server starts (:class:`AcrossStarts`) both ends are
    the starts' means, so the floor is judged at the starts level, against a tolerance from the goodput noise
    between starts (``goodput_rps_tolerance``, :func:`perfgate.profiles.noise.limit_tolerance`), never by the
    lowest start.
    """
    from perfgate.categories import Category, Outcome
    from perfgate.measuring.verdict import judge_limit

    v = judge_limit("goodput_rps", s.low, floor, tolerance, noise=None, max_cv=None, where=where,
                    update_hint=update_hint, what=what)
    if v.outcome in (Outcome.PASS, Outcome.SKIP) or floor is None:
        return v
    if s.high is not None:
        top = judge_limit("goodput_rps", s.high, floor, tolerance, noise=None, max_cv=None, where=where,
                          update_hint=update_hint, what=f"{what}: the SLOs were missed at {s.high:.4g} req/s")
        if top.outcome == Outcome.FAIL:
            return top
    bound = floor * (1 - tolerance)
    if s.high is None:
        more = "raise [slo] rate_max to find where the SLOs break"
    elif s.unresolved:
        more = "raise [slo] max_requests to resolve the levels between"
    else:
        more = "lower [slo] resolution to measure between"
    return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.UNRESOLVED,
                   message=f"inconclusive: {what} straddles the floor {floor:g} x (1 - {tolerance:g}) = "
                           f"{bound:.4g} req/s [{where}]; {more}")
