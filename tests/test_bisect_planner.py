"""The bisection of two stacks' package sets (perfgate.measuring.bisect), pure: against a fake judge whose
regressions, interactions and combinations that do not start are known, so what the search finds, in how many
steps, and what it says where halving is not sound are exact."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.measuring.bisect import (
    BROKEN,
    BUDGET,
    CURRENT_BROKEN,
    FOUND,
    NO_CHANGE,
    NO_REGRESSION,
    UNDECIDED,
    StepResult,
    bisect,
    planned_steps,
)
from perfgate.measuring.judge import Decision

PKGS = ("cuda", "torch", "nccl", "sglang", "sgl_kernel", "flashinfer")


def judge_of(regressed: Callable[[frozenset[str]], bool],
             broken: Callable[[frozenset[str]], bool] = lambda s: False, *, starts: int = 4,
             log: list[tuple[str, ...]] | None = None) -> Callable[[tuple[str, ...], str], StepResult]:
    def judge(pkgs: tuple[str, ...], role: str) -> StepResult:
        if log is not None:
            log.append(pkgs)
        s = frozenset(pkgs)
        if broken(s):
            return StepResult(category="missing-dependency", starts=starts - 1)
        if regressed(s):
            return StepResult(decision=Decision.REGRESSED, ratio=0.9, ci=(0.88, 0.92), pairs=2, starts=starts)
        return StepResult(decision=Decision.SAME, ratio=1.0, ci=(0.998, 1.002), pairs=2, starts=starts)
    return judge


def any_of(terms: Iterable[Iterable[str]]) -> Callable[[frozenset[str]], bool]:
    ts = [frozenset(t) for t in terms]
    return lambda s: any(t <= s for t in ts)


@pytest.mark.parametrize("culprit", PKGS)
def test_a_single_culprit_among_six_is_found_in_about_log2_steps(culprit):
    b = bisect(PKGS, judge_of(any_of([[culprit]])), step_starts=4)
    assert b.status == FOUND and b.culprit == (culprit,)
    assert len(b.steps) <= 2 + math.ceil(math.log2(6)) == planned_steps(6)[1]  # whole + 3 halvings + 1 confirm
    assert b.steps[0].role == "whole set" and b.steps[0].packages == PKGS
    assert b.culprit_step is not None and b.culprit_step.packages == (culprit,)
    assert b.culprit_step.result.decision is Decision.REGRESSED and b.culprit_step.result.ci == (0.88, 0.92)
    assert not b.notes  # halving was sound throughout


def test_no_regression_ends_at_the_first_step():
    b = bisect(PKGS, judge_of(lambda s: False))
    assert b.status == NO_REGRESSION and len(b.steps) == 1 and b.culprit == () and b.complete


def test_no_changed_package_takes_no_step():
    b = bisect((), judge_of(lambda s: True))
    assert b.status == NO_CHANGE and b.steps == () and "nothing to bisect" in b.notes[0]


def test_two_packages_that_regress_only_together_are_found_as_a_pair_and_the_interaction_said():
    # torch (first half) and sgl_kernel (second half): each half alone is the same, the whole regressed
    b = bisect(PKGS, judge_of(any_of([["torch", "sgl_kernel"]])), step_starts=4)
    assert b.status == FOUND and b.culprit == ("torch", "sgl_kernel")
    assert b.culprit_step is not None and b.culprit_step.result.decision is Decision.REGRESSED
    assert any("an interaction" in n for n in b.notes), b.notes
    decisions = {s.packages: s.result.decision for s in b.steps}
    assert decisions[("cuda", "torch", "nccl")] is Decision.SAME
    assert decisions[("sglang", "sgl_kernel", "flashinfer")] is Decision.SAME  # measured: halving was not sound


def test_a_combination_that_does_not_start_is_a_finding_and_the_search_goes_on():
    # the candidate's sgl_kernel needs its torch: layered without it, the server does not import
    b = bisect(PKGS, judge_of(any_of([["flashinfer"]]), lambda s: "sgl_kernel" in s and "torch" not in s))
    assert b.status == FOUND and b.culprit == ("flashinfer",)
    broken = [s for s in b.steps if s.result.broken]
    assert broken and all("sgl_kernel" in s.packages for s in broken)
    assert broken[0].result.label == "fails: missing-dependency"
    assert any("fails (missing-dependency): a finding" in n for n in b.notes)


def test_a_whole_set_that_does_not_start_looks_for_the_combination():
    b = bisect(PKGS, judge_of(lambda s: False, any_of([["nccl", "flashinfer"]])))
    assert b.status == FOUND and b.target == BROKEN and b.culprit == ("nccl", "flashinfer")
    assert b.culprit_step is not None and b.culprit_step.result.category == "missing-dependency"


def test_the_budget_stops_the_search_saying_so_with_what_is_known():
    b = bisect(PKGS, judge_of(any_of([["flashinfer"]]), starts=4), step_starts=4, budget_starts=9)
    assert b.status == BUDGET and len(b.steps) == 2 and b.starts <= 9 and not b.complete
    assert b.culprit == PKGS  # the narrowest set measured to carry it: the whole set
    assert b.likely == ("sglang", "sgl_kernel", "flashinfer")  # the first half was the same
    assert "budget of 9 server starts is spent" in b.notes[-1]
    b = bisect(PKGS, judge_of(any_of([["flashinfer"]])), step_starts=4, budget_starts=3)
    assert b.status == BUDGET and b.steps == () and b.culprit == ()


def test_an_undecided_whole_set_or_a_current_that_does_not_start_stops():
    undecided = lambda pkgs, role: StepResult(decision=Decision.UNDECIDED, pairs=6, starts=12)  # noqa: E731
    assert bisect(PKGS, undecided).status == UNDECIDED
    down = lambda pkgs, role: StepResult(category="crash", current_failed=True, starts=1)  # noqa: E731
    b = bisect(PKGS, down)
    assert b.status == CURRENT_BROKEN and len(b.steps) == 1


def test_an_undecided_half_is_said_and_the_search_goes_on_over_combinations():
    # a small share on nccl (undecided alone) and the rest on flashinfer: neither half alone decides
    def judge(pkgs: tuple[str, ...], role: str) -> StepResult:
        s = set(pkgs)
        if {"nccl", "flashinfer"} <= s:
            return StepResult(decision=Decision.REGRESSED, ratio=0.95, ci=(0.94, 0.96), pairs=2, starts=4)
        if "nccl" in s or "flashinfer" in s:
            return StepResult(decision=Decision.UNDECIDED, ratio=0.99, ci=(0.98, 1.0), pairs=6, starts=12)
        return StepResult(decision=Decision.SAME, ratio=1.0, ci=(0.998, 1.002), pairs=2, starts=4)

    b = bisect(PKGS, judge)
    assert b.status == FOUND and b.culprit == ("nccl", "flashinfer")
    assert any("an undecided half" in n for n in b.notes), b.notes


def test_each_set_is_judged_once():
    log: list[tuple[str, ...]] = []
    bisect(PKGS, judge_of(any_of([["torch", "sgl_kernel"], ["cuda", "flashinfer"]]), log=log))
    assert len(log) == len(set(map(frozenset, log)))


terms = st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=3), min_size=1, max_size=3)


@given(n=st.integers(1, 10), raw=terms, infer=st.booleans())
def test_what_is_found_carries_the_regression_and_no_package_of_it_is_spare(n, raw, infer):
    """Any monotone regression (any of a few sets of packages, each regressing when all of it is layered): the set
    found regresses, and without any one of its packages it does not (1-minimal)."""
    pkgs = tuple(f"p{i}" for i in range(n))
    ts = [[f"p{i % n}" for i in t] for t in raw]
    regressed = any_of(ts)
    b = bisect(pkgs, judge_of(regressed), infer=infer)
    assert b.status == FOUND
    c = frozenset(b.culprit)
    assert regressed(c) and all(not regressed(c - {p}) for p in c)
    assert b.culprit_step is not None and b.culprit_step.result.decision is Decision.REGRESSED
    if any(len(set(t)) == 1 for t in ts) and len(ts) == 1 and infer:  # one culprit: about log2(n) steps
        assert len(b.steps) <= planned_steps(n)[1]


@given(n=st.integers(2, 12), k=st.integers(0, 11), budget=st.integers(0, 40))
def test_the_starts_never_exceed_the_budget(n, k, budget):
    pkgs = tuple(f"p{i}" for i in range(n))
    b = bisect(pkgs, judge_of(any_of([[pkgs[k % n]]]), starts=4), step_starts=4, budget_starts=budget)
    assert b.starts <= budget
    assert b.status in (FOUND, BUDGET)
    if b.status == BUDGET:
        assert b.culprit == () or pkgs[k % n] in b.culprit
