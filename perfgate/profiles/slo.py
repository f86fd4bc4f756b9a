"""``[slo]``: the SLOs each mode is held to under load, and how its goodput is searched.

    [slo]                         # every mode
    ttft_ms_p99 = 500             # <metric>_p<q> = limit in ms (q in (0, 100]; p99_9 is 99.9;
                                  #   no suffix: every request)
    itl_ms_p99 = 50
    attainment = 0.99             # the share of requests that must meet every bound
    [slo.eagle3]                  # one mode: its keys replace the shared ones
    itl_ms_p99 = 80

The metrics are :data:`perfgate.measuring.goodput.REQUEST_METRICS`; the search and schedule keys are
:class:`perfgate.measuring.goodput.Slo`'s (docs/profiles.md lists them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from perfgate.profiles import Mode
from perfgate.profiles.reader import TableReader, _close

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
    from perfgate.measuring.goodput import REQUEST_METRICS, Bound, Slo

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
