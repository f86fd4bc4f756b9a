"""perfgate floors: a floor the machines of a fleet can hold, and tolerances narrower than the fleet's spread."""

from __future__ import annotations

import shutil
from pathlib import Path

from perfgate.cli import main
from perfgate.profiles.load import load_profile
from perfgate.report.fleet_floors import fleet_floors
from perfgate.report.junit_read import read_report
from tests.report_factory import perf_case, write_report

ROOT = Path(__file__).resolve().parents[1]
FLOOR = dict(kind="floor", classname="perftests.test_baseline", test="test_decode_floor", profile="llama-3.1-8b-dummy")


def _run(tmp_path: Path, name: str, machine: str, tok_s: float) -> Path:
    case = perf_case("baseline", tok_s=tok_s, spread=0.05, n=5, extra={"machine.id": machine}, **FLOOR)  # type: ignore[arg-type]
    return write_report(tmp_path / f"{name}.xml", [case])


def _fleet(tmp_path: Path) -> list[Path]:
    # the four H200s of issue 22: A 5 starts, B 3, C and D one each
    runs = [("A", v) for v in (210.42, 210.44, 210.45, 210.46, 210.48)] + [("B", v) for v in (212.5, 212.6, 212.7)]
    runs += [("C", 205.46), ("D", 212.7)]
    return [_run(tmp_path, f"r{i}", m, v) for i, (m, v) in enumerate(runs)]


def test_the_fleet_floor_is_the_slowest_machine(tmp_path: Path) -> None:
    ff = fleet_floors([read_report(p) for p in _fleet(tmp_path)])["baseline"]
    assert ff.tok_s == 205.46 and ff.slowest == "C" and len(ff.machines) == 4 and ff.runs == 10
    assert abs(ff.spread - (212.6 - 205.46) / 212.6) < 0.002  # B's median 212.6, D 212.7: the fastest is D
    assert [m for m, _ in ff.machines] == ["C", "A", "B", "D"]


def test_floors_flags_then_writes_a_floor_the_fleet_holds(tmp_path: Path) -> None:
    prof = tmp_path / "baselines" / "h200-x1"
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    prof.mkdir(parents=True)
    toml = prof / "llama.toml"
    text = (ROOT / "baselines" / "h200-x1" / "llama-3.1-8b-dummy.toml").read_text().replace("tolerance = 0.03", "tolerance = 0.02")
    toml.write_text(text)
    reports = [str(p) for p in _fleet(tmp_path)]
    out = tmp_path / "out.txt"
    assert main(["floors", str(toml), *reports, "-o", str(out)]) == 1  # 2 % < the fleet's 3.4 % spread
    assert "FLAGGED: [floors.baseline] tolerance 2.0% is narrower than the 3.4% spread" in out.read_text()
    assert main(["floors", str(toml), *reports, "--write", "-o", str(out)]) == 0
    fl = load_profile(toml).floors["baseline"]
    assert fl.tok_s == 205.46 and fl.measured["slowest_machine"] == "C" and fl.measured["machines"] == 4
    assert "A=210.45" in str(fl.measured["per_machine"])


def test_history_bands_of_the_four_machines(tmp_path: Path, capsys) -> None:
    """The bands the gate learns from the fleet's history: ~0.04 % between starts, ~1.6 % between machines."""
    assert main(["history", "--bands", *map(str, _fleet(tmp_path))]) == 0
    line = capsys.readouterr().out.strip()
    assert "(6 df)" in line and "(4 machines)" in line
    start = float(line.split("starts sd ")[1].split("%")[0])
    machines = float(line.split("machines sd ")[1].split("%")[0])
    assert 0.02 < start < 0.06 and 1.3 < machines < 2.0
