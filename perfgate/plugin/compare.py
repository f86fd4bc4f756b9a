"""Comparing a config with its baseline measured in the same run: the ``perf_baseline`` and ``perf_compare`` fixtures.

perfgate's speculation and variant records are written with them (``perftests/test_speculative.py``,
``test_backends.py``)::

    @pytest.mark.perfgate(kind="variant")
    def test_variant(perf_server, perf_baseline, measure, perf_compare):
        base = measure(perf_baseline)
        perf_compare(measure(perf_server), base)

``perf_compare`` of a candidate arm's measurement (``perf_candidate``, the stack-pair record) is the paired stack
judgement of :mod:`perfgate.plugin.stackpair`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfgate.kinds import Compares, compares_of, kind_of

if TYPE_CHECKING:
    from perfgate.measuring.metrics import Measurement
    from perfgate.measuring.verdict import Verdict
    from perfgate.plugin.runner import PerfRun
    from perfgate.profiles.config import ServerConfig
    from perfgate.record import Case

__all__ = ["BaselineServer", "PerfCompare", "baseline_of", "until_decided", "nothing_decides"]


@dataclass(frozen=True)
class BaselineServer:
    """The config a record is compared with in the same session (``perf_baseline``): the profile's baseline mode
    for a mode's record, the variant's own mode for a variant's. Its server is not started for it:
    ``measure(perf_baseline)`` gives the measurement its own record took (the baseline configs run first), else
    starts it then; a baseline that fails fails this record as a dependency."""

    mode: str
    config: ServerConfig
    case: Case

    @property
    def name(self) -> str:
        return self.config.name


def baseline_of(perf: PerfRun, case: Case) -> BaselineServer:
    """The baseline of ``case``'s record, as the kind registry says (perfgate.kinds ``compares``); a user's
    kind: a variant's own mode for a variant, the profile's baseline mode for a mode."""
    own = Compares.OWN_MODE in compares_of(case.kind, variant=case.variant is not None, fixtures=("perf_baseline",))
    base = case.baseline(case.mode if own else perf.state.profile.baseline_mode())
    return BaselineServer(mode=base.mode, config=perf.state.config_for(base), case=base)


class PerfCompare:
    """``perf_compare(m, base)``: conclude this test's record on ``m`` against ``base``, the baseline's measurement in
    the same session (``measure(perf_baseline)``).

    Greedy outputs first: fewer of the baseline's tokens matched than the workload's ``token_match_min`` is
    ``wrong-output`` (speculation and a variant must be lossless). Then decode tok/s by the bootstrap CI of the
    ratio of medians (with ``--perfgate-starts N``, N >= 2: the paired per-start ratios), faster or slower only
    beyond the profile's ``min_effect``; ``vs_baseline`` and its CI are recorded. A speculative mode's record
    adds the cost model's breakdown (a slower one says what it would take); a variant's passes when not slower
    beyond noise, and is inconclusive (``not-exercised``) where NCCL's log shows it never ran the variant's
    all-reduces. A candidate arm's measurement against the record's own,
    ``perf_compare(measure(perf_candidate), measure(perf_server))``, is the stack-pair judgement
    (:func:`perfgate.plugin.stackpair.stack_pair_verdict`: the paired ratio beyond the 0.5 % practical floor),
    whatever the record's kind. ``metric`` (one of ``perfgate.measuring.metrics.METRICS``, e.g. ``ttft_ms`` for a
    latency test) is what the record is about: its line leads with that figure and, in a paired run, that metric's
    ratio and decision; every judged metric still decides the record. Through the profile's expectations; this ends
    the test: call it last.
    """

    def __init__(self, perf: PerfRun) -> None:
        self._perf = perf

    def __call__(self, m: Measurement, base: Measurement, *, metric: str | None = None) -> None:
        perf = self._perf
        from perfgate.measuring.metrics import METRICS
        from perfgate.record import METRIC, case_of

        case = case_of(perf.item)
        if case is None:
            raise RuntimeError("perf_compare() needs the test to use perf_server (it names the mode and variant)")
        if metric is not None:  # what the test is about: its record's line leads with it (decode tok/s else)
            if metric not in METRICS:
                raise ValueError(f"perf_compare(): unknown metric {metric!r}; known: {', '.join(METRICS)}")
            perf.record(METRIC, metric)
        from perfgate.plugin.stackpair import DECIDES, on_candidate_arm, stack_pair_verdict

        k = kind_of(case.kind)
        if on_candidate_arm(perf.state, case, m) or (k is not None and k.compares is Compares.CANDIDATE):
            v = until_decided(perf, lambda c, b: stack_pair_verdict(perf, case, c, b), m, base, candidate=True)
            return perf.conclude(case, v, decides=DECIDES)
        if case.variant:
            v = until_decided(perf, lambda c, b: perf.variant_verdict(case, c, b), m, base)
        else:
            v = until_decided(perf, lambda c, b: perf.compare(case, c, b, what=f"{case.mode} vs {b.config_name}"),
                              m, base)
            if perf.state.profile.modes[case.mode].speculative:
                mm = perf._measured or m
                bb = perf.state.ledger.measurement(base.config_key) or base
                v = perf.explain_speculation(case, mm, bb, v)
        perf.conclude(case, v)


def nothing_decides(v: Verdict, n: int) -> str:
    """Why no further start pair can decide a paired comparison ("" when one can): from two pairs on, every pair so
    far had one arm measured on a busy host and the other quiet (the host's load changes faster than a start pair),
    so the next pairs would most likely be left out too."""
    from perfgate.record import PAIR_DISTURBED

    left = str(v.properties.get(PAIR_DISTURBED, "")).split(",")
    if n >= 2 and len([x for x in left if x]) >= n:
        return (f"every start pair so far ({n}) had one arm measured on a busy host and the other quiet: the host's "
                f"load changes faster than a start pair; re-run when it is steady (a load both arms share is kept) "
                f"or quiet")
    return ""


def until_decided(perf: PerfRun, judge: Callable[[Measurement, Measurement], Verdict], m: Measurement,
                  base: Measurement, *, candidate: bool = False) -> Verdict:
    """``judge(m, base)``, and while the judge says *undecided* (:attr:`Verdict.decision`), or names metrics
    still undecided that more pairs would decide within the budget (:attr:`Verdict.wants_more`), one more
    interleaved start pair of both configs (alternated: pair 2 the config's first, pair 3 the baseline's, ...:
    perfgate.measuring.order), judged again, until it decides or the budget
    runs out (``--perfgate-max-starts``, ``--perfgate-max-time``: :meth:`PerfRun.no_more_starts`); the terminal
    says each look before its pair, and why it stops where it stops undecided. The false-alarm rate
    holds under these repeated looks (perfgate.measuring.judge.Sequential). The record's numbers are recorded
    again from the pooled starts, and the order of each pair's starts (``pair_order``: ``AB,BA,...``)."""
    from dataclasses import replace

    from perfgate.categories import Why
    from perfgate.measuring.judge import Decision
    from perfgate.measuring.order import in_pair_order, pair_order
    from perfgate.plugin.junitguard import checkpoint
    from perfgate.plugin.say import say
    from perfgate.record import CANDIDATE_PREFIX, PAIR_LOOKS, PAIR_ORDER

    v = judge(m, base)
    looks: list[str] = []
    while v.decision is Decision.UNDECIDED or v.wants_more:
        n = len(m.starts) or 1
        at = f" at {v.judged}" if v.judged else ""
        what = "undecided" if v.decision is Decision.UNDECIDED else f"{v.decision}, {v.wants_more} undecided"
        why = perf.no_more_starts(base, m) or nothing_decides(v, n)
        if why:
            say(perf.item.config, f"perfgate: {perf.item.name}: {what} after {n} start pair(s){at}; no more: {why}")
            if v.decision is Decision.UNDECIDED and v.why is None:
                v = replace(v, why=Why.BUDGET_SPENT)
            break
        names = ([f"current {base.config_name}", f"candidate {m.config_name}"] if candidate
                 else [base.config_name, m.config_name])
        first, second = in_pair_order(names, n)  # A B, B A, ...: alternated
        arms = f"{first}, then {second}"
        say(perf.item.config, f"perfgate: {perf.item.name}: {what} after {n} start pair(s){at}; adding pair "
                              f"{n + 1} ({arms})")
        looks.append(f"{n}: {what}{' ' + v.judged if v.judged else ''}")
        perf.record(PAIR_LOOKS, "; ".join(looks))
        checkpoint(perf.item.config)  # a kill during the next pair keeps what these pairs said
        more = perf.more_starts(base, m)
        if more is None:  # a start failed: the pool has its verdict
            break
        base, m = more
        if candidate:  # the record's own numbers are the current arm's, the candidate's under candidate.
            perf._record_measurement(base)
            perf._record_measurement(m, prefix=CANDIDATE_PREFIX)
        else:
            perf._record_measurement(m)
        v = judge(m, base)
    order = pair_order([x.start_no for x in base.starts or (base,)], [x.start_no for x in m.starts or (m,)])
    if order:
        perf.record(PAIR_ORDER, order)
    if candidate and len(m.starts) >= 2:
        from perfgate.measuring.starts import start_properties

        for key, val in start_properties(m).items():
            perf.record(CANDIDATE_PREFIX + key, val)
    return v
