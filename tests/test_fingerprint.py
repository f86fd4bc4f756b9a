"""The machine in every record: machine.* and calib.* on the testcases and the suite (pytester on the simulated
box), the session's calibration choices, and the report side reading them back (perfgate.plugin.fingerprint)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from junitparser.xunit2 import JUnitXml

from perfgate.plugin.fingerprint import session_fingerprint
from perfgate.profiles.settings import Settings
from perfgate.record import MACHINE_PROPERTIES, fmt
from perfgate.report import compare_machines, diff, read_report
from perfgate.report.render import render_diff
from perfgate.sim.variation import machine_factor
from perfgate.stack.calibration import Calibration
from perfgate.stack.machine import GpuFacts, HostCpu, Machine, simulated_machine
from tests.test_plugin import make_project


def _run(pytester: Any, xml: str, *extra: str) -> Any:
    prof = pytester.path / "baselines" / "t" / "m.toml"
    if not prof.is_file():
        make_project(pytester)
    return pytester.runpytest_subprocess("perftests", "-m", "baseline", f"--perfgate-profile={prof}",
                                         f"--junitxml={xml}", "-p", "no:cacheprovider", *extra)


def _props(element: Any) -> dict[str, str]:
    return {p.name: p.value for p in element.properties()}


def test_records_carry_the_simulated_machine(pytester: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFGATE_SIM_MACHINE", "h200-b")
    _run(pytester, "b.xml").assert_outcomes(passed=1)
    suite = next(iter(JUnitXml.fromfile(str(pytester.path / "b.xml"))))
    case = next(iter(suite))
    p, sp = _props(case), _props(suite)
    want = simulated_machine("h200-b", 8)
    assert set(MACHINE_PROPERTIES) <= set(p) and set(MACHINE_PROPERTIES) <= set(sp)
    assert p["machine.id"] == sp["machine.id"] == want.id
    assert p["machine.gpu_uuid"] == ",".join(f"GPU-sim-h200-b-{i}" for i in range(8))
    assert p["calib.source"] == "sim"
    assert p["calib.hbm_gbps"] == fmt(1530.0 * machine_factor("h200-b"))
    assert p["machine.power_limit_w"] == "unknown"
    rep = read_report(pytester.path / "b.xml")
    assert rep.machine["machine.id"] == want.id and rep.records[0].machine_dict["calib.source"] == "sim"
    assert "machine.id" not in rep.records[0].number_dict

    monkeypatch.setenv("PERFGATE_SIM_MACHINE", "reference")
    _run(pytester, "ref.xml", "--perfgate-calibrate", "off").assert_outcomes(passed=1)
    ref = read_report(pytester.path / "ref.xml")
    assert ref.machine["calib.source"] == "none" and ref.machine["calib.hbm_gbps"] == "unknown"
    m = compare_machines(ref, rep)
    assert m.same is False and ("machine.gpu_uuid", ref.machine["machine.gpu_uuid"], p["machine.gpu_uuid"]) in m.differences
    text = render_diff(diff(ref, rep), "text")
    assert f"Machine: different machines {ref.machine['machine.id']} vs {want.id}: host_id" in text
    assert compare_machines(rep, rep).describe() == f"same machine {want.id}"


def test_a_bad_simulated_machine_is_a_usage_error(pytester: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFGATE_SIM_SCALE", "fast")
    r = _run(pytester, "r.xml")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*PERFGATE_SIM_SCALE='fast': expected a speed multiplier > 0; fix:*"])


class _Terminal:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, line: str) -> None:
        self.lines.append(line)

    def ensure_newline(self) -> None:
        pass


def _state(*, calibrate: str = "auto", url: str | None = None, collect_only: bool = False) -> Any:
    tr = _Terminal()
    config = SimpleNamespace(getoption=lambda name, default=None: collect_only if name == "collectonly" else default,
                             pluginmanager=SimpleNamespace(get_plugin=lambda name: tr if name == "terminalreporter"
                                                           else None))
    profile = SimpleNamespace(simulated=False, engine=SimpleNamespace(name="sglang", python="/venv/bin/python"))
    return SimpleNamespace(profile=profile, config=config, settings=Settings(calibrate=calibrate, url=url or ""),
                           terminal=tr)


BOX = Machine(host_id="abc", gpus=(GpuFacts(uuid="GPU-1"),),
              cpu=HostCpu(model="Intel(R) Xeon(R) Platinum 8480+", governor="performance", idle="intel_idle"))


def test_a_real_session_calibrates_in_the_server_python_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake_run(python: str = "", **kw: Any) -> Calibration:
        calls.append(python)
        return Calibration(hbm_gbps=4012.0, gemm_tflops=731.0, source="torch", seconds=3.5)

    monkeypatch.setattr("perfgate.stack.machine.probe_machine", lambda: BOX)
    monkeypatch.setattr("perfgate.stack.calibration.run_calibration", fake_run)
    st = _state()
    fp = session_fingerprint(st)
    assert calls == ["/venv/bin/python"] and fp.machine is BOX
    assert fp.as_properties()["calib.gemm_tflops"] == "731" and fp.as_properties()["machine.id"] == BOX.id
    assert st.terminal.lines == [f"perfgate: machine {BOX.id}: HBM copy 4012 GB/s, bf16 GEMM 731.0 TFLOP/s (3.5 s); "
                                 f"host CPU Intel(R) Xeon(R) Platinum 8480+ (governor performance, idle intel_idle)"]
    assert fp.as_properties()["machine.cpu_model"] == "Intel(R) Xeon(R) Platinum 8480+"


@pytest.mark.parametrize(("kw", "why"), [
    ({"calibrate": "off"}, "--perfgate-calibrate off"),
    ({"url": "http://127.0.0.1:30000"}, "attached with --perfgate-url"),
    ({"collect_only": True}, "collection only"),
])
def test_when_a_real_session_does_not_calibrate(monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any], why: str) -> None:
    monkeypatch.setattr("perfgate.stack.machine.probe_machine", lambda: BOX)
    monkeypatch.setattr("perfgate.stack.calibration.run_calibration", lambda *a, **k: pytest.fail("calibrated"))
    st = _state(**kw)
    fp = session_fingerprint(st)
    assert fp.calibration.source == "none" and why in fp.calibration.reason and st.terminal.lines == []
    assert fp.as_properties()["machine.id"] == BOX.id  # the machine is recorded all the same
