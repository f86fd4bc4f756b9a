"""Step profiles in the reports: rows from the profile records of real and simulated JUnit, the HTML panel."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.report.html import render_html
from perfgate.report.junit_read import read_report
from perfgate.report.steps import PARTS, step_rows

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "evidence" / "h200-x1" / "profile-2026-12-01" / "junit.xml"
SIM = ROOT / "evidence" / "sim-rtxpro6000-x8" / "profile-2026-12-01.xml"


def test_rows_of_the_real_h200_run_add_up_to_the_step():
    rows = {r.config: r for r in step_rows(read_report(H200))}
    assert set(rows) == {"baseline", "baseline+cuda-graph-bs-128", "baseline+custom-ar-off", "eagle3-acc2",
                         "eagle3-acc3.5"}
    b = rows["baseline"]
    assert b.allreduce_per_step == 0 and b.ms["allreduce"] == 0 and b.backend == "none"
    assert 4.5 < b.step_ms < 5.0 and 3.9 < b.ms["gemm"] < 4.0  # cuBLAS GEMMs: ~83 % of the step on one H200
    assert rows["baseline+custom-ar-off"].outcome == "inconclusive not-exercised"
    assert rows["eagle3-acc2"].ms["attention"] > 3 * b.ms["attention"]  # extend attention over 4 draft tokens


def test_rows_of_the_simulated_seed_box():
    rows = {r.config: r for r in step_rows(read_report(SIM))}
    e = rows["eagle3"]
    assert e.allreduce_per_step == 122 and e.backend == "nccl"
    assert e.ms["allreduce"] == pytest.approx(24.91, abs=0.05)
    assert e.step_ms == pytest.approx(30.57, abs=0.05)  # transfer + wait + compute = the cost model's verify
    assert e.ms["allreduce_wait"] > 0 and e.skew_ms == pytest.approx(2.44, abs=0.01)
    assert rows["baseline+custom-ar-pcie"].backend == "pcie_ipc"
    assert set(e.ms) == set(PARTS)


def test_html_report_has_the_step_panel_only_with_profile_records():
    page = render_html([read_report(SIM)], plots=True)
    assert "Where each decode step goes" in page and page.count("data:image/png;base64,") == 3
    assert "<td>eagle3</td><td>pass</td><td>30.57</td>" in page
    h200_floor_only = ROOT / "evidence" / "h200-x1" / "junit-2026-11-29.xml"
    assert "Where each decode step goes" not in render_html([read_report(h200_floor_only)], plots=False)
