"""Serving under load, drawn from a report's goodput and crossover records: throughput against latency per
config (the Pareto front of its levels), goodput per mode, and the crossover plot (both modes' output tok/s
against load, the crossover marked). PNG with matplotlib, imported lazily (:mod:`perfgate.report.plot`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from perfgate.report.records import Record, Report

GOODPUT_KIND = "goodput"
CROSSOVER_KIND = "crossover"


@dataclass(frozen=True, kw_only=True)
class LoadData:
    """What a report says about load: goodput per mode, each mode's closed-loop levels, the crossovers."""

    goodput: tuple[tuple[str, float, tuple[float, float] | None, str], ...]  # (mode, req/s, CI, outcome)
    levels: dict[str, list[dict[str, Any]]]  # mode -> [{load, output_tok_s, itl_ms, ttft_ms}]: closed loop
    crossovers: tuple[Record, ...]  # speculative modes' crossover records
    #: mode -> the goodput record's open-loop levels [{rate, output_tok_s, tpot_ms_p99, meets, ...}]
    rates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.goodput and not self.levels and not self.rates


def _json(r: Record, name: str) -> list[dict[str, Any]]:
    try:
        v = json.loads(r.prop(name) or "[]")
    except ValueError:
        return []
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _interval(r: Record) -> tuple[float, float] | None:
    """A goodput record's interval (``goodput_rps_low`` to ``goodput_rps_high``, the low end alone where no level
    failed); reports before the interval carried the trials' CI of ``goodput_rps``."""
    lo, hi = r.num("goodput_rps_low"), r.num("goodput_rps_high")
    if lo is None:
        return r.metric_ci("goodput_rps")
    return (lo, hi if hi is not None else lo)


def load_data(report: Report) -> LoadData:
    good: list[tuple[str, float, tuple[float, float] | None, str]] = []
    levels: dict[str, list[dict[str, Any]]] = {}
    rates: dict[str, list[dict[str, Any]]] = {}
    xs: list[Record] = []
    for r in report.records:
        if r.kind == GOODPUT_KIND and r.num("goodput_rps") is not None:
            good.append((r.mode, float(r.num("goodput_rps") or 0.0), _interval(r), r.outcome))
        if r.kind == GOODPUT_KIND and _json(r, "load_levels"):
            rates[r.mode] = sorted(_json(r, "load_levels"), key=lambda x: float(x.get("rate") or 0))
        elif r.kind == CROSSOVER_KIND:
            pts = _json(r, "crossover_levels")
            if r.prop("crossover_result"):
                xs.append(r)
                base = r.prop("crossover_baseline") or "baseline"
                levels.setdefault(base, [{"load": p.get("load"), "output_tok_s": p.get("base_tok_s"),
                                          "itl_ms": p.get("base_itl_ms"), "ttft_ms": p.get("base_ttft_ms")}
                                         for p in pts])
                levels[r.mode] = [{"load": p.get("load"), "output_tok_s": p.get("spec_tok_s"),
                                   "itl_ms": p.get("spec_itl_ms"), "ttft_ms": p.get("spec_ttft_ms")} for p in pts]
            elif pts:
                levels[r.mode] = pts
    return LoadData(goodput=tuple(good), levels=levels, crossovers=tuple(xs), rates=rates)


def pareto(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (latency, throughput) points no other point beats on both (lower latency, higher throughput)."""
    front, best = [], float("-inf")
    for lat, tput in sorted(points, key=lambda p: (p[0], -p[1])):
        if tput > best:
            front.append((lat, tput))
            best = tput
    return front


def pareto_png(data: LoadData) -> bytes:
    """Throughput against latency per config, the Pareto front of its levels: the closed-loop levels (median ITL,
    labels: streams) and, beside them, the goodput records' open-loop levels (TPOT p99, the bound the SLOs hold;
    labels: req/s; a hollow marker missed the SLOs). Two panels, as a median and a p99 are not one axis."""
    from perfgate.report.plot import _figure, _to_png

    panels = [(levels, x, xlabel, title, unit) for levels, x, xlabel, title, unit in (
        (data.levels, "itl_ms", "inter-token latency, median (ms)", "closed loop (labels: streams)", "load"),
        (data.rates, "tpot_ms_p99", "time per output token, p99 (ms)", "open loop (labels: req/s)", "rate"))
        if any(p.get(x) is not None and p.get("output_tok_s") is not None for pts in levels.values() for p in pts)]
    fig = _figure(6.4 * max(1, len(panels)), 4.2)
    if not panels:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no load levels in this report", ha="center", va="center")
        ax.set_axis_off()
        return _to_png(fig)
    for i, (levels, x, xlabel, title, unit) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for mode, pts in sorted(levels.items()):
            xy = [(float(p[x]), float(p["output_tok_s"]), p.get(unit), p.get("meets", True)) for p in pts
                  if p.get(x) is not None and p.get("output_tok_s") is not None]
            if not xy:
                continue
            met = [(a, b) for a, b, _c, m in xy if m]
            missed = [(a, b) for a, b, _c, m in xy if not m]
            line = ax.plot([a for a, _ in met], [b for _, b in met], "o", alpha=0.6)[0]
            if missed:
                ax.plot([a for a, _ in missed], [b for _, b in missed], "o", mfc="none", color=line.get_color())
            front = pareto([(a, b) for a, b, _c, _m in xy])
            ax.plot([a for a, _ in front], [b for _, b in front], "-", color=line.get_color(), label=f"{mode} (front)")
            for a, b, c, _m in xy:
                ax.annotate(f"{c:g}" if isinstance(c, (int, float)) else str(c), (a, b), textcoords="offset points",
                            xytext=(3, 3), fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("output tok/s (all streams)")
        ax.set_title(f"throughput against latency, {title}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _to_png(fig)


def goodput_png(data: LoadData) -> bytes:
    from perfgate.report.plot import _figure, _to_png

    fig = _figure(max(3.5, 1.3 * len(data.goodput) + 1.5), 3.6)
    ax = fig.add_subplot(1, 1, 1)
    if not data.goodput:
        ax.text(0.5, 0.5, "no goodput records in this report", ha="center", va="center")
        ax.set_axis_off()
        return _to_png(fig)
    names = [m for m, _, _, _ in data.goodput]
    vals = [v for _, v, _, _ in data.goodput]
    err = [[max(0.0, v - ci[0]) if ci else 0.0 for _, v, ci, _ in data.goodput],
           [max(0.0, ci[1] - v) if ci else 0.0 for _, v, ci, _ in data.goodput]]
    colors = ["#2e7d32" if o == "pass" else "#9e9e9e" if o in ("skip", "inconclusive") else "#c62828"
              for _, _, _, o in data.goodput]
    ax.bar(range(len(vals)), vals, yerr=err, color=colors, capsize=4)
    ax.set_xticks(range(len(vals)))
    ax.set_xticklabels(names, rotation=20, ha="right")
    ax.set_ylabel("goodput (req/s within every SLO)")  # the bar: the interval's low end; the whisker: its high end
    ax.set_title("goodput per mode")
    for i, v in enumerate(vals):
        ax.annotate(f"{v:.3g}", (i, v), ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    return _to_png(fig)


def crossover_png(data: LoadData) -> bytes:
    from perfgate.report.plot import _figure, _to_png

    n = max(1, len(data.crossovers))
    fig = _figure(5.6 * min(n, 2), 3.8 * ((n + 1) // 2))
    if not data.crossovers:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no crossover records in this report", ha="center", va="center")
        ax.set_axis_off()
        return _to_png(fig)
    for i, r in enumerate(data.crossovers):
        ax = fig.add_subplot((n + 1) // 2, min(n, 2), i + 1)
        pts = [p for p in _json(r, "crossover_levels") if p.get("load")]
        loads = [float(p["load"]) for p in pts]
        base = r.prop("crossover_baseline") or "baseline"
        ax.plot(loads, [p.get("base_tok_s") for p in pts], "o-", label=base)
        ax.plot(loads, [p.get("spec_tok_s") for p in pts], "s-", label=r.mode)
        ax.set_xscale("log", base=2)
        res = r.prop("crossover_result")
        x, pred = r.num("crossover"), r.num("crossover_predicted")
        if res == "at" and x is not None:
            ax.axvline(x, color="#d32f2f", linestyle="--", label=f"crossover {x:.3g}")
            ci = r.metric_ci("crossover")
            if ci is not None:
                ax.axvspan(ci[0], ci[1], color="#d32f2f", alpha=0.1)
        if pred is not None:
            ax.axvline(pred, color="#6a1b9a", linestyle=":", label=f"cost model {pred:.3g}")
        ax.set_title(f"{r.mode} vs {base}: {res}" + (f" {x:.3g} streams" if res == "at" and x else ""), fontsize=9)
        ax.set_xlabel("streams (closed loop)")
        ax.set_ylabel("output tok/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _to_png(fig)
