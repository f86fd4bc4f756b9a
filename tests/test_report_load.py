"""perfgate plot / report for load records: throughput against latency (the Pareto front), goodput per mode,
the crossover plot; PNGs that open and are not blank, and the HTML page embedding them."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.report.junit_read import read_report
from perfgate.report.loadplot import load_data, pareto
from tests.report_factory import perf_case, seed_cases, write_report
from tests.test_report_plot import _check_png

LEVELS = [{"load": c, "base_tok_s": b, "spec_tok_s": s, "ratio": s / b, "base_itl_ms": bi, "spec_itl_ms": si}
          for c, b, s, bi, si in ((1, 90, 57, 11, 17), (4, 131, 162, 30, 24), (16, 368, 383, 43, 42),
                                  (64, 828, 754, 77, 72))]


def _load_report(tmp_path: Path) -> Path:
    cases = seed_cases() + [
        perf_case("baseline", outcome="pass", classname="perftests.test_goodput", test="test_goodput_under_slo",
                  kind="goodput", extra={"goodput_rps": "5.2", "goodput_rps_low": "5.2",
                                         "goodput_rps_high": "6.1", "n": "5", "metric": "goodput_rps"}),
        perf_case("eagle3", outcome="inconclusive", category="client-behind", classname="perftests.test_goodput",
                  test="test_goodput_under_slo", kind="goodput", extra={"goodput_rps": "3.1"}),
        perf_case("baseline", classname="perftests.test_crossover", test="test_speculation_crossover",
                  kind="crossover", extra={"crossover_levels": json.dumps(
                      [{"load": p["load"], "output_tok_s": p["base_tok_s"], "itl_ms": p["base_itl_ms"]} for p in LEVELS])}),
        perf_case("eagle3", classname="perftests.test_crossover", test="test_speculation_crossover", kind="crossover",
                  extra={"crossover_levels": json.dumps(LEVELS), "crossover_result": "at", "crossover": "40.0",
                         "crossover_ci_low": "30", "crossover_ci_high": "50", "crossover_predicted": "45",
                         "crossover_baseline": "baseline", "n": "5"}),
    ]
    return write_report(tmp_path / "load.xml", cases)


def test_the_pareto_front_keeps_the_points_nothing_beats():
    pts = [(10, 100), (20, 90), (30, 300), (25, 250), (40, 280)]
    assert pareto(pts) == [(10, 100), (25, 250), (30, 300)]


def test_load_data_reads_goodput_levels_and_crossovers(tmp_path):
    d = load_data(read_report(_load_report(tmp_path)))
    # the interval: highest level passed to lowest failed (a report before it: the trials' CI, none here)
    assert [(m, v, ci) for m, v, ci, _ in d.goodput] == [("baseline", 5.2, (5.2, 6.1)), ("eagle3", 3.1, None)]
    assert set(d.levels) == {"baseline", "eagle3"} and len(d.levels["eagle3"]) == 4
    assert [r.mode for r in d.crossovers] == ["eagle3"]
    assert load_data(read_report(write_report(tmp_path / "none.xml", seed_cases()))).empty


def test_plot_writes_the_load_pngs_and_they_are_not_blank(tmp_path, capsys):
    from matplotlib.image import imread

    out = tmp_path / "plots"
    assert main(["plot", str(_load_report(tmp_path)), "-o", str(out), "--what", "load"]) == 0
    assert capsys.readouterr().out.split() == [str(out / f) for f in ("pareto.png", "goodput.png", "crossover.png")]
    for name in ("pareto.png", "goodput.png", "crossover.png"):
        _check_png(out / name)
        img = imread(str(out / name))
        assert img[..., :3].std() > 0.05  # lines, bars and labels, not an empty canvas


def test_the_html_report_embeds_the_load_plots(tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", str(_load_report(tmp_path)), "-o", str(out)]) == 0
    page = out.read_text()
    assert "Serving under load" in page
    assert len(re.findall(r'alt="(throughput against latency|goodput per mode|speculation crossover)"', page)) == 3
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 5  # matrix, history and the three load plots
    png = tmp_path / "x.png"
    png.write_bytes(base64.b64decode(images[-1]))
    _check_png(png)


@pytest.mark.parametrize("what", ["all"])
def test_a_report_without_load_records_draws_no_load_plots(tmp_path, capsys, what):
    p = write_report(tmp_path / "plain.xml", seed_cases())
    assert main(["plot", str(p), "-o", str(tmp_path / "o"), "--what", what]) == 0
    assert not (tmp_path / "o" / "pareto.png").exists()


def test_the_goodput_records_open_loop_levels_are_drawn_beside_the_closed_loop_ones(tmp_path):
    """A report with only goodput records still has a throughput-latency plot: the open-loop levels, TPOT p99
    against output tok/s (a p99 and a median are two panels, never one axis)."""
    from matplotlib.image import imread

    from perfgate.report.loadplot import pareto_png

    levels = [{"rate": r, "meets": r <= 8, "output_tok_s": 120 * r, "tpot_ms_p99": 4 + r / 4, "attainment": 1.0}
              for r in (2, 4, 8, 16)]
    p = write_report(tmp_path / "g.xml", [perf_case(
        "baseline", outcome="pass", classname="perftests.test_goodput", test="test_goodput_under_slo",
        kind="goodput", extra={"goodput_rps": "7.9", "metric": "goodput_rps", "load_levels": json.dumps(levels)})])
    d = load_data(read_report(p))
    assert not d.levels and [x["rate"] for x in d.rates["baseline"]] == [2, 4, 8, 16] and not d.empty
    out = tmp_path / "pareto.png"
    out.write_bytes(pareto_png(d))
    assert imread(str(out))[..., :3].std() > 0.05
    # both kinds of level: one panel each, side by side
    both = tmp_path / "both.png"
    d2 = load_data(read_report(_load_report(tmp_path)))
    both.write_bytes(pareto_png(type(d2)(goodput=d2.goodput, levels=d2.levels, crossovers=d2.crossovers,
                                         rates=d.rates)))
    assert imread(str(both)).shape[1] > 1.8 * imread(str(out)).shape[1]
