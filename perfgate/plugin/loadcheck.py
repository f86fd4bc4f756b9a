"""Concluding the load records: a goodput search, and the speculation crossover, recorded as JUnit
properties (names below) and judged against ``[floors.<mode>]`` in their direction (higher is better),
through the profile's expectations like any record."""

from __future__ import annotations

import json
import statistics
from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome
from perfgate.measuring.crossover import Crossover, Point, crossover, predicted
from perfgate.measuring.metrics import Measurement, Stat
from perfgate.measuring.verdict import Verdict, judge_limit
from perfgate.plugin.ledger import note_value
from perfgate.profiles import DEFAULT_TOLERANCE
from perfgate.record import DIRECTION, LIMIT, METRIC, TOLERANCE, cv_name

if TYPE_CHECKING:
    from perfgate.plugin.loadrun import Goodput, Levels
    from perfgate.plugin.runner import PerfRun
    from perfgate.record import Case

# goodput records (kind "goodput")
GOODPUT = "goodput_rps"  # good requests per second at the highest rate meeting the SLOs (+ _ci_low/_ci_high/_cv)
GOODPUT_RATE = "goodput_rate"  # that rate (offered, req/s)
GOODPUT_RATE_NEXT = "goodput_rate_next"  # the lowest rate that missed the SLOs (absent: rate_max met them)
GOODPUT_RESOLUTION = "goodput_resolution"  # (next - rate) / rate
SLO = "slo"  # the SLOs, as text
SLO_ATTAINMENT = "slo_attainment"  # the required attainment
ATTAINMENT = "attainment"  # the attainment at goodput_rate
LIMITING_METRIC = "limiting_metric"  # the bound most requests missed at goodput_rate_next
SEND_LAG_MS_P99 = "send_lag_ms_p99"  # the worst level's send lag p99 (ms, server time)
ARRIVAL = "arrival"
LOAD_LEVELS = "load_levels"  # JSON: every level measured, in order (rate, meets, attainment, goodput, lag, values)
# crossover records (kind "crossover")
CROSSOVER = "crossover"  # the load (streams) where speculation stops beating the baseline (+ _ci_low/_ci_high)
CROSSOVER_RESULT = "crossover_result"  # at | never | always
CROSSOVER_PREDICTED = "crossover_predicted"  # the cost model's, from decode step times
CROSSOVER_PREDICTED_RESULT = "crossover_predicted_result"
CROSSOVER_WINS = "crossover_wins"  # the levels where speculation beat the baseline, comma-separated
CROSSOVER_LEVELS = "crossover_levels"  # JSON: per level, both modes' output tok/s, ratio and CI, TTFT, ITL
CROSSOVER_BASELINE = "crossover_baseline"  # the mode compared against


def _limit(perf: PerfRun, case: Case, metric: str) -> tuple[float | None, float, str]:
    p = perf.state.profile
    fl = p.floors.get(case.mode)
    lim = fl.limit(metric) if fl is not None else None
    tol = fl.tolerance if fl is not None else DEFAULT_TOLERANCE
    return lim, tol, f"{p.path}, [floors.{case.mode}] {metric}"


def _against_floor(perf: PerfRun, case: Case, metric: str, got: float, what: str, *, ceiling: float | None = None,
                   noise: Stat | None = None, max_cv: float | None = None, new_floor: float | None = None) -> Verdict:
    """The record's value against ``[floors.<mode>] <metric>``: the one judge of a limit
    (:func:`perfgate.measuring.verdict.judge_limit`), with the properties every limit writes; under
    ``--perfgate-update-baselines`` ``new_floor`` (default: the value) is the floor written, unless the verdict
    is inconclusive or the record failed for another reason than being slower."""
    lim, tol, where = _limit(perf, case, metric)
    if lim is not None:
        perf.record(LIMIT, lim)
        perf.record(TOLERANCE, tol)
    v = judge_limit(metric, got, lim, tol, noise=noise, max_cv=max_cv, where=where, what=what, highest=ceiling,
                    update_hint=perf.update_command())
    why = ""
    if v.outcome == Outcome.INCONCLUSIVE:
        why = v.message.removeprefix("inconclusive: ")
    elif v.outcome == Outcome.FAIL and v.category != Category.SLOWER_THAN_BASELINE:
        why = f"the record failed ({v.category})"
    elif got <= 0:
        why = f"no {metric} above zero to make a floor of"
    note_value(perf.state, case.mode, metric, lim, got if new_floor is None else new_floor,
               n=noise.n if noise is not None else 0, cv=noise.cv if noise is not None else None, why=why)
    return v


def _metric(perf: PerfRun, metric: str) -> None:
    """What the record is judged on, whatever its outcome (an inconclusive record says it too)."""
    perf.record(METRIC, metric)
    perf.record(DIRECTION, "higher")


def conclude_goodput(perf: PerfRun, case: Case, g: Goodput) -> None:
    """Record a goodput search and conclude the record on ``goodput_rps`` against its floor."""
    s = g.search
    _metric(perf, GOODPUT)
    perf.record(SLO, g.slo.describe())
    perf.record(SLO_ATTAINMENT, g.slo.attainment)
    perf.record(ARRIVAL, f"{g.slo.arrival}, {g.slo.requests} requests a trial, seed {g.slo.seed}")
    perf.record("n", g.trials)
    lags = [lv.send_lag_ms_p99 for lv in s.levels if lv.send_lag_ms_p99 is not None]
    if lags:
        perf.record(SEND_LAG_MS_P99, max(lags))
    perf.record(LOAD_LEVELS, json.dumps([_level_json(lv) for lv in s.levels], separators=(",", ":")))
    if s.next_rate is not None:
        perf.record(GOODPUT_RATE_NEXT, s.next_rate)
        nxt = next((lv for lv in s.levels if lv.rate == s.next_rate), None)
        if nxt is not None and nxt.limiting:
            perf.record(LIMITING_METRIC, nxt.limiting)
    if s.resolution is not None:
        perf.record(GOODPUT_RESOLUTION, s.resolution)
    if s.best is None:
        if s.inconclusive is not None:
            v = Verdict(outcome="inconclusive", category="client-behind" if "behind" in s.inconclusive.why
                        else "noise-unknown", message=f"inconclusive: {s.inconclusive.why}")
            perf.conclude(case, v)
            return
        first = s.levels[0] if s.levels else None
        perf.record(GOODPUT, 0.0)  # no rate from rate_start up meets the SLOs: no goodput at all in the range
        what = (f"no rate meets the SLOs ({g.slo.describe()}): {first.why if first else 'nothing measured'} "
                f"(lower [slo] rate_start to find the rate that does)")
        perf.conclude(case, _against_floor(perf, case, GOODPUT, 0.0, what))
        return
    best = s.best
    perf.record(GOODPUT_RATE, best.rate)
    perf.record(ATTAINMENT, best.attainment)
    st = best.goodput
    got = st.median if st is not None else 0.0
    perf.record(GOODPUT, got)
    if st is not None and st.ci_low is not None and st.ci_high is not None:
        perf.record(f"{GOODPUT}_ci_low", st.ci_low)
        perf.record(f"{GOODPUT}_ci_high", st.ci_high)
    if st is not None and st.cv is not None:
        perf.record(cv_name(GOODPUT), st.cv)
    bracket = (f"between {best.rate:g} and {s.next_rate:g} req/s" if s.next_rate is not None
               else f"at rate_max {best.rate:g} req/s or above")
    what = f"goodput {got:.4g} req/s (the SLOs break {bracket})"
    if s.inconclusive is not None:
        what += f"; the search stopped at {s.inconclusive.rate:g} req/s: {s.inconclusive.why}"
        perf.conclude(case, Verdict(outcome="inconclusive", category="client-behind", message=f"inconclusive: {what}"))
        return
    max_cv = perf.state.profile.workload_for(case.mode).max_cv
    perf.conclude(case, _against_floor(perf, case, GOODPUT, got, what, noise=st, max_cv=max_cv))


def _level_json(lv: object) -> dict[str, object]:
    from perfgate.measuring.goodput import LoadLevel

    assert isinstance(lv, LoadLevel)
    tok = [t.output_tok_s for t in lv.trials if t.output_tok_s is not None]
    return {"rate": lv.rate, "meets": lv.meets, "attainment": round(lv.attainment, 4),
            "goodput_rps": round(lv.goodput.median, 4) if lv.goodput else None,
            "output_tok_s": round(statistics.median(tok), 2) if tok else None,
            "send_lag_ms_p99": round(lv.send_lag_ms_p99, 3) if lv.send_lag_ms_p99 is not None else None,
            "limiting": lv.limiting, **{k: round(v, 3) for k, v in {**lv.p99, **lv.values}.items()}}


def _point(c: int, b: Measurement, s: Measurement) -> Point:
    def med(m: Measurement, name: str) -> float | None:
        st = m.stat(name)
        return st.median if st is not None else None

    bt, sp = med(b, "output_tok_s") or 0.0, med(s, "output_tok_s") or 0.0
    lo = hi = None
    bs, ss = b.output_tok_s, s.output_tok_s
    if bs is not None and ss is not None and bs.noise_known and ss.noise_known:
        from perfgate.measuring.metrics import bootstrap_ratio_ci

        lo, hi = bootstrap_ratio_ci(ss.samples, bs.samples)
    return Point(load=c, base_tok_s=bt, spec_tok_s=sp, ratio=sp / bt if bt else 0.0, ratio_ci_low=lo,
                 ratio_ci_high=hi, base_itl_ms=med(b, "itl_ms"), spec_itl_ms=med(s, "itl_ms"),
                 base_ttft_ms=med(b, "ttft_ms"), spec_ttft_ms=med(s, "ttft_ms"), base_decode_tok_s=med(b, "tok_s"),
                 spec_decode_tok_s=med(s, "tok_s"))


def crossover_of(base: Levels, spec: Levels) -> tuple[Crossover, tuple[str, float | None]]:
    """The measured crossover of ``spec`` against ``base`` (same loads) and the cost model's prediction."""
    pts = [_point(c, b, s) for c, b, s in zip(base.loads, base.measurements, spec.measurements)]
    samples = [(b.output_tok_s.samples if b.output_tok_s else (), s.output_tok_s.samples if s.output_tok_s else ())
               for b, s in zip(base.measurements, spec.measurements)]
    x = crossover(base.loads, [b for b, _ in samples], [s for _, s in samples], points=pts)
    acc = [m.accept_len for m in spec.measurements if m.accept_len]
    return x, predicted(pts, statistics.median(acc) if acc else None, base_cap=max_running(base.measurements),
                        spec_cap=max_running(spec.measurements))


def max_running(ms: tuple[Measurement, ...]) -> int | None:
    """SGLang's ``max_running_requests`` from the server log's start-up line (the simulator prints it too)."""
    import re

    for m in ms:
        if not m.log_path:
            continue
        try:
            with open(m.log_path, errors="replace") as f:
                found = re.findall(r"\bmax_running_requests=(\d+)", f.read(1 << 22))
        except OSError:
            continue
        if found:
            return int(found[-1])
    return None


def conclude_crossover(perf: PerfRun, case: Case, base: Levels, spec: Levels | None) -> None:
    """The baseline's record: its levels, recorded (pass). A speculative mode's: the crossover against
    them, judged against ``[floors.<mode>] crossover`` (higher is better)."""
    if spec is None:
        perf.record(CROSSOVER_LEVELS, json.dumps([
            {"load": c, "output_tok_s": _r(m.output_tok_s.median if m.output_tok_s else None),
             "itl_ms": _r(m.itl_ms.median if m.itl_ms else None),
             "ttft_ms": _r(m.ttft_ms.median if m.ttft_ms else None)}
            for c, m in zip(base.loads, base.measurements)], separators=(",", ":")))
        perf.conclude(case, Verdict(outcome="pass", message=f"the baseline's output tok/s at {len(base.loads)} loads "
                                                            f"({', '.join(map(str, base.loads))} streams), recorded"))
        return
    x, (presult, pload) = crossover_of(base, spec)
    _metric(perf, CROSSOVER)
    perf.record(CROSSOVER_BASELINE, base.mode)
    perf.record(CROSSOVER_RESULT, x.result)
    perf.record(CROSSOVER, x.value)
    if x.ci_low is not None and x.ci_high is not None:
        perf.record(f"{CROSSOVER}_ci_low", x.ci_low)
        perf.record(f"{CROSSOVER}_ci_high", x.ci_high)
    perf.record(CROSSOVER_WINS, ",".join(map(str, x.wins)))
    perf.record(CROSSOVER_PREDICTED_RESULT, presult)
    if pload is not None:
        perf.record(CROSSOVER_PREDICTED, pload)
    perf.record(CROSSOVER_LEVELS, json.dumps([
        {"load": p.load, "base_tok_s": _r(p.base_tok_s), "spec_tok_s": _r(p.spec_tok_s), "ratio": _r(p.ratio, 4),
         "ratio_ci": [_r(p.ratio_ci_low, 4), _r(p.ratio_ci_high, 4)], "base_itl_ms": _r(p.base_itl_ms),
         "spec_itl_ms": _r(p.spec_itl_ms), "base_ttft_ms": _r(p.base_ttft_ms), "spec_ttft_ms": _r(p.spec_ttft_ms)}
        for p in x.points], separators=(",", ":")))
    pred = f"{pload:.3g} streams" if pload is not None else presult
    if x.result == "at":
        what = (f"{case.mode} stops beating {base.mode} at {x.load:.3g} streams (CI {x.ci_low:.3g}-{x.ci_high:.3g}; "
                f"the cost model predicts {pred})")
    elif x.result == "never":
        what = f"{case.mode} beats {base.mode} at no load from {base.loads[0]} to {base.loads[-1]} streams " \
               f"(the cost model predicts {pred})"
    else:
        what = f"{case.mode} still beats {base.mode} at {base.loads[-1]} streams, the highest load measured " \
               f"(the cost model predicts {pred})"
    if x.wins and x.result != "never":
        what += f"; it wins at {', '.join(map(str, x.wins))} streams"
    # a floor written from this run is the CI's low end: the crossover's own interval is several per cent wide,
    # wider than any tolerance, so its median as the floor would fail half the runs of an unchanged stack
    perf.conclude(case, _against_floor(perf, case, CROSSOVER, x.value, what,
                                       ceiling=float(base.loads[-1]) if x.result == "always" else None,
                                       new_floor=x.ci_low if x.ci_low is not None else x.value))


def _r(x: float | None, nd: int = 2) -> float | None:
    return round(x, nd) if x is not None else None
