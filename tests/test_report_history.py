"""perfgate history: time ordering, the table, and change points (steps, not outliers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.cli import main
from perfgate.report.history import build_history, detect_steps, order_reports
from perfgate.report.junit_read import read_report
from tests.report_factory import perf_case, write_report

FLOOR = dict(kind="floor", classname="perftests.test_baseline", test="test_floor")

# --- change points on plain series --------------------------------------------------------


def test_sustained_step_is_detected() -> None:
    series = [89.6, 89.4, 89.7, 89.5, 89.3, 80.1, 80.4, 79.9, 80.2]
    (step,) = detect_steps(series)
    assert step.index == 5
    assert step.direction == "drop"
    assert step.before == pytest.approx(89.5) and step.after == pytest.approx(80.15)


def test_single_outlier_is_not_a_step() -> None:
    assert detect_steps([89.6, 89.4, 89.7, 60.0, 89.5, 89.3, 89.6]) == ()
    assert detect_steps([89.6, 89.4, 89.7, 89.5, 89.3, 60.0]) == ()  # at the end: not sustained yet
    assert detect_steps([60.0, 89.4, 89.7, 89.5, 89.3, 89.6]) == ()  # at the start


def test_two_points_make_a_step_at_the_end() -> None:
    (step,) = detect_steps([89.6, 89.4, 89.7, 89.5, 80.0, 80.3])
    assert step.index == 4


def test_step_with_an_outlier_before_it() -> None:
    (step,) = detect_steps([100.0, 100.5, 60.0, 99.8, 100.2, 120.0, 120.4, 119.8])
    assert step.index == 5 and step.direction == "rise"


def test_missing_points_keep_their_indices() -> None:
    (step,) = detect_steps([100.0, None, 100.2, 99.9, None, 90.0, 90.1, None, 89.9])
    assert step.index == 5


def test_two_steps() -> None:
    steps = detect_steps([100, 100.2, 99.9, 100.1, 90, 90.2, 89.9, 90.1, 95, 95.1, 94.9, 95.2])
    assert [s.index for s in steps] == [4, 8]


def test_recorded_noise_hides_a_small_step() -> None:
    series = [100.0, 100.0, 100.0, 97.0, 97.0, 97.0]
    assert len(detect_steps(series)) == 1  # no scatter: a 3% level change is a step
    assert detect_steps(series, [2.0] * 6) == ()  # 3 < 3 * 2: within the recorded noise


# Noise of ±0.4% keeps any two medians within 0.8%, below the default min_rel_step (1%).
@settings(max_examples=60, deadline=None)
@given(
    level=st.floats(min_value=10, max_value=1000),
    noise=st.lists(st.floats(min_value=-0.004, max_value=0.004), min_size=6, max_size=12),
    where=st.integers(min_value=0, max_value=11),
    factor=st.floats(min_value=0.1, max_value=10).filter(lambda f: abs(f - 1) > 0.2),
)
def test_property_one_outlier_never_a_step(level: float, noise: list[float], where: int, factor: float) -> None:
    series = [level * (1 + e) for e in noise]
    series[where % len(series)] = level * factor
    assert detect_steps(series) == ()


@settings(max_examples=60, deadline=None)
@given(
    level=st.floats(min_value=10, max_value=1000),
    before=st.lists(st.floats(min_value=-0.004, max_value=0.004), min_size=2, max_size=8),
    after=st.lists(st.floats(min_value=-0.004, max_value=0.004), min_size=2, max_size=8),
    factor=st.sampled_from([0.5, 0.8, 0.9, 1.1, 1.25, 2.0]),
)
def test_property_sustained_step_found_where_it_is(
    level: float, before: list[float], after: list[float], factor: float
) -> None:
    series = [level * (1 + e) for e in before] + [level * factor * (1 + e) for e in after]
    steps = detect_steps(series)
    assert [s.index for s in steps] == [len(before)]
    assert steps[0].direction == ("drop" if factor < 1 else "rise")


# --- across reports -------------------------------------------------------------------------


def _series(tmp_path: Path, values: list[float], *, shuffle: bool = False) -> list[Path]:
    paths = []
    for i, v in enumerate(values):
        cases = [
            perf_case("baseline", tok_s=v, spread=0.3, **FLOOR),  # type: ignore[arg-type]
            perf_case("baseline", "nccl-tree", outcome="xfail" if i < 3 else "pass", category="cuda-graph-capture"),
        ]
        started = f"2026-01-{i + 1:02d}T10:00:00+00:00"
        paths.append(write_report(tmp_path / f"run{i:02d}.xml", cases, started_at=started))
    return list(reversed(paths)) if shuffle else paths


def test_reports_are_ordered_by_started_at_then_timestamp(tmp_path: Path) -> None:
    a = read_report(write_report(tmp_path / "a.xml", [], started_at="2026-03-01T00:00:00+00:00"))
    b = read_report(write_report(tmp_path / "b.xml", [], started_at=None, timestamp="2026-02-01T00:00:00"))
    c = read_report(write_report(tmp_path / "c.xml", [], perfgate_properties=False, timestamp="not a time"))
    assert [Path(r.path).stem for r in order_reports([c, a, b])] == ["b", "a", "c"]


def test_history_table_and_step_across_reports(tmp_path: Path) -> None:
    paths = _series(tmp_path, [89.5, 89.6, 89.4, 89.5, 81.0, 81.2, 80.9], shuffle=True)
    h = build_history([read_report(p) for p in paths])
    assert [c.path for c in h.columns] == [str(p) for p in reversed(paths)]  # time order
    floor_key = "perftests.test_baseline::test_floor[kimi-k2.5-sim:baseline]"
    (row,) = [r for r in h.rows if r.key == floor_key]
    assert [c.outcome for c in row.cells if c] == ["pass"] * 7
    assert [s.index for s in row.steps] == [4]
    tree = next(r for r in h.rows if r.key.endswith("+nccl-tree]"))
    assert [c.outcome for c in tree.cells if c] == ["xfail"] * 3 + ["pass"] * 4
    assert tree.steps == ()


def test_history_cli_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in _series(tmp_path, [89.5, 89.6, 89.4, 75.0, 75.2])]
    assert main(["history", *paths]) == 0
    text = capsys.readouterr().out
    assert "1 sustained step(s)" in text and "drop at #4: 89.50 → 75.10" in text
    assert main(["history", *paths, "--format", "md"]) == 0
    assert "| `perftests.test_baseline::test_floor[kimi-k2.5-sim:baseline]` |" in capsys.readouterr().out
    assert main(["history", *paths, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["columns"]) == 5
    (floor,) = [r for r in data["rows"] if "test_floor" in r["key"]]
    assert floor["steps"][0]["index"] == 3
    assert main(["history", *paths, "--min-segment", "0"]) == 2
