"""Which package change carries a regression: the bisection of two stacks' package sets, pure (no I/O).

Given the packages that differ between the current stack and a candidate (``packages``) and a judge that layers a
set of them over the current stack and compares the result with the current stack (``judge(packages)``: in
``perfgate bisect`` the paired, sequential stack-pair judge, :mod:`perfgate.measuring.stackpair`, one session per
step), :func:`bisect` finds the smallest set that carries what the whole set does:

1. The whole set first. Same or improved: nothing to find (one step). Undecided: nothing can be found with these
   pairs. Regressed: find the regression. Does not start: find the combination that does not start.
2. Halving: the first half is layered alone. If it carries it, the search goes on in it (sound: measured). If it is
   the same or better, the other half is taken to carry it without a step of its own (the halving's assumption:
   no two packages act only together), and the one package reached that way is measured alone to confirm it
   (``role`` ``confirm``). A single culprit among n packages costs 1 + ceil(log2 n) steps, + 1 to confirm.
3. Where that is not sound: a confirmation that does not reproduce (the assumption failed), or a first half that
   neither carries it nor is the same (undecided, or it does not start alone), the search goes back to the last
   set measured to carry it and layers both halves, each alone. If neither carries it alone although both together
   do (an interaction: two packages regress only together, or one needs the other to start; or a half undecided
   alone), that is said (:attr:`Bisection.notes`) and the search continues over combinations: which of the first
   half are needed with the whole second half layered, then which of the second with those. Whatever is named
   the culprit has been measured to carry it, layered alone over the current stack.
4. A step that does not start (its category, e.g. ``missing-dependency``) is a finding, never the tool's crash: it
   is neither the regression nor the same; the search goes on as in 3.

Every step is paid in server starts: a step is run only if the budget (``budget_starts``) still holds the most a
step can take (``step_starts``); when it does not, the bisection stops saying so, with the narrowest set known to
carry the regression so far. :func:`planned_steps` is what is printed before it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from perfgate.categories import Outcome
from perfgate.measuring.judge import Decision
from perfgate.measuring.outcomes import Claim, outcome_of

__all__ = ["StepResult", "Step", "Bisection", "bisect", "planned_steps", "REGRESSION", "BROKEN",
           "FOUND", "NO_REGRESSION", "NO_CHANGE", "UNDECIDED", "BUDGET", "CURRENT_BROKEN"]

#: what the bisection looks for (Bisection.target): a regression, or a combination that fails (does not import or
#: start: its category says how)
REGRESSION = "regressed"
BROKEN = "fails"

#: how a bisection ended (Bisection.status)
FOUND = "found"
NO_REGRESSION = "no regression"
NO_CHANGE = "no change"
UNDECIDED = "undecided"
BUDGET = "budget spent"
CURRENT_BROKEN = "current does not start"


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """What one step's paired comparison came to: a decision, or a category where the layered stack did not start
    (``broken``), with the ratio (candidate/current), its interval, the start pairs and the server starts taken."""

    decision: Decision | None = None
    #: the failure category where the layered stack did not start (perfgate.categories: missing-dependency, crash)
    category: str = ""
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    pairs: int = 0
    starts: int = 0
    #: the current stack itself did not start: nothing can be compared
    current_failed: bool = False
    message: str = ""
    #: where the step's record is (a JUnit file)
    record: str = ""
    #: why an undecided step is undecided (its record's ``why_undecided``: perfgate.categories.Why)
    why: str = ""
    #: the metric that decided a regressed step when it is not decode tok/s (its ratio and interval are then that
    #: metric's, e.g. ``itl_ms_p99``); "" for decode tok/s or a step decided on one metric (``--metric``)
    metric: str = ""

    @property
    def broken(self) -> bool:
        return self.decision is None

    @property
    def label(self) -> str:
        """``regressed`` / ``same`` / ``undecided (host-busy)`` ... or ``fails: <category>``."""
        if self.decision is None:
            return f"{BROKEN}: {self.category or 'crash'}"
        if self.decision is Decision.UNDECIDED and self.why:
            return f"{self.decision} ({self.why})"
        if self.decision is Decision.REGRESSED and self.metric:
            return f"{self.decision} ({self.metric})"
        return str(self.decision)


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step: the packages layered over the current stack (in the order given), why, and its result."""

    number: int
    packages: tuple[str, ...]
    role: str
    result: StepResult


@dataclass(frozen=True, kw_only=True)
class Bisection:
    """The steps, how the search ended and what it found."""

    packages: tuple[str, ...]
    steps: tuple[Step, ...]
    status: str
    target: str = REGRESSION
    #: the smallest set found to carry it (status FOUND), or the narrowest set known to carry it when the search
    #: stopped early (BUDGET, UNDECIDED)
    culprit: tuple[str, ...] = ()
    #: where the search was when it stopped early: the set it was narrowing (measured, or taken to carry it
    #: because the other half was the same), with the packages layered beside it
    likely: tuple[str, ...] = ()
    #: the step that measured the culprit alone over the current stack (its decision, ratio and interval)
    culprit_step: Step | None = None
    #: what the search says on the way: where halving was not sound, steps that did not start
    notes: tuple[str, ...] = ()

    @property
    def starts(self) -> int:
        return sum(s.result.starts for s in self.steps)

    @property
    def complete(self) -> bool:
        return self.status in (FOUND, NO_REGRESSION, NO_CHANGE)


def planned_steps(n: int) -> tuple[int, int]:
    """(fewest, most) steps of a bisection of ``n`` packages where no two act only together: the whole set alone
    (nothing to find), up to the whole set, ceil(log2 n) halvings and one confirmation."""
    if n <= 0:
        return 0, 0
    if n == 1:
        return 1, 1
    return 1, 2 + math.ceil(math.log2(n))


class _Stop(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class _Search:
    order: tuple[str, ...]
    judge: Callable[[tuple[str, ...], str], StepResult]
    step_starts: int
    budget_starts: int | None
    target: str = REGRESSION
    steps: list[Step] = field(default_factory=list)
    seen: dict[frozenset[str], Step] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the narrowest set measured to carry it (the packages layered in all)
    narrowest: tuple[str, ...] = ()
    #: the set being narrowed (with its context), measured or inferred
    likely: tuple[str, ...] = ()

    def sort(self, pkgs: Sequence[str] | frozenset[str]) -> tuple[str, ...]:
        s = set(pkgs)
        return tuple(p for p in self.order if p in s)

    def test(self, pkgs: Sequence[str], role: str) -> StepResult:
        key = frozenset(pkgs)
        if key in self.seen:
            return self.seen[key].result
        spent = sum(s.result.starts for s in self.steps)
        if self.budget_starts is not None and spent + self.step_starts > self.budget_starts:
            self.notes.append(f"the budget of {self.budget_starts} server starts is spent ({spent} taken; a step "
                              f"takes up to {self.step_starts}): {', '.join(self.sort(key))} ({role}) not tested")
            raise _Stop(BUDGET)
        r = self.judge(self.sort(key), role)
        step = Step(number=len(self.steps) + 1, packages=self.sort(key), role=role, result=r)
        self.steps.append(step)
        self.seen[key] = step
        if r.current_failed:
            raise _Stop(CURRENT_BROKEN)
        if r.broken and self.target == REGRESSION and step.number > 1:
            self.notes.append(f"step {step.number}: {' + '.join(step.packages)} over the current stack fails "
                              f"({r.category or 'crash'}): a finding; the search goes on around it")
        if self.bad(r) and (not self.narrowest or len(key) < len(self.narrowest)):
            self.narrowest = self.sort(key)
        return r

    def bad(self, r: StepResult) -> bool:
        """Shown to carry it: regressed, a fail of the stack pair's claim (a regression's search), not started (a
        broken one's)."""
        if self.target == BROKEN:
            return r.broken
        return r.decision is not None and outcome_of(r.decision, Claim.NOT_SLOWER) is Outcome.FAIL

    def good(self, r: StepResult) -> bool:
        """Shown not to carry it: the same or better, a pass of the stack pair's claim (a regression's search),
        started (a broken one's)."""
        if self.target == BROKEN:
            return not r.broken
        return r.decision is not None and outcome_of(r.decision, Claim.NOT_SLOWER) is Outcome.PASS

    def locate(self, s: tuple[str, ...], ctx: tuple[str, ...], *, infer: bool) -> tuple[str, ...]:
        """The smallest part of ``s`` that, layered with ``ctx``, carries it; ``ctx + s`` is measured to carry it
        and ``ctx`` alone not."""
        measured = s
        inferred = False
        while len(s) > 1:
            self.likely = self.sort(ctx + s)
            half = (len(s) + 1) // 2
            left, right = s[:half], s[half:]
            with_ctx = " (with " + ", ".join(ctx) + ")" if ctx else ""
            rl = self.test(ctx + left, "half" + with_ctx)
            if self.bad(rl):
                s, measured, inferred = left, left, False
                continue
            if infer and self.good(rl):
                s, inferred = right, True  # no step: the other half is taken to carry it (confirmed at the end)
                continue
            rr = self.test(ctx + right, "other half" + with_ctx)
            if self.bad(rr):
                s, measured, inferred = right, right, False
                continue
            undecided = Decision.UNDECIDED in (rl.decision, rr.decision)
            self.notes.append(
                f"halving is not sound at {', '.join(s)}" + with_ctx + f": {', '.join(left)} alone is "
                f"{rl.label}, {', '.join(right)} alone is {rr.label}, together {self.target}: "
                + ("an undecided half (too small a share of it to decide alone, or an interaction)" if undecided
                   else "an interaction") + "; testing combinations")
            need_left = self.locate(left, ctx + right, infer=infer)
            need_right = self.locate(right, ctx + need_left, infer=infer)
            return self.sort(need_left + need_right)
        self.likely = self.sort(ctx + s)
        if inferred:
            r = self.test(ctx + s, "confirm" + (" (with " + ", ".join(ctx) + ")" if ctx else ""))
            if self.bad(r):
                return s
            self.notes.append(f"{', '.join(s)} alone is {r.label}, not {self.target}: halving assumed no two packages "
                              f"act only together, and that does not hold here; back to {', '.join(measured)}, "
                              f"both halves layered each alone")
            return self.locate(measured, ctx, infer=False)
        return s


def bisect(packages: Sequence[str], judge: Callable[[tuple[str, ...], str], StepResult], *, step_starts: int = 0,
           budget_starts: int | None = None, infer: bool = True) -> Bisection:
    """Bisect ``packages`` (the changes between the current stack and the candidate) with ``judge(layered, role)``:
    the packages layered over the current stack (in ``packages``' order) compared with the current stack.

    ``step_starts``: the most server starts one step can take; ``budget_starts``: the most all steps may take
    (None: no limit). ``infer``: halve on one step per level (the other half taken to carry it, confirmed at the
    end); False: every half is measured. See the module docstring for the rules."""
    order = tuple(dict.fromkeys(packages))
    if not order:
        return Bisection(packages=(), steps=(), status=NO_CHANGE,
                         notes=("the two stacks have the same packages: nothing to bisect",))
    run = _Search(order=order, judge=judge, step_starts=step_starts, budget_starts=budget_starts)

    def done(status: str, culprit: tuple[str, ...] = (), target: str = REGRESSION) -> Bisection:
        key = frozenset(culprit)
        likely = run.likely if status not in (FOUND, NO_REGRESSION, NO_CHANGE) and run.likely != culprit else ()
        return Bisection(packages=order, steps=tuple(run.steps), status=status, target=target, culprit=culprit,
                         likely=likely, culprit_step=run.seen.get(key) if culprit else None, notes=tuple(run.notes))

    try:
        whole = run.test(order, "whole set")
    except _Stop as stop:
        return done(stop.status)
    if whole.broken:
        run.target = BROKEN
        run.narrowest = order
        run.notes.append(f"the whole set does not start ({whole.category or 'crash'}): looking for the combination "
                         f"that does not start")
    elif whole.decision is Decision.UNDECIDED:
        return done(UNDECIDED)
    elif whole.decision is not Decision.REGRESSED:
        return done(NO_REGRESSION)
    try:
        culprit = run.locate(order, (), infer=infer)
        if frozenset(culprit) not in run.seen:
            r = run.test(culprit, "culprit alone")
            if not run.bad(r):
                run.notes.append(f"{', '.join(culprit)} alone is {r.label}: the culprit was found through steps it "
                                 f"does not reproduce alone")
                return done(UNDECIDED, run.narrowest, run.target)
    except _Stop as stop:
        return done(stop.status, run.narrowest, run.target)
    return done(FOUND, culprit, run.target)
