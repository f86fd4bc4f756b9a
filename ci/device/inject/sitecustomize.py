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
#: the module whose Scheduler.handle_generate_request takes each new request (SGLang 0.5.16, 0.5.17, 0.5.23)
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"

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


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: lets the other finders find :data:`SCHEDULER_MODULE` and patches it once executed."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != SCHEDULER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, _run=run):  # type: ignore[no-untyped-def]
                    _run(module)
                    _delay_requests(module)

                spec.loader.exec_module = exec_module  # type: ignore[method-assign]
                return spec
        return None


if _PREFILL_MS > 0:
    sys.meta_path.insert(0, _AfterImport())
