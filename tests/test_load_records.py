"""The goodput and crossover records as users run them (pytester, the simulated seed box, marker ``load``)."""

from __future__ import annotations

import json

import pytest

from tests.simproject import make_project as _make
from tests.test_plugin import PROFILE, cases, props

SLO = """
[slo]
ttft_ms_p90 = 2000
tpot_ms_p90 = 200
attainment = 0.9
requests = 10
warmup_requests = 4
max_requests = 60
rate_start = 4
rate_max = 8
max_levels = 3
crossover_levels = [1, 2]
[expectations.crossover]
eagle3 = { expect = "xfail", category = "slower-than-baseline", reason = "verify is all-reduce bound at 1 and 2 streams" }
"""


@pytest.mark.records
def test_goodput_and_crossover_records_carry_their_numbers_and_meet_their_floors(pytester):
    text = (PROFILE.replace("FLOOR", "89.5").replace("tolerance = 0.05", "tolerance = 0.05\ngoodput_rps = 0.01")
            .replace("accept_len = 1.5", "accept_len = 1.5\ncrossover = 1")) + SLO
    path = _make(pytester.path, text)
    r = pytester.runpytest_subprocess("perftests", "-m", "load", f"--perfgate-profile={path}", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", "-rA")
    cs = cases(pytester.path / "r.xml")
    g = props(cs["test_goodput_under_slo[m:baseline]"])
    assert g["kind"] == "goodput" and g["metric"] == "goodput_rps" and g["direction"] == "higher"
    levels = json.loads(g["load_levels"])
    assert [lv["rate"] for lv in levels][:1] == [4.0] and len(levels) <= 3
    assert all({"attainment", "attainment_ci", "decision", "requests", "send_lag_ms_p99", "ttft_ms_p99", "tpot_ms_p99",
                "itl_ms_p99", "ttft_ms_p90", "ttft_ms_p90_bounds"} <= set(lv) for lv in levels)
    assert all(lv["requests"] == 10 * lv["trials"] for lv in levels)  # the warm-up's 4 a trial are not counted
    assert g["slo"] == "ttft_ms_p90 <= 2000, tpot_ms_p90 <= 200, attainment >= 0.9" and g["n"] == "3"
    assert g["goodput_min_requests"] == "29"  # a p90 at 95 %: 1 - 0.9^29 >= 0.95
    if g["outcome"] == "pass":  # a quiet machine: the sender kept its schedule
        assert float(g["goodput_rps"]) == float(g["goodput_rps_low"]) > 0.01 and float(g["goodput_rate"]) >= 4
        assert int(g["level_requests"]) >= 29 and float(g["attainment_low"]) >= 0.9
        assert "goodput_rps_high" not in g or float(g["goodput_rps_high"]) > float(g["goodput_rps_low"])
        r.stdout.fnmatch_lines(["*(goodput goodput_rps)*pass [[]*, *)*"])  # the interval, on the terminal
    else:  # a busy one: said so, never a number judged
        assert g["outcome"] == "inconclusive" and g["category"] == "client-behind", g
    base = props(cs["test_speculation_crossover[m:baseline]"])
    assert base["outcome"] == "pass" and [lv["load"] for lv in json.loads(base["crossover_levels"])] == [1, 2]
    x = props(cs["test_speculation_crossover[m:eagle3]"])
    # the seed box's EAGLE-3 is slower than plain decoding at 1 and 2 streams: it never pays there, below the floor,
    # which the profile's expectation says (strict: the record must fail for that reason)
    assert x["crossover_result"] == "never" and float(x["crossover"]) == 0 and x["crossover_wins"] == ""
    assert x["outcome"] == "xfail" and x["category"] == "slower-than-baseline" and x["limit"] == "1"
    pts = json.loads(x["crossover_levels"])
    assert [p["load"] for p in pts] == [1, 2] and all(p["ratio"] < 1 for p in pts)
    assert x["crossover_predicted_result"] in ("never", "at", "always")
    r.stdout.fnmatch_lines(["*(goodput goodput_rps)*", "*(crossover crossover)*xfail slower-than-baseline 0*"])


@pytest.mark.records
def test_update_baselines_writes_the_goodput_floor_and_refuses_a_crossover_that_never_pays(pytester):
    import tomllib

    path = _make(pytester.path, PROFILE.replace("FLOOR", "89.5") + SLO.split("[expectations")[0])
    r = pytester.runpytest_subprocess("perftests", "-m", "load", "-k", "baseline or eagle3",
                                      f"--perfgate-profile={path}", "--junitxml=r.xml", "-p", "no:cacheprovider",
                                      "--perfgate-update-baselines")
    g = props(cases(pytester.path / "r.xml")["test_goodput_under_slo[m:baseline]"])
    floors = tomllib.loads(path.read_text())["floors"]
    if g["outcome"] == "skip":  # no floor yet: this run's goodput becomes it, with the machine it came from
        assert floors["baseline"]["goodput_rps"] == round(float(g["goodput_rps"]), 2) > 0
        assert floors["baseline"]["measured"]["n"] == int(g["level_requests"]) >= 29  # the requests at that level
        assert floors["baseline"]["measured"]["machine"]
    else:  # a busy machine: the sender fell behind, so nothing is written and the summary says why
        assert g["outcome"] == "inconclusive" and "goodput_rps" not in floors["baseline"]
        r.stdout.fnmatch_lines(["*NOT updated*[[]floors.baseline[]] goodput_rps*"])
    # EAGLE-3 never pays on the seed box: a crossover of 0 is no floor
    assert "crossover" not in floors.get("eagle3", {})
    r.stdout.fnmatch_lines(["*NOT updated*[[]floors.eagle3[]] crossover: no crossover above zero*"])
