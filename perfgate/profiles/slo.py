"""``[slo]``: the SLOs each mode is held to under load, and how its goodput is searched.

    [slo]                         # every mode
    ttft_ms_p99 = 500             # <metric>_p<q> = limit in ms (q in (0, 100]; p99_9 is 99.9;
                                  #   no suffix: every request)
    itl_ms_p99 = 50
    attainment = 0.99             # the share of requests that must meet every bound
    [slo.eagle3]                  # one mode: its keys replace the shared ones
    itl_ms_p99 = 80

The metrics are :data:`REQUEST_METRICS`; the search and schedule keys are
:class:`Slo`'s (docs/profiles.md lists them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfgate.profiles import Mode
from perfgate.profiles.reader import TableReader, _close

#: per-request metrics an SLO can bound (all in ms; lower is better)
REQUEST_METRICS: dict[str, str] = {
    "ttft_ms": "time to first token",
    "itl_ms": "inter-token latency (every gap of every request)",
    "tpot_ms": "time per output token after the first, per request",
    "e2e_ms": "end-to-end latency, per request",
}

@dataclass(frozen=True, kw_only=True)
class Bound:
    """One SLO: ``metric`` at its ``percentile`` over a level's requests within ``limit_ms``."""

    metric: str
    percentile: float
    limit_ms: float

    @property
    def key(self) -> str:
        q = f"{self.percentile:g}".replace(".", "_")
        return self.metric if self.percentile == 100 else f"{self.metric}_p{q}"


@dataclass(frozen=True, kw_only=True)
class Slo:
    """A mode's SLOs and how its goodput is searched (``[slo]`` / ``[slo.<mode>]`` of a profile)."""

    bounds: tuple[Bound, ...]
    attainment: float = 0.99  # the share of requests that must be good
    # a sender later at p99 than both of these fell behind its schedule (inconclusive): ms, and a share of the
    # schedule's mean gap between requests (jitter well inside a gap does not change the load offered)
    max_send_lag_ms: float = 10.0
    max_send_lag_gap: float = 0.1
    arrival: str = "poisson"
    requests: int = 32  # measured requests per trial of a level (trial i of a rate: schedule seed + 2i)
    duration_s: float | None = None  # and no measured send after this many seconds of a trial's window
    warmup_requests: int = 32  # sent at the level's rate before each trial's measured window, not counted
    seed: int = 0
    rate_start: float = 1.0  # requests per second: the search doubles from here...
    rate_max: float = 64.0  # ...up to here
    resolution: float = 0.1  # ...then bisects until the bracket is this narrow (relative)
    max_levels: int = 12
    confidence: float = 0.95  # one-sided, of each bound a level is decided on
    max_requests: int | None = None  # per level: an unresolved level gets trials up to this (None: default_budget)
    crossover_levels: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)  # closed-loop streams of the crossover record
    max_new_tokens: int | None = None  # tokens per request under load (default: the most any mode's workload asks)
    trials: int | None = None  # trials per level before any top-up (default: the workload's)

    def describe(self) -> str:
        return ", ".join(f"{b.key} <= {b.limit_ms:g}" for b in self.bounds) + f", attainment >= {self.attainment:g}"

    @property
    def min_requests(self) -> int:
        """The fewest requests a level needs to pass: :func:`level_min_requests`."""
        return level_min_requests(self)

    @property
    def budget(self) -> int:
        """Requests per level, at most (``max_requests``, else :func:`default_budget`)."""
        return self.max_requests if self.max_requests is not None else default_budget(self)


# -- sizing: how many requests a level needs before it can pass ------------------------------------------------


def min_requests(q: float, confidence: float = 0.95) -> int | None:
    """The fewest requests whose ``q``-th percentile has a distribution-free one-sided upper confidence bound at
    ``confidence``: the smallest n with ``1 - (q/100)^n >= confidence`` (the largest of n values is then that
    bound: it lies above the percentile unless all n fell below it, probability ``(q/100)^n``). A p99 at 95 %
    needs 299, a p90 29, a p50 5. ``None`` for q = 100: no sample bounds the largest value."""
    p = q / 100.0
    if p >= 1.0:
        return None
    if p <= 0.0:
        return 1
    n = max(1, math.ceil(math.log(1.0 - confidence) / math.log(p)))
    while 1.0 - p ** n < confidence:  # the float log can land one short or one over
        n += 1
    while n > 1 and 1.0 - p ** (n - 1) >= confidence:
        n -= 1
    return n


def attainment_min_requests(attainment: float, confidence: float = 0.95) -> int | None:
    """The fewest requests, all good, whose Clopper-Pearson lower bound (one-sided at ``confidence``) reaches
    ``attainment``: the smallest n with ``(1 - confidence)^(1/n) >= attainment``, the same rule as
    :func:`min_requests` (299 for 0.99 at 95 %). ``None`` for an attainment of 1: a sample never bounds it."""
    return min_requests(attainment * 100.0, confidence)


def level_min_requests(slo: Slo) -> int:
    """The fewest requests, pooled over a level's trials, with which a level can pass: the largest of
    :func:`min_requests` for each bound's percentile and :func:`attainment_min_requests` for the attainment
    (a p99 bound at 95 %: 299). A bound on every request (no ``_p``) or an attainment of 1 adds nothing: those
    are judged on the requests seen (docs/load.md)."""
    ns = [min_requests(b.percentile, slo.confidence) for b in slo.bounds]
    ns.append(attainment_min_requests(slo.attainment, slo.confidence))
    return max([n for n in ns if n is not None], default=1)


def default_budget(slo: Slo) -> int:
    """``max_requests`` when the profile sets none: three times the level minimum (at least 300)."""
    return max(300, 3 * level_min_requests(slo))


_BOUND = re.compile(r"^(?P<metric>[a-z0-9]+_ms)(?:_p(?P<q>\d+(?:_\d+)?))?$")
#: the keys of ``[slo]`` that are not bounds
SETTINGS = frozenset({"attainment", "max_send_lag_ms", "max_send_lag_gap", "arrival", "requests", "duration_s",
                      "seed", "rate_start", "rate_max", "resolution", "max_levels", "crossover_levels",
                      "max_new_tokens", "trials", "warmup_requests", "confidence", "max_requests"})


def slo(r: TableReader, modes: Mapping[str, Mode]) -> dict[str, Any]:
    """``[slo]`` and its ``[slo.<mode>]`` overrides: each mode's :class:`perfgate.measuring.goodput.Slo` (none without
    ``[slo]``)."""
    if "slo" not in r.data:
        return {}
    sr = r.sub("slo")
    shared = {k: v for k, v in sr.data.items() if not isinstance(v, dict)}
    for k, v in sr.data.items():
        if isinstance(v, dict) and k not in modes:
            raise sr.err(k, f"a mode of this profile ({', '.join(modes)}) for a per-mode [slo.<mode>] table", k,
                         fix=_close(k, modes))
    out = {}
    for m in modes:
        got = sr.data.get(m)
        own: dict[str, Any] = got if isinstance(got, dict) else {}
        out[m] = _one(_Merged(r.path, {**shared, **own}, "slo.", r.warnings, own=own, mode=m), m, own)
    return out


class _Merged(TableReader):
    """``[slo]`` with one mode's ``[slo.<mode>]`` over it: an error names the table its key came from."""

    def __init__(self, *a: Any, own: Mapping[str, Any], mode: str) -> None:
        super().__init__(*a)
        self._own, self._mode = own, mode

    def k(self, key: str) -> str:
        return f"slo.{self._mode}.{key}" if key in self._own else f"slo.{key}"


def _one(t: TableReader, mode: str, own: Mapping[str, Any]) -> Any:
    from perfgate.client.schedule import ARRIVALS

    where = f"[slo.{mode}]" if own else "[slo]"
    bounds = []
    for key in t.data:
        if key in SETTINGS:
            continue
        m = _BOUND.match(key)
        if m is None or m.group("metric") not in REQUEST_METRICS:
            known = [f"{x}_p99" for x in REQUEST_METRICS] + sorted(SETTINGS)
            raise t.err(key, f"a bound <metric>_p<q> on one of {', '.join(REQUEST_METRICS)}, or a setting "
                             f"({', '.join(sorted(SETTINGS))})", key, fix=_close(key, known))
        q = float(m.group("q").replace("_", ".")) if m.group("q") else 100.0
        if not 0 < q <= 100:
            raise t.err(key, "a percentile in (0, 100] after _p", m.group("q"), fix=f"write {m.group('metric')}_p99")
        lim = t.num(key, f"a limit in ms > 0 ({REQUEST_METRICS[m.group('metric')]})", required=True, lo=1e-9)
        bounds.append(Bound(metric=m.group("metric"), percentile=q, limit_ms=float(lim)))
    if not bounds:
        raise t.err("(table)", "at least one bound such as ttft_ms_p99 = 500", f"{where} with none",
                    fix=f"add `ttft_ms_p99 = <ms>` (or another <metric>_p<q>) under {where}")
    arrival = t.get("arrival", str, f"one of {', '.join(ARRIVALS)}", "poisson")
    if arrival not in ARRIVALS:
        raise t.err("arrival", f"one of {', '.join(ARRIVALS)}", arrival, fix=_close(arrival, ARRIVALS))
    levels = t.get("crossover_levels", list, "a list of stream counts (integers >= 1, increasing)",
                   [1, 2, 4, 8, 16, 32, 64])
    if (len(levels) < 2 or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in levels)
            or sorted(set(levels)) != levels):
        raise t.err("crossover_levels", "at least two stream counts, integers >= 1, increasing", levels,
                    fix="write e.g. crossover_levels = [1, 2, 4, 8, 16, 32, 64]")
    start = float(t.num("rate_start", "requests per second > 0", 1.0, lo=1e-6))
    top = float(t.num("rate_max", "requests per second >= rate_start", 64.0, lo=start))
    dur = t.num("duration_s", "seconds > 0 (no send after this many seconds of a trial)", None, lo=1e-6)
    slo = Slo(
        bounds=tuple(bounds),
        attainment=float(t.num("attainment", "a fraction in (0, 1]", 0.99, lo=1e-6, hi=1.0)),
        max_send_lag_ms=float(t.num("max_send_lag_ms", "milliseconds > 0", 10.0, lo=1e-6)),
        max_send_lag_gap=float(t.num("max_send_lag_gap", "a fraction of the mean gap between requests, in [0, 1]",
                                     0.1, lo=0, hi=1)),
        arrival=arrival,
        requests=t.int_("requests", "an integer >= 4 (requests per trial of a level)", 32, lo=4),
        duration_s=float(dur) if dur is not None else None,
        seed=t.int_("seed", "an integer >= 0", 0, lo=0),
        rate_start=start,
        rate_max=top,
        resolution=float(t.num("resolution", "a fraction in (0, 1] (the bracket's relative width)", 0.1,
                               lo=1e-3, hi=1.0)),
        max_levels=t.int_("max_levels", "an integer >= 2", 12, lo=2),
        crossover_levels=tuple(levels),
        max_new_tokens=t.int_("max_new_tokens", "an integer >= 2 (tokens per request under load)", None, lo=2),
        trials=t.int_("trials", "an integer >= 1 (trials per level)", None, lo=1),
        warmup_requests=t.int_("warmup_requests", "an integer >= 0 (requests at the level's rate before each "
                                                  "trial's measured window)", 32, lo=0),
        confidence=float(t.num("confidence", "a fraction in [0.5, 1) (one-sided, of each bound a level is decided "
                                             "on)", 0.95, lo=0.5, hi=0.9999)),
        max_requests=t.int_("max_requests", "an integer >= 1 (requests per level at most, its trials pooled)", None,
                            lo=1),
    )
    if slo.max_requests is not None and slo.max_requests < slo.min_requests:
        raise t.err("max_requests", f"at least {slo.min_requests}, the fewest requests with which a level of these "
                                    f"SLOs can pass (docs/load.md, \"Sizing a level\")", slo.max_requests,
                    fix=f"write max_requests = {slo.min_requests} or more, or judge a lower percentile")
    return slo
