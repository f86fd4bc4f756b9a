"""A short calibration of the GPU at session start: HBM copy bandwidth and bf16 GEMM throughput.

Two machines of one model differ by a few per cent (docs/measurement.md, "Machines"); a calibration says
how fast this one's memory and tensor cores are, so a record's speed can be read against it. Measured with
torch on the first visible GPU, in a subprocess of the server's Python (``profile.engine.python``: the
server may run in another environment than pytest, and pytest never imports torch), which prints one JSON
line (:data:`SCRIPT`):

- ``hbm_gbps``: a 2 GiB device-to-device ``copy_`` of random bytes (never zeros), bytes read + written per
  second, the median of :data:`COPY_REPEATS` copies timed with CUDA events after warm-up (a 1 GiB copy read
  2.5 % lower than a 2 GiB one on the same H200: its ~0.25 ms leaves the launch gap a visible share);
- ``gemm_tflops``: a bf16 8192 x 8192 x 8192 matmul, 2 n^3 flops per second, the median of
  :data:`GEMM_REPEATS`.

A few seconds in all (most of it importing torch and starting CUDA). Without torch or CUDA, or when the
child fails, the :class:`Calibration` says ``source="none"`` and why; :func:`run_calibration` never raises.
The simulator's calibration (``source="sim"``) is :func:`simulated_calibration`.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass

from perfgate.record import CALIB_GEMM_TFLOPS, CALIB_HBM_GBPS, CALIB_SOURCE, fmt
from perfgate.stack.probes import UNKNOWN

__all__ = ["Calibration", "SCRIPT", "parse_calibration", "run_calibration", "simulated_calibration"]

SOURCES = ("torch", "sim", "none")
COPY_REPEATS = 30
GEMM_REPEATS = 30
TIMEOUT_S = 180.0  # torch's import and CUDA's start on a cold box, then a few seconds of work

SCRIPT = f"""
import json, statistics, sys, time
t0 = time.perf_counter()
try:
    import torch
except Exception as e:
    print(json.dumps({{"source": "none", "reason": "torch not importable: " + str(e)[:200]}}))
    sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({{"source": "none", "reason": "torch " + torch.__version__ + " sees no CUDA device"}}))
    sys.exit(0)

def timed(fn, repeats):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms) / 1000.0

dev = torch.device("cuda", 0)
nbytes = 2 << 30
src = torch.empty(nbytes, dtype=torch.uint8, device=dev).random_(0, 256)
dst = torch.empty_like(src)
copy_s = timed(lambda: dst.copy_(src), {COPY_REPEATS})
del src, dst
n = 8192
x = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
y = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
z = torch.empty(n, n, dtype=torch.bfloat16, device=dev)
gemm_s = timed(lambda: torch.matmul(x, y, out=z), {GEMM_REPEATS})
print(json.dumps({{"source": "torch", "hbm_gbps": 2 * nbytes / copy_s / 1e9, "gemm_tflops": 2 * n ** 3 / gemm_s / 1e12,
                  "device": torch.cuda.get_device_name(dev), "seconds": time.perf_counter() - t0}}))
"""


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """What the calibration measured (None where it did not), where the figures come from, how long it took."""

    hbm_gbps: float | None = None
    gemm_tflops: float | None = None
    source: str = "none"  # torch | sim | none
    seconds: float | None = None
    reason: str = ""  # why there is no measurement (source "none")

    def as_properties(self) -> dict[str, str]:
        """The ``calib.*`` JUnit properties (perfgate.record); absent figures are ``"unknown"``."""
        return {
            CALIB_HBM_GBPS: UNKNOWN if self.hbm_gbps is None else fmt(float(self.hbm_gbps)),
            CALIB_GEMM_TFLOPS: UNKNOWN if self.gemm_tflops is None else fmt(float(self.gemm_tflops)),
            CALIB_SOURCE: self.source,
        }

    def line(self, machine_id: str) -> str:
        """The one terminal line: ``perfgate: machine <id>: HBM copy X GB/s, bf16 GEMM Y TFLOP/s (Z s)``."""
        took = f" ({self.seconds:.1f} s)" if self.seconds is not None else ""
        if self.hbm_gbps is None or self.gemm_tflops is None:
            return f"perfgate: machine {machine_id}: no calibration ({self.reason or self.source}){took}"
        modelled = ", modelled by the simulator" if self.source == "sim" else ""
        return (f"perfgate: machine {machine_id}: HBM copy {self.hbm_gbps:.0f} GB/s, bf16 GEMM "
                f"{self.gemm_tflops:.1f} TFLOP/s{took}{modelled}")


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) and x > 0 else None


def parse_calibration(stdout: str, *, seconds: float | None = None) -> Calibration:
    """The child's last JSON line as a Calibration; anything else is ``source="none"`` saying what it got."""
    lines = [ln for ln in stdout.strip().splitlines() if ln.strip()]
    if not lines:
        return Calibration(reason="the calibration printed nothing", seconds=seconds)
    try:
        data = json.loads(lines[-1])
    except ValueError:
        return Calibration(reason=f"the calibration printed no JSON: {lines[-1][:120]!r}", seconds=seconds)
    if not isinstance(data, dict):
        return Calibration(reason=f"the calibration printed {type(data).__name__}, not an object", seconds=seconds)
    took = _positive(data.get("seconds")) if seconds is None else seconds
    if data.get("source") != "torch":
        return Calibration(reason=str(data.get("reason") or "no measurement"), seconds=took)
    hbm, gemm = _positive(data.get("hbm_gbps")), _positive(data.get("gemm_tflops"))
    if hbm is None or gemm is None:
        return Calibration(reason=f"the calibration's figures are not positive numbers: {lines[-1][:160]}",
                           seconds=took)
    return Calibration(hbm_gbps=hbm, gemm_tflops=gemm, source="torch", seconds=took)


def run_calibration(python: str = "", *, timeout_s: float = TIMEOUT_S, script: str = SCRIPT) -> Calibration:
    """Run :data:`SCRIPT` under ``python`` (default: this interpreter). Never raises."""
    exe = python or sys.executable
    t0 = time.monotonic()
    try:
        proc = subprocess.run([exe, "-c", script], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return Calibration(reason=f"{exe}: the calibration took over {timeout_s:g} s", seconds=time.monotonic() - t0)
    except (OSError, subprocess.SubprocessError) as e:
        return Calibration(reason=f"{exe}: cannot run the calibration: {e}", seconds=time.monotonic() - t0)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Calibration(reason=f"{exe}: the calibration exited {proc.returncode}: {last[:200]}", seconds=took)
    return parse_calibration(proc.stdout, seconds=took)


def simulated_calibration(machine: str, gpu: str) -> Calibration:
    """The simulated machine's calibration: the model's figures for its GPU times its speed factor."""
    from perfgate.sim.variation import modelled_calibration

    hbm, gemm = modelled_calibration(machine, gpu)
    return Calibration(hbm_gbps=hbm, gemm_tflops=gemm, source="sim", seconds=0.0)
