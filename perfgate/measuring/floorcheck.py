"""A record judged on one metric against its limit (``perf_check(m, metric)``: the floor record and a user's
kind), pure and in one call (:func:`floor_record`): the measurement, the limit (:func:`limit_at`, the one lookup)
and the noise bar in; a :class:`Concluded` out: the verdict with every property of the record, and the limit
``--perfgate-update-baselines`` would write or why not (:func:`limit_write`). The load records conclude the same
way (perfgate.measuring.goodputrecord, perfgate.measuring.crossover); the plugin records the properties and notes
the floor in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.categories import Category, Outcome
from perfgate.measuring.metrics import METRICS, RECORD_METRICS, Measurement
from perfgate.measuring.starts import start_properties
from perfgate.measuring.verdict import Verdict, acceptance_verdict, limit_verdict
from perfgate.profiles import DEFAULT_TOLERANCE, Floor
from perfgate.record import DIRECTION, LIMIT, METRIC, TOLERANCE, cv_name

__all__ = ["LimitAt", "FloorWrite", "Concluded", "limit_at", "limit_check", "limit_write", "floor_from", "floor_record"]


@dataclass(frozen=True, kw_only=True)
class FloorWrite:
    """The floor a record's measurement would write (``--perfgate-update-baselines``), or why it writes none."""

    metric: str
    new: float
    n: int = 0
    cv: float | None = None
    why: str = ""  # non-empty: not written, and why
    starts: tuple[float, ...] | None = None  # goodput's per-start values: a tolerance from their spread
    #: the measurement whose noise (between its starts, within its trials) gives the tolerance written beside it
    tolerance_from: Measurement | None = None
    #: the concurrency of a limit at another concurrency than the workload's (``[floors.<mode>.c<N>]``)
    concurrency: int | None = None


@dataclass(frozen=True, kw_only=True)
class Concluded:
    """One record's verdict (its properties: every figure, in the order recorded) and its floor to write."""

    verdict: Verdict
    floor: FloorWrite | None = None


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

    @property
    def properties(self) -> dict[str, object]:
        """The limit judged and its tolerance, as the record carries them (none: no limit)."""
        return {LIMIT: self.limit, TOLERANCE: self.tolerance} if self.limit is not None else {}


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
    props.update(at.properties)
    v = (limit_verdict(m, metric, at.limit, at.tolerance, max_cv=max_cv, where=at.where, update_hint=update_hint)
         if metric in METRICS
         else acceptance_verdict(m.accept_len, at.limit, at.tolerance, where=at.where, update_hint=update_hint))
    return v.led_by(props)


def floor_from(metric: str, v: Verdict, new: float, *, n: int = 0, cv: float | None = None, why: str = "",
               starts: tuple[float, ...] | None = None) -> FloorWrite:
    """A load record's floor to write (goodput, crossover): ``new``, unless the verdict is inconclusive, the record
    failed for another reason than being slower, or ``why`` says it cannot be one."""
    if v.outcome == Outcome.INCONCLUSIVE:
        why = v.message.removeprefix("inconclusive: ")
    elif v.outcome == Outcome.FAIL and v.category != Category.SLOWER_THAN_BASELINE:
        why = f"the record failed ({v.category})"
    elif new <= 0 and not why:
        why = f"no {metric} above zero to make a floor of"
    return FloorWrite(metric=metric, new=new, n=n, cv=cv, why=why, starts=starts)


def limit_write(m: Measurement, v: Verdict, metric: str, *, max_cv: float) -> FloorWrite:
    """The limit ``--perfgate-update-baselines`` writes from ``m`` (its metric's median; ``accept_len``'s mean), or
    why none: requests failed, the host was busy (a limit written there fails the next quiet run, or passes
    anything), nothing measured, the verdict noisy or inconclusive, the trials past ``max_cv``, a failure other
    than being slower. A metric other than decode tok/s and acceptance gets its tolerance from ``m``'s noise."""
    from perfgate.measuring.outcomes import noise_gate
    from perfgate.measuring.verdict import disturbed_state, pct

    stat = m.stat(metric) if metric in METRICS else None
    new = m.accept_len if metric == "accept_len" else (stat.median if stat is not None else None)
    noise = stat if stat is not None else m.tok_s
    busy = disturbed_state(m)
    why = ""
    if m.failures:
        why = f"{m.failures} request(s) failed"
    elif busy:
        why = (f"measured {busy}; a limit is written only from a quiet measurement: re-run with "
               f"--perfgate-update-baselines when the host is quiet")
    elif new is None:
        why = "nothing was measured"
    elif v.category == Category.NOISY or v.outcome == Outcome.INCONCLUSIVE:
        why = v.message.removeprefix("inconclusive: ")
    elif noise is not None and noise.cv is not None and noise_gate(noise, max_cv) is Category.NOISY:
        why = f"too noisy: CV {pct(noise.cv)} of {noise.n} trials exceeds the max_cv {pct(max_cv)}"
    elif v.outcome == Outcome.FAIL and v.category != Category.SLOWER_THAN_BASELINE:
        why = f"the measurement failed ({v.category})"
    return FloorWrite(metric=metric, new=float(new) if new is not None else 0.0,
                      n=noise.n if noise is not None else 0, cv=noise.cv if noise is not None else None, why=why,
                      tolerance_from=m if metric not in ("tok_s", "accept_len") else None,
                      concurrency=m.concurrency)


def floor_record(m: Measurement, at: LimitAt, *, confidence: float, max_cv: float, update_hint: str) -> Concluded:
    """The record of one metric against its limit, in one call: :func:`limit_check`'s verdict with every property,
    and the limit to write (:func:`limit_write`)."""
    v = limit_check(m, at, confidence=confidence, max_cv=max_cv, update_hint=update_hint)
    return Concluded(verdict=v, floor=limit_write(m, v, at.metric, max_cv=max_cv))
