"""Fanning the matrix out: `perfgate plan` cells, `--perfgate-shard` / `--perfgate-configs`, and the proof
that the cells' merged records are a single run's records (the simulated seed box, real subprocesses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.profiles.fleet import ConfigCost, config_costs, plan
from perfgate.profiles.load import load_profile
from perfgate.profiles.variants import load_variants
from perfgate.report.junit_read import read_report
from tests.simproject import SIM_PROFILE
from tests.simproject import make_project as _make

ROOT = Path(__file__).resolve().parent.parent

#: the simulated test profile (tests.simproject), a decode floor, three variants and their expectations
PROFILE = SIM_PROFILE + """[floors.baseline]
tok_s = 89.5
tolerance = 0.1
[variants]
modes = ["baseline", "eagle3"]
include = ["nccl-small-buffer", "custom-ar-pcie", "nccl-tree"]
[expectations.nccl-tree]
"*" = { expect = "xfail", category = "cuda-graph-capture", reason = "Tree fails in capture on PCIe" }
[expectations.custom-ar-pcie]
"*" = { expect = "xfail", category = "slower-than-baseline", reason = "PCIe contention" }
[expectations.speculation-vs-baseline]
eagle3 = { expect = "xfail", category = "slower-than-baseline", reason = "verify is all-reduce bound" }
"""
ARGS = ("perftests", "-m", "baseline or speculative or backends", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def _outcomes(path: Path) -> dict[str, str]:
    return {r.id: r.outcome for r in read_report(path).records}


def test_plan_balances_whole_configs_and_is_deterministic():
    costs = [ConfigCost(k, k, s, "report", needs) for k, s, needs in
             [("b", 100, None), ("v1", 60, "b"), ("v2", 50, "b"), ("v3", 40, "b"), ("e", 30, "b")]]
    one, two = plan(costs, 1), plan(costs, 2)
    assert [c.keys for c in one] == [["b", "e", "v1", "v2", "v3"]] and one[0].seconds == 280
    assert sorted(k for c in two for k in c.keys) == ["b", "e", "v1", "v2", "v3"]  # every config once
    for cell in two:  # a cell with a variant but not its baseline measures the baseline too
        if any(c.needs == "b" for c in cell.owned) and "b" not in cell.keys:
            assert "b" in cell.extra
    assert [c.keys for c in plan(costs, 2)] == [c.keys for c in two]
    with pytest.raises(ValueError):
        plan(costs, 0)


def test_the_cells_merged_are_a_single_run(pytester):
    """Run the matrix whole, then as 3 cells (separate pytest processes, each with its cell's config keys),
    merge the cells' reports: the same record ids with the same outcomes."""
    prof = _make(pytester.path, PROFILE)
    whole = pytester.runpytest_subprocess(*ARGS, f"--perfgate-profile={prof}", "--junitxml=whole.xml")
    assert whole.ret == 0, whole.stdout.str()[-3000:]
    p = load_profile(prof)
    cells = plan(config_costs(p, load_variants(pytester.path / "baselines" / "variants.toml")), 3)
    assert len(cells) == 3
    for cell in cells:
        r = pytester.runpytest_subprocess(*ARGS, f"--perfgate-profile={prof}", f"--junitxml=cell{cell.index}.xml",
                                          f"--perfgate-configs={','.join(cell.keys)}")
        assert r.ret == 0, r.stdout.str()[-3000:]
    cell_files = [str(pytester.path / f"cell{c.index}.xml") for c in cells]
    assert main(["merge", *cell_files, "-o", str(pytester.path / "merged.xml")]) == 0
    whole_o, merged_o = _outcomes(pytester.path / "whole.xml"), _outcomes(pytester.path / "merged.xml")
    assert len(whole_o) == 9 and merged_o == whole_o  # floor, acceptance, speculation, 3 variants x 2 modes
    # and no record is reported twice: each cell's ids are disjoint
    ids = [i for f in cell_files for i in _outcomes(Path(f))]
    assert len(ids) == len(set(ids)) == len(whole_o)


def test_shards_partition_the_collection(pytester):
    prof = _make(pytester.path, PROFILE)
    base = ("perftests", "-m", "baseline or speculative or backends", f"--perfgate-profile={prof}",
            "--collect-only", "-q", "-p", "no:cacheprovider")
    everything = set(_ids(pytester.runpytest_subprocess(*base)))
    parts = [_ids(pytester.runpytest_subprocess(*base, f"--perfgate-shard={i}/3")) for i in (1, 2, 3)]
    assert sorted(x for part in parts for x in part) == sorted(everything) and len(everything) == 9
    bad = pytester.runpytest_subprocess(*base, "--perfgate-shard=4/3")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    unknown = pytester.runpytest_subprocess(*base, "--perfgate-configs=deadbeef00")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR and "not config keys" in unknown.stderr.str()


def _ids(result) -> list[str]:
    """The collected node ids (the summary's lines about deselected kinds name tests too, but are not ids)."""
    return [ln for ln in result.stdout.lines if "::" in ln and not ln.startswith("perfgate:")]


def test_plan_cli_prints_a_ci_matrix(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "sim-rtxpro6000-x8/kimi-k2.5", "--runners", "4"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert len(m["include"]) == 4 and {row["cell"] for row in m["include"]} == {"1/4", "2/4", "3/4", "4/4"}
    assert set(m) == {"include"}  # a CI matrix: every top-level key would be a dimension
    keys = [k for row in m["include"] for k in row["configs"].split(",")]
    assert len(keys) == len(set(keys)) == 25  # every config of the seed box in exactly one cell
    assert main(["plan", "sim-rtxpro6000-x8/kimi-k2.5", "--runners", "x=0"]) == 2


def test_the_workflow_is_a_valid_github_workflow(tmp_path):
    """GitHub's own workflow schema (vendored in check-jsonschema: no network), so a broken workflow fails
    here and not on a GPU runner; and a broken one is caught."""
    import subprocess
    import sys

    wf = ROOT / "ci" / "github-workflow.yml"
    cmd = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows"]
    ok = subprocess.run([*cmd, str(wf)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(wf.read_text().replace("runs-on: ubuntu-latest", "run-on: ubuntu-latest", 1))
    bad = subprocess.run([*cmd, str(broken)], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0
    text = wf.read_text()
    assert "fromJson(needs.plan.outputs.matrix)" in text and "--perfgate-configs ${{ matrix.configs }}" in text


def test_a_config_measured_as_a_dependency_is_costed_from_its_own_numbers(tmp_path):
    """In a whole run the first EAGLE-3 variant also starts the EAGLE-3 baseline, so its test time holds both
    and the baseline's own records take ~0 s; costs come from start-up and rate, not test times."""
    from tests.report_factory import perf_case, write_report

    prof = load_profile(ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml")
    variants = load_variants(ROOT / "baselines" / "variants.toml")
    eagle = prof.config("eagle3").key
    w = prof.workload_for("eagle3")
    tokens = (w.warmup + w.trials * w.per_trial) * w.max_new_tokens
    rec = perf_case("eagle3", kind="acceptance", profile=prof.name, tok_s=57.0, config=eagle,
                    extra={"startup_s": "30.0", "n": "5"})
    report = read_report(write_report(tmp_path / "r.xml", [rec]))
    cost = {c.key: c for c in config_costs(prof, variants, [report])}[eagle]
    assert cost.source == "report" and cost.seconds == pytest.approx(30.0 + tokens / 57.0)
