"""The record-kind registry (perfgate.kinds) and the cases it gives a profile (perfgate.profiles.cases)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from perfgate.kinds import (
    KINDS,
    USER_ORDER,
    Cases,
    Compares,
    compares_of,
    in_matrix,
    kind_of,
    run_order,
    update_key,
)
from perfgate.profiles.cases import cases
from perfgate.profiles.load import load_profile
from perfgate.profiles.variants import load_variants

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"


def test_the_registry_keeps_the_run_order_of_a_configs_records():
    """floor, sweep, acceptance, crosscheck, profile (before the speculation record that reads it), speculation,
    variant, stack-pair; a user's kind after them, and the load records with it (nothing they serve reaches a
    later record: tests/test_sim_history.py)."""
    assert list(KINDS)[:8] == ["floor", "sweep", "acceptance", "crosscheck", "profile", "speculation-vs-baseline",
                               "variant", "stack-pair"]
    assert run_order("profile") == 3.5 and run_order("goodput") == run_order("crossover") == USER_ORDER
    assert run_order("my-own-kind") == USER_ORDER and run_order("stack-pair") < USER_ORDER


def test_what_a_kind_decides():
    assert [k for k in KINDS if KINDS[k].matrix] == ["floor", "speculation-vs-baseline", "variant"]
    assert update_key("floor") == "tok_s" and update_key("acceptance") == "accept_len"
    assert update_key("variant") is None and update_key("mine") is None
    assert kind_of("variant").compares is Compares.OWN_MODE  # type: ignore[union-attr]
    assert kind_of("speculation-vs-baseline").compares is Compares.BASELINE_MODE  # type: ignore[union-attr]
    assert kind_of("stack-pair").compares is Compares.CANDIDATE  # type: ignore[union-attr]
    # what a record is compared with (and started interleaved with): the registry's, else what its test's fixtures ask
    assert compares_of("variant", variant=True, fixtures=()) == (Compares.OWN_MODE,)
    assert compares_of("stack-pair", variant=False, fixtures=("perf_baseline",)) == (Compares.CANDIDATE,)
    assert compares_of("mine", variant=False, fixtures=("perf_server",)) == ()
    assert compares_of("mine", variant=True, fixtures=("perf_baseline",)) == (Compares.OWN_MODE,)
    assert compares_of("mine", variant=False, fixtures=("perf_baseline", "perf_candidate")) == (
        Compares.BASELINE_MODE, Compares.CANDIDATE)
    # the matrix shows its kinds, a user's kind and the marked ones (one row per kind and metric), not the others
    assert in_matrix("floor") and in_matrix("mine") and in_matrix("goodput") and in_matrix("profile")
    assert not in_matrix("sweep") and not in_matrix("crosscheck") and not in_matrix("allreduce")
    assert {k for k in KINDS if KINDS[k].expectation} == {"floor", "sweep", "acceptance", "profile",
                                                         "speculation-vs-baseline", "variant", "goodput", "crossover"}


def _session(crosscheck: str = "auto", url: str = "", variants: str = "") -> SimpleNamespace:
    return SimpleNamespace(profile=load_profile(SIM), variants=load_variants(ROOT / "baselines" / "variants.toml"),
                           settings=SimpleNamespace(crosscheck=crosscheck, url=url,
                                                    variants=tuple(variants.split(",")) if variants else ()),
                           dropped_modes=[])


def test_each_kind_gets_the_cases_its_registry_entry_says():
    st = _session()
    p = st.profile
    plain = [m for m in p.modes if not p.modes[m].speculative]
    spec = [m for m in p.modes if p.modes[m].speculative]
    assert plain and spec
    assert [c.mode for c in cases(st, "floor")] == plain
    assert [c.mode for c in cases(st, "acceptance")] == spec
    assert [c.mode for c in cases(st, "speculation-vs-baseline")] == spec
    assert [c.mode for c in cases(st, "stack-pair")] == list(p.modes)
    assert cases(st, "crosscheck") == []  # auto: only where SGLang serves
    assert [c.mode for c in cases(_session("on"), "crosscheck")] == list(p.modes)
    assert cases(_session("on", url="http://box:1"), "crosscheck") == []
    variants = cases(st, "variant")
    assert variants and {c.mode for c in variants} == set(p.variant_modes) and all(c.variant for c in variants)
    sweep = cases(st, "sweep")
    assert [c.mode for c in sweep] == ([p.baseline_mode()] if p.workload.concurrency_sweep else [])
    with pytest.raises(ValueError, match="micro_cases"):
        cases(st, "allreduce")


def test_a_users_kind_and_a_marked_kind_get_one_case_per_named_mode():
    st = _session()
    p = st.profile
    assert [c.mode for c in cases(st, "mine")] == list(p.modes)
    assert KINDS["goodput"].cases is Cases.AS_MARKED
    mode = next(iter(p.modes))
    got = cases(st, "goodput", modes=[mode, "nope"], where="t.py::test_g")
    assert [c.mode for c in got] == [mode] and "t.py::test_g: modes ['nope']" in st.dropped_modes[0]
    with_variants = cases(st, "mine", modes=list(p.variant_modes), variants=True)
    assert {c.variant for c in with_variants} - {None} == {c.variant for c in cases(st, "variant")}


USER_KINDS = '''
import pytest


@pytest.mark.perfgate(kind="latency", modes=["baseline"])
def test_latency(perf_server, measure, perf_check):
    perf_check(measure(perf_server, trials=3), "ttft_ms")


@pytest.mark.perfgate(kind="skip", modes=["baseline"])  # named like pytest's own marker: that marker is not put on
def test_named_skip(perf_server, measure, perf_check):
    perf_check(measure(perf_server), "tok_s")


@pytest.mark.perfgate(kind="floor")
def test_floor(perf_server, measure, perf_check):
    perf_check(measure(perf_server), "tok_s")
'''


def test_minus_m_a_users_kind_selects_its_records(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_kinds_of_mine=USER_KINDS)
    args = ("--collect-only", "-q", "-p", "no:cacheprovider", "--strict-markers", f"--perfgate-profile={SIM}")
    r = pytester.runpytest_subprocess("-m", "latency", *args)
    assert r.ret == pytest.ExitCode.OK, r.stdout.str() + r.stderr.str()
    r.stdout.fnmatch_lines(["test_kinds_of_mine.py::test_latency[[]kimi-k2.5:baseline[]]", "1/3 tests collected (2 deselected)*"])
    rest = pytester.runpytest_subprocess("-m", "not latency", *args)
    rest.stdout.fnmatch_lines(["*::test_floor[[]kimi-k2.5:baseline[]]", "*::test_named_skip[[]kimi-k2.5:baseline[]]",
                               "2/3 tests collected (1 deselected)*"])
    # a kind named like a marker registered otherwise (pytest's skip) gets no marker of its name: -m skip selects none
    none = pytester.runpytest_subprocess("-m", "skip", *args)
    assert none.ret == pytest.ExitCode.NO_TESTS_COLLECTED, none.stdout.str()


def test_the_update_command_a_users_record_prints_selects_its_kind(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_kinds_of_mine=USER_KINDS)
    r = pytester.runpytest_subprocess("-m", "latency", "-rs", "-p", "no:cacheprovider", f"--perfgate-profile={SIM}")
    assert r.ret == pytest.ExitCode.OK, r.stdout.str() + r.stderr.str()
    r.stdout.fnmatch_lines(["*1 skipped*"])
    assert "-m latency --perfgate-profile" in r.stdout.str() and "--perfgate-update-baselines`" in r.stdout.str()
