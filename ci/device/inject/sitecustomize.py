"""Real, known slowdowns for a paired run's candidate arm on a GPU box (docs/gate.md "Deciding").

Put this folder first on the candidate server's PYTHONPATH and set one (or both) of:

- ``PERFGATE_INJECT_GPU_US``: every CUDA graph replay (SGLang replays one per decode step at batch 1) is preceded by
  a kernel that spins the GPU for that many microseconds on the replay's stream (``torch.cuda._sleep``, ~1980
  cycles a microsecond at the H200's boost clock), so each decode step takes that much longer on the GPU itself: a
  CPU-side delay could hide behind SGLang's overlapped scheduler, a GPU-side one cannot.
- ``PERFGATE_INJECT_PREFILL_MS``: a TTFT-only slowdown on the host (issue 40): the scheduler sleeps that many
  milliseconds in ``Scheduler.handle_generate_request`` before it queues each new request, so every request's
  first token comes that much later and nothing else moves (at batch 1 no other request is decoding while the
  scheduler waits). The patch is made when SGLang's scheduler module is imported (in the scheduler's own process:
  this file runs in every Python process whose PYTHONPATH holds it), through an import hook, so SGLang is not
  imported early.

- ``PERFGATE_INJECT_EXTEND_GPU_US``: a GPU-side prefill slowdown (issue 53 (a)): every EXTEND forward (a prefill) is
  preceded by a kernel that spins the GPU that many microseconds, launched inside the forward's
  ``step[EXTEND ...]`` span (``ModelRunner._forward_raw`` is patched), so the prefill's GPU time
  (``ttft_part.prefill_gpu_ms``) grows by that much and nothing on the host moves.
- ``PERFGATE_INJECT_EXTEND_HOST_MS``: a host-side prefill slowdown (issue 53 (b)): the scheduler's process sleeps that
  many milliseconds at the start of every EXTEND forward, inside the prefill leg (after ``forward_entry_time``), with
  no kernel launched: the prefill's host time (``ttft_part.prefill_host_ms``) grows, its GPU time does not.

Nothing happens unless a variable is set.

    --perfgate-candidate "env.PYTHONPATH=$PWD/ci/device/inject:$PYTHONPATH,env.PERFGATE_INJECT_GPU_US=600"
    --perfgate-candidate "env.PYTHONPATH=$PWD/ci/device/inject:$PYTHONPATH,env.PERFGATE_INJECT_PREFILL_MS=2.8"
"""

import importlib.abc
import os
import sys
import time

_US = float(os.environ.get("PERFGATE_INJECT_GPU_US", "0") or 0)
_CYCLES_PER_US = float(os.environ.get("PERFGATE_INJECT_CYCLES_PER_US", "1980"))
_PREFILL_MS = float(os.environ.get("PERFGATE_INJECT_PREFILL_MS", "0") or 0)
_EXTEND_GPU_US = float(os.environ.get("PERFGATE_INJECT_EXTEND_GPU_US", "0") or 0)
_EXTEND_HOST_MS = float(os.environ.get("PERFGATE_INJECT_EXTEND_HOST_MS", "0") or 0)
#: the module whose Scheduler.handle_generate_request takes each new request (SGLang 0.5.16, 0.5.17, 0.5.23)
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
#: the module whose ModelRunner._forward_raw runs every forward inside its step span (SGLang 0.5.16, 0.5.17)
MODEL_RUNNER_MODULE = "sglang.srt.model_executor.model_runner"

if _US > 0:
    import torch

    _replay = torch.cuda.CUDAGraph.replay

    def _slow_replay(self: "torch.cuda.CUDAGraph") -> None:
        torch.cuda._sleep(int(_US * _CYCLES_PER_US))
        _replay(self)

    torch.cuda.CUDAGraph.replay = _slow_replay  # type: ignore[method-assign]


def _delay_requests(module: object) -> None:
    """Wrap the module's ``Scheduler.handle_generate_request`` with a sleep of ``PERFGATE_INJECT_PREFILL_MS``."""
    cls = getattr(module, "Scheduler", None)
    handle = getattr(cls, "handle_generate_request", None)
    if handle is None:
        print(f"perfgate inject: {SCHEDULER_MODULE}.Scheduler.handle_generate_request not found; "
              f"PERFGATE_INJECT_PREFILL_MS has no effect", file=sys.stderr)
        return

    def handle_generate_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(_PREFILL_MS / 1000.0)
        return handle(self, *args, **kwargs)

    handle_generate_request.__wrapped__ = handle  # type: ignore[attr-defined]
    handle_generate_request.perfgate_inject_ms = _PREFILL_MS  # type: ignore[attr-defined]
    cls.handle_generate_request = handle_generate_request  # type: ignore[union-attr]


def _is_extend(forward_batch: object) -> bool:
    """Whether a ForwardBatch is a plain prefill (``ForwardMode.EXTEND``; not a verify pass or a draft extend)."""
    return getattr(getattr(forward_batch, "forward_mode", None), "name", "") == "EXTEND"


def _slow_extends(module: object) -> None:
    """Wrap the module's ``ModelRunner._forward_raw``: before each EXTEND forward, a GPU spin of
    ``PERFGATE_INJECT_EXTEND_GPU_US`` and a host sleep of ``PERFGATE_INJECT_EXTEND_HOST_MS``."""
    cls = getattr(module, "ModelRunner", None)
    raw = getattr(cls, "_forward_raw", None)
    if raw is None:
        print(f"perfgate inject: {MODEL_RUNNER_MODULE}.ModelRunner._forward_raw not found; "
              f"PERFGATE_INJECT_EXTEND_* have no effect", file=sys.stderr)
        return
    import torch

    cycles = int(_EXTEND_GPU_US * _CYCLES_PER_US)

    def _forward_raw(self, forward_batch, *args, **kwargs):  # type: ignore[no-untyped-def]
        if _is_extend(forward_batch):
            if _EXTEND_HOST_MS > 0:
                time.sleep(_EXTEND_HOST_MS / 1000.0)
            if cycles > 0:
                torch.cuda._sleep(cycles)
        return raw(self, forward_batch, *args, **kwargs)

    _forward_raw.__wrapped__ = raw  # type: ignore[attr-defined]
    _forward_raw.perfgate_inject = (_EXTEND_GPU_US, _EXTEND_HOST_MS)  # type: ignore[attr-defined]
    cls._forward_raw = _forward_raw  # type: ignore[union-attr]


#: module -> the patch made once it is executed
_PATCHES = {}
if _PREFILL_MS > 0:
    _PATCHES[SCHEDULER_MODULE] = _delay_requests
if _EXTEND_GPU_US > 0 or _EXTEND_HOST_MS > 0:
    _PATCHES[MODEL_RUNNER_MODULE] = _slow_extends


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: lets the other finders find a module of :data:`_PATCHES` and patches it once executed."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, _run=run, _patch=patch):  # type: ignore[no-untyped-def]
                    _run(module)
                    _patch(module)

                spec.loader.exec_module = exec_module  # type: ignore[method-assign]
                return spec
        return None


if _PATCHES:
    sys.meta_path.insert(0, _AfterImport())
