"""perfgate.stack.machine and perfgate.stack.calibration: the machine fingerprint (NVML, host id) and the
session-start calibration (a torch subprocess that fails cleanly)."""

from __future__ import annotations

import json
import socket
import sys
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.record import MACHINE_PROPERTIES
from perfgate.stack import calibration, machine
from perfgate.stack.calibration import Calibration, parse_calibration, run_calibration
from perfgate.stack.machine import GpuFacts, HostCpu, Machine, host_cpu, host_id, probe_machine, simulated_machine
from tests.test_stack import _NvmlError, fake_pynvml


def nvml_with_machine_facts(n: int = 4, *, broken: frozenset[str] = frozenset(), power_mw: list[int] | None = None,
                            ecc: int = 1) -> Any:
    m = fake_pynvml(names=["NVIDIA H200"] * n, nvlink=True, cap=(9, 0))
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM = 1, 2
    m.NVML_FEATURE_DISABLED = 0
    watts = power_mw or [700_000] * n

    def fn(name: str, body):
        def call(*a):
            if name in broken:
                raise _NvmlError(3)  # NVML_ERROR_NOT_SUPPORTED
            return body(*a)
        return call

    m.nvmlDeviceGetUUID = fn("uuid", lambda h: f"GPU-{h:04d}-aaaa")
    m.nvmlDeviceGetSerial = fn("serial", lambda h: f"165{h:010d}".encode())
    m.nvmlDeviceGetEnforcedPowerLimit = fn("power", lambda h: watts[h])
    m.nvmlDeviceGetPowerManagementLimit = fn("power_mgmt", lambda h: watts[h])
    m.nvmlDeviceGetMaxClockInfo = fn("clocks", lambda h, kind: {1: 1980, 2: 3201}[kind])
    m.nvmlDeviceGetEccMode = fn("ecc", lambda h: [ecc, ecc])
    m.nvmlDeviceGetMaxPcieLinkGeneration = fn("pcie", lambda h: 5)
    m.nvmlDeviceGetMaxPcieLinkWidth = fn("pcie", lambda h: 16)
    m.nvmlDeviceGetCurrPcieLinkGeneration = fn("pcie", lambda h: 1 if h == 0 else 5)
    m.nvmlDeviceGetCurrPcieLinkWidth = fn("pcie", lambda h: 16)
    return m


@pytest.fixture
def no_cuda_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_the_fingerprint_from_nvml(monkeypatch: pytest.MonkeyPatch, no_cuda_env: None) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nvml_with_machine_facts())
    m = probe_machine()
    assert len(m.gpus) == 4
    g0, g1 = m.gpus[0], m.gpus[1]
    assert g0 == GpuFacts(uuid="GPU-0000-aaaa", serial="1650000000000", power_limit_w="700", sm_clock_max_mhz="1980",
                          mem_clock_max_mhz="3201", ecc="on", pcie="gen5 x16 (current gen1 x16)")
    assert g1.pcie == "gen5 x16"
    p = m.as_properties()
    assert tuple(p) == MACHINE_PROPERTIES[:12]
    assert p["machine.gpu_uuid"] == "GPU-0000-aaaa,GPU-0001-aaaa,GPU-0002-aaaa,GPU-0003-aaaa"
    assert p["machine.power_limit_w"] == "700" and p["machine.ecc"] == "on"
    assert p["machine.pcie"] == "gen5 x16 (current gen1 x16),gen5 x16,gen5 x16,gen5 x16"
    assert len(p["machine.id"]) == 12 and p["machine.id"] == m.id


def test_the_fingerprint_is_of_the_gpus_cuda_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nvml_with_machine_facts(power_mw=[700_000, 700_000, 600_000, 650_500]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0002,3")
    m = probe_machine()
    assert m.gpu_uuid == "GPU-0002-aaaa,GPU-0003-aaaa"
    assert m.as_properties()["machine.power_limit_w"] == "600,650.5"  # per GPU where they differ
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    other = probe_machine()
    assert other.id != m.id and other.host_id == m.host_id


def test_every_piece_nvml_cannot_say_is_unknown(monkeypatch: pytest.MonkeyPatch, no_cuda_env: None) -> None:
    broken = frozenset({"serial", "power", "power_mgmt", "clocks", "ecc", "pcie"})
    monkeypatch.setitem(sys.modules, "pynvml", nvml_with_machine_facts(2, broken=broken))
    p = probe_machine().as_properties()
    assert p["machine.gpu_uuid"] == "GPU-0000-aaaa,GPU-0001-aaaa"
    assert {p[k] for k in ("machine.power_limit_w", "machine.sm_clock_max_mhz", "machine.mem_clock_max_mhz",
                           "machine.ecc", "machine.pcie")} == {"unknown"}
    assert p["machine.gpu_serial"] == "unknown,unknown"
    monkeypatch.setitem(sys.modules, "pynvml", nvml_with_machine_facts(1, ecc=0))
    assert probe_machine().gpus[0].ecc == "off"


def test_no_nvml_is_a_machine_without_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    broken: Any = types.ModuleType("pynvml")

    def fail() -> None:
        raise _NvmlError(9)  # NVML_ERROR_DRIVER_NOT_LOADED

    broken.nvmlInit = fail
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    m = probe_machine()
    assert m.gpus == () and m.gpu_uuid == "unknown" and m.host_id != "unknown"
    assert m.id != "unknown"  # the host alone still names the machine
    assert Machine().id == "unknown" and Machine().as_properties()["machine.pcie"] == "unknown"


def test_the_host_id_is_a_hash_never_the_name(tmp_path) -> None:
    mid = tmp_path / "machine-id"
    mid.write_text("3d1215c0ffee4a6b9d2e0c8b7a6f5e4d\n")
    a = host_id((str(mid),))
    assert len(a) == 12 and all(c in "0123456789abcdef" for c in a)
    assert a == host_id((str(mid),)) and "3d1215" not in a
    mid.write_text("another-machine\n")
    assert host_id((str(mid),)) != a
    name = socket.gethostname()
    by_name = host_id((str(tmp_path / "absent"),))
    assert by_name == host_id((str(tmp_path / "absent"),), hostname=name) and name not in by_name
    assert host_id((str(tmp_path / "absent"),), hostname="") == "unknown"
    m = Machine(host_id=by_name, gpus=(GpuFacts(uuid="GPU-1"),))
    assert all(name not in v for v in m.as_properties().values())


def test_the_machine_id_follows_host_and_gpus() -> None:
    a = Machine(host_id="h1", gpus=(GpuFacts(uuid="GPU-1"), GpuFacts(uuid="GPU-2")))
    assert a.id == Machine(host_id="h1", gpus=(GpuFacts(uuid="GPU-1", ecc="on"), GpuFacts(uuid="GPU-2"))).id
    assert a.id != Machine(host_id="h2", gpus=a.gpus).id
    assert a.id != Machine(host_id="h1", gpus=(GpuFacts(uuid="GPU-1"), GpuFacts(uuid="GPU-3"))).id


def test_a_simulated_machine_is_named_by_its_gpus_and_host() -> None:
    m = simulated_machine("h200-b", 2)
    assert m.gpu_uuid == "GPU-sim-h200-b-0,GPU-sim-h200-b-1"
    assert m.id == simulated_machine("h200-b", 2).id != simulated_machine("h200-c", 2).id
    assert m.host_id == simulated_machine("h200-b", 8).host_id


# ---------------------------------------------------------------- calibration


def test_a_calibration_line_is_parsed() -> None:
    line = json.dumps({"source": "torch", "hbm_gbps": 4012.5, "gemm_tflops": 731.2, "device": "H200", "seconds": 4.2})
    c = parse_calibration("torch says hello\n" + line + "\n")
    assert c == Calibration(hbm_gbps=4012.5, gemm_tflops=731.2, source="torch", seconds=4.2)
    assert c.as_properties() == {"calib.hbm_gbps": "4012.5", "calib.gemm_tflops": "731.2", "calib.source": "torch"}
    assert c.line("abc123") == "perfgate: machine abc123: HBM copy 4012 GB/s, bf16 GEMM 731.2 TFLOP/s (4.2 s)"


@pytest.mark.parametrize(("stdout", "why"), [
    ("", "printed nothing"),
    ("Segmentation fault", "printed no JSON"),
    ("[1, 2]", "printed list"),
    ('{"source": "none", "reason": "torch 2.9.1 sees no CUDA device"}', "sees no CUDA device"),
    ('{"source": "torch", "hbm_gbps": -1, "gemm_tflops": 700}', "not positive numbers"),
    ('{"source": "torch", "hbm_gbps": "fast", "gemm_tflops": 700}', "not positive numbers"),
])
def test_anything_but_a_measurement_is_source_none(stdout: str, why: str) -> None:
    c = parse_calibration(stdout)
    assert c.source == "none" and c.hbm_gbps is None and why in c.reason
    assert c.as_properties() == {"calib.hbm_gbps": "unknown", "calib.gemm_tflops": "unknown", "calib.source": "none"}
    assert c.line("m1").startswith("perfgate: machine m1: no calibration (")


def test_without_torch_the_calibration_says_so(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no torch in this environment')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    c = run_calibration(sys.executable)
    assert c.source == "none" and "torch not importable: no torch in this environment" in c.reason
    assert c.seconds is not None


def test_without_cuda_the_calibration_says_so(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = '2.9.1'\nclass cuda:\n    is_available = staticmethod(lambda: False)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    c = run_calibration()
    assert c.source == "none" and c.reason == "torch 2.9.1 sees no CUDA device"


def test_a_failing_child_or_python_is_source_none(tmp_path) -> None:
    crashed = run_calibration(sys.executable, script="import sys; sys.stderr.write('boom\\n'); sys.exit(3)")
    assert crashed.source == "none" and "exited 3: boom" in crashed.reason
    missing = run_calibration(str(tmp_path / "no-python"))
    assert missing.source == "none" and "cannot run the calibration" in missing.reason
    slow = run_calibration(sys.executable, script="import time; time.sleep(30)", timeout_s=0.5)
    assert slow.source == "none" and "took over 0.5 s" in slow.reason


def test_the_simulated_calibration_scales_with_the_machine() -> None:
    from perfgate.sim.variation import machine_factor

    ref = calibration.simulated_calibration("reference", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    other = calibration.simulated_calibration("box-7", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert ref.source == "sim" and ref.hbm_gbps == 1530.0
    assert other.gemm_tflops == pytest.approx(380.0 * machine_factor("box-7"))
    assert machine.pcie_max("gen5 x16 (current gen1 x16)") == "gen5 x16"


FAKE_CUDA_TORCH = '''
__version__ = "0.0-fake"
uint8, bfloat16 = "uint8", "bf16"
class _T:
    def copy_(self, other): return self
    def random_(self, lo, hi): return self
def empty(*a, **k): return _T()
def empty_like(x): return _T()
def randn(*a, **k): return _T()
def matmul(a, b, out=None): return out
def device(*a): return a
class cuda:
    is_available = staticmethod(lambda: True)
    synchronize = staticmethod(lambda: None)
    get_device_name = staticmethod(lambda d: "Fake GPU")
    class Event:
        def __init__(self, enable_timing=False): pass
        def record(self): pass
        def synchronize(self): pass
        def elapsed_time(self, other): return 0.5  # every timed call: 0.5 ms
'''


def test_the_script_turns_event_times_into_bandwidth_and_flops(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_CUDA_TORCH)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    c = run_calibration()
    assert c.source == "torch"
    assert c.hbm_gbps == pytest.approx(2 * 2**31 / 0.5e-3 / 1e9)  # 2 GiB read + 2 GiB written in 0.5 ms
    assert c.gemm_tflops == pytest.approx(2 * 8192**3 / 0.5e-3 / 1e12)


X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
cpu MHz\t\t: 2000.000

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 2000.00
CPU implementer\t: 0x41
CPU part\t: 0xd4f
"""


@pytest.mark.parametrize(("cpuinfo", "governor", "idle", "want"), [
    (X86_CPUINFO, "performance\n", "intel_idle\n",
     HostCpu(model="Intel(R) Xeon(R) Platinum 8480+", governor="performance", idle="intel_idle")),
    (ARM_CPUINFO, None, "psci_idle\n", HostCpu(model="arm implementer 0x41 part 0xd4f", idle="psci_idle")),
    ("", None, None, HostCpu()),  # a container that shows none of it
    (None, "", "", HostCpu()),  # no /proc/cpuinfo at all, empty sysfs files
])
def test_the_host_cpu_from_proc_and_sys(tmp_path, cpuinfo, governor, idle, want) -> None:
    files = {"proc/cpuinfo": cpuinfo, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": governor,
             "sys/devices/system/cpu/cpuidle/current_driver": idle}
    for rel, text in files.items():
        if text is not None:
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
    assert host_cpu(tmp_path) == want


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_cpuinfo_text_gives_a_one_line_model_or_unknown(text: str) -> None:
    from perfgate.stack.machine import _cpu_model

    model = _cpu_model(text)
    assert model and "\n" not in model and model == model.strip()


def test_the_fingerprint_carries_the_host_cpu(monkeypatch: pytest.MonkeyPatch, no_cuda_env: None) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nvml_with_machine_facts(1))
    want = HostCpu(model="AMD EPYC 9654 96-Core Processor", governor="performance", idle="acpi_idle")
    monkeypatch.setattr(machine, "host_cpu", lambda: want)
    p = probe_machine().as_properties()
    assert (p["machine.cpu_model"], p["machine.cpu_governor"], p["machine.cpu_idle"]) == \
        ("AMD EPYC 9654 96-Core Processor", "performance", "acpi_idle")
    assert simulated_machine("h200-a", 8).as_properties()["machine.cpu_model"] == "unknown"  # not modelled
