"""Noise measured on this machine (perfgate.report.pairnoise, ``--perfgate-noise-from``): one start's noise per metric
from earlier paired runs like the one judged stands in for the documented prior. The estimate (hypothesis: each
record's spread around its own mean, so an injected change does not widen it), which records count (config, pairing,
machine, pinning, disturbed pairs), what it buys (a TTFT change on a calm box decided where the 16 % prior leaves it
undecided) and what it keeps (A/A false alarms within the budget when the history is as noisy as the run, and when
the run is noisier than its history); the session that uses it is in tests/test_stack_pair_fixtures.py (pytester,
the simulated server)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.measured_noise_power import history, run
from perfgate.measuring.judge import Decision
from perfgate.report.junit_read import read_report
from perfgate.report.pairnoise import Match, pair_noise
from tests.report_factory import Case, write_report


def _pair_case(name: str, cur: list[float], cand: list[float], /, *, metric: str = "ttft_probe_ms",
               config: str = "c1", **extra: str) -> Case:
    return Case(name=name, kind="stack-pair", config=config, extra={
        "pair_n": str(len(cur)), f"start_values.{metric}": ",".join(map(repr, cur)),
        f"candidate.start_values.{metric}": ",".join(map(repr, cand)), **extra})


@settings(max_examples=40, deadline=None)
@given(logs=st.lists(st.floats(-0.3, 0.3), min_size=2, max_size=6), shift=st.floats(-0.5, 0.5))
def test_a_change_moves_the_mean_not_the_noise(tmp_path_factory, logs, shift):
    """The same pairs with a change added to every candidate start give the same noise: the sd of the log ratios
    around their own mean, over sqrt(2), with n - 1 degrees of freedom."""
    cur = [30.0 + i for i in range(len(logs))]
    got = []
    for s in (0.0, shift):
        cand = [x * math.exp(v + s) for x, v in zip(cur, logs)]
        path = write_report(tmp_path_factory.mktemp("r") / "p.xml", [_pair_case("r", cur, cand)])
        got.append(pair_noise([read_report(path)]).get("starts", "ttft_probe_ms"))
    mean = sum(logs) / len(logs)
    want = math.sqrt(sum((v - mean) ** 2 for v in logs) / (len(logs) - 1) / 2)
    if want == 0:
        assert all(n is None or n.cv == pytest.approx(0, abs=1e-9) for n in got)
        return
    a, b = got
    assert a is not None and b is not None and a.df == b.df == len(logs) - 1 and a.pairs == len(logs)
    assert a.cv == pytest.approx(want, rel=1e-6, abs=1e-9) and b.cv == pytest.approx(want, rel=1e-5, abs=1e-8)


def test_only_records_like_the_one_judged_count_and_disturbed_pairs_are_left_out(tmp_path):
    e = math.exp
    aa = ([30.0, 30.0, 30.0], [30 * e(0.01), 30 * e(-0.01), 30 * e(0.5)])  # the third pair disturbed
    path = write_report(tmp_path / "h.xml", [
        _pair_case("mine", *aa, pair_disturbed="3", config="c1", **{"host.server_cpus": "1-4"}),
        _pair_case("other-config", *aa, config="c2", **{"host.server_cpus": "1-4"}),
        _pair_case("unpinned", *aa, config="c1"),
        _pair_case("side", *aa, config="c1", co_resident_starts="3", **{"host.server_cpus": "1-4"}),
        Case(name="no-pair", kind="variant", config="c1"),
    ])
    report = read_report(path)
    got = pair_noise([report], Match(config="c1", level="starts", server_cpus="1-4"))
    n = got.get("starts", "ttft_probe_ms")
    assert n is not None and (n.records, n.pairs, n.df) == (1, 2, 1)
    assert n.cv == pytest.approx(math.sqrt((0.01 ** 2 + 0.01 ** 2) / 1 / 2))  # the disturbed pair left out
    assert got.left_out == {"another server config": 1, "other server CPUs": 1,
                            "other pairing (side by side / alternated)": 1}
    assert got.at("starts") == {"ttft_probe_ms": (n.cv, 1.0)} and got.at("side-by-side") == {}
    assert got.text("starts") == (f"ttft_probe_ms {n.text()} (records left out: 1 another server config, "
                                  f"1 other pairing (side by side / alternated), 1 other server CPUs)")
    assert got.text("side-by-side").startswith("no paired run like this one (records left out: ")
    machine = report.records[0].machine_dict.get("machine.id", "")
    assert pair_noise([report], Match(machine=machine + "x")).left_out == {"another machine": 4}
    assert "2 pairs of 1 records" in n.text() and "(1 df" in n.text()


def test_a_calm_box_measured_decides_a_ttft_change_the_prior_cannot():
    """A box whose TTFT moves 2 % a start (pinned servers, say), measured by one A/A record of 9 pairs: +10 % TTFT is
    regressed within 4 pairs in most runs on the measured noise (the benchmark's grid, docs/gate.md: 88 %). On the
    16 % prior alone it is decided far less often: only where the pairs agree closely enough by the fourth to reject
    the prior from below (perfgate.measuring.judge.pair_spread, issue 52: a prior never outweighs pairs that agree),
    about a fifth of runs; before that rule, in none."""
    rng = random.Random(5)
    runs = 200
    measured = sum(run(rng, change=0.10, noise=0.02, measured=history(rng, 0.02, 9))[0] is Decision.REGRESSED
                   for _ in range(runs))
    prior = sum(run(rng, change=0.10, noise=0.02, measured=None)[0] is Decision.REGRESSED for _ in range(runs))
    assert measured / runs >= 0.8 and prior / runs <= 0.3 and prior < measured, (measured, prior)


@pytest.mark.parametrize(("run_noise", "limit"), [(0.03, 0.01), (0.09, 0.03)])
def test_identical_arms_rarely_regress_on_a_measured_noise(run_noise, limit):
    """A/A: the history measured at 3 % a start; the run as noisy (false alarms within the 1 % a metric may spend),
    or three times noisier than its history (the judge's chi-square check drops a history the run's pairs reject:
    still within 3 %); 6 pairs at most."""
    rng = random.Random(7)
    runs = 1000
    hits = sum(run(rng, change=0.0, noise=run_noise, measured=history(rng, 0.03, 9), max_pairs=6)[0]
               is Decision.REGRESSED for _ in range(runs))
    assert hits / runs <= limit, hits
