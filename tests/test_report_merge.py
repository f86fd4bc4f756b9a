"""perfgate merge: reports of several boxes in one file, records kept apart; xdist reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.report.diff import diff
from perfgate.report.junit_read import read_report
from perfgate.report.matrix import build_matrix
from perfgate.report.merge import merge_reports
from tests.report_factory import DEFAULT_STACK, perf_case, seed_cases, write_report

H200 = dict(DEFAULT_STACK, **{"stack.gpu": "NVIDIA H200", "stack.sm": "90", "stack.interconnect": "NVLink"})


def _boxes(tmp_path: Path, tag: str, *, h200_tok: float = 150.0) -> tuple[Path, Path]:
    a = write_report(tmp_path / f"{tag}-rtx.xml", seed_cases(), hostname="rtx-box")
    b = write_report(
        tmp_path / f"{tag}-h200.xml",
        [perf_case("baseline", tok_s=h200_tok, spread=1.0, kind="floor", classname="perftests.test_baseline",
                   test="test_floor"),
         perf_case("baseline", "nccl-tree", tok_s=160.0, spread=1.0)],
        stack=H200,
        hostname="h200-box",
        started_at="2026-01-05T10:05:00+00:00",
    )
    return a, b


def test_merge_keeps_suites_and_keys_colliding_ids_apart(tmp_path: Path) -> None:
    a, b = _boxes(tmp_path, "cur")
    result = merge_reports([a, b], tmp_path / "merged.xml")
    assert result.suites == 2 and result.records == len(seed_cases()) + 2
    rep = read_report(tmp_path / "merged.xml")
    assert len(rep.suites) == 2
    assert [s.hostname for s in rep.suites] == ["rtx-box", "h200-box"]
    assert [s.prop("perfgate.merged_from") for s in rep.suites] == ["cur-rtx.xml", "cur-h200.xml"]
    floor = "perftests.test_baseline::test_floor[kimi-k2.5-sim:baseline]"
    assert f"{floor} @NVIDIA H200" in rep.by_key
    assert f"{floor} @{DEFAULT_STACK['stack.gpu']}" in rep.by_key
    assert floor not in rep.by_key
    assert set(result.qualified_keys) == {k for k in rep.by_key if " @" in k}
    assert rep.by_key[f"{floor} @NVIDIA H200"].num("tok_s") == 150.0
    # ids found on one box only keep their plain key
    assert "perftests.test_backends::test_variant[kimi-k2.5-sim:baseline+mscclpp]" in rep.by_key
    assert rep.stack["stack.gpu"] == f"{DEFAULT_STACK['stack.gpu']} | NVIDIA H200"
    assert rep.started_at is not None and rep.started_at.isoformat() == "2026-01-05T10:00:00+00:00"


def test_same_gpu_on_two_hosts_is_keyed_by_hostname(tmp_path: Path) -> None:
    a = write_report(tmp_path / "a.xml", seed_cases()[:1], hostname="box-1")
    b = write_report(tmp_path / "b.xml", seed_cases()[:1], hostname="box-2")
    c = write_report(tmp_path / "c.xml", seed_cases()[:1], hostname="box-2")
    merge_reports([a, b, c], tmp_path / "m.xml")
    keys = sorted(read_report(tmp_path / "m.xml").by_key)
    floor = "perftests.test_baseline::test_floor[kimi-k2.5-sim:baseline]"
    gpu = DEFAULT_STACK["stack.gpu"]
    assert keys == [f"{floor} @{gpu}/box-1", f"{floor} @{gpu}/box-2", f"{floor} @{gpu}/box-2#2"]


def test_diff_of_merged_reports_per_box(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cur = _boxes(tmp_path, "cur")
    cand = _boxes(tmp_path, "cand", h200_tok=120.0)
    assert main(["merge", *map(str, cur), "-o", str(tmp_path / "cur.xml")]) == 0
    assert main(["merge", *map(str, cand), "-o", str(tmp_path / "cand.xml")]) == 0
    captured = capsys.readouterr()
    assert "keyed apart" in captured.err and "2 suite(s)" in captured.out
    d = diff(read_report(tmp_path / "cur.xml"), read_report(tmp_path / "cand.xml"))
    assert [r.key for r in d.regressed] == ["perftests.test_baseline::test_floor[kimi-k2.5-sim:baseline] @NVIDIA H200"]
    assert not d.new and not d.gone
    assert main(["gate", str(tmp_path / "cur.xml"), str(tmp_path / "cand.xml"), "--pyproject",
                 str(tmp_path / "none.toml")]) == 2  # the policy file given must exist
    (tmp_path / "pyproject.toml").write_text("")
    assert main(["gate", str(tmp_path / "cur.xml"), str(tmp_path / "cand.xml"), "--pyproject",
                 str(tmp_path / "pyproject.toml")]) == 1


def test_merged_matrix_covers_every_box(tmp_path: Path) -> None:
    a, b = _boxes(tmp_path, "cur")
    merge_reports([a, b], tmp_path / "m.xml")
    m = build_matrix(read_report(tmp_path / "m.xml"))
    cell = m.cell("nccl-tree", "baseline")
    assert cell is not None and cell.outcome == "xfail" and len(cell.keys) == 2  # worst of the two boxes


def test_merge_of_unreadable_input_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.xml").write_text("<nope")
    a, _ = _boxes(tmp_path, "cur")
    assert main(["merge", str(a), str(tmp_path / "bad.xml"), "-o", str(tmp_path / "m.xml")]) == 2
    assert not (tmp_path / "m.xml").exists()


def test_report_written_under_xdist(tmp_path: Path) -> None:
    """Controller-written suite properties, @group suffixes on names: same records as without xdist."""
    plain = write_report(tmp_path / "plain.xml", seed_cases())
    cases = seed_cases()
    for c in cases:
        c.name += "@kimi-k2.5-sim"
    xdist = write_report(tmp_path / "xdist.xml", cases, hostname="controller")
    d = diff(read_report(plain), read_report(xdist))
    assert d.is_empty
    assert read_report(xdist).stack == read_report(plain).stack
