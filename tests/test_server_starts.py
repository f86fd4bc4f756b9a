"""perfgate.serving.starts.ServerStarts, the one step of the loops over server starts, on a stand-in pool and ledger
(no server): a start already measured is stopped before the next, a failure is handed back, added starts count
against the time budget."""

from __future__ import annotations

from types import SimpleNamespace

from perfgate.categories import Category, Outcome
from perfgate.measuring.metrics import summarize
from perfgate.measuring.verdict import Verdict
from perfgate.serving.pool import ServerFailed
from perfgate.serving.starts import ServerStarts


class _Launched:
    def __init__(self) -> None:
        self.starts, self.current, self.stopped = 1, SimpleNamespace(config=SimpleNamespace(key="a")), 0

    def stop(self) -> None:
        self.stopped += 1
        self.starts += 1  # the next measurement starts a new process


class _Ledger:
    def __init__(self) -> None:
        self.measured: set[int] = set()

    def start_measured(self, n: int) -> bool:
        return n in self.measured

    def note_measured_start(self, n: int) -> None:
        self.measured.add(n)


def _state(max_starts: int = 4, max_time_s: float | None = None):
    launched = _Launched()
    st = SimpleNamespace(pool=SimpleNamespace(launched=launched), ledger=_Ledger(),
                         settings=SimpleNamespace(max_starts=max_starts, max_time_s=max_time_s), added_start_s=0.0)
    return st, launched


def test_a_measured_start_is_stopped_before_the_next_and_the_first_is_kept():
    st, launched = _state()
    starts = ServerStarts(st)
    m = starts.measure(SimpleNamespace(key="a"), lambda c: summarize(config_key=c.key, config_name="a", trials=[]))  # type: ignore[arg-type]
    assert not isinstance(m, ServerFailed) and launched.stopped == 0  # the fixture's start: measured, not restarted
    assert st.ledger.measured == {1}
    starts.measure(SimpleNamespace(key="a"), lambda c: summarize(config_key=c.key, config_name="a", trials=[]))  # type: ignore[arg-type]
    assert launched.stopped == 1 and st.ledger.measured == {1, 2}
    starts.fresh(SimpleNamespace(key="b"))  # type: ignore[arg-type]  # another config's start, whatever was measured
    assert launched.stopped == 2


def test_a_failed_start_is_handed_back_unmeasured_and_added_time_is_counted():
    st, _ = _state(max_time_s=0.0)
    failed = ServerFailed(Verdict(outcome=Outcome.FAIL, category=Category.CRASH, message="exited"), log="l")

    def boom(c):
        raise failed

    assert ServerStarts(st).measure(SimpleNamespace(key="a"), boom, added=True) is failed  # type: ignore[arg-type]
    assert st.ledger.measured == set() and st.added_start_s >= 0.0
    assert ServerStarts(st).budget_spent(1) == "the 0 s of --perfgate-max-time for added start pairs are spent"
    st, _ = _state(max_starts=2)
    assert ServerStarts(st).budget_spent(1) == ""
    assert ServerStarts(st).budget_spent(2) == "the budget of 2 start pairs (--perfgate-max-starts) is spent"
