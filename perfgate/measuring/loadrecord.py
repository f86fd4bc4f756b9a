"""The load records' figures, pure: a goodput search's levels and the speculation crossover's points, properties
and words, from the measurements (perfgate.plugin.loadcheck records them and judges them against the profile's
floors).
"""

from __future__ import annotations

import json
import re
import statistics

from perfgate.measuring.crossover import Crossover, Point, crossover, predicted
from perfgate.measuring.goodput import LoadLevel, Search
from perfgate.measuring.goodputfloor import AcrossStarts, interval_text
from perfgate.measuring.metrics import Measurement, bootstrap_ratio_ci
from perfgate.measuring.starts import start_stats
from perfgate.record import N_STARTS, START_CI_HIGH, START_CI_LOW, START_CV, START_VALUES

__all__ = ["CROSSOVER", "CROSSOVER_RESULT", "CROSSOVER_PREDICTED", "CROSSOVER_PREDICTED_RESULT", "CROSSOVER_WINS",
           "CROSSOVER_LEVELS", "CROSSOVER_BASELINE", "level_json", "point_of", "crossover_of", "max_running",
           "baseline_levels", "crossover_properties", "crossover_text", "search_properties", "search_text",
           "starts_properties", "starts_spread", "starts_text"]

# goodput records (kind "goodput"): goodput as an interval (perfgate.measuring.goodput.search)
GOODPUT = "goodput_rps"  # the interval's low end: good requests per second at the highest level passed
GOODPUT_LOW = "goodput_rps_low"  # the same figure, under the interval's name (0: no level passed)
GOODPUT_HIGH = "goodput_rps_high"  # the interval's high end: the rate achieved at the lowest level failed
GOODPUT_RATE = "goodput_rate"  # the highest level passed (offered, req/s)
GOODPUT_RATE_NEXT = "goodput_rate_next"  # the lowest level failed (absent: none failed)
GOODPUT_RESOLUTION = "goodput_resolution"  # (next - rate) / rate
GOODPUT_UNRESOLVED = "goodput_unresolved"  # the levels between the two left unresolved, comma-separated (req/s)
GOODPUT_MIN_REQUESTS = "goodput_min_requests"  # the fewest requests with which a level can pass (the sizing rule)
SLO = "slo"  # the SLOs, as text
SLO_ATTAINMENT = "slo_attainment"  # the required attainment
SLO_CONFIDENCE = "slo_confidence"  # the one-sided confidence of each bound a level is decided on
ATTAINMENT = "attainment"  # the attainment at goodput_rate, pooled over its requests
ATTAINMENT_LOW = "attainment_low"  # its Clopper-Pearson lower bound
LEVEL_REQUESTS = "level_requests"  # the requests at goodput_rate, pooled over its trials
LIMITING_METRIC = "limiting_metric"  # the bound most requests missed at goodput_rate_next
SEND_LAG_MS_P99 = "send_lag_ms_p99"  # the worst level's send lag p99 (ms, server time)
ARRIVAL = "arrival"
LOAD_LEVELS = "load_levels"  # JSON: every level measured, in order (rate, decision, requests, attainment, ...)
GOODPUT_STARTS = "goodput_starts"  # JSON, with --perfgate-starts N: per start, its interval, levels and requests
# crossover records (kind "crossover")
CROSSOVER = "crossover"  # the load (streams) where speculation stops beating the baseline (+ _ci_low/_ci_high)
CROSSOVER_RESULT = "crossover_result"  # at | never | always
CROSSOVER_PREDICTED = "crossover_predicted"  # the cost model's, from decode step times
CROSSOVER_PREDICTED_RESULT = "crossover_predicted_result"
CROSSOVER_WINS = "crossover_wins"  # the levels where speculation beat the baseline, comma-separated
CROSSOVER_LEVELS = "crossover_levels"  # JSON: per level, both modes' output tok/s, ratio and CI, TTFT, ITL
CROSSOVER_BASELINE = "crossover_baseline"  # the mode compared against


def level_json(lv: LoadLevel) -> dict[str, object]:
    """One goodput level as the record's ``load_levels`` JSON gives it."""
    tok = [t.output_tok_s for t in lv.trials if t.output_tok_s is not None]
    bounds = {f"{k}_bounds": [_r(x, 3) if x is not None and x != float("inf") else None for x in b]
              for k, b in lv.bounds.items()}
    return {"rate": lv.rate, "meets": lv.meets, "decision": lv.decision, "requests": lv.requests,
            "trials": len(lv.trials), "good": lv.good, "attainment": round(lv.attainment, 4),
            "attainment_ci": [round(lv.attainment_low, 4), round(lv.attainment_high, 4)],
            "goodput_rps": round(lv.goodput_rps, 4) if lv.goodput_rps is not None else None,
            "achieved_rps": round(lv.achieved_rps, 4) if lv.achieved_rps is not None else None,
            "output_tok_s": round(statistics.median(tok), 2) if tok else None,
            "send_lag_ms_p99": round(lv.send_lag_ms_p99, 3) if lv.send_lag_ms_p99 is not None else None,
            "limiting": lv.limiting, **{k: round(v, 3) for k, v in {**lv.p99, **lv.values}.items()}, **bounds}


def search_properties(s: Search) -> dict[str, object]:
    """A goodput search's answer (one server start): the lowest level failed and its limiting metric, the
    resolution between the two, and the highest level passed with its attainment and requests."""
    out: dict[str, object] = {}
    if s.failed is not None:
        out[GOODPUT_RATE_NEXT] = s.failed.rate
        if s.failed.limiting:
            out[LIMITING_METRIC] = s.failed.limiting
    if s.resolution is not None:
        out[GOODPUT_RESOLUTION] = s.resolution
    if s.best is not None:
        out[GOODPUT_RATE] = s.best.rate
        out[ATTAINMENT] = s.best.attainment
        out[ATTAINMENT_LOW] = s.best.attainment_low
        out[LEVEL_REQUESTS] = s.best.requests
    return out


def search_text(s: Search) -> str:
    """What a goodput record of one start says: its interval and where the SLOs hold and break (none passed: the
    first level's reason and the fix)."""
    if s.best is not None and s.failed is not None:
        where = f"the SLOs hold at {s.best.rate:g} and break at {s.failed.rate:g} req/s"
    elif s.best is not None:
        where = f"the SLOs hold up to {s.best.rate:g} req/s, and no level above failed"
    else:
        first = min(s.levels, key=lambda lv: lv.rate) if s.levels else None
        hint = ("lower [slo] rate_start to find one that does" if first is None or first.meets is False else
                "raise [slo] max_requests to resolve the levels below")
        where = f"no level passed ({first.why if first else 'nothing measured'}; {hint})"
    return f"goodput {interval_text(s)} ({where})"


def starts_properties(a: AcrossStarts) -> dict[str, object]:
    """A goodput record over N server starts: every start's levels (``load_levels``) and interval
    (``goodput_starts``), and the starts' low and high ends (``start_values.*``)."""
    levels = [{"start": k, **level_json(lv)} for k, s in enumerate(a.searches, 1) for lv in s.levels]
    per = [{"start": k, "low": round(s.low, 4), "high": _r(s.high, 4),
            "rate": s.best.rate if s.best is not None else None,
            "rate_next": s.failed.rate if s.failed is not None else None,
            "requests": s.best.requests if s.best is not None else 0,
            "unresolved": [lv.rate for lv in s.unresolved]} for k, s in enumerate(a.searches, 1)]
    return {LOAD_LEVELS: json.dumps(levels, separators=(",", ":")),
            GOODPUT_STARTS: json.dumps(per, separators=(",", ":")),
            N_STARTS: len(a.searches),
            START_VALUES: ",".join(f"{x:.6g}" for x in a.lows),
            f"{START_VALUES}.{GOODPUT}": ",".join(f"{x:.6g}" for x in a.lows),
            f"{START_VALUES}.{GOODPUT_HIGH}": ",".join("-" if x is None else f"{x:.6g}" for x in a.highs)}


def starts_spread(a: AcrossStarts) -> tuple[float | None, dict[str, object]]:
    """The goodput noise between starts: the CV of the starts' low ends, and its properties (``start_cv``, the
    mean's interval)."""
    cv, lo, hi = start_stats(a.lows)
    out: dict[str, object] = {}
    if cv is not None:
        out[START_CV] = cv
    if lo is not None and hi is not None:
        out[START_CI_LOW] = lo
        out[START_CI_HIGH] = hi
    return cv, out


def starts_text(a: AcrossStarts, cv: float | None, *, what_slo: str) -> str:
    """What a goodput record over N starts says: the mean interval, each start's, their spread and the SLOs."""
    spread = f", between-start CV {cv:.1%}" if cv is not None else ""
    return (f"goodput {interval_text(a)} (the mean of {len(a.searches)} server starts' intervals: "
            + "; ".join(interval_text(s) for s in a.searches) + f"{spread}; SLOs {what_slo})")


def point_of(c: int, b: Measurement, s: Measurement) -> Point:
    """The crossover's point at ``c`` streams: the baseline's (``b``) and the speculative mode's (``s``) medians,
    and the ratio of their output tok/s with its bootstrap CI where both have noise known."""
    def med(m: Measurement, name: str) -> float | None:
        st = m.stat(name)
        return st.median if st is not None else None

    bt, sp = med(b, "output_tok_s") or 0.0, med(s, "output_tok_s") or 0.0
    lo = hi = None
    bs, ss = b.output_tok_s, s.output_tok_s
    if bs is not None and ss is not None and bs.noise_known and ss.noise_known:
        lo, hi = bootstrap_ratio_ci(ss.samples, bs.samples)
    return Point(load=c, base_tok_s=bt, spec_tok_s=sp, ratio=sp / bt if bt else 0.0, ratio_ci_low=lo,
                 ratio_ci_high=hi, base_itl_ms=med(b, "itl_ms"), spec_itl_ms=med(s, "itl_ms"),
                 base_ttft_ms=med(b, "ttft_ms"), spec_ttft_ms=med(s, "ttft_ms"), base_decode_tok_s=med(b, "tok_s"),
                 spec_decode_tok_s=med(s, "tok_s"))


def crossover_of(loads: tuple[int, ...], base: tuple[Measurement, ...], spec: tuple[Measurement, ...]
                 ) -> tuple[Crossover, tuple[str, float | None]]:
    """The measured crossover of ``spec`` against ``base`` (one measurement per load of ``loads``) and the cost
    model's prediction."""
    pts = [point_of(c, b, s) for c, b, s in zip(loads, base, spec)]
    samples = [(b.output_tok_s.samples if b.output_tok_s else (), s.output_tok_s.samples if s.output_tok_s else ())
               for b, s in zip(base, spec)]
    x = crossover(loads, [b for b, _ in samples], [s for _, s in samples], points=pts)
    acc = [m.accept_len for m in spec if m.accept_len]
    return x, predicted(pts, statistics.median(acc) if acc else None, base_cap=max_running(base),
                        spec_cap=max_running(spec))


def max_running(ms: tuple[Measurement, ...]) -> int | None:
    """SGLang's ``max_running_requests`` from the server log's start-up line (the simulator prints it too)."""
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


def baseline_levels(loads: tuple[int, ...], ms: tuple[Measurement, ...]) -> str:
    """The baseline's crossover record: its output tok/s, ITL and TTFT at each load (``crossover_levels``, JSON)."""
    return json.dumps([{"load": c, "output_tok_s": _r(m.output_tok_s.median if m.output_tok_s else None),
             "itl_ms": _r(m.itl_ms.median if m.itl_ms else None),
             "ttft_ms": _r(m.ttft_ms.median if m.ttft_ms else None)} for c, m in zip(loads, ms)], separators=(",", ":"))


def crossover_properties(x: Crossover, prediction: tuple[str, float | None], *, base_mode: str
                         ) -> dict[str, object]:
    """A speculative mode's crossover record, in the order it is recorded (``crossover_levels``: JSON, per level
    both modes' output tok/s, the ratio and its CI, ITL and TTFT)."""
    presult, pload = prediction
    out: dict[str, object] = {CROSSOVER_BASELINE: base_mode, CROSSOVER_RESULT: x.result, CROSSOVER: x.value}
    if x.ci_low is not None and x.ci_high is not None:
        out[f"{CROSSOVER}_ci_low"] = x.ci_low
        out[f"{CROSSOVER}_ci_high"] = x.ci_high
    out[CROSSOVER_WINS] = ",".join(map(str, x.wins))
    out[CROSSOVER_PREDICTED_RESULT] = presult
    if pload is not None:
        out[CROSSOVER_PREDICTED] = pload
    out[CROSSOVER_LEVELS] = json.dumps([
        {"load": p.load, "base_tok_s": _r(p.base_tok_s), "spec_tok_s": _r(p.spec_tok_s), "ratio": _r(p.ratio, 4),
         "ratio_ci": [_r(p.ratio_ci_low, 4), _r(p.ratio_ci_high, 4)], "base_itl_ms": _r(p.base_itl_ms),
         "spec_itl_ms": _r(p.spec_itl_ms), "base_ttft_ms": _r(p.base_ttft_ms), "spec_ttft_ms": _r(p.spec_ttft_ms)}
        for p in x.points], separators=(",", ":"))
    return out


def crossover_text(x: Crossover, prediction: tuple[str, float | None], *, mode: str, base_mode: str,
                   loads: tuple[int, ...]) -> str:
    """What a crossover record says: where ``mode`` stops beating ``base_mode``, the cost model's prediction, and
    the loads where it wins."""
    presult, pload = prediction
    pred = f"{pload:.3g} streams" if pload is not None else presult
    if x.result == "at":
        what = (f"{mode} stops beating {base_mode} at {x.load:.3g} streams (CI {x.ci_low:.3g}-{x.ci_high:.3g}; "
                f"the cost model predicts {pred})")
    elif x.result == "never":
        what = f"{mode} beats {base_mode} at no load from {loads[0]} to {loads[-1]} streams " \
               f"(the cost model predicts {pred})"
    else:
        what = f"{mode} still beats {base_mode} at {loads[-1]} streams, the highest load measured " \
               f"(the cost model predicts {pred})"
    if x.wins and x.result != "never":
        what += f"; it wins at {', '.join(map(str, x.wins))} streams"
    return what


def _r(x: float | None, nd: int = 2) -> float | None:
    return round(x, nd) if x is not None else None
