"""A real, known slowdown for a paired run's candidate arm on a GPU box (docs/gate.md "Deciding").

Put this folder first on the candidate server's PYTHONPATH and set PERFGATE_INJECT_GPU_US: every CUDA graph
replay (SGLang replays one per decode step at batch 1) is preceded by a kernel that spins the GPU for that many
microseconds on the replay's stream (``torch.cuda._sleep``, ~1980 cycles a microsecond at the H200's boost
clock), so each decode step takes that much longer on the GPU itself: a CPU-side delay could hide behind
SGLang's overlapped scheduler, a GPU-side one cannot. Nothing happens unless the variable is set.

    --perfgate-candidate "env.PYTHONPATH=$PWD/ci/device/inject:$PYTHONPATH,env.PERFGATE_INJECT_GPU_US=600"
"""

import os

_US = float(os.environ.get("PERFGATE_INJECT_GPU_US", "0") or 0)
_CYCLES_PER_US = float(os.environ.get("PERFGATE_INJECT_CYCLES_PER_US", "1980"))

if _US > 0:
    import torch

    _replay = torch.cuda.CUDAGraph.replay

    def _slow_replay(self: "torch.cuda.CUDAGraph") -> None:
        torch.cuda._sleep(int(_US * _CYCLES_PER_US))
        _replay(self)

    torch.cuda.CUDAGraph.replay = _slow_replay  # type: ignore[method-assign]
