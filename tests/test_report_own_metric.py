"""Each record shows its own metric (issue 41 items 1-2): the verdicts every view draws from, the one matrix builder the
terminal and the report share (one row per record kind, one severity order), history and the HTML page (pure)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from perfgate.report.diff import diff
from perfgate.report.history import build_history
from perfgate.report.html import render_html
from perfgate.report.junit_read import read_report, read_reports
from perfgate.report.matrix import NO_VARIANT, SEVERITY, build_matrix, matrix_of, severity
from perfgate.report.render import render_diff
from perfgate.report.terminal import matrix_lines
from perfgate.report.verdicts import verdict_of_reports, verdicts
from tests.html_pages import write_series
from tests.report_factory import fmt, perf_case, write_report


def _latency(ttft: float, rate: float) -> dict[str, str]:
    return {"metric": "ttft_ms", "ttft_ms": fmt(ttft), "ttft_ms_ci_low": fmt(ttft * 0.99),
            "ttft_ms_ci_high": fmt(ttft * 1.01), "ttft_ms_cv": fmt(0.01), "n": "5", "tok_s": fmt(rate),
            "direction": "lower", "machine.id": "GPU-1", "start_values": f"{ttft * 0.999!r},{ttft!r},{ttft * 1.001!r}"}


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    def cases(ttft: float, rate: float, floor: float, outcome: str) -> list[object]:
        return [perf_case("baseline", tok_s=floor, spread=0.5, cv=0.01, kind="floor", test="test_floor",
                          extra={"n": "5"}),
                perf_case("baseline", kind="latency", test="test_ttft", extra=_latency(ttft, rate), outcome=outcome,
                          category="slower-than-baseline" if outcome == "fail" else "")]
    old = write_report(tmp_path / "old.xml", cases(269.9, 32.07, 86.85, "pass"))  # type: ignore[arg-type]
    new = write_report(tmp_path / "new.xml", cases(278.2, 31.10, 86.85, "fail"),  # type: ignore[arg-type]
                       started_at="2026-01-06T10:00:00+00:00")
    return old, new


def test_a_latency_record_is_judged_and_shown_on_its_own_metric(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    d, gate, vs = verdict_of_reports(read_report(old), read_report(new))
    (v,) = [v for v in vs.records if v.metric == "ttft_ms"]
    assert (v.old, v.new, v.unit, v.higher_is_better) == (269.9, 278.2, "ms", False)
    assert v.delta_pct is not None and round(v.delta_pct, 1) == 3.1
    assert v.figure == "ttft_ms 269.9 → 278.2 ms (+3.1 %)"
    assert "newly-broken" in v.blocks and vs.exit_code == 1
    assert vs.headline.startswith("exit 1: BLOCKED") and "ttft_ms" not in vs.headline.split("—")[0]
    data = json.loads(render_diff(d, "json", gate))
    (jv,) = [x for x in data["verdicts"] if x["metric"] == "ttft_ms"]
    assert jv["old"] == 269.9 and jv["direction"] == "lower" and jv["blocks"] == list(v.blocks)
    text = render_diff(d, "text", gate)
    assert "ttft_ms 278.2 [275.4, 281.0] ms" in text and "31.1" not in text
    page = render_html([read_report(old), read_report(new)], plots=False)
    assert page.index('id="verdict"') < page.index("Compatibility matrix")
    assert "<code>ttft_ms</code>" in page and "31.1" not in page and "32.07" not in page


def test_the_matrix_gives_a_latency_record_its_own_row_and_metric(tmp_path: Path) -> None:
    _, new = _pair(tmp_path)
    m = build_matrix(read_report(new))
    floor, latency = m.cell(NO_VARIANT, "baseline"), m.cell("(latency ttft_ms)", "baseline")
    assert floor is not None and floor.outcome == "pass" and floor.figure == "86.8 tok/s"
    assert latency is not None and latency.outcome == "fail" and latency.figure == "ttft_ms 278.2 ms"


def test_the_terminal_builds_its_matrix_with_the_reports_builder_and_severity(tmp_path: Path) -> None:
    _, new = _pair(tmp_path)
    rep = read_report(new)
    worse = [*rep.records, *[r.__class__(**{**r.__dict__, "key": r.key + "@b", "outcome": "pass"})
                             for r in rep.records]]
    stats = {"passed": [SimpleNamespace(nodeid=r.key, user_properties=list(r.properties)) for r in worse]}
    lines = matrix_lines(stats)
    assert any(line.strip().startswith("(latency ttft_ms)") and "fail slower-than-baseline 278.2" in line
               for line in lines), lines  # worst wins, not last
    assert any(line.strip().startswith(NO_VARIANT) and "tok_s 86.85" in line for line in lines), lines
    assert matrix_of(worse).cell("(latency ttft_ms)", "baseline").outcome == "fail"  # type: ignore[union-attr]
    assert sorted(SEVERITY, key=severity)[-1] == "error"


def test_history_and_its_steps_follow_each_records_own_metric(tmp_path: Path) -> None:
    paths, _ = write_series(tmp_path, 6, 6)
    h = build_history(read_reports([str(p) for p in paths]))
    metrics = {row.key.split("::")[1].split("[")[0]: row.metric for row in h.rows}
    assert metrics["test_latency_1"] == "ttft_ms" and metrics["test_throughput_2"] == "output_tok_s"
    assert metrics["test_floor_0"] == "tok_s"
    (lat,) = [row for row in h.rows if "test_latency_1[" in row.key]
    assert all(c is not None and c.value is not None and c.value > 200 for c in lat.cells)  # ms, not a 31 tok/s rate


def test_identical_reports_have_no_section_and_no_block(tmp_path: Path) -> None:
    old, _ = _pair(tmp_path)
    vs = verdicts(diff(read_report(old), read_report(old)))
    assert all(v.sections == () and not v.blocks for v in vs.records)
    assert vs.headline == "not gated: no change beyond noise"


def test_one_report_shows_each_failing_records_own_reason(tmp_path: Path) -> None:
    """A paired run is one report: no verdict by comparison, but its records carry their own. The page's verdict line
    counts them and the verdict panel lists each record that did not pass with its reason, so a stack pair that
    failed on a TTFT leg says so where its own metric (decode tok/s, unchanged) cannot; a report whose records all
    passed says that instead."""
    from tests.report_factory import Case

    why = "stack-pair baseline: the candidate stack (s) is worse on TTFT's to_forward leg by +3.12 ms (8.9% of TTFT)"
    failed = write_report(tmp_path / "paired.xml", [
        Case(name="test_stack_pair[m:baseline]", classname="perftests.test_stack_pair", outcome="fail",
             category="slower-than-baseline", kind="stack-pair", tok_s=210.1, reason=why),
        Case(name="test_floor[m:baseline]", kind="floor", tok_s=210.1),
    ])
    page = render_html([read_report(failed)], plots=False)
    verdict = re.search(r'<p class="verdict[^"]*" id="verdict">(.*?)</p>', page, re.S)
    assert verdict and "1 fail, 1 pass" in verdict.group(1), verdict
    panel = page[page.index('id="changes"'):page.index('id="matrix"')]
    assert "1 of 2 record(s) did not pass" in panel and "fail(slower-than-baseline)" in panel
    assert "worse on TTFT&#x27;s to_forward leg by +3.12 ms" in panel and "test_floor" not in panel

    passed = write_report(tmp_path / "ok.xml", [Case(name="test_floor[m:baseline]", kind="floor", tok_s=210.1)])
    page = render_html([read_report(passed)], plots=False)
    assert "every record passed" in page and "1 pass" in page
