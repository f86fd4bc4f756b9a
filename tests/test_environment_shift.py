"""Many records of a report moving together: ``perfgate gate`` names an environment shift with its evidence
instead of a list of regressions when the stack did not change, and says it beside the regressions when it did."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.cli import main
from perfgate.report.diff import diff
from perfgate.report.junit_read import read_report
from tests.report_factory import DEFAULT_STACK, perf_case, write_report

VARIANTS = ["", "nccl-tree", "custom-ar-off", "quiet-logs", "fa3", "triton"]
LEVELS = [210.0, 205.0, 198.0, 212.0, 190.0, 201.0]


def _report(path: Path, moves: list[float], *, day: int, extra: dict[str, str] | None = None,
            stack: dict[str, str] | None = None) -> Path:
    cases = [perf_case("baseline", v, tok_s=lvl * m, spread=lvl * m * 0.0004, n=5,
                       extra={"machine.id": "h200-a", **(extra or {})})
             for v, lvl, m in zip(VARIANTS, LEVELS, moves, strict=True)]
    return write_report(path, cases, started_at=f"2026-01-{day:02d}T10:00:00+00:00", stack=stack)


def _gate(tmp: Path, moves: list[float], capsys: pytest.CaptureFixture[str], **new_kw: object) -> tuple[int, str]:
    (tmp / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    old = _report(tmp / "old.xml", [1.0] * len(VARIANTS), day=1)
    new = _report(tmp / "new.xml", moves, day=2, **new_kw)  # type: ignore[arg-type]
    code = main(["gate", str(old), str(new), "--pyproject", str(tmp / "pyproject.toml")])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_every_record_slower_on_one_stack_measured_disturbed_is_an_environment_shift(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shift with its evidence (the NEW side measured on a busy host): the regressions are undecided, naming
    what moved them all."""
    moves = [0.962, 0.958, 0.965, 0.960, 0.961, 0.957]
    state = {"host.state": "disturbed: host busy: CPU steal 9.0% (limit 5%)"}
    code, out = _gate(tmp_path, moves, capsys, extra=state)
    assert code == 0, out
    assert "environment shift: 6 of 6 judged records moved together, slower" in out
    assert "the stack did not change" in out and "NEW 6 record(s) measured disturbed" in out
    assert "re-run both sides on one quiet machine" in out and "0 regressed" in out


def test_every_record_slower_with_nothing_recorded_different_still_blocks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The pattern alone is no evidence: quiet records on the same machine and stack that all regress (a change
    nobody recorded, or a real one in every record) keep their regressions, and the note says why."""
    moves = [0.962, 0.958, 0.965, 0.960, 0.961, 0.957]
    code, out = _gate(tmp_path, moves, capsys)
    assert code == 1, out
    assert "6 of 6 judged records moved together, slower" in out and "environment shift" not in out
    assert "nothing recorded differs between the sides' environments" in out and "6 regressed" in out


def test_a_shift_under_a_stack_change_still_blocks_and_says_so(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    moves = [0.962, 0.958, 0.965, 0.960, 0.961, 0.957]
    code, out = _gate(tmp_path, moves, capsys, stack=dict(DEFAULT_STACK, **{"stack.cuda": "13.1"}))
    assert code == 1, out
    assert "6 of 6 judged records moved together, slower" in out and "it may be the stack" in out


def test_one_regression_among_quiet_records_is_no_shift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _gate(tmp_path, [0.96, 1.0, 1.0, 1.0005, 0.9995, 1.0], capsys)
    assert code == 1, out
    assert "moved together" not in out


@settings(max_examples=60, deadline=None)
@given(moves=st.lists(st.floats(0.8, 1.2), min_size=6, max_size=6))
def test_the_shift_rule_only_turns_moves_with_the_shift_undecided(moves: list[float]) -> None:
    """Against the judge's own decision per record: the shift changes nothing but a regressed or improved record
    that moved the shift's way into undecided, and only when it names the shift."""
    import tempfile

    from perfgate.report.diff import compare_metric

    with tempfile.TemporaryDirectory() as d:
        old = read_report(_report(Path(d) / "old.xml", [1.0] * 6, day=1))
        new = read_report(_report(Path(d) / "new.xml", moves, day=2))
    dd = diff(old, new)
    shift = [n for n in dd.notes if n.startswith("environment shift: ")]
    for r in dd.records:
        assert r.old is not None and r.new is not None and r.throughput is not None
        plain = compare_metric(r.old, r.new)
        assert plain is not None
        if r.throughput.verdict != plain.verdict:
            assert shift and plain.verdict in ("regressed", "improved") and r.throughput.verdict == "undecided"
            slower = "slower" in shift[0]
            assert (plain.verdict == "regressed") == slower  # never a record that moved against the shift
