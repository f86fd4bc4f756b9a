"""Error spending for the sequential paired rule (pure; no I/O): how much of the false-alarm budget each look spends.

A paired comparison is looked at after each start pair, from the first pairs measured up to the budget
(:class:`perfgate.measuring.judge.Sequential`). Looking again after every pair at a fixed level would call
identical arms regressed far more often than that level says; splitting the budget evenly over the looks
(Bonferroni) keeps it, but spends almost none of it (the looks share most of their pairs, so their crossings are
nearly the same event): six looks at a 2.5 % one-sided budget spend about 0.1 %.

This module spends it instead, with the Lan-DeMets error-spending function of O'Brien-Fleming shape
(Lan & DeMets 1983, Biometrika 70:659): by information fraction ``t`` (pairs so far / the planned most), a
one-sided budget ``alpha`` has spent ``alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))``: almost nothing at the
first looks (``alpha(1/6)`` of 2.5 % is 4e-8), most of it at the last, and exactly ``alpha`` at ``t = 1``. Each
look's boundary is the one at which the chance of crossing *first* at that look, for identical arms, is the
spending function's increment, accounting for the looks' correlation (``corr(Z_i, Z_j) = sqrt(t_i / t_j)``):
the standard recursive numerical integration of the sum's density over the continuation region (Jennison &
Turnbull 2000, ch. 19), on a grid. The boundaries are normal-theory; the judge applies each look's nominal level
to its t-interval (the nominal p-value scale), as group-sequential t-tests do.

:func:`boundaries` gives the z boundaries, :func:`nominal_levels` each look's one-sided nominal level.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["obf_spent", "hsd_spent", "spent", "spent_by_look", "boundaries", "nominal_levels", "crossing_probabilities"]

#: grid points per look for the recursive integration (trapezoid; the boundaries within 1e-4 of a grid four times
#: as fine, and about 0.1 s for eight looks)
_GRID = 601
#: the continuation region's lower end, in standard deviations of the sum at that look
_LOWER_SD = 10.0


def _pdf(x: Any) -> Any:
    """The standard normal density on an array (numpy's exp: several times scipy's ``norm.pdf`` on a matrix)."""
    import numpy as np

    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _at_the_ends(t: float, alpha: float) -> float | None:
    """What every spending function spends at ``t <= 0`` (nothing) and ``t >= 1`` (the budget); None between."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"a one-sided budget needs 0 < alpha < 1, got {alpha}")
    return 0.0 if t <= 0.0 else alpha if t >= 1.0 else None


def obf_spent(t: float, alpha: float) -> float:
    """One-sided alpha spent by information fraction ``t`` (0..1) under the O'Brien-Fleming-shaped Lan-DeMets
    function ``2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))``: 0 at ``t = 0``, ``alpha`` at ``t >= 1``, increasing."""
    from scipy.stats import norm

    if (end := _at_the_ends(t, alpha)) is not None:
        return end
    return float(2.0 * norm.sf(norm.isf(alpha / 2.0) / math.sqrt(t)))


def hsd_spent(t: float, alpha: float, gamma: float) -> float:
    """One-sided alpha spent by information fraction ``t`` under the Hwang-Shih-DeCani family (Hwang, Shih & DeCani
    1990, Statistics in Medicine 9:1439): ``alpha (1 - e^(-gamma t)) / (1 - e^(-gamma))``, ``alpha t`` at ``gamma = 0``.
    ``gamma = -4`` is close to O'Brien-Fleming's shape (little early), ``gamma = 1`` to Pocock's (much early)."""
    if (end := _at_the_ends(t, alpha)) is not None:
        return end
    if abs(gamma) < 1e-9:
        return alpha * t
    return alpha * (1.0 - math.exp(-gamma * t)) / (1.0 - math.exp(-gamma))


def spent(shape: str, t: float, alpha: float) -> float:
    """Alpha spent by ``t`` under a named shape: ``obf`` (:func:`obf_spent`) or ``hsd:GAMMA`` (:func:`hsd_spent`)."""
    if shape == "obf":
        return obf_spent(t, alpha)
    if shape.startswith("hsd:"):
        return hsd_spent(t, alpha, float(shape[4:]))
    raise ValueError(f"a spending shape is 'obf' or 'hsd:GAMMA' (e.g. hsd:-2), got {shape!r}")


def _check(fractions: Sequence[float]) -> tuple[float, ...]:
    ts = tuple(float(t) for t in fractions)
    if not ts or any(not 0.0 < t <= 1.0 for t in ts) or any(b <= a for a, b in zip(ts, ts[1:])):
        raise ValueError(f"information fractions must rise strictly within (0, 1], got {list(fractions)}")
    return ts


def _grid(t: float, b: float) -> tuple[Any, Any]:
    """The grid of the sum ``S = Z sqrt(t)`` over the continuation region below ``b`` at information ``t``, and its
    trapezoid weights."""
    import numpy as np

    hi = b * math.sqrt(t) if math.isfinite(b) else _LOWER_SD * math.sqrt(t)
    g = np.linspace(-_LOWER_SD * math.sqrt(t), hi, _GRID)
    h = g[1] - g[0]
    w = np.full(_GRID, h)
    w[0] = w[-1] = h / 2
    return g, w


def _run(ts: tuple[float, ...], pick: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The recursion over the looks: at each, ``pick(k, crossing)`` gives the boundary (``crossing(b)``: the chance
    of crossing ``b`` first at look ``k``); returns (the boundaries, the chance of crossing first at each)."""
    import numpy as np
    from scipy.stats import norm

    bounds: list[float] = []
    probs: list[float] = []
    grid: Any = None
    mass: Any = None
    prev_t = 0.0
    for k, t in enumerate(ts):
        sd = math.sqrt(t - prev_t)

        def crossing(b: float, k: int = k, mass: Any = mass, g: Any = grid, sd: float = sd, t: float = t) -> float:
            if k == 0:  # Z_1 is standard normal
                return float(norm.sf(b))
            return float(np.dot(mass, norm.sf((b * math.sqrt(t) - g) / sd)))
        b = float(pick(k, crossing))
        bounds.append(b)
        probs.append(crossing(b) if math.isfinite(b) else 0.0)
        new, w = _grid(t, b)
        if k == 0:
            dens = _pdf(new / math.sqrt(t)) / math.sqrt(t)
        else:
            dens = _pdf((new[:, None] - grid[None, :]) / sd) / sd @ mass
        grid, mass, prev_t = new, dens * w, t
    return tuple(bounds), tuple(probs)


def spent_by_look(fractions: Sequence[float], alpha: float, shape: str = "obf", *,
                  one_order_looks: int = 0) -> tuple[float, ...]:
    """The one-sided alpha spent by each look at information ``fractions``, cumulative: the shape's (:func:`spent`),
    the last planned look the whole budget (a plan that stops short of ``t = 1`` still spends it all), and the first
    ``one_order_looks`` looks no more than O'Brien-Fleming's: a paired comparison's first pair has one order of the
    arms (perfgate.measuring.order), whatever favours a place in a pair is in its ratio whole, and only the next pair,
    reversed, cancels it; what those looks do not spend, the next look does."""
    ts = _check(fractions)
    by = [spent(shape, t, alpha) for t in ts[:-1]] + [alpha]
    for k in range(min(one_order_looks, len(ts) - 1)):
        by[k] = min(by[k], obf_spent(ts[k], alpha))
    return tuple(by)


@functools.lru_cache(maxsize=256)
def _boundaries(ts: tuple[float, ...], alpha: float, shape: str = "obf", one_order_looks: int = 0) -> tuple[
        float, ...]:
    from scipy.optimize import brentq
    from scipy.stats import norm

    by = spent_by_look(ts, alpha, shape, one_order_looks=one_order_looks)
    targets = [c - p for p, c in zip([0.0, *by], by)]

    def pick(k: int, crossing: Any) -> float:
        target = targets[k]
        if target <= 0:
            return math.inf
        if k == 0:
            return float(norm.isf(target))
        return float(brentq(lambda x: crossing(x) - target, -10.0, 40.0, xtol=1e-10))

    return _run(ts, pick)[0]


def boundaries(fractions: Sequence[float], alpha: float, shape: str = "obf", *,
               one_order_looks: int = 0) -> tuple[float, ...]:
    """The upper z boundary of each look at information ``fractions`` (rising, the last at most 1), spending a
    one-sided ``alpha`` as :func:`spent_by_look` says. Cached."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"a one-sided budget needs 0 < alpha < 1, got {alpha}")
    return _boundaries(_check(fractions), float(alpha), shape, one_order_looks)


def nominal_levels(fractions: Sequence[float], alpha: float, shape: str = "obf", *,
                   one_order_looks: int = 0) -> tuple[float, ...]:
    """Each look's one-sided nominal level ``P(Z > b_k)``: what a single test at that look may use. Cached."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"a one-sided budget needs 0 < alpha < 1, got {alpha}")
    return _nominal(_check(fractions), float(alpha), shape, one_order_looks)


@functools.lru_cache(maxsize=256)
def _nominal(ts: tuple[float, ...], alpha: float, shape: str = "obf", one_order_looks: int = 0) -> tuple[float, ...]:
    from scipy.stats import norm

    return tuple(float(norm.sf(b)) for b in _boundaries(ts, alpha, shape, one_order_looks))


def crossing_probabilities(fractions: Sequence[float], bounds: Sequence[float]) -> tuple[float, ...]:
    """The chance, for identical arms, of crossing ``bounds`` first at each look (the same recursion run forward
    on given boundaries): what a set of boundaries spends, look by look."""
    ts = _check(fractions)
    if len(bounds) != len(ts):
        raise ValueError(f"one boundary per look: {len(ts)} looks, {len(bounds)} boundaries")
    return _run(ts, lambda k, crossing: bounds[k])[1]
