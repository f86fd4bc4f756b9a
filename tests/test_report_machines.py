"""perfgate.report.machines: same machine, different machines, or unknown (reports older than the fingerprint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfgate.report import compare_machines, diff, read_report
from perfgate.report.render import render_diff
from tests.report_factory import perf_case, write_report

BOX_A = {
    "machine.id": "a1a1a1a1a1a1", "machine.host_id": "h0h0h0h0h0h0", "machine.gpu_uuid": "GPU-aaaa",
    "machine.gpu_serial": "1650000000001", "machine.power_limit_w": "700", "machine.sm_clock_max_mhz": "1980",
    "machine.mem_clock_max_mhz": "3201", "machine.ecc": "on", "machine.pcie": "gen5 x16",
    "calib.hbm_gbps": "4012", "calib.gemm_tflops": "731", "calib.source": "torch",
}


def _report(path: Path, machine: dict[str, str] | None, *, on_cases: bool = False):
    props = sorted((machine or {}).items())
    case = perf_case("baseline", tok_s=210.4, spread=0.1, cv=0.001, kind="floor",
                     extra=dict(props) if on_cases else {})
    return read_report(write_report(path, [case], suite_properties=() if on_cases else props))


def test_reports_of_one_machine(tmp_path: Path) -> None:
    old = _report(tmp_path / "a.xml", BOX_A)
    new = _report(tmp_path / "b.xml", {**BOX_A, "machine.pcie": "gen5 x16 (current gen1 x16)",
                                        "calib.hbm_gbps": "4030"}, on_cases=True)
    assert new.machine["machine.id"] == "a1a1a1a1a1a1" and new.records[0].machine_dict["calib.hbm_gbps"] == "4030"
    m = compare_machines(old, new)
    assert m.same is True and m.differences == ()  # an idle link's generation and 0.4 % of HBM are no difference
    assert m.hbm_ratio == pytest.approx(4030 / 4012) and m.gemm_ratio == 1.0
    assert m.describe() == "same machine a1a1a1a1a1a1"


def test_reports_of_two_machines_say_what_differs(tmp_path: Path) -> None:
    b = {**BOX_A, "machine.id": "b2b2b2b2b2b2", "machine.host_id": "h9h9h9h9h9h9", "machine.gpu_uuid": "GPU-bbbb",
         "machine.power_limit_w": "600", "machine.ecc": "unknown", "calib.gemm_tflops": "700"}
    m = compare_machines(_report(tmp_path / "a.xml", BOX_A), _report(tmp_path / "b.xml", b))
    assert m.same is False
    keys = [k for k, _, _ in m.differences]
    assert keys == ["machine.host_id", "machine.gpu_uuid", "machine.power_limit_w", "calib.gemm_tflops"]
    assert ("machine.gpu_uuid", "GPU-aaaa", "GPU-bbbb") in m.differences
    assert m.describe().startswith("different machines a1a1a1a1a1a1 vs b2b2b2b2b2b2: host_id h0h0h0h0h0h0 vs "
                                   "h9h9h9h9h9h9, gpu_uuid GPU-aaaa vs GPU-bbbb, power_limit_w 700 vs 600")


def test_one_machine_whose_state_changed(tmp_path: Path) -> None:
    m = compare_machines(_report(tmp_path / "a.xml", BOX_A),
                         _report(tmp_path / "b.xml", {**BOX_A, "machine.power_limit_w": "500"}))
    assert m.same is True and m.differences == (("machine.power_limit_w", "700", "500"),)
    assert m.describe() == "same machine a1a1a1a1a1a1 (changed: power_limit_w 700 vs 500)"


@pytest.mark.parametrize(("old", "new", "says"), [
    (None, BOX_A, "the old report records no machine.id"),
    (BOX_A, None, "the new report records no machine.id"),
    (None, None, "neither report records machine.id"),
    ({**BOX_A, "machine.id": "unknown"}, BOX_A, "the old report records no machine.id"),
])
def test_a_report_without_a_machine_id_is_unknown(tmp_path: Path, old: dict[str, str] | None,
                                                  new: dict[str, str] | None, says: str) -> None:
    m = compare_machines(_report(tmp_path / "a.xml", old), _report(tmp_path / "b.xml", new))
    assert m.same is None and m.differences == () and says in m.describe()


def test_diff_shows_the_machines_in_every_format(tmp_path: Path) -> None:
    old = _report(tmp_path / "a.xml", BOX_A)
    new = _report(tmp_path / "b.xml", {**BOX_A, "machine.id": "b2b2b2b2b2b2", "machine.gpu_uuid": "GPU-bbbb"})
    d = diff(old, new)
    assert "Machine: different machines a1a1a1a1a1a1 vs b2b2b2b2b2b2: gpu_uuid GPU-aaaa vs GPU-bbbb" in render_diff(d, "text")
    assert "**Machine:** different machines a1a1a1a1a1a1 vs b2b2b2b2b2b2" in render_diff(d, "md")
    data = json.loads(render_diff(d, "json"))
    assert data["machines"]["same"] is False
    assert data["machines"]["differences"] == [{"key": "machine.gpu_uuid", "old": "GPU-aaaa", "new": "GPU-bbbb"}]
    assert data["old"]["machine"]["calib.hbm_gbps"] == "4012"
    older = diff(_report(tmp_path / "c.xml", None), old)
    assert "Machine: machine unknown (the old report records no machine.id" in render_diff(older, "text")


def test_two_hosts_with_the_same_gpu_say_their_cpus_differ(tmp_path: Path) -> None:
    """The host's CPU sets TTFT's prefill host time (10-14 ms on one H100 box, 20-30 ms on another): a comparison
    across machines names it where the two differ, and a report without it (older) compares as before."""
    a = {**BOX_A, "machine.cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "machine.cpu_governor": "performance",
         "machine.cpu_idle": "intel_idle"}
    b = {**a, "machine.id": "b2b2b2b2b2b2", "machine.host_id": "h9h9h9h9h9h9",
         "machine.cpu_model": "AMD EPYC 9654 96-Core Processor", "machine.cpu_idle": "acpi_idle"}
    m = compare_machines(_report(tmp_path / "a.xml", a), _report(tmp_path / "b.xml", b))
    assert [k for k, _, _ in m.differences] == ["machine.host_id", "machine.cpu_model", "machine.cpu_idle"]
    assert "cpu_model Intel(R) Xeon(R) Platinum 8480+ vs AMD EPYC 9654 96-Core Processor" in m.describe()
    older = compare_machines(_report(tmp_path / "c.xml", BOX_A), _report(tmp_path / "d.xml", a))
    assert older.same is True and older.differences == ()
