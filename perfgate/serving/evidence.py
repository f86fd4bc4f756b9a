"""What a server run actually exercised, read from its own log.

A variant that changes NCCL settings proves nothing if NCCL never carried the all-reduces (at tensor
parallel 2 on NVLink SGLang's custom all-reduce does). With ``NCCL_DEBUG=INFO`` and
``NCCL_DEBUG_SUBSYS`` including ``ENV`` and ``COLL``, NCCL prints each environment override it applied
and one line per collective it is handed on the host (eager calls and CUDA-graph captures; graph
replays launch no host code and print nothing). This module counts those lines per operation and
message size, so a record can say "NCCL carried 4224 all-reduces of 8 KiB" or "NCCL carried no
all-reduce", and keeps the first NCCL warning as evidence when a run failed.

Pure functions over log text; :func:`summarize` gives the JUnit properties.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Evidence", "not_exercised", "parse_evidence", "read_evidence", "summarize"]

# ncclDataType_t: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16, fp8e4m3, fp8e5m2
_DTYPE_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}

# "host:pid:tid [0] NCCL INFO AllReduce: opCount 1f sendbuff 0x.. recvbuff 0x.. count 4096 datatype 9 op 0 ..."
_COLL = re.compile(r"\[(\d+)\] NCCL INFO (\w+): opCount \w+ .*?\bcount (\d+) datatype (\d+)")
# "host:pid:tid [0] NCCL INFO NCCL_ALGO set by environment to allreduce:tree"
_ENV = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to (\S+?)\.?$")
_WARN = re.compile(r"NCCL WARN .*")
_DEBUG_ON = re.compile(r"NCCL INFO (NCCL version|Bootstrap|cudaDriverVersion|comm 0x)")

#: SGLang's own lines saying an all-reduce backend is in service (informational: their absence proves
#: nothing across SGLang versions, so no verdict rests on them)
BACKEND_LINES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("flashinfer_ar_fusion", re.compile(r"FlashInfer AllReduce Fusion enabled and workspace initialized: "
                                        r"backend=(\w+)")),
)

#: an all-reduce this small is a barrier or a flag, not a layer's activations
TINY_BYTES = 64


@dataclass(frozen=True)
class Evidence:
    """NCCL's own account of one server run (first CUDA device that logged, usually rank 0)."""

    nccl_logging: bool = False  # NCCL INFO lines were present at all
    coll_logging: bool = False  # ... and per-collective lines
    device: str = ""
    calls: Counter[tuple[str, int]] = field(default_factory=Counter)  # (op, bytes) -> calls on `device`
    env: tuple[tuple[str, str], ...] = ()
    warning: str = ""
    backends: tuple[str, ...] = ()  # SGLang said these all-reduce backends are in service (BACKEND_LINES)

    def count(self, op: str, *, min_bytes: int = 0) -> int:
        return sum(n for (o, b), n in self.calls.items() if o == op and b >= min_bytes)

    @property
    def nccl_allreduces(self) -> int:
        """All-reduces NCCL was handed, leaving out barrier-sized ones."""
        return self.count("AllReduce", min_bytes=TINY_BYTES + 1)

    def describe(self, top: int = 4) -> str:
        parts = []
        if not self.nccl_logging:
            parts.append("NCCL: unknown, the server log has no NCCL INFO lines (set NCCL_DEBUG=INFO and "
                         "NCCL_DEBUG_SUBSYS=INIT,ENV,COLL in the profile's [server.env] to record it)")
        elif not self.coll_logging:
            parts.append("NCCL: unknown, NCCL logged no per-collective lines (NCCL_DEBUG_SUBSYS lacks COLL)")
        else:
            ar = self.nccl_allreduces
            parts.append(f"NCCL carried all-reduces ({ar} host calls: eager and CUDA-graph capture)" if ar
                         else "NCCL carried no all-reduce")
        if self.calls:
            common = sorted(self.calls.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            parts.append("calls on GPU " + self.device + ": "
                         + ", ".join(f"{o} {_size(b)} x{n}" for (o, b), n in common))
        if self.backends:
            parts.append("SGLang: " + ", ".join(self.backends) + " in service")
        if self.env:
            parts.append("env: " + ", ".join(f"{k}={v}" for k, v in self.env))
        return "; ".join(parts)


def _size(b: int) -> str:
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20} MiB"
    if b >= 1024 and b % 1024 == 0:
        return f"{b >> 10} KiB"
    return f"{b} B"


def parse_evidence(text: str) -> Evidence:
    """Count NCCL's per-collective log lines of the first device that logged any."""
    per_dev: dict[str, Counter[tuple[str, int]]] = {}
    env: dict[str, str] = {}
    warning = ""
    logging = False
    backends: dict[str, None] = {}
    for line in text.splitlines():
        if "NCCL" not in line:
            for name, pattern in BACKEND_LINES:
                b = pattern.search(line)
                if b:
                    backends[f"{name} ({b.group(1)})" if b.groups() else name] = None
            continue
        m = _COLL.search(line)
        if m:
            logging = True
            dev, op, count, dt = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
            per_dev.setdefault(dev, Counter())[(op, count * _DTYPE_BYTES.get(dt, 1))] += 1
            continue
        m = _ENV.search(line)
        if m:
            logging = True
            env.setdefault(m.group(1), m.group(2))
            continue
        if not warning:
            w = _WARN.search(line)
            if w:
                warning = w.group(0).strip()
                continue
        if not logging and _DEBUG_ON.search(line):
            logging = True
    dev = min(per_dev, key=int) if per_dev else ""
    return Evidence(nccl_logging=logging or bool(warning), coll_logging=bool(per_dev), device=dev,
                    calls=per_dev.get(dev, Counter()), env=tuple(sorted(env.items())), warning=warning,
                    backends=tuple(backends))


def read_evidence(log_path: str | Path) -> Evidence:
    """:func:`parse_evidence` of a log file (an unreadable or missing file: no evidence)."""
    try:
        return parse_evidence(Path(log_path).read_text(errors="replace"))
    except OSError:
        return Evidence()


def not_exercised(backend: str, ev: Evidence) -> str | None:
    """Why a run did not exercise ``backend``, where the log can prove it (else None).

    Only NCCL is decided: with per-collective logging on, zero NCCL all-reduces means another backend
    (SGLang's custom all-reduce, FlashInfer, ...) carried every one of them.
    """
    if backend == "nccl" and ev.coll_logging and not ev.nccl_allreduces:
        return f"NCCL carried no all-reduce in this run, so another backend carried them all ({ev.describe()})"
    return None


def summarize(ev: Evidence) -> dict[str, object]:
    """JUnit properties: ``exercised`` (one line), the NCCL call counts, and the first NCCL warning."""
    props: dict[str, object] = {"exercised": ev.describe()}
    if ev.coll_logging:
        props["nccl_allreduce_calls"] = ev.nccl_allreduces
        props["nccl_allgather_calls"] = ev.count("AllGather")
    if ev.warning:
        props["nccl_warning"] = ev.warning[:300]
    return props
