"""The launcher: one process per rank, a rendezvous, a process group, results or the reason there are none.

:func:`run_allreduce_bench` is what perftests and scripts call (the package docstring of
:mod:`perfgate.allreduce` says what is measured and how).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.allreduce import BACKENDS, DTYPE_BYTES, Device, rank_environment
from perfgate.allreduce.results import AllReduceResult, aggregate
from perfgate.errors import BackendUnavailable, ConfigError, MicrobenchTimeout, RankFailed
from perfgate.host import gpu
from perfgate.host.procs import free_port, group_kw, lost_port_race, signal_group, start_reaper, tail


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
                                     stdin=subprocess.DEVNULL, **group_kw(0))
                self.pgid = p.pid
                self.procs.append(p)
                self.reaper = start_reaper(self.pgid, 2, env)
            else:
                self.procs.append(subprocess.Popen(argv, env=dict(env), stdout=f, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, **group_kw(self.pgid)))

    def kill(self) -> None:
        """SIGKILL the whole group and reap every rank; idempotent."""
        if self.pgid is not None:
            signal_group(self.pgid, signal.SIGKILL)
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
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    if graph and dev != "cuda":
        raise ConfigError(f"CUDA-graph timing needs a GPU backend; {backend!r} runs on {dev}")
    if not sizes_bytes:
        return []
    numels = [max(1, int(b) // DTYPE_BYTES[dtype]) for b in sizes_bytes]

    if dev == "cuda":
        n_gpu = gpu.visible_count()
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
    run_dir = Path(tempfile.mkdtemp(prefix=f"perfgate-allreduce-{backend}-")) if log_dir is None else Path(log_dir)
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
            if attempt + 1 < attempts and lost_port_race(e.log_tail):
                continue
            raise
        break
    results = aggregate(spec, outputs)
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
            ranks.start([sys.executable, "-m", "perfgate.allreduce.rank", "--rank", str(r), "--spec", str(spec_path)],
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
            raise RankFailed(f"{backend}: rank {r} exited without writing its results (killed after the others "
                             f"finished)",
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
