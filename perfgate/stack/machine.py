"""Which machine a run happened on: a :class:`Machine` fingerprint from NVML, or a simulated machine's.

Two H200s with the same stack decode 3.4 % apart (docs/measurement.md, "Machines"), so a record says which
machine it came from: a host id (a short sha256 of ``/etc/machine-id``, else of the hostname; never the
name itself), per GPU in use (the ones CUDA sees here, :func:`perfgate.host.gpu.visible_handles`) its UUID
and serial, enforced power limit, maximum SM and memory clocks, ECC mode and PCIe link, and the host's CPU
(:class:`HostCpu`: its model, frequency governor and idle driver, where the server's host-side work runs: TTFT's
prefill host time read 10-14 ms on one H100 box and 20-30 ms on another, and no record said whether their CPUs
differed). :attr:`Machine.id` is a short hash of the host id and the GPU UUIDs: the same id is the same machine.

:func:`probe_machine` never raises; every piece it cannot find is ``"unknown"``. :func:`simulated_machine`
is the simulator's box (:mod:`perfgate.sim.variation`): GPU UUIDs ``GPU-sim-<machine>-<i>``, host id from
the machine name.
"""

from __future__ import annotations

import hashlib
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.host import gpu
from perfgate.record import (
    MACHINE_CPU_GOVERNOR,
    MACHINE_CPU_IDLE,
    MACHINE_CPU_MODEL,
    MACHINE_ECC,
    MACHINE_GPU_SERIAL,
    MACHINE_GPU_UUID,
    MACHINE_HOST_ID,
    MACHINE_ID,
    MACHINE_MEM_CLOCK_MAX_MHZ,
    MACHINE_PCIE,
    MACHINE_POWER_LIMIT_W,
    MACHINE_SM_CLOCK_MAX_MHZ,
)
from perfgate.stack.probes import UNKNOWN

__all__ = ["GpuFacts", "HostCpu", "Machine", "host_cpu", "host_id", "probe_machine", "simulated_machine"]

MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_ID_LEN = 12  # hex digits of the short hashes


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_ID_LEN]


@dataclass(frozen=True, kw_only=True)
class GpuFacts:
    """One GPU in use: identity and the state that sets its speed (``"unknown"`` where NVML did not say)."""

    uuid: str = UNKNOWN
    serial: str = UNKNOWN
    power_limit_w: str = UNKNOWN
    sm_clock_max_mhz: str = UNKNOWN
    mem_clock_max_mhz: str = UNKNOWN
    ecc: str = UNKNOWN  # on | off | unknown
    pcie: str = UNKNOWN  # "gen5 x16", or "gen5 x16 (current gen1 x16)"


@dataclass(frozen=True, kw_only=True)
class HostCpu:
    """The host's CPU (``"unknown"`` where the kernel does not say: a container often has no cpufreq)."""

    model: str = UNKNOWN  # /proc/cpuinfo's model name; on Arm, its implementer and part
    governor: str = UNKNOWN  # /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
    idle: str = UNKNOWN  # /sys/devices/system/cpu/cpuidle/current_driver


@dataclass(frozen=True, kw_only=True)
class Machine:
    """A machine's fingerprint: a host id, the GPUs in use and the host's CPU."""

    host_id: str = UNKNOWN
    gpus: tuple[GpuFacts, ...] = ()
    cpu: HostCpu = HostCpu()

    @property
    def gpu_uuid(self) -> str:
        """The GPUs' UUIDs, comma-joined in CUDA order."""
        return ",".join(g.uuid for g in self.gpus) or UNKNOWN

    @property
    def gpu_serial(self) -> str:
        return ",".join(g.serial for g in self.gpus) or UNKNOWN

    @property
    def id(self) -> str:
        """A short hash of the host id and the GPU UUIDs; ``"unknown"`` when neither is known."""
        uuids = [g.uuid for g in self.gpus if g.uuid != UNKNOWN]
        if self.host_id == UNKNOWN and not uuids:
            return UNKNOWN
        return _short_hash(f"perfgate-machine:{self.host_id}:{','.join(uuids)}")

    def _per_gpu(self, name: str) -> str:
        values = [str(getattr(g, name)) for g in self.gpus]
        if not values:
            return UNKNOWN
        return values[0] if len(set(values)) == 1 else ",".join(values)

    def as_properties(self) -> dict[str, str]:
        """The ``machine.*`` JUnit properties (perfgate.record), every value a string."""
        return {
            MACHINE_ID: self.id,
            MACHINE_HOST_ID: self.host_id,
            MACHINE_GPU_UUID: self.gpu_uuid,
            MACHINE_GPU_SERIAL: self.gpu_serial,
            MACHINE_POWER_LIMIT_W: self._per_gpu("power_limit_w"),
            MACHINE_SM_CLOCK_MAX_MHZ: self._per_gpu("sm_clock_max_mhz"),
            MACHINE_MEM_CLOCK_MAX_MHZ: self._per_gpu("mem_clock_max_mhz"),
            MACHINE_ECC: self._per_gpu("ecc"),
            MACHINE_PCIE: self._per_gpu("pcie"),
            MACHINE_CPU_MODEL: self.cpu.model,
            MACHINE_CPU_GOVERNOR: self.cpu.governor,
            MACHINE_CPU_IDLE: self.cpu.idle,
        }


# ---------------------------------------------------------------- this box


def host_id(machine_id_files: tuple[str, ...] = MACHINE_ID_FILES, hostname: str | None = None) -> str:
    """A short sha256 of the first readable machine-id file, else of the hostname; ``"unknown"`` if neither."""
    for f in machine_id_files:
        try:
            text = Path(f).read_text().strip()
        except OSError:
            continue
        if text:
            return _short_hash(f"perfgate-host:{text}")
    try:
        name = socket.gethostname() if hostname is None else hostname
    except OSError:
        name = ""
    return _short_hash(f"perfgate-hostname:{name}") if name else UNKNOWN


def _cpu_model(cpuinfo: str) -> str:
    """The CPU's name from ``/proc/cpuinfo``'s text: its ``model name`` (x86), else its ``Hardware`` line, else (Arm,
    which names no model there) ``arm implementer 0x41 part 0xd4f``; ``"unknown"`` where none is given."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), " ".join(value.split())
        if sep and value and key not in fields:
            fields[key] = value
    if fields.get("model name"):
        return fields["model name"]
    if fields.get("hardware"):
        return fields["hardware"]
    if "cpu implementer" in fields and "cpu part" in fields:
        return f"arm implementer {fields['cpu implementer']} part {fields['cpu part']}"
    return UNKNOWN


def _first_line(path: Path) -> str:
    """A sysfs file's first line, ``"unknown"`` where it is absent or empty."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return UNKNOWN
    return text.splitlines()[0].strip() if text else UNKNOWN


def host_cpu(root: Path = Path("/")) -> HostCpu:
    """This host's CPU facts (``root``: where ``proc`` and ``sys`` are, for tests). Never raises."""
    try:
        cpuinfo = (root / "proc/cpuinfo").read_text(errors="replace")
    except OSError:
        cpuinfo = ""
    cpu = root / "sys/devices/system/cpu"
    return HostCpu(model=_cpu_model(cpuinfo), governor=_first_line(cpu / "cpu0/cpufreq/scaling_governor"),
                   idle=_first_line(cpu / "cpuidle/current_driver"))


def probe_machine() -> Machine:
    """This box's fingerprint: host id, the visible GPUs' facts through NVML, the host's CPU. Never raises."""
    try:
        gpus = _nvml_gpus()
    except Exception:
        gpus = ()
    return Machine(host_id=host_id(), gpus=gpus, cpu=host_cpu())


def _nvml_gpus() -> tuple[GpuFacts, ...]:
    import pynvml

    pynvml.nvmlInit()
    try:
        return tuple(_gpu_facts(pynvml, h) for h in gpu.visible_handles(pynvml))
    finally:
        gpu.shutdown(pynvml)


def _ask(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None


def _gpu_facts(nv: Any, h: Any) -> GpuFacts:
    def text(value: Any) -> str:
        t = gpu.text(value) if value is not None else ""
        return t or UNKNOWN

    def whole(value: Any, divisor: float = 1.0) -> str:
        try:
            x = float(value) / divisor
        except (TypeError, ValueError):
            return UNKNOWN
        return f"{x:g}" if x > 0 else UNKNOWN

    power = _ask(nv.nvmlDeviceGetEnforcedPowerLimit, h)
    if power is None:
        power = _ask(nv.nvmlDeviceGetPowerManagementLimit, h)
    return GpuFacts(
        uuid=text(_ask(nv.nvmlDeviceGetUUID, h)),
        serial=text(_ask(nv.nvmlDeviceGetSerial, h)),
        power_limit_w=whole(power, 1000.0),  # NVML: milliwatts
        sm_clock_max_mhz=whole(_ask(nv.nvmlDeviceGetMaxClockInfo, h, getattr(nv, "NVML_CLOCK_SM", 1))),
        mem_clock_max_mhz=whole(_ask(nv.nvmlDeviceGetMaxClockInfo, h, getattr(nv, "NVML_CLOCK_MEM", 2))),
        ecc=_ecc(nv, _ask(nv.nvmlDeviceGetEccMode, h)),
        pcie=_pcie(nv, h),
    )


def _ecc(nv: Any, mode: Any) -> str:
    """The current ECC mode (NVML answers ``[current, pending]``)."""
    try:
        current = int(mode[0] if isinstance(mode, (list, tuple)) else mode)
    except (TypeError, ValueError, IndexError):
        return UNKNOWN
    if current == int(getattr(nv, "NVML_FEATURE_ENABLED", 1)):
        return "on"
    if current == int(getattr(nv, "NVML_FEATURE_DISABLED", 0)):
        return "off"
    return UNKNOWN


def _pcie(nv: Any, h: Any) -> str:
    """``gen5 x16``; the current link appended where it differs (an idle GPU drops its generation)."""
    def link(gen_fn: str, width_fn: str) -> str | None:
        g, w = _ask(getattr(nv, gen_fn, None), h), _ask(getattr(nv, width_fn, None), h)
        try:
            gi, wi = int(g), int(w)
        except (TypeError, ValueError):
            return None
        return f"gen{gi} x{wi}" if gi > 0 and wi > 0 else None

    best = link("nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth")
    now = link("nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth")
    if best is None:
        return now or UNKNOWN
    return best if now is None or now == best else f"{best} (current {now})"


def pcie_max(value: str) -> str:
    """The maximum link of a ``machine.pcie`` value (``gen5 x16 (current gen1 x16)`` -> ``gen5 x16``)."""
    return value.split(" (current", 1)[0].strip()


# ---------------------------------------------------------------- simulated


def simulated_machine(name: str, count: int) -> Machine:
    """Simulated machine ``name`` with ``count`` GPUs (perfgate.sim.variation): its GPU UUIDs and serials
    name it; the power, clocks, ECC, PCIe and host CPU it does not model are ``"unknown"``."""
    from perfgate.sim.variation import sim_gpu_uuid

    gpus = tuple(GpuFacts(uuid=sim_gpu_uuid(name, i), serial=f"sim-{name}-{i}") for i in range(max(0, count)))
    return Machine(host_id=_short_hash(f"perfgate-sim-host:{name}"), gpus=gpus)
