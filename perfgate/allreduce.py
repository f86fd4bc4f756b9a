"""All-reduce micro-benchmark: time the collective itself at the sizes the model uses.

A server start costs minutes; "is this all-reduce backend faster for the verify pass?" is
answered in seconds by timing the collective alone. :func:`run_allreduce_bench` launches one
process per rank (``python -m perfgate.allreduce --rank R --spec FILE``) with a rendezvous on a
free TCP port of 127.0.0.1, all ranks in one process group of their own, and returns one
:class:`AllReduceResult` per size (and per timing mode). Every rank process is killed on a
timeout, on any rank's failure and on any exception in the caller; a reaper
(:mod:`perfgate.reaper`) kills them if the caller itself dies.

Backends (:data:`BACKENDS`): ``nccl`` and its tuned variants (``nccl-tree``,
``nccl-fewer-channels``, ``nccl-small-buffer``, the environment of the server variants of the
same names), ``gloo`` (CPU tensors, so the harness runs anywhere), ``sglang-custom-ar``
(SGLang's ``CustomAllreduce``, where importable) and ``torch-symm-mem`` (torch symmetric
memory's two-shot all-reduce). NVLink multicast stays off in every rank
(:data:`MULTICAST_OFF`).

What is measured, per size: a correctness check first (rank r contributes r + 1 everywhere;
the sum must be n(n + 1)/2), then ``warmup`` untimed and ``iters`` timed all-reduces of a
``numel``-element tensor (bf16 by default; fp32 where the backend rejects bf16, and
``dtype`` says which). Each iteration is timed on every rank (CUDA events on GPU,
``perf_counter_ns`` on CPU); the per-iteration time is the mean over ranks, as nccl-tests
averages over ranks; ``latency_us`` is the median and ``latency_p99_us`` the 99th percentile
over iterations. Eager GPU samples include the host's launch overhead whenever the GPU waits
for it, as an eager server would. With ``graph=True`` (GPU only) each size is also captured
in a CUDA graph of ``graph_ops`` back-to-back all-reduces, and a replay's time / ``graph_ops``
is one sample: that is how a decode step inside SGLang's CUDA graphs pays for it.

Bandwidth as nccl-tests reports it: ``algbw = bytes / latency`` and
``busbw = algbw × 2(n − 1)/n`` (GB/s, 1 GB = 1e9 B), here from the median latency. At world
size 1 there is no communication (busbw is 0 by that formula): the latency is a local
kernel, or nothing at all (NCCL launches no work for an in-place all-reduce on one rank, so
its CUDA graph is empty and eager time is pure launch overhead); each result's ``note`` says
so, and such a number is not comparable with a multi-rank all-reduce.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perfgate.errors import BackendUnavailable, ConfigError, MicrobenchTimeout, RankFailed
from perfgate.server import free_port, tail

__all__ = [
    "BACKENDS",
    "MULTICAST_OFF",
    "AllReduceBackend",
    "AllReduceResult",
    "busbw_gbps",
    "gpu_count",
    "rank_environment",
    "run_allreduce_bench",
]

Device = Literal["cpu", "cuda"]

MULTICAST_OFF: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""Set in every rank's environment, over anything else: the GPU machines require NVLink multicast off."""

FAIL_ENV = "PERFGATE_ALLREDUCE_FAIL"
"""Fault injection for perfgate's own tests: ``RANK:STAGE`` makes that rank raise at ``start``
(before importing torch) or ``init`` (after the process group is up, the others blocked in a
collective)."""


@dataclass(frozen=True, kw_only=True)
class AllReduceBackend:
    """One way to all-reduce: process-group backend, implementation and environment."""

    name: str
    device: Device
    pg_backend: str  # torch.distributed backend of the default group: "nccl" | "gloo"
    impl: str  # "torch" (dist.all_reduce) | "sglang-custom-ar" | "torch-symm-mem"
    env: tuple[tuple[str, str], ...] = ()
    description: str = ""

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


BACKENDS: Mapping[str, AllReduceBackend] = {
    b.name: b
    for b in (
        AllReduceBackend(name="nccl", device="cuda", pg_backend="nccl", impl="torch",
                         description="NCCL, default environment"),
        AllReduceBackend(name="nccl-tree", device="cuda", pg_backend="nccl", impl="torch",
                         env=(("NCCL_ALGO", "Tree"),), description="NCCL with NCCL_ALGO=Tree"),
        AllReduceBackend(name="nccl-fewer-channels", device="cuda", pg_backend="nccl", impl="torch",
                         env=(("NCCL_MIN_NCHANNELS", "1"), ("NCCL_MAX_NCHANNELS", "2")),
                         description="NCCL with 1-2 channels"),
        AllReduceBackend(name="nccl-small-buffer", device="cuda", pg_backend="nccl", impl="torch",
                         env=(("NCCL_BUFFSIZE", "1048576"),), description="NCCL with a 1 MiB buffer"),
        AllReduceBackend(name="gloo", device="cpu", pg_backend="gloo", impl="torch",
                         description="gloo on CPU tensors (runs anywhere; not a GPU number)"),
        AllReduceBackend(name="sglang-custom-ar", device="cuda", pg_backend="nccl", impl="sglang-custom-ar",
                         description="SGLang's CustomAllreduce (IPC buffers, P2P)"),
        AllReduceBackend(name="torch-symm-mem", device="cuda", pg_backend="nccl", impl="torch-symm-mem",
                         description="torch symmetric memory, two-shot all-reduce (multicast off)"),
    )
}

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


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


def gpu_count() -> int:
    """CUDA GPUs this process may use: NVML's count, limited by ``CUDA_VISIBLE_DEVICES`` (no torch import)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            n = int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        ids = []
        for tok in cvd.split(","):
            tok = tok.strip()
            if not tok or tok.startswith("-"):
                break  # CUDA stops at the first invalid entry
            ids.append(tok)
        n = min(n, len(ids))
    return n


def rank_environment(backend: str, env: Mapping[str, str] | None = None, *,
                     base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every rank of ``backend`` gets.

    ``base`` (the caller's environment), then the backend's own variables (``NCCL_ALGO=Tree``
    for ``nccl-tree``), then ``env``, then :data:`MULTICAST_OFF`, which nothing overrides.
    perfgate's own package goes first on ``PYTHONPATH``; CPU ranks get one OpenMP thread and
    gloo on the loopback interface unless the caller set those.
    """
    b = BACKENDS[backend]
    out = dict(base if base is not None else os.environ)
    out.update(b.env_dict)
    out.update(env or {})
    out.update(MULTICAST_OFF)
    pkg_root = str(Path(__file__).resolve().parent.parent)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, out.get("PYTHONPATH", "")) if p)
    out.setdefault("PYTHONUNBUFFERED", "1")
    if b.device == "cpu":
        out.setdefault("OMP_NUM_THREADS", "1")
        out.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return out


# ----------------------------------------------------------------------------- the launcher


def _percentile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of already sorted values."""
    k = (len(sorted_xs) - 1) * q / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def _num(x: float) -> str:
    s = f"{x:.6f}".rstrip("0").rstrip(".")
    return s if s not in ("", "-0") else "0"


def _pgroup_kw(pgid: int) -> dict[str, Any]:
    """Popen arguments that put the child in process group ``pgid`` (0: a new group of its own)."""
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}  # pragma: no cover - Python 3.10


class _Ranks:
    """The rank processes of one run: one process group, killed as a whole."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pgid: int | None = None
        self.reaper: subprocess.Popen[bytes] | None = None

    def start(self, argv: list[str], env: Mapping[str, str], log: Path) -> None:
        with open(log, "wb") as f:
            if self.pgid is None:
                # a new process group in this session, so the other ranks can join it
                p = subprocess.Popen(argv, env=dict(env), stdout=f, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, **_pgroup_kw(0))
                self.pgid = p.pid
                self.procs.append(p)
                self.reaper = subprocess.Popen(
                    [sys.executable, "-m", "perfgate.reaper", str(os.getpid()), str(self.pgid), "2"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True, env=dict(env),
                )
            else:
                self.procs.append(subprocess.Popen(argv, env=dict(env), stdout=f, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, **_pgroup_kw(self.pgid)))

    def kill(self) -> None:
        """SIGKILL the whole group and reap every rank; idempotent."""
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process in D state
                pass
        if self.reaper is not None:
            if self.reaper.poll() is None:
                self.reaper.kill()
            self.reaper.wait(timeout=10)
            self.reaper = None


def run_allreduce_bench(
    *,
    world_size: int,
    sizes_bytes: Sequence[int],
    backend: str,
    env: Mapping[str, str] | None = None,
    device: Device | None = None,
    warmup: int = 5,
    iters: int = 50,
    graph: bool = False,
    graph_ops: int = 10,
    timeout_s: float = 300.0,
    dtype: str = "bfloat16",
    log_dir: str | Path | None = None,
) -> list[AllReduceResult]:
    """Time all-reduce at each size on ``world_size`` local ranks; one result per size (and mode).

    ``sizes_bytes`` are message sizes in ``dtype`` (bf16: 2 bytes an element). Results come in
    the order of ``sizes_bytes``, eager timing first, then (``graph=True``) CUDA-graph timing.
    ``env`` is added to every rank's environment over the backend's own (``MULTICAST_OFF`` wins
    over both). Rank logs go to ``log_dir`` (a temporary folder, removed on success, when None).

    Raises :class:`~perfgate.errors.BackendUnavailable` (with ``category``) when the backend
    cannot run here, :class:`~perfgate.errors.RankFailed` when a rank fails (the others are
    killed at once) and :class:`~perfgate.errors.MicrobenchTimeout` past ``timeout_s``.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown all-reduce backend {backend!r}; known: {', '.join(BACKENDS)}")
    spec_b = BACKENDS[backend]
    dev: Device = device or spec_b.device
    if dev != spec_b.device:
        raise ConfigError(f"backend {backend!r} runs on {spec_b.device}, not {dev}")
    if world_size < 1:
        raise ConfigError(f"world_size must be ≥ 1, got {world_size}")
    if iters < 1 or warmup < 0 or graph_ops < 1:
        raise ConfigError(f"need iters ≥ 1, warmup ≥ 0, graph_ops ≥ 1; got {iters}, {warmup}, {graph_ops}")
    if dtype not in _DTYPE_BYTES:
        raise ConfigError(f"dtype must be one of {sorted(_DTYPE_BYTES)}, got {dtype!r}")
    if graph and dev != "cuda":
        raise ConfigError(f"CUDA-graph timing needs a GPU backend; {backend!r} runs on {dev}")
    if not sizes_bytes:
        return []
    numels = [max(1, int(b) // _DTYPE_BYTES[dtype]) for b in sizes_bytes]

    if dev == "cuda":
        n_gpu = gpu_count()
        if n_gpu == 0:
            raise BackendUnavailable(f"{backend}: no CUDA GPU visible here", backend=backend,
                                     category="missing-dependency")
        if n_gpu < world_size:
            raise BackendUnavailable(
                f"{backend}: world size {world_size} needs {world_size} GPUs (one rank per GPU), {n_gpu} visible",
                backend=backend, category="config-error")
    if spec_b.impl == "sglang-custom-ar":
        import importlib.util

        if importlib.util.find_spec("sglang") is None:
            raise BackendUnavailable(f"{backend}: SGLang is not importable here", backend=backend,
                                     category="missing-dependency")

    own_dir = log_dir is None
    run_dir = Path(tempfile.mkdtemp(prefix=f"perfgate-allreduce-{backend}-")) if own_dir else Path(log_dir)  # type: ignore[arg-type]
    run_dir.mkdir(parents=True, exist_ok=True)
    rank_env = rank_environment(backend, env, base=os.environ)

    spec = {
        "backend": backend, "world_size": world_size, "device": dev, "pg_backend": spec_b.pg_backend,
        "impl": spec_b.impl, "numels": numels, "dtype": dtype, "warmup": warmup, "iters": iters,
        "graph": graph, "graph_ops": graph_ops, "timeout_s": timeout_s, "out_dir": str(run_dir),
    }
    attempts = 2  # a second try only when the rendezvous port was taken in between
    for attempt in range(attempts):
        spec["port"] = free_port()
        try:
            outputs = _launch(spec, rank_env, run_dir, timeout_s)
        except RankFailed as e:
            if attempt + 1 < attempts and "address already in use" in e.log_tail.lower():
                continue
            raise
        break
    results = _aggregate(spec, outputs)
    if own_dir:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)
    return results


def _launch(spec: dict[str, Any], env: Mapping[str, str], run_dir: Path, timeout_s: float) -> list[dict[str, Any]]:
    backend, n = spec["backend"], spec["world_size"]
    for old in run_dir.glob("rank*.json"):
        old.unlink()
    for old in run_dir.glob("ready.*"):
        old.unlink()
    spec_path = run_dir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    ranks = _Ranks()
    logs = [run_dir / f"rank{r}.log" for r in range(n)]
    try:
        for r in range(n):
            ranks.start([sys.executable, "-m", "perfgate.allreduce", "--rank", str(r), "--spec", str(spec_path)],
                        env, logs[r])
        deadline = time.monotonic() + timeout_s
        grace_until: float | None = None
        while True:
            codes = [p.poll() for p in ranks.procs]
            for r, rc in enumerate(codes):
                if rc is not None and rc != 0:
                    ranks.kill()
                    raise _rank_error(backend, r, rc, run_dir, logs[r])
            if all(rc == 0 for rc in codes):
                break
            now = time.monotonic()
            if any(rc == 0 for rc in codes):
                # one rank is done: the others finish within seconds, or they are stuck
                grace_until = grace_until or now + min(30.0, max(5.0, timeout_s / 10))
                if now > grace_until:
                    ranks.kill()
                    break
            if now > deadline:
                ready = sum(1 for r in range(n) if (run_dir / f"ready.{r}").exists())
                ranks.kill()
                stage = "before every rank joined the process group" if ready < n else "while timing"
                raise MicrobenchTimeout(
                    f"{backend}: all-reduce micro-benchmark at world size {n} did not finish in {timeout_s:g} s "
                    f"({stage}; {ready}/{n} ranks had joined); all ranks killed",
                    backend=backend, category="startup-timeout" if ready < n else "crash",
                    log_path=logs[0], log_tail=tail(logs[0], 25))
            time.sleep(0.05)
    finally:
        ranks.kill()
    outputs = []
    for r in range(n):
        path = run_dir / f"rank{r}.json"
        if not path.exists():
            raise RankFailed(f"{backend}: rank {r} exited without writing its results (killed after the others finished)",
                             backend=backend, rank=r, returncode=ranks.procs[r].returncode, category="crash",
                             log_path=logs[r], log_tail=tail(logs[r], 25))
        outputs.append(json.loads(path.read_text()))
    unavailable = [o["unavailable"] for o in outputs if o.get("unavailable")]
    if unavailable:
        u = unavailable[0]
        raise BackendUnavailable(f"{backend}: {u['reason']}", backend=backend, category=u["category"],
                                 log_path=logs[0])
    return outputs


def _rank_error(backend: str, rank: int, rc: int, run_dir: Path, log: Path) -> RankFailed:
    category, reason = "crash", f"exit status {rc}"
    if rc < 0:
        try:
            reason = f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            reason = f"killed by signal {-rc}"
    path = run_dir / f"rank{rank}.json"
    if path.exists():
        try:
            err = json.loads(path.read_text()).get("error") or {}
            category = err.get("category", category)
            reason = err.get("reason", reason)
        except (OSError, ValueError):
            pass
    return RankFailed(f"{backend}: rank {rank} failed ({category}): {reason}; the other ranks were killed",
                      backend=backend, rank=rank, returncode=rc, category=category, log_path=log,
                      log_tail=tail(log, 25))


def _aggregate(spec: dict[str, Any], outputs: list[dict[str, Any]]) -> list[AllReduceResult]:
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
            nbytes = numel * _DTYPE_BYTES.get(dtype, 2)
            base = dict(backend=spec["backend"], world_size=n, numel=numel, bytes=nbytes, dtype=dtype, graph=graph,
                        iters=spec["iters"], device=spec["device"], note=note)
            failed = next((e for e in entries if e is None or e.get("category")), False)
            if failed is not False:
                cat = failed.get("category", "crash") if failed else "crash"
                why = failed.get("reason", "") if failed else "a rank reported no result for this size"
                results.append(AllReduceResult(**base, category=cat, reason=why))  # type: ignore[arg-type]
                continue
            per_iter = [sum(xs) / n for xs in zip(*(e["samples_us"] for e in entries))]  # type: ignore[index]
            s = sorted(per_iter)
            med = _percentile(s, 50)
            p99 = _percentile(s, 99)
            if med <= 0:
                results.append(AllReduceResult(**base, category="crash",  # type: ignore[arg-type]
                                               reason=f"non-positive median latency {med} µs"))
                continue
            algbw, busbw = busbw_gbps(nbytes, med, n)
            extra = next((e.get("note") for e in entries if e and e.get("note")), "")  # type: ignore[union-attr]
            if extra:
                base["note"] = f"{base['note']}; {extra}" if base["note"] else extra
            results.append(AllReduceResult(**base, latency_us=med, latency_p99_us=p99,  # type: ignore[arg-type]
                                           algbw_gbps=algbw, busbw_gbps=busbw))
    return results


# ----------------------------------------------------------------------------- the rank process


class _Unavailable(Exception):
    def __init__(self, category: str, reason: str) -> None:
        super().__init__(reason)
        self.category = category
        self.reason = reason


def _classify(exc: BaseException, default: str = "crash") -> str:
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, ImportError):
        return "missing-dependency"
    if "out of memory" in text:
        return "oom"
    if "no kernel image" in text or "compute capability" in text or "not supported on this" in text:
        return "unsupported-arch"
    if "nccl" in text:
        return "nccl-error"
    if "graph" in text and ("captur" in text or "cuda" in text):
        return "cuda-graph-capture"
    if isinstance(exc, AssertionError):
        return "assertion"
    return default


def _maybe_fail(rank: int, stage: str) -> None:
    want = os.environ.get(FAIL_ENV, "")
    if want == f"{rank}:{stage}":
        raise RuntimeError(f"injected failure ({FAIL_ENV}={want})")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class _Impl:
    """How one backend all-reduces a tensor inside a rank (torch imported by then)."""

    def __init__(self, spec: dict[str, Any], rank: int, device: Any) -> None:
        self.spec, self.rank, self.device = spec, rank, device

    def setup(self, max_numel: int, dtype: Any) -> None:
        pass

    def prepare(self, t: Any) -> Callable[[], Any]:
        """A closure doing one all-reduce of ``t`` and returning the reduced tensor (None: not handled)."""
        import torch.distributed as dist

        def op() -> Any:
            dist.all_reduce(t)
            return t

        return op

    def capture_context(self) -> Any:
        import contextlib

        return contextlib.nullcontext()


class _SglangCustomAR(_Impl):
    def setup(self, max_numel: int, dtype: Any) -> None:
        import torch
        import torch.distributed as dist

        try:
            from sglang.srt.distributed.device_communicators.custom_all_reduce import CustomAllreduce
        except Exception as e:  # ImportError, or an import-time failure of SGLang's kernels
            raise _Unavailable(_classify(e, "missing-dependency"), f"cannot import SGLang's CustomAllreduce: {e}") from e
        cpu_group = dist.new_group(backend="gloo")
        nbytes = max_numel * torch.tensor([], dtype=dtype).element_size()
        max_size = max(8192 * 1024, 1 << math.ceil(math.log2(nbytes + 1)))
        try:
            self.ca = CustomAllreduce(group=cpu_group, device=self.device, max_size=max_size)
        except Exception as e:
            raise _Unavailable(_classify(e), f"CustomAllreduce setup failed: {type(e).__name__}: {e}") from e
        if self.ca.disabled:
            raise _Unavailable(
                "fallback",
                f"SGLang's CustomAllreduce disabled itself at world size {self.spec['world_size']} "
                "(single GPU, unsupported world size, >2 PCIe-only GPUs or no P2P; see the rank log); "
                "SGLang falls back to NCCL")

    def prepare(self, t: Any) -> Callable[[], Any]:
        def op() -> Any:
            return self.ca.custom_all_reduce(t)

        return op

    def capture_context(self) -> Any:
        return self.ca.capture()


class _TorchSymmMem(_Impl):
    def setup(self, max_numel: int, dtype: Any) -> None:
        import torch
        import torch.distributed as dist

        try:
            import torch.distributed._symmetric_memory as symm_mem
        except Exception as e:
            raise _Unavailable("missing-dependency", f"torch.distributed._symmetric_memory: {e}") from e
        major, minor = torch.cuda.get_device_capability(self.device)
        try:
            self.group_name = dist.group.WORLD.group_name  # type: ignore[union-attr]
            self.buf = symm_mem.empty(max_numel, dtype=dtype, device=self.device)
            symm_mem.rendezvous(self.buf, self.group_name)
            torch.ops.symm_mem.two_shot_all_reduce_  # noqa: B018 - the op must exist
        except Exception as e:
            cat = _classify(e, "unsupported-arch")
            raise _Unavailable(cat, f"torch symmetric memory does not work on this GPU (SM{major}{minor}): "
                                    f"{type(e).__name__}: {e}") from e

    def prepare(self, t: Any) -> Callable[[], Any]:
        # as SGLang's TorchSymmMemCommunicator does it: stage into the symmetric buffer, reduce, copy out
        import torch

        n = t.numel()
        view = self.buf[:n]
        out = torch.empty_like(t)
        flat_in, flat_out = t.view(-1), out.view(-1)
        group = self.group_name

        def op() -> Any:
            view.copy_(flat_in)
            torch.ops.symm_mem.two_shot_all_reduce_(view, "sum", group)
            flat_out.copy_(view)
            return out

        return op


def _rank_main(rank: int, spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text())
    out_dir = Path(spec["out_dir"])
    out_path = out_dir / f"rank{rank}.json"
    result: dict[str, Any] = {"rank": rank, "entries": [], "dtype": spec["dtype"], "note": ""}
    try:
        _maybe_fail(rank, "start")
        _rank_run(rank, spec, out_dir, result)
    except _Unavailable as u:
        result["unavailable"] = {"category": u.category, "reason": u.reason}
    except BaseException as e:
        traceback.print_exc()
        result["error"] = {"category": _classify(e), "reason": f"{type(e).__name__}: {e}"}
        _write_json(out_path, result)
        return 1
    _write_json(out_path, result)
    return 0


def _rank_run(rank: int, spec: dict[str, Any], out_dir: Path, result: dict[str, Any]) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    n = spec["world_size"]
    cuda = spec["device"] == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        device = torch.device("cpu")
    kw: dict[str, Any] = {}
    if spec["pg_backend"] == "nccl":
        kw["device_id"] = device
    dist.init_process_group(spec["pg_backend"], init_method=f"tcp://127.0.0.1:{spec['port']}", rank=rank,
                            world_size=n, timeout=timedelta(seconds=max(30.0, float(spec["timeout_s"]))), **kw)
    (out_dir / f"ready.{rank}").touch()
    _maybe_fail(rank, "init")
    try:
        impl_cls = {"torch": _Impl, "sglang-custom-ar": _SglangCustomAR, "torch-symm-mem": _TorchSymmMem}
        impl = impl_cls[spec["impl"]](spec, rank, device)
        dtype = getattr(torch, spec["dtype"])
        numels: list[int] = spec["numels"]
        # bf16 where the backend takes it; otherwise fp32, and the results say so
        probe = torch.ones(1, dtype=dtype, device=device)
        try:
            dist.all_reduce(probe)
        except Exception as e:
            if spec["dtype"] == "float32":
                raise
            result["note"] = f"{spec['dtype']} all-reduce failed on {spec['pg_backend']} ({e}); timed float32"
            dtype = torch.float32
            result["dtype"] = "float32"
        if cuda:
            result["device_name"] = torch.cuda.get_device_name(device)
        impl.setup(max(numels), dtype)
        expected = n * (n + 1) / 2
        for numel in numels:
            result["entries"].append(_time_eager(spec, impl, numel, dtype, device, expected, cuda))
        if spec["graph"]:
            for numel in numels:
                result["entries"].append(_time_graph(spec, impl, numel, dtype, device))
        dist.barrier()
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def _time_eager(spec: dict[str, Any], impl: _Impl, numel: int, dtype: Any, device: Any, expected: float,
                cuda: bool) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    entry: dict[str, Any] = {"numel": numel, "graph": False}
    rank = dist.get_rank()
    t = torch.full((numel,), float(rank + 1), dtype=dtype, device=device)
    op = impl.prepare(t)
    try:
        out = op()
        if out is None:
            entry.update(category="fallback", reason=f"{spec['backend']} declined {numel} elements "
                                                     f"({numel * t.element_size()} B); SGLang would use NCCL")
            return entry
        got = out.float()
        if not bool(torch.all(got == expected)):
            bad = got[got != expected][0].item()
            entry.update(category="wrong-output", reason=f"sum over {dist.get_world_size()} ranks gave {bad}, "
                                                         f"expected {expected:g}")
            return entry
        t.zero_()  # sums of zeros stay zero however often they repeat
        for _ in range(spec["warmup"]):
            op()
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        iters = spec["iters"]
        if cuda:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            for i in range(iters):
                starts[i].record()
                op()
                ends[i].record()
            torch.cuda.synchronize()
            samples = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)]
        else:
            samples = []
            clock = time.perf_counter_ns
            for _ in range(iters):
                t0 = clock()
                op()
                samples.append((clock() - t0) / 1000.0)
        entry["samples_us"] = samples
    except Exception as e:
        cat = _classify(e)
        if cat in ("crash", "nccl-error"):
            raise  # a broken communicator or a dead peer: the next collective would hang
        entry.update(category=cat, reason=f"{type(e).__name__}: {e}")
    return entry


def _time_graph(spec: dict[str, Any], impl: _Impl, numel: int, dtype: Any, device: Any) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    entry: dict[str, Any] = {"numel": numel, "graph": True}
    k = spec["graph_ops"]
    t = torch.zeros((numel,), dtype=dtype, device=device)
    try:
        op = impl.prepare(t)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                op()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with impl.capture_context():
                with torch.cuda.graph(g):
                    for _ in range(k):
                        if op() is None:
                            raise _Unavailable("fallback", f"{spec['backend']} declined {numel} elements in capture")
        if any("graph is empty" in str(w.message).lower() for w in caught):
            entry["note"] = ("the captured CUDA graph is empty: the backend launched no GPU work (NCCL does "
                             "nothing for an in-place all-reduce on one rank); the time is an empty graph replay")
    except _Unavailable as u:
        entry.update(category=u.category, reason=u.reason)
        return entry
    except Exception as e:
        cat = _classify(e, "cuda-graph-capture")
        entry.update(category=cat if cat in ("oom", "unsupported-arch") else "cuda-graph-capture",
                     reason=f"CUDA-graph capture of {k} all-reduces failed: {type(e).__name__}: {e}")
        torch.cuda.synchronize()
        return entry
    try:
        for _ in range(max(1, spec["warmup"] // k)):
            g.replay()
        torch.cuda.synchronize()
        dist.barrier()
        iters = spec["iters"]
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i in range(iters):
            starts[i].record()
            g.replay()
            ends[i].record()
        torch.cuda.synchronize()
        entry["samples_us"] = [s.elapsed_time(e) * 1000.0 / k for s, e in zip(starts, ends)]
    except Exception as e:
        entry.update(category=_classify(e), reason=f"CUDA-graph replay failed: {type(e).__name__}: {e}")
    finally:
        del g
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    """Rank entry point: ``python -m perfgate.allreduce --rank R --spec FILE`` (launched by the harness)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rank = int(args[args.index("--rank") + 1])
        spec_path = Path(args[args.index("--spec") + 1])
    except (ValueError, IndexError):
        print("usage: python -m perfgate.allreduce --rank R --spec FILE (started by run_allreduce_bench)",
              file=sys.stderr)
        return 2
    return _rank_main(rank, spec_path)


if __name__ == "__main__":
    sys.exit(main())

