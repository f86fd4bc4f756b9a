"""perfgate.plugin.compare.until_decided: while the judge is undecided, one more start pair at a time, each look said
on the terminal with the figures it was undecided at, until it decides or the budget is spent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfgate.categories import Category, Outcome
from perfgate.measuring.judge import Decision
from perfgate.measuring.verdict import Verdict, judged_text
from perfgate.plugin.compare import until_decided


class _Terminal:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, msg: str) -> None:
        self.lines.append(msg)


@dataclass
class _Config:
    tr: _Terminal

    @property
    def pluginmanager(self) -> Any:
        tr = self.tr

        class _PM:
            @staticmethod
            def get_plugin(name: str) -> Any:
                return tr if name == "terminalreporter" else None

        return _PM()


@dataclass
class _Item:
    config: _Config
    name: str = "test_variant[m:baseline:v]"


@dataclass
class _M:
    config_name: str
    starts: tuple[_M, ...] = ()
    start_no: int = 0


@dataclass
class _Perf:
    item: _Item
    budget: int  # pairs more_starts may add
    added: int = 0
    recorded: list[str] = field(default_factory=list)
    properties: dict[str, object] = field(default_factory=dict)
    started: int = 2  # the session's server starts so far: pair 1, A then B
    order: list[str] = field(default_factory=list)  # the configs in the order more_starts started them

    def no_more_starts(self, base: _M, m: _M) -> str:
        return f"the budget of {self.budget + 1} start pairs (--perfgate-max-starts) is spent" \
            if self.added >= self.budget else ""

    def more_starts(self, base: _M, m: _M) -> tuple[_M, _M] | None:
        """As PerfRun.more_starts: pair number n (0-based) starts its arms as given when even, reversed when odd."""
        from perfgate.measuring.order import in_pair_order

        assert not self.no_more_starts(base, m)
        self.added += 1
        n = len(m.starts) or 1
        new: dict[str, _M] = {}
        for x in in_pair_order([base, m], n):
            self.started += 1
            self.order.append(x.config_name)
            new[x.config_name] = _M(x.config_name, start_no=self.started)
        return (_M(base.config_name, starts=(*(base.starts or (base,)), new[base.config_name])),
                _M(m.config_name, starts=(*(m.starts or (m,)), new[m.config_name])))

    def _record_measurement(self, m: _M, prefix: str = "") -> None:
        self.recorded.append(prefix + m.config_name)

    def record(self, name: str, value: object) -> None:
        self.properties[name] = value


def _judge(decisions: list[Decision | tuple[Decision, str]]) -> Any:
    looks = iter(decisions)

    def judge(m: _M, base: _M) -> Verdict:
        d = next(looks)
        d, wants = d if isinstance(d, tuple) else (d, "")
        if d is Decision.REGRESSED:
            outcome, category = Outcome.FAIL, Category.SLOWER_THAN_BASELINE
        else:
            outcome, category = Outcome.INCONCLUSIVE, None
        return Verdict(outcome=outcome, category=category, decision=d, wants_more=wants,
                       judged=judged_text(0.99 - 0.001 * len(m.starts), (0.98, 1.001)))

    return judge


def _run(decisions: list[Decision | tuple[Decision, str]], budget: int) -> tuple[Verdict, _Perf]:
    perf = _Perf(item=_Item(_Config(_Terminal())), budget=budget)
    v = until_decided(perf, _judge(decisions), _M("v", start_no=2), _M("baseline", start_no=1))  # type: ignore[arg-type]
    return v, perf


def test_each_pair_is_said_before_it_is_added_with_the_figures_it_was_undecided_at():
    v, perf = _run([Decision.UNDECIDED, Decision.UNDECIDED, Decision.REGRESSED], budget=5)
    assert v.decision is Decision.REGRESSED and perf.added == 2
    assert perf.item.config.tr.lines == [
        "perfgate: test_variant[m:baseline:v]: undecided after 1 start pair(s) at ×0.9900 [0.9800, 1.0010]; "
        "adding pair 2 (v, then baseline)",
        "perfgate: test_variant[m:baseline:v]: undecided after 2 start pair(s) at ×0.9880 [0.9800, 1.0010]; "
        "adding pair 3 (baseline, then v)",
    ]
    assert perf.recorded == ["v", "v"]  # the record's numbers again from the pooled starts, at each look
    # the arms alternate within pairs (A B, B A, A B) and the record says so, pair by pair
    assert perf.order == ["v", "baseline", "baseline", "v"]
    assert perf.properties["pair_order"] == "AB,BA,AB"
    # each look that added a pair, in the record as it is taken (the JUnit guard writes it: a kill keeps it)
    assert perf.properties["pair_looks"] == ("1: undecided ×0.9900 [0.9800, 1.0010]; "
                                             "2: undecided ×0.9880 [0.9800, 1.0010]")


def test_the_budget_ends_it_undecided_saying_so_and_a_decision_ends_it_at_once():
    v, perf = _run([Decision.UNDECIDED, Decision.UNDECIDED], budget=1)
    assert v.decision is Decision.UNDECIDED and perf.added == 1
    assert perf.item.config.tr.lines[-1] == (
        "perfgate: test_variant[m:baseline:v]: undecided after 2 start pair(s) at ×0.9880 [0.9800, 1.0010]; "
        "no more: the budget of 2 start pairs (--perfgate-max-starts) is spent")
    v, perf = _run([Decision.SAME], budget=5)
    assert v.decision is Decision.SAME and perf.added == 0 and perf.item.config.tr.lines == []
    assert "pair_looks" not in perf.properties  # no pair was added
    assert perf.properties["pair_order"] == "AB"  # one pair, the baseline's start first


def test_a_metric_the_budget_would_decide_gets_its_pairs_after_the_primary_decided():
    # decode tok/s "same" after one pair, TTFT undecided but decidable: pairs are added until TTFT decides
    v, perf = _run([(Decision.SAME, "ttft_ms"), (Decision.SAME, "ttft_ms"), Decision.REGRESSED], budget=5)
    assert v.decision is Decision.REGRESSED and perf.added == 2
    assert perf.item.config.tr.lines[0].startswith(
        "perfgate: test_variant[m:baseline:v]: same, ttft_ms undecided after 1 start pair(s) at ×0.9900")
    v, perf = _run([(Decision.SAME, "ttft_ms"), (Decision.SAME, "ttft_ms")], budget=1)
    assert v.decision is Decision.SAME and perf.added == 1  # the budget ends it: the primary's decision stands
