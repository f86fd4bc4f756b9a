#!/usr/bin/env python
"""All-reduce floors for a profile, from the JUnit report of a micro-benchmark run.

    pytest perftests/ -m micro --perfgate-profile h200-x2/allreduce --junitxml=run.xml
    python scripts/micro_floors.py run.xml                        # print the TOML fragment
    python scripts/micro_floors.py run.xml --update baselines/h200-x2/allreduce.toml

Every passing ``test_allreduce`` record (``outcome`` pass, a ``latency_us``) becomes a floor
``[micro.floors] "<backend>.<eager|graph>.<bytes>" = { latency_us, tolerance, world_size }``:
its median latency, with ``--graph-tolerance`` (0.25) for CUDA-graph timings and
``--eager-tolerance`` (0.5) for eager ones, whose time is mostly the host's launch overhead
and moves with the host, not the link. The medians of one backend in a CUDA graph
(``--latency-backend``, nccl) also become ``[model.allreduce_latency_us]``, the cost model's
all-reduce latency on that box. Records that did not pass (xfail, fail) get no floor.

``--update PROFILE`` replaces the fragment between its BEGIN/END marker lines in the profile
(or appends it), checks that the result loads, and only then writes the file (the writer of
``--perfgate-update-baselines``, ``perfgate.profiles.writer.write_profile``). A report that
holds the same backend, timing and size at two world sizes needs ``--world-size``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from perfgate.errors import PerfgateError, ReportError  # noqa: E402

BEGIN = "# --- BEGIN micro floors (scripts/micro_floors.py; refresh with --update, do not edit by hand) ---"
END = "# --- END micro floors ---"
GRAPH_TOLERANCE = 0.25
EAGER_TOLERANCE = 0.5


@dataclass(frozen=True, kw_only=True)
class Point:
    """One passing all-reduce record of the report."""

    backend: str
    timing: str  # "eager" | "graph"
    bytes: int
    world_size: int
    latency_us: float
    p99_us: float | None
    busbw_gbps: float | None

    @property
    def key(self) -> str:
        return f"{self.backend}.{self.timing}.{self.bytes}"


def read_points(junit: str | Path, *, world_size: int | None = None) -> tuple[list[Point], dict[str, str]]:
    """The passing all-reduce records of a report (sorted), and the report's stack and run facts."""
    from perfgate.report.junit_read import read_report

    rep = read_report(junit)
    points: dict[str, Point] = {}
    for r in rep.records:
        if r.kind != "allreduce" or r.outcome != "pass":
            continue
        lat, nbytes, ws = r.num("latency_us"), r.num("bytes"), r.num("world_size")
        timing = r.mode or ("graph" if r.prop("graph") == "true" else "eager")
        backend = r.prop("backend") or r.variant
        if lat is None or nbytes is None or ws is None or not backend or timing not in ("eager", "graph"):
            raise ReportError(f"{junit}: record {r.id} passed but lacks backend/mode/bytes/world_size/latency_us; "
                              "was it written by perftests/test_allreduce.py?")
        if world_size is not None and int(ws) != world_size:
            continue
        p = Point(backend=backend, timing=timing, bytes=int(nbytes), world_size=int(ws), latency_us=lat,
                  p99_us=r.num("latency_p99_us"), busbw_gbps=r.num("busbw_gbps"))
        old = points.get(p.key)
        if old is not None and old.world_size != p.world_size:
            raise ReportError(f"{junit}: {p.key} was measured at world sizes {old.world_size} and {p.world_size}; "
                              "a profile keeps one floor per backend, timing and size: pass --world-size N")
        if old is not None and old.latency_us != p.latency_us:
            raise ReportError(f"{junit}: {p.key} occurs twice with different medians ({old.latency_us} and "
                              f"{p.latency_us} µs; a merged report?): give the report of one run")
        points[p.key] = p
    if not points:
        raise ReportError(f"{junit}: no passing all-reduce record (kind 'allreduce'): nothing to make floors of")
    facts = dict(rep.stack)
    facts["report"] = Path(junit).name
    if rep.started_at is not None:
        facts["started_at"] = rep.started_at.isoformat()
    facts["iters"] = ",".join(sorted({r.prop("iters") for r in rep.records if r.prop("iters")}))
    order = {"eager": 0, "graph": 1}
    return sorted(points.values(), key=lambda p: (p.backend, order[p.timing], p.bytes)), facts


def _us(x: float) -> str:
    """A latency rounded to 0.01 µs, written as TOML reads it back (always with a decimal point)."""
    v = round(x, 2)
    if v <= 0 or not math.isfinite(v):
        raise ValueError(f"latency {x} µs does not round to a positive number")
    return repr(v)


def fragment(points: Sequence[Point], facts: dict[str, str], *, graph_tolerance: float = GRAPH_TOLERANCE,
             eager_tolerance: float = EAGER_TOLERANCE, latency_backend: str = "nccl") -> str:
    """The TOML fragment: ``[model.allreduce_latency_us]`` and ``[micro.floors]``, between the markers."""
    st = facts
    lines = [
        BEGIN,
        f"# From {st.get('report', '?')} ({st.get('started_at', 'time unknown')}): {st.get('stack.gpu_count', '?')}x "
        f"{st.get('stack.gpu', '?')}, SM {st.get('stack.sm', '?')}, {st.get('stack.interconnect', '?')};",
        f"# driver {st.get('stack.driver', '?')}, CUDA {st.get('stack.cuda', '?')}, "
        f"torch {st.get('stack.torch', '?')}, NCCL {st.get('stack.nccl', '?')}; "
        f"{st.get('iters') or '?'} timed iterations per record.",
        f"# A floor is a ceiling: the median latency must be <= latency_us x (1 + tolerance). tolerance "
        f"{graph_tolerance:g} for CUDA-graph",
        f"# timings (replays of back-to-back all-reduces: steady), {eager_tolerance:g} for eager timings (one "
        "launch per all-reduce: mostly host",
        "# launch overhead, which moves with the host's load and clocks, not with the link).",
        "",
    ]
    lat = [p for p in points if p.backend == latency_backend and p.timing == "graph"]
    if lat:
        ws = sorted({p.world_size for p in lat})
        lines += [
            "[model.allreduce_latency_us]",
            f"# {latency_backend} in a CUDA graph at world size {'/'.join(map(str, ws))}: bytes -> median us; the cost "
            "model's all-reduce latency on this box",
        ]
        lines += [f'"{p.bytes}" = {_us(p.latency_us)}' for p in lat]
        lines.append("")
    lines.append("[micro.floors]")
    for p in points:
        tol = graph_tolerance if p.timing == "graph" else eager_tolerance
        note = f"p99 {p.p99_us:.2f} us" if p.p99_us is not None else ""
        if p.busbw_gbps is not None:
            note += f", busbw {p.busbw_gbps:.2f} GB/s"
        entry = (f'"{p.key}" = {{ latency_us = {_us(p.latency_us)}, tolerance = {float(tol)!r}, '
                 f"world_size = {p.world_size} }}")
        lines.append(f"{entry}  # {note}" if note else entry)
    lines.append(END)
    return "\n".join(lines) + "\n"


def splice(text: str, frag: str) -> str:
    """``text`` with the fragment between the markers replaced by ``frag`` (appended when absent)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.rstrip("\n") == BEGIN]
    ends = [i for i, ln in enumerate(lines) if ln.rstrip("\n") == END]
    if not starts and not ends:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + frag
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError("the profile has unbalanced or repeated micro-floors marker lines; fix them by hand")
    return "".join(lines[: starts[0]]) + frag + "".join(lines[ends[0] + 1:])


def update(profile: Path, frag: str) -> None:
    """Write the fragment into ``profile``, but only if the result still loads as a profile (through
    perfgate's one profile writer, :func:`perfgate.profiles.writer.write_profile`)."""
    from perfgate.profiles.writer import write_profile

    write_profile(profile, splice(profile.read_text(), frag))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/micro_floors.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", help="JUnit XML of a `pytest perftests/ -m micro` run")
    ap.add_argument("--graph-tolerance", type=float, default=GRAPH_TOLERANCE)
    ap.add_argument("--eager-tolerance", type=float, default=EAGER_TOLERANCE)
    ap.add_argument("--latency-backend", default="nccl",
                    help="whose CUDA-graph medians become [model.allreduce_latency_us] (default nccl)")
    ap.add_argument("--world-size", type=int, default=None, help="only records of this world size")
    ap.add_argument("--update", metavar="PROFILE", type=Path, default=None,
                    help="write the fragment into this profile (between its marker lines) instead of printing it")
    a = ap.parse_args(argv)
    if a.graph_tolerance < 0 or a.eager_tolerance < 0:
        ap.error("tolerances are fractions >= 0, e.g. 0.25")
    try:
        points, facts = read_points(a.junit, world_size=a.world_size)
        frag = fragment(points, facts, graph_tolerance=a.graph_tolerance, eager_tolerance=a.eager_tolerance,
                        latency_backend=a.latency_backend)
        if a.update is None:
            sys.stdout.write(frag)
        else:
            update(a.update, frag)
            print(f"{a.update}: {len(points)} floors written from {a.junit}", file=sys.stderr)
    except (PerfgateError, ValueError, OSError) as e:
        print(f"micro_floors: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
