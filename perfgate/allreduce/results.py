"""All-reduce results: one record per backend × world size × size × timing, and its statistics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perfgate.allreduce import DTYPE_BYTES


@dataclass(frozen=True, kw_only=True)
class AllReduceResult:
    """One backend × world size × size × timing mode: the measurement, or why there is none.

    A measured result has ``latency_us`` (median, µs), ``latency_p99_us``, ``algbw_gbps`` and
    ``busbw_gbps`` (nccl-tests' definitions). One that could not be measured has them None and
    ``category`` / ``reason`` set (e.g. ``cuda-graph-capture``, ``fallback``, ``wrong-output``).
    """

    backend: str
    world_size: int
    numel: int
    bytes: int
    dtype: str
    graph: bool
    iters: int
    device: str
    latency_us: float | None = None
    latency_p99_us: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    category: str | None = None
    reason: str = ""
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.latency_us is not None

    def as_properties(self) -> dict[str, str]:
        """JUnit properties of the record; a measurement that is missing is absent."""
        out = {
            "backend": self.backend,
            "world_size": str(self.world_size),
            "bytes": str(self.bytes),
            "dtype": self.dtype,
            "graph": "true" if self.graph else "false",
            "iters": str(self.iters),
        }
        for key in ("latency_us", "latency_p99_us", "algbw_gbps", "busbw_gbps"):
            v = getattr(self, key)
            if v is not None:
                out[key] = _num(v)
        return out


def busbw_gbps(nbytes: int, latency_us: float, world_size: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in GB/s as nccl-tests computes them for all-reduce.

    ``algbw = bytes / time``; ``busbw = algbw × 2(n − 1)/n`` (0 at world size 1).
    """
    if latency_us <= 0:
        raise ValueError(f"latency must be > 0 µs, got {latency_us}")
    algbw = nbytes / (latency_us * 1e-6) / 1e9
    return algbw, algbw * 2 * (world_size - 1) / world_size


def _percentile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of already sorted values."""
    k = (len(sorted_xs) - 1) * q / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def _num(x: float) -> str:
    s = f"{x:.6f}".rstrip("0").rstrip(".")
    return s if s not in ("", "-0") else "0"


def aggregate(spec: dict[str, Any], outputs: list[dict[str, Any]]) -> list[AllReduceResult]:
    """One result per size and timing mode from every rank's samples: the per-iteration mean over ranks,
    then its median and 99th percentile."""
    n = spec["world_size"]
    by_rank = [{(e["numel"], e["graph"]): e for e in o["entries"]} for o in outputs]
    dtype = outputs[0].get("dtype", spec["dtype"])
    note = outputs[0].get("note", "")
    if n == 1:
        note = (note + "; " if note else "") + (
            "world size 1: no communication (a local kernel, or no GPU work at all); not comparable with n > 1")
    results = []
    modes = [False, True] if spec["graph"] else [False]
    for graph in modes:
        for numel in spec["numels"]:
            entries = [m.get((numel, graph)) for m in by_rank]
            nbytes = numel * DTYPE_BYTES.get(dtype, 2)
            base = dict(backend=spec["backend"], world_size=n, numel=numel, bytes=nbytes, dtype=dtype, graph=graph,
                        iters=spec["iters"], device=spec["device"], note=note)
            failed: Any = next((e for e in entries if e is None or e.get("category")), False)
            if failed is not False:
                cat = failed.get("category", "crash") if failed else "crash"
                why = failed.get("reason", "") if failed else "a rank reported no result for this size"
                results.append(AllReduceResult(**base, category=cat, reason=why))
                continue
            samples = [e["samples_us"] for e in entries if e is not None]  # every rank's: none failed
            per_iter = [sum(xs) / n for xs in zip(*samples)]
            s = sorted(per_iter)
            med = _percentile(s, 50)
            p99 = _percentile(s, 99)
            if med <= 0:
                results.append(AllReduceResult(**base, category="crash",
                                               reason=f"non-positive median latency {med} µs"))
                continue
            algbw, busbw = busbw_gbps(nbytes, med, n)
            extra = next((e.get("note") for e in entries if e and e.get("note")), "")
            if extra:
                base["note"] = f"{base['note']}; {extra}" if base["note"] else extra
            results.append(AllReduceResult(**base, latency_us=med, latency_p99_us=p99,
                                           algbw_gbps=algbw, busbw_gbps=busbw))
    return results
