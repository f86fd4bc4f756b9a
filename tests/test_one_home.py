"""One concept, one home (issue 54): each decision made in one place, held by a test so that a second home fails CI,
not a review. The limit of a record kind is looked up once (the crossover at its own tolerance, on the shipped
profile); the busy-host rule is perfgate.host.conditions'; the exit codes are one table (the metric list and the
Measurement's fields are tied at import: tests/test_metric_fields.py); the pytest layer stays an adapter within its
line budget."""

from __future__ import annotations

import re
from pathlib import Path

from perfgate.errors import ExitCode
from perfgate.measuring.floorcheck import limit_at
from perfgate.profiles.load import load_profile

ROOT = Path(__file__).resolve().parents[1]
#: plugin/'s lines may not grow past this: new judging goes below the pytest layer (perfgate.measuring), the plugin
#: records what one call returns (docs: "where new logic goes"); the server pool, the start loop and the records a
#: profile asks for live below it too (perfgate.serving.pool, perfgate.serving.starts, perfgate.profiles.cases)
PLUGIN_LINE_BUDGET = 4000


def test_the_crossover_is_judged_at_its_own_tolerance_on_the_shipped_profile() -> None:
    """``[floors.eagle3-*] crossover`` of the shipped H200 load profile: its tolerance is the crossover's own
    (Floor.tolerance_for: from the goodput class's noise), not the decode floor's 3 % it once borrowed."""
    p = load_profile(ROOT / "baselines" / "h200-x1" / "llama-3.1-8b-dummy-load.toml")
    judged = []
    for mode, fl in p.floors.items():
        if fl.limit("crossover") is None:
            continue
        c = p.workload_for(mode).concurrency
        at = limit_at(fl, "crossover", mode=mode, concurrency=c, workload_concurrency=c, limit=None, tolerance=None,
                      profile_path=str(p.path))
        assert at.tolerance == fl.tolerance_for("crossover") != fl.tolerance, (mode, at.tolerance, fl.tolerance)
        judged.append(mode)
    assert judged == ["eagle3-acc2", "eagle3-acc3.5"]


def test_the_profile_has_no_second_limit_lookup() -> None:
    from perfgate.profiles import Profile

    assert not hasattr(Profile, "limit_of")


def test_one_exit_code_table() -> None:
    """Every ``perfgate`` command's codes are perfgate.errors.ExitCode's; no module writes its own numbers."""
    assert [(c.name, int(c)) for c in ExitCode] == [("OK", 0), ("BLOCKED", 1), ("USAGE", 2), ("UNBLOCKED", 3)]
    assert int(ExitCode.STOPPED) == int(ExitCode.UNBLOCKED) == 3  # one value, two commands' words
    own = [f"{p.relative_to(ROOT)}:{m.group(0)}" for p in (ROOT / "perfgate").rglob("*.py")
           for m in re.finditer(r"^(EXIT_\w+|\w+_EXIT)\s*=\s*\d+\b", p.read_text(), re.M)]
    assert own == [], own


def test_the_busy_host_rule_has_one_home() -> None:
    """Who decides that a start or a pair was measured disturbed: perfgate.host.conditions alone (pair_kind,
    is_quiet, unpaired_miss); nowhere else compares a host state with "quiet"."""
    elsewhere = [f"{p.relative_to(ROOT)}" for p in (ROOT / "perfgate").rglob("*.py")
                 if p.name != "conditions.py" and re.search(r"(host_state|HOST_STATE\)?)\s*(not )?in \(\"\", QUIET\)",
                                                            p.read_text())]
    assert elsewhere == [], elsewhere


def test_the_pytest_layer_stays_within_its_budget() -> None:
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "perfgate" / "plugin").glob("*.py"))
    assert lines <= PLUGIN_LINE_BUDGET, (f"perfgate/plugin/ is {lines} lines, over its budget of {PLUGIN_LINE_BUDGET}: "
                                         f"move the judging below the pytest layer (perfgate.measuring), and record "
                                         f"what one call returns")
