"""A record judged on one metric against its limit (``perf_check(m, metric)``: the floor record and a user's
kind), pure: the measurement, the mode's floors and the noise bar in, the verdict with the record's properties
out. perfgate.plugin.api reads the profile, records the properties, notes the floor to write and concludes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfgate.measuring.metrics import METRICS, RECORD_METRICS, Measurement
from perfgate.measuring.starts import start_properties
from perfgate.measuring.verdict import Verdict, acceptance_verdict, limit_verdict
from perfgate.profiles import DEFAULT_TOLERANCE, Floor
from perfgate.record import DIRECTION, LIMIT, METRIC, TOLERANCE, cv_name

__all__ = ["LimitAt", "limit_at", "limit_check"]


@dataclass(frozen=True, kw_only=True)
class LimitAt:
    """The limit a measurement is judged against, and where it is written."""

    metric: str
    #: the ``[floors.<table>]`` it is read from and written to: the mode's, or ``<mode>.c<N>`` at another concurrency
    table: str
    #: that table (None: the profile has none), whose ``max_cv`` is the noise bar
    floor: Floor | None
    #: the profile's stored limit, if any
    stored: float | None
    #: the limit judged: the test's own ``limit=``, else the stored one
    limit: float | None
    tolerance: float
    #: where the limit is written, for messages
    where: str

    @property
    def stored_floor(self) -> str | None:
        """The stored limit the verdict checked, in words (``the baseline floor (89.5 tok/s)``)."""
        if self.limit is None:
            return None
        spec = METRICS.get(self.metric) or RECORD_METRICS[self.metric]
        word = "floor" if spec.higher_is_better else "ceiling"
        return f"the {self.table} {word} ({self.limit:g} {spec.unit})"


def limit_at(floors: Floor | None, metric: str, *, mode: str, concurrency: int, workload_concurrency: int,
             limit: float | None, tolerance: float | None, profile_path: str) -> LimitAt:
    """The limit of ``metric`` for a measurement at ``concurrency``: the test's own ``limit``/``tolerance``, else
    ``[floors.<mode>]`` at the workload's concurrency or ``[floors.<mode>.c<N>]`` at concurrency N (the limit's own
    tolerance, :meth:`Floor.tolerance_for`; none: the default)."""
    same_c = concurrency == workload_concurrency
    table = mode if same_c else f"{mode}.c{concurrency}"
    at = (floors.at(concurrency) if floors is not None else None) or (floors if same_c else None)
    stored = at.limit(metric) if at is not None else None
    tol = tolerance if tolerance is not None else (at.tolerance_for(metric) if at is not None else DEFAULT_TOLERANCE)
    where = f"{profile_path}, mode {mode}" if same_c else f"{profile_path}, [floors.{table}]"
    return LimitAt(metric=metric, table=table, floor=at, stored=stored,
                   limit=limit if limit is not None else stored, tolerance=tol, where=where)


def limit_check(m: Measurement, at: LimitAt, *, confidence: float, max_cv: float, update_hint: str) -> Verdict:
    """``m``'s metric against ``at`` (a metric of :data:`~perfgate.measuring.metrics.METRICS`:
    :func:`~perfgate.measuring.verdict.limit_verdict`, with the noise bar ``max_cv``; ``accept_len``:
    :func:`~perfgate.measuring.verdict.acceptance_verdict`). Its properties, in the order they are recorded: the
    metric and its direction, the metric's median, CI and CV over trials and its per-start values, the limit and
    its tolerance."""
    metric = at.metric
    spec = METRICS.get(metric) or RECORD_METRICS[metric]
    props: dict[str, object] = {METRIC: metric, DIRECTION: spec.direction}
    if metric in METRICS:
        stat = m.stat(metric)
        if stat is not None:
            props[metric] = stat.median
            if stat.ci_low is not None and stat.ci_high is not None:
                props[f"{metric}_ci_low"] = stat.ci_low
                props[f"{metric}_ci_high"] = stat.ci_high
            if stat.cv is not None:
                props[cv_name(metric)] = stat.cv
        props.update(start_properties(m, metric, confidence=confidence))
    if at.limit is not None:
        props[LIMIT] = at.limit
        props[TOLERANCE] = at.tolerance
    v = (limit_verdict(m, metric, at.limit, at.tolerance, max_cv=max_cv, where=at.where, update_hint=update_hint)
         if metric in METRICS
         else acceptance_verdict(m.accept_len, at.limit, at.tolerance, where=at.where, update_hint=update_hint))
    return replace(v, properties={**props, **v.properties})
