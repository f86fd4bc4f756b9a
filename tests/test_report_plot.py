"""perfgate plot / report: PNG files that open, and an HTML page that holds the matrix."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.report.html import render_html
from perfgate.report.junit_read import read_report
from perfgate.report.matrix import NO_VARIANT, build_matrix
from tests.report_factory import DEFAULT_STACK, perf_case, seed_cases, write_report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _reports(tmp_path: Path) -> list[Path]:
    old = write_report(tmp_path / "old.xml", seed_cases())
    new_cases = seed_cases()
    new_cases[3] = perf_case("baseline", "flashinfer-ar-fusion", outcome="xpass", tok_s=95.0, spread=1.0)
    new_cases.append(perf_case("eagle3", "nccl-tree", outcome="fail", category="nccl-error"))
    new = write_report(
        tmp_path / "new.xml",
        new_cases,
        stack=dict(DEFAULT_STACK, **{"stack.flashinfer": "0.8.0"}),
        started_at="2026-01-06T10:00:00+00:00",
    )
    return [old, new]


def _check_png(path: Path) -> tuple[int, ...]:
    from matplotlib.image import imread

    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    img = imread(str(path))
    assert img.shape[0] > 100 and img.shape[1] > 100
    return tuple(img.shape)


def test_build_matrix(tmp_path: Path) -> None:
    m = build_matrix(read_report(_reports(tmp_path)[1]))
    assert m.rows[0] == NO_VARIANT
    assert set(m.rows) >= {"nccl-tree", "flashinfer-ar-fusion", "mscclpp"}
    assert m.columns == ("baseline", "eagle3")
    cell = m.cell("flashinfer-ar-fusion", "baseline")
    assert cell is not None and cell.outcome == "xpass" and cell.tok_s == 95.0
    assert m.cell("mscclpp", "eagle3") is None
    assert m.cell("nccl-tree", "eagle3").outcome == "fail"  # type: ignore[union-attr]


def test_plot_cli_writes_pngs_that_open(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in _reports(tmp_path)]
    out = tmp_path / "plots"
    assert main(["plot", *paths, "-o", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / "history.png"), str(out / "matrix.png")]
    _check_png(out / "history.png")
    _check_png(out / "matrix.png")


def test_plot_of_a_report_without_perfgate_properties(tmp_path: Path) -> None:
    c = perf_case("baseline")
    c.mode = ""
    p = write_report(tmp_path / "plain.xml", [c], perfgate_properties=False)
    assert main(["plot", str(p), "-o", str(tmp_path / "plots")]) == 0
    _check_png(tmp_path / "plots" / "matrix.png")
    _check_png(tmp_path / "plots" / "history.png")


def test_html_report_contains_matrix_plots_and_stack(tmp_path: Path) -> None:
    paths = [str(p) for p in _reports(tmp_path)]
    out = tmp_path / "report.html"
    assert main(["report", *paths, "-o", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert '<table class="matrix">' in page
    for variant in (NO_VARIANT, "nccl-tree", "flashinfer-ar-fusion", "mscclpp"):
        assert f"<th>{variant}</th>" in page
    assert 'class="o-xpass"' in page and 'class="o-fail"' in page
    assert "SIMULATED" in page
    assert ('<tr class="changed"><td class="key">flashinfer</td><td class="why"><small>#1:</small> 0.7.2<br>'
            '<small>#2:</small> 0.8.0</td></tr>') in page.replace("\n", "")
    assert "Unblocked" in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 2
    for i, b64 in enumerate(images):
        png = tmp_path / f"img{i}.png"
        png.write_bytes(base64.b64decode(b64))
        _check_png(png)


def test_html_without_plots_needs_no_matplotlib(tmp_path: Path) -> None:
    page = render_html([read_report(p) for p in _reports(tmp_path)], plots=False)
    assert '<table class="matrix">' in page and "data:image/png" not in page


def test_history_panel_axis_keeps_a_tiny_wobble_flat_and_spans_the_intervals() -> None:
    from perfgate.report.history import Cell
    from perfgate.report.plot import MIN_Y_SPAN, _y_range

    values = [89.500, 89.502, 89.498]
    wobble = [Cell(outcome="pass", value=v) for v in values]
    lo, hi = _y_range(wobble, values)
    assert hi - lo >= 89.5 * MIN_Y_SPAN * 0.999  # ±2 %: 0.004 tok/s of spread is not a cliff
    wide = [Cell(outcome="pass", value=100.0, ci=(60.0, 140.0)), Cell(outcome="pass", value=101.0)]
    lo, hi = _y_range(wide, [100.0, 101.0])
    assert lo <= 60.0 and hi >= 140.0  # every recorded interval is inside the panel
