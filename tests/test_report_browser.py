"""The HTML report in a real browser (headless Chromium through Playwright, the system's browser): from 2 to 100
reports and up to 500 records, nothing overlaps (element boxes read from the page), nothing runs off the page (wide
tables scroll inside their panel, long names wrap), the verdict line is within the first screen, and each record shows
its own metric (``ttft_ms`` for a latency record, ``output_tok_s``), not decode tok/s.

It needs Chromium (Debian's ``chromium``, or ``PERFGATE_CHROMIUM=/path/to/chrome``) and ``playwright`` (the dev extra;
Playwright's own browsers are not used) and skips saying which is missing. With ``PERFGATE_SCREENSHOTS=DIR`` it also
saves each page's first screen and whole page there (docs/report-*.png come from this test).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from perfgate.report.html import render_html
from perfgate.report.junit_read import read_reports
from tests.html_pages import Expected, write_series

pytestmark = pytest.mark.process  # it starts a browser

VIEWPORT = {"width": 1280, "height": 800}


def _chromium() -> str:
    path = os.environ.get("PERFGATE_CHROMIUM") or next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if not path:
        pytest.skip("no Chromium found (apt-get install -y chromium, or set PERFGATE_CHROMIUM to a Chrome binary): "
                    "the HTML report's browser test needs a real browser")
    return path


def _sync_playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]'; its own browsers are not needed)")
    return sync_playwright


#: every element box of the page that must not overlap a sibling: the page's blocks, then within each panel its
#: headings, tables' scroll boxes and images; and every box that must stay inside its panel
_BOXES_JS = """
() => {
  const box = e => { const r = e.getBoundingClientRect();
                     return {x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height,
                             tag: e.tagName + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '')}; };
  const kids = p => Array.from(p.children).filter(e => getComputedStyle(e).display !== 'none'
                                                      && e.getBoundingClientRect().height > 0);
  const groups = [kids(document.body).map(box)];
  const inside = [];
  for (const p of document.querySelectorAll('.panel, details')) {
    groups.push(kids(p).filter(e => e.tagName !== 'SUMMARY').map(box));
    const pb = box(p);
    for (const e of p.querySelectorAll('.scroll, img, h2, h3, p')) inside.push({outer: pb, inner: box(e)});
  }
  const unclipped = [];  // a table wider than its panel with no scrolling box between them
  for (const t of document.querySelectorAll('.panel table')) {
    const panel = t.closest('.panel'), pr = panel.getBoundingClientRect(), tr = t.getBoundingClientRect();
    if (tr.right <= pr.right + 1) continue;
    let e = t.parentElement, scrolls = false;
    for (; e && e !== panel; e = e.parentElement)
      if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX) && e.getBoundingClientRect().right <= pr.right + 1)
        scrolls = true;
    if (!scrolls) unclipped.push(t.className + ' ' + Math.round(tr.width) + 'px in ' + Math.round(pr.width) + 'px');
  }
  const overflowing = Array.from(document.querySelectorAll('td.key, td.why, .verdict'))
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 80));
  return {groups, inside, overflowing, unclipped,
          pageWidth: document.documentElement.scrollWidth, viewWidth: document.documentElement.clientWidth};
}
"""

_ROWS_JS = """
() => Array.from(document.querySelectorAll('table.verdicts tr.rec')).map(tr => ({
  key: tr.querySelector('td.key').textContent,
  metric: tr.querySelector('td.metric code').textContent,
  cells: Array.from(tr.querySelectorAll('td')).map(td => td.textContent)}))
"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"]) > 1
            and min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"]) > 1)


def _check_layout(boxes: dict[str, Any]) -> None:
    for group in boxes["groups"]:
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                assert not _overlap(a, b), f"{a['tag']} {a} overlaps {b['tag']} {b}"
    for pair in boxes["inside"]:
        o, e = pair["outer"], pair["inner"]
        assert e["x"] >= o["x"] - 1 and e["x"] + e["w"] <= o["x"] + o["w"] + 1, (
            f"{e['tag']} {e} runs out of its panel {o}")
    assert boxes["pageWidth"] <= boxes["viewWidth"] + 1, (
        f"the page is {boxes['pageWidth']} px wide in a {boxes['viewWidth']} px window: a table is not scrolling "
        "inside its panel")
    assert not boxes["overflowing"], f"names that do not wrap: {boxes['overflowing'][:3]}"
    assert not boxes["unclipped"], f"tables wider than their panel that do not scroll inside it: {boxes['unclipped']}"


def _number(text: str) -> float:
    m = re.match(r"-?[\d.]+", text.strip())
    assert m, text
    return float(m.group())


def _check_own_metric(rows: list[dict[str, Any]], expected: dict[str, Expected]) -> None:
    assert rows, "the page lists no record under its verdict"
    for row in rows:
        want = expected[row["key"]]
        assert row["metric"] == want.metric, f"{row['key']} shows {row['metric']}, judged on {want.metric}"
        new = _number(row["cells"][4])
        assert new == pytest.approx(want.new, rel=0.01), f"{row['key']}: new {new}, its {want.metric} {want.new}"
        assert "31.1" not in row["cells"][4] or want.metric == "tok_s"


@pytest.mark.parametrize(("reports", "records"), [(2, 500), (14, 60), (100, 40)])
def test_page_in_chromium(tmp_path: Path, reports: int, records: int) -> None:
    chromium, sync_playwright = _chromium(), _sync_playwright()
    paths, expected = write_series(tmp_path / "reports", reports, records)
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(read_reports([str(p) for p in paths]), title=f"perfgate report ({reports} "
                                                                                      f"reports, {records} records)"))
    shots = os.environ.get("PERFGATE_SCREENSHOTS")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri())
            assert not [u for u in requests if not u.startswith(("file:", "data:"))], "the page reached the network"
            verdict = page.locator("#verdict")
            line = verdict.inner_text()
            assert line.startswith("exit 1: BLOCKED"), line
            assert "newly-broken" in line and "regressed" in line
            vb = verdict.bounding_box()
            assert vb is not None and vb["y"] + vb["height"] <= VIEWPORT["height"], (
                f"the verdict line ends at {vb} px, below the first screen ({VIEWPORT['height']} px)")
            _check_layout(page.evaluate(_BOXES_JS))
            _check_own_metric(page.evaluate(_ROWS_JS), expected)
            matrix = page.locator("table.matrix").inner_text()
            assert "ttft_ms" in matrix and "output_tok_s" in matrix
            history = page.locator("table.history").inner_text()
            assert "ttft_ms" in history
            if shots:
                out = Path(shots)
                out.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out / f"report-{reports}x{records}-first-screen.png"))
                page.screenshot(path=str(out / f"report-{reports}x{records}-full.png"), full_page=True)
        finally:
            browser.close()
