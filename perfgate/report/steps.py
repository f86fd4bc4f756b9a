"""The ``profile`` records of a report as rows: where each config's decode step goes (ms per step).

One row per profile record: GEMM, attention, all-reduce (the transfer), the ranks' mean wait inside
all-reduces for each other (``allreduce_wait``), all-gather, other kernels, and the step's time with no
kernel running (``idle``), which add up to the step's span on the GPU (averaged over ranks). The HTML
report shows them as a table and a stacked bar (perfgate.report.plot.steps_png).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from perfgate.report.records import Report

__all__ = ["PARTS", "StepRow", "step_rows", "steps_table"]

#: the parts of a step, in the order they stack
PARTS = ("gemm", "attention", "allreduce", "allreduce_wait", "allgather", "other", "idle")


@dataclass(frozen=True)
class StepRow:
    config: str
    outcome: str
    ms: dict[str, float]  # part -> ms per step
    allreduce_per_step: float
    backend: str
    skew_ms: float
    speculative: bool

    @property
    def step_ms(self) -> float:
        return sum(self.ms.values())


def step_rows(report: Report) -> list[StepRow]:
    """The report's ``profile`` records that carry a step profile, in report order."""
    out: list[StepRow] = []
    for r in report.records:
        if r.kind != "profile" or r.num("step_us") is None:
            continue
        us = {p: r.num(f"{p}_us_per_step") or 0.0 for p in PARTS if p not in ("allreduce", "idle")}
        us["allreduce"] = r.num("allreduce_us_per_step") or 0.0
        busy = r.num("gpu_busy_us_per_step") or sum(us.values())
        step = r.num("step_us") or busy
        us["idle"] = max(0.0, step - busy)
        name = r.mode + (f"+{r.prop('variant')}" if r.prop("variant") else "")
        out.append(StepRow(config=name, outcome=r.outcome + (f" {r.category}" if r.category else ""),
                           ms={p: us.get(p, 0.0) / 1000 for p in PARTS},
                           allreduce_per_step=r.num("allreduce_per_step") or 0.0,
                           backend=r.prop("allreduce_backend"), skew_ms=(r.num("skew_us_per_step") or 0.0) / 1000,
                           speculative="verify" in r.prop("reason")))
    return out


def steps_table(rows: list[StepRow]) -> str:
    """An HTML table of the rows (ms per step)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in ("config", "outcome", "step ms", *PARTS, "AR/step", "backend",
                                                       "skew ms"))
    body = []
    for r in rows:
        cells = [escape(r.config), escape(r.outcome), f"{r.step_ms:.2f}", *(f"{r.ms[p]:.2f}" for p in PARTS),
                 f"{r.allreduce_per_step:g}", escape(r.backend), f"{r.skew_ms:.2f}"]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"
