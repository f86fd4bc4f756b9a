"""Goodput judged at the server-starts level (``--perfgate-starts N``): each start searched on its own new server,
the floor judged on the starts' means, written from them with the tolerance their spread gives (pure rule, then
as users run it: pytester, the simulated seed box)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import tomllib
from hypothesis import given
from hypothesis import strategies as st

from perfgate.categories import Category, Outcome
from perfgate.measuring.goodput import LoadLevel, Search
from perfgate.measuring.goodputrecord import AcrossStarts, floor_verdict, interval_text
from perfgate.profiles.noise import limit_tolerance
from tests.simproject import make_project
from tests.test_load_records import SLO
from tests.test_plugin import PROFILE, cases, props
from tests.test_starts import CONFTEST


def _level(rate: float, meets: bool | None, achieved: float | None = None) -> LoadLevel:
    return LoadLevel(rate=rate, trials=(), meets=meets, limiting="", why="", attainment=1.0 if meets else 0.5,
                     goodput_rps=rate if meets else None, send_lag_ms_p99=1.0, achieved_rps=achieved or rate,
                     requests=300)


def _search(low: float, high: float | None, unresolved: tuple[float, ...] = ()) -> Search:
    best = _level(low, True)
    failed = _level(high, False) if high is not None else None
    levels = (best, *(_level(r, None) for r in unresolved), *((failed,) if failed else ()))
    return Search(levels=levels, best=best, failed=failed, unresolved=tuple(_level(r, None) for r in unresolved))


def _judge(a: AcrossStarts, floor: float, tol: float = 0.1):
    return floor_verdict(a, floor, tol, where="p.toml, [floors.baseline] goodput_rps", update_hint="U", what="g")


def test_the_starts_interval_is_the_means_of_the_starts_ends():
    a = AcrossStarts(searches=(_search(40, 48), _search(36, 45, (40.5,)), _search(44, 52)))
    assert a.lows == (40, 36, 44) and a.low == 40 and a.high == 48.333333333333336
    assert a.cv == statistics.stdev([40, 36, 44]) / 40
    assert interval_text(a) == "[40, 48.33) req/s, unresolved at 40.5 req/s"
    # a start with no level failing leaves the starts' high end open
    assert AcrossStarts(searches=(_search(40, 48), _search(44, None))).high is None


def test_the_floor_is_judged_on_the_means_not_the_lowest_start():
    a = AcrossStarts(searches=(_search(40, 48), _search(30, 36), _search(44, 52)))  # mean low 38, mean high 45.3
    assert _judge(a, 40).outcome is Outcome.PASS  # 38 >= 40 x 0.9: the lowest start (30) alone would fail it
    v = _judge(a, 55)  # 45.3 < 55 x 0.9 = 49.5: shown to miss the SLOs below the floor
    assert v.outcome is Outcome.FAIL and v.category is Category.SLOWER_THAN_BASELINE
    v = _judge(a, 48)  # 38 < 43.2 <= 45.3: straddles it
    assert v.outcome is Outcome.INCONCLUSIVE and v.category is Category.UNRESOLVED


@given(st.lists(st.tuples(st.floats(1, 100), st.floats(1.01, 2)), min_size=2, max_size=6), st.floats(1, 150))
def test_pass_and_fail_follow_the_means_of_both_ends(starts, floor):
    a = AcrossStarts(searches=tuple(_search(lo, lo * k) for lo, k in starts))
    v = _judge(a, floor)
    bound = floor * 0.9
    mean_low = statistics.fmean(lo for lo, _ in starts)
    mean_high = statistics.fmean(lo * k for lo, k in starts)
    assert (v.outcome is Outcome.PASS) == (mean_low >= bound)
    assert (v.outcome is Outcome.FAIL) == (mean_low < bound and mean_high < bound)


def _project(pytester, floor: str) -> Path:
    text = PROFILE.replace("FLOOR", "89.5").replace("tolerance = 0.05", f"tolerance = 0.05{floor}") + SLO
    path = make_project(pytester.path, text)
    (pytester.path / "conftest.py").write_text(CONFTEST)
    return path


@pytest.mark.timing
def test_goodput_over_three_starts_is_searched_on_each_and_judged_on_their_means(pytester):
    path = _project(pytester, "\ngoodput_rps = 0.01")
    r = pytester.runpytest_subprocess("perftests", "-m", "load", "-k", "goodput and baseline",
                                      f"--perfgate-profile={path}", "--perfgate-starts", "3", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", "-rA")
    assert json.loads((pytester.path / "starts.json").read_text()) == ["baseline"] * 3  # a new server each
    g = props(cases(pytester.path / "r.xml")["test_goodput_under_slo[m:baseline]"])
    per = json.loads(g["goodput_starts"])
    assert [p["start"] for p in per] == [1, 2, 3] and g["n_starts"] == "3"
    levels = json.loads(g["load_levels"])
    assert {lv["start"] for lv in levels} == {1, 2, 3}
    r.stdout.fnmatch_lines(["*start 1 of 3: goodput [[]*", "*start 3 of 3: goodput [[]*"])
    if g["outcome"] == "inconclusive":  # a busy machine: a sender fell behind, said so, no number judged
        assert g["category"] == "client-behind", g
        return
    lows = [float(x) for x in g["start_values.goodput_rps"].split(",")]
    assert len(lows) == 3 and all(abs(x - p["low"]) < 1e-3 for x, p in zip(lows, per))
    assert abs(float(g["goodput_rps"]) - statistics.fmean(lows)) < 1e-3  # the mean, not the lowest start
    assert g["outcome"] == "pass", g
    r.stdout.fnmatch_lines(["*(goodput goodput_rps)*pass [[]*"])


@pytest.mark.timing
def test_update_writes_the_mean_of_the_starts_with_the_tolerance_of_their_spread(pytester):
    path = _project(pytester, "")
    r = pytester.runpytest_subprocess("perftests", "-m", "load", "-k", "goodput and baseline",
                                      f"--perfgate-profile={path}", "--perfgate-starts", "2", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", "--perfgate-update-baselines")
    g = props(cases(pytester.path / "r.xml")["test_goodput_under_slo[m:baseline]"])
    fl = tomllib.loads(path.read_text())["floors"]["baseline"]
    if g["outcome"] == "inconclusive":  # a busy machine: nothing written, and the summary says why
        assert "goodput_rps" not in fl
        r.stdout.fnmatch_lines(["*NOT updated*[[]floors.baseline[]] goodput_rps*"])
        return
    lows = [float(x) for x in g["start_values.goodput_rps"].split(",")]
    stamp = fl["measured"].get("goodput_rps", fl["measured"])
    assert fl["goodput_rps"] == round(statistics.fmean(lows), 2) and stamp["n"] == 2
    cv = statistics.stdev(lows) / statistics.fmean(lows)
    assert fl["goodput_rps_tolerance"] == limit_tolerance("goodput_rps", simulated=True, start_cv=cv, n_starts=2)
    assert fl["goodput_rps_tolerance"] >= limit_tolerance("goodput_rps", simulated=True, n_starts=2)  # never calmer
