"""Where each decode step's GPU time goes, read from SGLang's own profiler trace (Chrome trace JSON).

SGLang wraps every forward of the target model in a ``step[<MODE> bs=<n>]`` span; torch's profiler
writes it twice, on the CPU (``user_annotation``) and as the GPU time of the kernels launched inside it
(``gpu_user_annotation``), and every kernel, CUDA-graph replays included, as a ``kernel`` event. So:

- a **step** is one ``step[DECODE ...]`` (plain decoding) or ``step[TARGET_VERIFY ...]`` (the verify
  pass of a speculative cycle) GPU span, and its kernels are those that start inside it;
- a **cycle** runs from one step's start to the next one's (the draft forwards and the draft extend of
  a speculative cycle fall between two verify passes), so there is one cycle fewer than steps.

Kernels are sorted into groups (GEMM, attention, all-reduce, all-gather, other) by name; an all-reduce
also gets the *family* that ran it, in the vocabulary of the variants' ``backend`` key (``nccl``,
``custom_ar``, ``flashinfer_ar_fusion``, ``pcie_ipc``, ``torch_symm_mem``, ``mscclpp``): that is what
proves which backend carried the all-reduces, whatever the log says.

Ranks: the rank that reaches an all-reduce first waits for the others inside the kernel, so one rank's
all-reduce time can be many times another's on the same steps. The transfer is the minimum across
ranks; the skew (maximum minus minimum) is reported apart.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.categories import Backend

__all__ = ["GROUPS", "EXTEND_STEP", "TraceError", "busy_within", "RankSteps", "StepProfile", "kernel_group",
           "read_trace", "summarize", "analyze"]

#: the groups a kernel's time is booked to, in the order a stacked bar shows them
GROUPS = ("gemm", "attention", "allreduce", "allgather", "other")

# (group, family, pattern), first match wins. The all-reduce families use the variants' `backend`
# names. NCCL's device kernels are named ncclDevKernel_<Coll>_<Op>_<type>_<ALGO>_<PROTO> (2.19+;
# ncclKernel_... before); SGLang's custom all-reduce kernels are cross_device_reduce_{1,2}stage (from
# vLLM) or its v2's *all_reduce*; FlashInfer's fused all-reduce + RMSNorm is TensorRT-LLM's
# allreduce_fusion_kernel_{oneshot,twoshot}_*; torch symmetric memory's are {one,two}_shot_all_reduce_kernel
# and multimem_*all_reduce_kernel. GEMM and attention names are those of real H200 traces
# (fixtures/traces/): cuBLAS's nvjet_*/splitKreduce, SGLang's Triton attention (_fwd_*kernel*), and
# the usual library names.
_TABLE: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (g, f, re.compile(p, re.IGNORECASE)) for g, f, p in (
        ("allreduce", Backend.NCCL, r"nccl(Dev)?Kernel_AllReduce"),
        ("allgather", Backend.NCCL, r"nccl(Dev)?Kernel_AllGather"),
        ("allgather", Backend.NCCL, r"nccl(Dev)?Kernel_(ReduceScatter|Broadcast|SendRecv|Reduce)"),
        ("allreduce", Backend.FLASHINFER_AR_FUSION, r"allreduce_fusion_kernel|trtllm_allreduce|lamport"),
        ("allreduce", Backend.PCIE_IPC, r"pcie_ipc|ipc_allreduce|oneshot_pcie"),
        ("allreduce", Backend.TORCH_SYMM_MEM, r"(one|two)_shot_all_reduce_kernel|multimem_\w*all_reduce"),
        ("allreduce", Backend.MSCCLPP, r"mscclpp|allreduce\d+\b"),
        ("allreduce", Backend.CUSTOM_AR, r"cross_device_reduce|custom_?all_?reduce|all_reduce"),
        ("allgather", "other", r"all_?gather"),
        ("gemm", "", r"nvjet|gemm|cutlass|splitKreduce|cublas|sm\d+_xmma|deep_?gemm|fused_moe|_mm_kernel|matmul"),
        ("attention", "", r"attention|attn|_fwd_(grouped_)?kernel|flash_?(fwd|attn|mla)|fmha|BatchDecode|"
                          r"BatchPrefill|BatchMLA|decode_kernel|prefill_kernel|paged_?kv"),
    ))
_STEP = re.compile(r"^step\[(DECODE|TARGET_VERIFY)\b")
#: a prefill's span (``step[EXTEND bs=<n> toks=<t>]``): perfgate.measuring.prefill_gpu reads the prefills' GPU time
EXTEND_STEP = re.compile(r"^step\[EXTEND\b")
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


class TraceError(ValueError):
    """A trace file that cannot be read, or holds no decode step."""


def kernel_group(name: str) -> tuple[str, str]:
    """(group, all-reduce/all-gather family) of a kernel name; ``("other", "")`` when nothing matches."""
    for group, family, pat in _TABLE:
        if pat.search(name):
            return group, family
    return "other", ""


@dataclass(frozen=True)
class _Kernel:
    name: str
    ts: float
    dur: float
    group: str
    family: str


@dataclass(frozen=True)
class _Span:
    name: str
    ts: float
    dur: float


@dataclass
class RankSteps:
    """One rank's trace, cut into steps and cycles."""

    path: str
    rank: int
    world_size: int
    gpu: str
    steps: list[_Span]
    kernels: list[_Kernel]  # sorted by start


def read_trace(path: str | Path, *, step: re.Pattern[str] = _STEP) -> RankSteps:
    """One rank's Chrome trace (``.json`` or ``.json.gz``), as written by torch's profiler for SGLang; its steps are
    the GPU spans whose name ``step`` matches (the decode steps and verify passes, or :data:`EXTEND_STEP`)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw)
    except (OSError, EOFError, ValueError, zlib.error) as err:
        raise TraceError(f"{p}: not a readable Chrome trace ({type(err).__name__}: {err})") from err
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{p}: no traceEvents list (is it a torch profiler trace?)")
    info = doc.get("distributedInfo", {}) if isinstance(doc, dict) else {}
    devs = doc.get("deviceProperties", []) if isinstance(doc, dict) else []
    kernels: list[_Kernel] = []
    steps: list[_Span] = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), str(e.get("name", ""))
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        if cat in _GPU_CATS:
            group, family = kernel_group(name) if cat == "kernel" else ("other", "")
            kernels.append(_Kernel(name, ts, dur, group, family))
        elif cat == "gpu_user_annotation" and step.match(name):
            steps.append(_Span(name, ts, dur))
    if not steps and step is EXTEND_STEP:
        raise TraceError(f"{p}: no step[EXTEND ...] GPU span: not a prefill-stage trace of SGLang (profile with "
                         f"profile_by_stage while prefills run)")
    if not steps:
        raise TraceError(f"{p}: no step[DECODE ...] or step[TARGET_VERIFY ...] GPU span: not a decode-stage trace "
                         f"of SGLang (profile with profile_by_stage, and a request decoding while it records)")
    rank = _rank_from_name(p.name)
    return RankSteps(path=str(p), rank=int(info.get("rank", rank if rank is not None else 0)),
                     world_size=int(info.get("world_size", 1)),
                     gpu=str(devs[0].get("name", "")) if devs and isinstance(devs[0], dict) else "",
                     steps=sorted(steps, key=lambda s: s.ts), kernels=sorted(kernels, key=lambda k: k.ts))


def _rank_from_name(name: str) -> int | None:
    m = re.search(r"-TP-(\d+)", name)
    return int(m.group(1)) if m else None


def _busy(ks: Sequence[_Kernel]) -> float:
    """GPU-busy microseconds: the union of the kernels' intervals (streams can overlap)."""
    total, end = 0.0, float("-inf")
    for k in ks:  # sorted by start
        a, b = k.ts, k.ts + k.dur
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _within(ks: Sequence[_Kernel], starts: Sequence[float], lo: float, hi: float) -> list[_Kernel]:
    """The kernels starting in [lo, hi) (``starts``: the kernels' start times, sorted like them)."""
    import bisect

    return list(ks[bisect.bisect_left(starts, lo):bisect.bisect_left(starts, hi)])


def busy_within(t: RankSteps, span: _Span) -> float:
    """GPU-busy microseconds of the kernels of ``t`` that start inside ``span`` (one of its steps)."""
    return _busy(_within(t.kernels, [k.ts for k in t.kernels], span.ts, span.ts + span.dur))


@dataclass(frozen=True)
class RankSummary:
    """Per-step and per-cycle figures of one rank (microseconds; counts per step)."""

    rank: int
    steps: int
    step_us: float  # the step span on the GPU (first kernel to last)
    busy_us: float  # GPU-busy inside the step
    group_us: dict[str, float]  # inside the step, by group
    allreduce_count: float
    allreduce_us: float
    allreduce_families: dict[str, float]  # family -> us per step
    allgather_count: float
    cycles: int
    cycle_us: float | None  # step start to the next step's start
    cycle_busy_us: float | None
    cycle_allreduce_count: float | None
    cycle_allreduce_us: float | None
    top: tuple[tuple[str, float, float], ...]  # (name, count per step, us per step), by time


def summarize(t: RankSteps, *, top: int = 5) -> RankSummary:
    """The per-step and per-cycle figures of one rank's trace."""
    n = len(t.steps)
    group_us: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
    fam: dict[str, float] = defaultdict(float)
    names: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    busy = step_us = ar_n = ar_us = ag_n = 0.0
    starts = [k.ts for k in t.kernels]  # once per trace, not per step
    for s in t.steps:
        ks = _within(t.kernels, starts, s.ts, s.ts + s.dur)
        busy += _busy(ks)
        step_us += s.dur
        for k in ks:
            group_us[k.group] += k.dur
            names[k.name][0] += 1
            names[k.name][1] += k.dur
            if k.group == "allreduce":
                ar_n += 1
                ar_us += k.dur
                fam[k.family] += k.dur
            elif k.group == "allgather":
                ag_n += 1
    cyc = [(a.ts, b.ts) for a, b in zip(t.steps, t.steps[1:])]
    c_busy = c_n = c_us = 0.0
    for lo, hi in cyc:
        ks = _within(t.kernels, starts, lo, hi)
        c_busy += _busy(ks)
        ars = [k for k in ks if k.group == "allreduce"]
        c_n += len(ars)
        c_us += sum(k.dur for k in ars)
    m = len(cyc)
    tops = sorted(names.items(), key=lambda kv: -kv[1][1])[:top]
    return RankSummary(
        rank=t.rank, steps=n, step_us=step_us / n, busy_us=busy / n,
        group_us={g: v / n for g, v in group_us.items()}, allreduce_count=ar_n / n, allreduce_us=ar_us / n,
        allreduce_families={f: v / n for f, v in fam.items()}, allgather_count=ag_n / n, cycles=m,
        cycle_us=sum(b - a for a, b in cyc) / m if m else None, cycle_busy_us=c_busy / m if m else None,
        cycle_allreduce_count=c_n / m if m else None, cycle_allreduce_us=c_us / m if m else None,
        top=tuple((name, c / n, us / n) for name, (c, us) in tops))


@dataclass(frozen=True)
class StepProfile:
    """The profile of one config across its tensor-parallel ranks."""

    ranks: tuple[RankSummary, ...]
    gpu: str = ""
    speculative: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def steps(self) -> int:
        return min(r.steps for r in self.ranks)

    @property
    def step_us(self) -> float:
        return sum(r.step_us for r in self.ranks) / len(self.ranks)

    @property
    def busy_us(self) -> float:
        return sum(r.busy_us for r in self.ranks) / len(self.ranks)

    @property
    def allreduce_count(self) -> float:
        return max(r.allreduce_count for r in self.ranks)

    @property
    def allreduce_us(self) -> float:
        """The transfer: the least all-reduce time of any rank (the others include waiting for it)."""
        return min(r.allreduce_us for r in self.ranks)

    @property
    def skew_us(self) -> float:
        return max(r.allreduce_us for r in self.ranks) - self.allreduce_us

    @property
    def allreduce_wait_us(self) -> float:
        """Mean time per step the ranks spent waiting inside all-reduces for the others (mean minus least)."""
        return sum(r.allreduce_us for r in self.ranks) / len(self.ranks) - self.allreduce_us

    @property
    def allreduce_share(self) -> float:
        return self.allreduce_us / self.step_us if self.step_us > 0 else 0.0

    @property
    def allreduce_backend(self) -> str:
        """The family that carried most all-reduce time (``none`` when the step has no all-reduce)."""
        fam: Counter[str] = Counter()
        for r in self.ranks:
            fam.update(r.allreduce_families)
        return fam.most_common(1)[0][0] if fam else "none"

    @property
    def cycle_us(self) -> float | None:
        vals = [r.cycle_us for r in self.ranks if r.cycle_us is not None]
        return sum(vals) / len(vals) if vals else None

    @property
    def cycle_allreduce_us(self) -> float | None:
        vals = [r.cycle_allreduce_us for r in self.ranks if r.cycle_allreduce_us is not None]
        return min(vals) if vals else None

    def group_us(self, group: str) -> float:
        """Time per step in ``group``; the all-reduce group counts the transfer only (see ``skew_us``)."""
        if group == "allreduce":
            return self.allreduce_us
        return sum(r.group_us.get(group, 0.0) for r in self.ranks) / len(self.ranks)

    def projected_speedup(self, allreduce_factor: float) -> float | None:
        """Decode speed-up if every cycle's all-reduce time were scaled by ``allreduce_factor`` (0: removed).

        From the cycle (step start to step start, so the draft and the idle gaps count) and its measured
        all-reduce transfer: ``cycle / (cycle - (1 - factor) * allreduce)``.
        """
        c, ar = self.cycle_us, self.cycle_allreduce_us
        if c is None or ar is None or c <= 0:
            return None
        rest = c - (1.0 - allreduce_factor) * ar
        return c / rest if rest > 0 else None

    def properties(self) -> dict[str, object]:
        """The record's properties (docs/records.md, kind ``profile``)."""
        out: dict[str, object] = {
            "tp_ranks": len(self.ranks),
            "profiled_steps": self.steps,
            "step_us": self.step_us,
            "gpu_busy_us_per_step": self.busy_us,
            "allreduce_per_step": self.allreduce_count,
            "allreduce_us_per_step": self.allreduce_us,
            "allreduce_share": self.allreduce_share,
            "allreduce_backend": self.allreduce_backend,
            "skew_us_per_step": self.skew_us,
            "allreduce_wait_us_per_step": self.allreduce_wait_us,
            "allgather_per_step": max(r.allgather_count for r in self.ranks),
        }
        for g in GROUPS:
            if g != "allreduce":
                out[f"{g}_us_per_step"] = self.group_us(g)
        if self.cycle_us is not None:
            out["cycle_us"] = self.cycle_us
            out["allreduce_per_cycle"] = max(r.cycle_allreduce_count or 0.0 for r in self.ranks)
            out["allreduce_us_per_cycle"] = self.cycle_allreduce_us
            for name, f in (("ar_halved", 0.5), ("no_ar", 0.0)):
                s = self.projected_speedup(f)
                if s is not None:
                    out[f"speedup_{name}"] = s
        r0 = min(self.ranks, key=lambda r: r.rank)
        out["top_kernels"] = "; ".join(f"{_short(n)} x{c:g} {us:.1f}us" for n, c, us in r0.top)
        return out


def _short(name: str, width: int = 60) -> str:
    """A kernel name without its template arguments and parameter list, cut to ``width``."""
    s = re.sub(r"^void\s+", "", name)
    depth, out = 0, []
    for ch in s:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    short = "".join(out).strip() or s
    return short if len(short) <= width else short[:width - 1] + "…"


def analyze(paths: Iterable[str | Path]) -> StepProfile:
    """The profile of one config from its ranks' trace files (one per tensor-parallel rank)."""
    traces = [read_trace(p) for p in paths]
    if not traces:
        raise TraceError("no trace file to analyze")
    traces.sort(key=lambda t: t.rank)
    notes: list[str] = []
    ranks = {t.rank for t in traces}
    world = max(t.world_size for t in traces)
    if len(ranks) < world:
        notes.append(f"{len(ranks)} of {world} ranks' traces read")
    counts = {t.rank: len(t.steps) for t in traces}
    if len(set(counts.values())) > 1:
        notes.append(f"ranks recorded different step counts: {counts}")
    spec = any(s.name.startswith("step[TARGET_VERIFY") for t in traces for s in t.steps)
    return StepProfile(ranks=tuple(summarize(t) for t in traces), gpu=traces[0].gpu, speculative=spec,
                       notes=tuple(notes))

