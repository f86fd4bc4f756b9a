"""Report series for the HTML page's tests and docs/ screenshots: N reports of R records each (pure: files only).

The records are of three kinds, each judged on its own metric: decode floors (``tok_s``), latency records (``ttft_ms``,
which also carry a per-request ``tok_s`` the page must not show for them) and output-throughput records
(``output_tok_s``); variants and profiles with long names. The newest report regresses TTFT by about 3 % and breaks
one variant, so the verdict blocks; with three reports or more the older ones are the noise history.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.report_factory import DEFAULT_STACK, Case, fmt, perf_case, write_report

LONG_VARIANT = "flashinfer-allreduce-fusion-with-one-shot-and-two-shot-kernels-and-a-long-name-x8"
VARIANTS = ("nccl-tree", "custom-ar-on", LONG_VARIANT, "mscclpp", "nccl-fewer-channels")
MODES = ("baseline", "eagle3", "eagle3-4stream-with-a-rather-long-mode-name")


@dataclass(frozen=True)
class Expected:
    """What a record is judged on in the newest report: its metric and its figure there."""

    metric: str
    new: float


def _figure(metric: str, base: float, report: int, n: int, regress: bool) -> float:
    wobble = 1 + 0.0005 * ((report * 7 + len(metric)) % 5 - 2)
    if regress and report == n - 1:
        return base * (1.03 if metric.endswith("_ms") else 0.97)
    return base * wobble


def _case(kind: str, mode: str, variant: str, metric: str, value: float, i: int, *, rate: float,
          outcome: str = "pass") -> Case:
    spread = value * 0.004
    extra = {"metric": metric, metric: fmt(value), f"{metric}_ci_low": fmt(value - spread),
             f"{metric}_ci_high": fmt(value + spread), f"{metric}_cv": fmt(0.004), "n": fmt(5),
             "start_values": ",".join(fmt(value * (1 + d)) for d in (-0.001, 0.0, 0.001)), "n_starts": "3",
             "direction": "lower" if metric.endswith("_ms") else "higher", "machine.id": "GPU-4caf1049"}
    if metric != "tok_s":
        extra["tok_s"] = fmt(rate)  # a per-request rate the page must not show for this record
    return perf_case(mode, variant, outcome=outcome, kind=kind, test=f"test_{kind.replace('-', '_')}_{i}",
                     classname=f"perftests.test_{kind.replace('-', '_')}", extra=extra,
                     category="slower-than-baseline" if outcome == "fail" else "")


def write_series(folder: Path, reports: int, records: int) -> tuple[list[Path], dict[str, Expected]]:
    """``reports`` report files of ``records`` records each in ``folder``; the newest report's expected metric and
    figure per record key (``classname::name``)."""
    folder.mkdir(parents=True, exist_ok=True)
    kinds = (("floor", "tok_s", 86.85), ("latency", "ttft_ms", 269.9), ("throughput", "output_tok_s", 116.5))
    plan: list[tuple[str, str, str, str, float]] = []
    i = 0
    while len(plan) < records:
        kind, metric, base = kinds[i % 3]
        mode = MODES[(i // 3) % len(MODES)]
        variant = "" if kind != "floor" and i % 2 else VARIANTS[(i // 9) % len(VARIANTS)] if i >= 9 else ""
        plan.append((kind if not variant else "variant" if kind == "floor" else kind, mode, variant, metric,
                     base * (1 + 0.01 * (i % 11))))
        i += 1
    paths: list[Path] = []
    expected: dict[str, Expected] = {}
    for rep in range(reports):
        cases = []
        for j, (kind, mode, variant, metric, base) in enumerate(plan):
            regress = kind == "latency" and j % 4 == 1
            value = _figure(metric, base, rep, reports, regress)
            broken = rep == reports - 1 and j == 9
            c = _case(kind, mode, variant, metric, value, j, rate=31.10 if rep == reports - 1 else 32.07,
                      outcome="fail" if broken else "pass")
            cases.append(c)
            if rep == reports - 1:
                expected[f"{c.classname}::{c.name}"] = Expected(metric=metric, new=value)
        stack = dict(DEFAULT_STACK)
        if rep == reports - 1:
            stack["stack.sglang"] = "0.5.24.dev417+g1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
            stack["stack.flashinfer"] = "0.8.0"
        day, hour = divmod(rep, 24)
        paths.append(write_report(folder / f"run-{rep:03d}.xml", cases, stack=stack,
                                  started_at=f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T{hour:02d}:00:00+00:00",
                                  hostname="gpu-box-a"))
    return paths, expected
