"""One rank process: ``python -m perfgate.allreduce.rank --rank R --spec FILE`` (started by the harness).

It joins the process group, checks the sum, times eager (and CUDA-graph) all-reduces of each size
and writes ``rank<R>.json`` into the run folder; a backend that cannot run here is reported as
unavailable, with its category, instead of failing the rank.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perfgate.allreduce import FAIL_ENV


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
            raise _Unavailable(_classify(e, "missing-dependency"),
                               f"cannot import SGLang's CustomAllreduce: {e}") from e
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
            self.group_name = dist.group.WORLD.group_name
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
    """Rank entry point: ``python -m perfgate.allreduce.rank --rank R --spec FILE`` (launched by the harness)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rank = int(args[args.index("--rank") + 1])
        spec_path = Path(args[args.index("--spec") + 1])
    except (ValueError, IndexError):
        print("usage: python -m perfgate.allreduce.rank --rank R --spec FILE (started by run_allreduce_bench)",
              file=sys.stderr)
        return 2
    return _rank_main(rank, spec_path)


if __name__ == "__main__":
    sys.exit(main())
