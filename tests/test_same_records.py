"""scripts/same_records.py: two runs' JUnit files give the same records, or it says what differs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("same_records", ROOT / "scripts" / "same_records.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("same_records", mod)
    spec.loader.exec_module(mod)
    return mod


sr = _script()

CASE = """<testcase classname="perftests.test_baseline" name="test_decode_floor[m:baseline]">
<properties><property name="outcome" value="OUTCOME"/><property name="category" value=""/>
<property name="expected" value="pass"/><property name="tok_s" value="TOK"/><property name="tok_s_cv" value="CV"/>
<property name="config" value="849e20ee4e"/><property name="log" value="/logs/run-DIR/baseline-849e20ee4e.log"/>
<property name="reason" value="tok_s TOK tok/s SIDE floor 89.5 [2026-12-02 01:RUN:44]"/></properties>RESULT</testcase>"""


def _xml(path: Path, *, outcome="pass", tok="89.55", cv="0.0002", run="1", result="", extra="",
         side="&gt;=") -> Path:
    case = (CASE.replace("OUTCOME", outcome).replace("TOK", tok).replace("CV", cv).replace("DIR", run)
            .replace("RUN", run).replace("RESULT", result).replace("SIDE", side))
    path.write_text(f'<testsuites><testsuite name="pytest">{case}{extra}</testsuite></testsuites>')
    return path


def test_the_same_records_within_the_tolerance_noise_and_run_directory_aside(tmp_path, capsys):
    a = _xml(tmp_path / "a.xml")
    # 0.06 %; a CV is noise; another run directory, and another time in a log line the reason quotes
    b = _xml(tmp_path / "b.xml", tok="89.60", cv="0.0009", run="2")
    assert sr.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "1 records in both (1 passed after)" in out and out.rstrip().endswith("same records")


def test_an_outcome_a_result_a_figure_or_a_record_that_differs_is_said(tmp_path):
    a = _xml(tmp_path / "a.xml")
    failed = '<failure message="below the floor"/>'
    diffs, _, n = sr.compare(a, _xml(tmp_path / "b.xml", outcome="fail", tok="80.1", result=failed, side="&lt;",
                                     extra='<testcase classname="x" name="new"/>'))
    assert n == 1 and len(diffs) == 5, diffs
    text = "\n".join(diffs)
    for want in ("x::new: only in b.xml", "result passed -> failed", "outcome 'pass' -> 'fail'",
                 "tok_s 89.55 -> 80.1 (10.55%)", "reason 'tok_s 89.55 tok/s >= floor"):
        assert want in text
