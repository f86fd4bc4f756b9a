"""All-reduce micro-benchmark: time the collective itself at the sizes the model uses.

A server start costs minutes; "is this all-reduce backend faster for the verify pass?" is
answered in seconds by timing the collective alone. :func:`perfgate.allreduce.harness.run_allreduce_bench` launches one
process per rank (``python -m perfgate.allreduce.rank --rank R --spec FILE``) with a rendezvous on a
free TCP port of 127.0.0.1, all ranks in one process group of their own, and returns one
:class:`AllReduceResult` per size (and per timing mode). Every rank process is killed on a
timeout, on any rank's failure and on any exception in the caller; a reaper
(:mod:`perfgate.host.procs`) kills them if the caller itself dies.

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

This package: the backends and each rank's environment (here), the launcher
(:mod:`~perfgate.allreduce.harness`), what one rank process does (:mod:`~perfgate.allreduce.rank`),
the results with their statistics (:mod:`~perfgate.allreduce.results`) and the micro tier's records,
concluded through the profile's expectations (:mod:`~perfgate.plugin.microcheck`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from perfgate.host.procs import perfgate_pythonpath

Device = Literal["cpu", "cuda"]

MULTICAST_OFF: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""Set in every rank's environment, over anything else: NVLink multicast stays off (NVLS in NCCL, multicast in
torch symmetric memory and NVSHMEM)."""


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


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


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
    out["PYTHONPATH"] = perfgate_pythonpath(out)
    out.setdefault("PYTHONUNBUFFERED", "1")
    if b.device == "cpu":
        out.setdefault("OMP_NUM_THREADS", "1")
        out.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return out
