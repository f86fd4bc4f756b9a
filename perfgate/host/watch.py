"""Gathering what :mod:`perfgate.host.conditions` judges: one measured start watched (:class:`Watch`): the CPU time of
the whole host and of perfgate's own processes at the start and end of its window (psutil), every
:data:`~perfgate.host.conditions.SAMPLE_S` seconds the GPUs' clocks, power, temperature and clock-event reasons
(NVML), and where our processes ran (:mod:`perfgate.host.placement`). *Ours* are this process and its descendants
and the processes holding memory on the GPUs CUDA sees here, with their parent's tree (an attached server).
Nothing here raises: what cannot be read is absent."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

from perfgate.host.conditions import SAMPLE_S, Conditions, CpuSample, GpuSample, conditions
from perfgate.host.placement import Placement, ThreadSample, placement
from perfgate.host.placement import sample as thread_sample

__all__ = ["Watch", "cpu_sample", "gpu_samples"]

def _ours_pids() -> set[int]:
    """This process, its descendants, and the GPU memory holders with their parent's tree (an attached server)."""
    import psutil

    from perfgate.host import gpu

    me = psutil.Process()
    pids = {me.pid} | {p.pid for p in me.children(recursive=True)}
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker of -n N: the controller and every worker are this session
        with contextlib.suppress(psutil.Error):
            boss = me.parent()
            if boss is not None:
                pids |= {boss.pid} | {p.pid for p in boss.children(recursive=True)}
    nv = gpu._nvml()
    if nv is None:
        return pids
    holders: set[int] = set()
    with contextlib.suppress(Exception):
        for h in gpu.visible_handles(nv):
            for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                with contextlib.suppress(Exception):
                    holders.update(p.pid for p in getattr(nv, fn)(h))
    for pid in holders - pids:
        with contextlib.suppress(psutil.Error):
            top = psutil.Process(pid).parent() or psutil.Process(pid)
            pids |= {top.pid, pid} | {c.pid for c in top.children(recursive=True)}
    return pids


def cpu_sample() -> CpuSample | None:
    """The host's and our processes' CPU seconds now; None without psutil."""
    try:
        import psutil

        t = psutil.cpu_times()
        ours: dict[int, float] = {}
        for pid in _ours_pids():
            with contextlib.suppress(psutil.Error):
                ct = psutil.Process(pid).cpu_times()
                ours[pid] = ct.user + ct.system
    except Exception:
        return None
    busy = t.user + getattr(t, "nice", 0.0) + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
    steal = getattr(t, "steal", 0.0)
    total = busy + t.idle + getattr(t, "iowait", 0.0) + steal
    return CpuSample(t=time.monotonic(), busy=busy, steal=steal, total=total, ours=ours)


def gpu_samples() -> list[GpuSample]:
    """One sample of every GPU CUDA sees here; empty without NVML or a GPU."""
    from perfgate.host import gpu

    nv = gpu._nvml()
    if nv is None:
        return []
    try:
        handles = gpu.visible_handles(nv)
    except Exception:
        return []
    out = []
    def read(fn: str, h: Any, *args: object) -> Any:
        try:
            return getattr(nv, fn)(h, *args)
        except Exception:
            return None

    for i, h in enumerate(handles):
        sm = read("nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1))
        power = read("nvmlDeviceGetPowerUsage", h)
        temp = read("nvmlDeviceGetTemperature", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        reasons = read("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:
            reasons = read("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        out.append(GpuSample(index=i, sm_mhz=float(sm) if sm is not None else None,
                             power_w=float(power) / 1000 if power is not None else None,
                             temp_c=float(temp) if temp is not None else None,
                             reasons=int(reasons) if reasons is not None else None))
    return out


class Watch:
    """Watches one measured start: :meth:`start` before it, :meth:`stop` after (its :class:`Conditions`). GPU
    samples come from a daemon thread every :data:`SAMPLE_S` seconds; nothing here raises."""

    def __init__(self, period_s: float = SAMPLE_S) -> None:
        self.period_s = period_s
        #: what :meth:`stop` found (None: not stopped, or never started)
        self.conditions: Conditions | None = None
        self._start: CpuSample | None = None
        self._gpu: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: where our processes ran during the start (perfgate.host.placement), once stopped
        self.placement: Placement | None = None
        self._threads = ThreadSample()

    def start(self) -> Watch:
        self._start = cpu_sample()
        with contextlib.suppress(Exception):
            self._threads = thread_sample(_ours_pids())
        first = gpu_samples()
        self._gpu += first
        if first:
            self._thread = threading.Thread(target=self._sample, name="perfgate-host-watch", daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.period_s):
            self._gpu += gpu_samples()

    def stop(self) -> Conditions:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._gpu += gpu_samples()
        end = cpu_sample()
        with contextlib.suppress(Exception):
            self.placement = placement(self._threads, thread_sample(_ours_pids()))
        load = None
        with contextlib.suppress(OSError, AttributeError):
            load = os.getloadavg()[0]
        self.conditions = conditions(self._start, end, self._gpu, cpus=os.cpu_count(), load_1m=load)
        return self.conditions

    @property
    def state(self) -> str:
        """``quiet`` or ``disturbed: <why>`` once stopped; "" before, or when never started (a measurement's
        ``host_state``)."""
        return self.conditions.state() if self.conditions is not None else ""
