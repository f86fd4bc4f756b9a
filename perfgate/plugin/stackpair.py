"""The paired stack comparison (record kind ``stack-pair``): the current stack against a candidate on one box.

The strongest way to gate a stack upgrade (issue 22): both stacks in one session on one machine, config by
config, their server starts interleaved (current 1, candidate 1, current 2, candidate 2, ...:
``--perfgate-starts N``, at least 2 recommended), and the verdict from the candidate/current ratio of each
start pair (``perfgate.measuring.judge.paired``, with the judge's practical floor for throughput, 0.5 %), so the
machine's own offset, which a comparison of two reports from two machines cannot tell from a regression,
cancels. The candidate arm is ``--perfgate-candidate SPEC``
(:func:`perfgate.plugin.settings.parse_candidate`): its server runs with another Python (and its SGLang), extra
environment, or for the simulator other stack versions; the arm is part of the config key, so the server
manager stops one arm and starts the other.

Written with the public fixtures (``perftests/test_stack_pair.py``)::

    @pytest.mark.perfgate(kind="stack-pair")
    def test_stack_pair(perf_candidate, perf_server, measure, perf_compare):
        current = measure(perf_server)
        perf_compare(measure(perf_candidate), current)

``perf_candidate`` is :func:`candidate_of`, ``measure(perf_candidate)`` :func:`measure_candidate` and
``perf_compare`` of a candidate arm's measurement :func:`stack_pair_verdict`, the one judge of the paired run.
pass: same or improved; fail (``slower-than-baseline``): regressed; inconclusive: undecided, saying how many
interleaved start pairs would decide it. With one start per arm the pair's spread is the judge's prior.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfgate.measuring.verdict import Verdict, pct
from perfgate.plugin.arms import arm_stack
from perfgate.plugin.kinds import STACK_PAIR
from perfgate.record import (
    CANDIDATE,
    CANDIDATE_PREFIX,
    PAIR_CI_HIGH,
    PAIR_CI_LOW,
    PAIR_DECISION,
    PAIR_N,
    PAIR_RATIO,
    Case,
    case_of,
)

if TYPE_CHECKING:
    from perfgate.measuring.metrics import Measurement
    from perfgate.plugin.runner import PerfRun
    from perfgate.plugin.state import PerfgateState
    from perfgate.profiles import Workload
    from perfgate.profiles.config import ServerConfig

__all__ = ["CandidateServer", "candidate_of", "measure_candidate", "on_candidate_arm", "stack_pair_verdict",
           "candidate_stack_properties", "KIND", "DECIDES"]

KIND = STACK_PAIR  # perfgate.plugin.kinds
#: the categories a stack-pair record decides (an expectation naming another does not apply to it)
DECIDES = ("slower-than-baseline", "crash", "wrong-output")


@dataclass(frozen=True)
class CandidateServer:
    """The record's own config on the candidate stack (``perf_candidate``; ``--perfgate-candidate SPEC``).

    Its server is not started for it: ``measure(perf_candidate)`` measures this record's own config first, then
    the candidate arm, their starts interleaved (current 1, candidate 1, ... with ``--perfgate-starts N``), and
    records the candidate's numbers under ``candidate.``; a candidate that fails fails this record as a
    dependency. ``perf_compare(measure(perf_candidate), measure(perf_server))`` concludes on the pair."""

    mode: str
    config: ServerConfig
    #: the candidate arm's case (``Case.on_candidate()`` of the record's own)
    case: Case
    #: the record's own case (the current stack)
    current: Case
    #: the ``--perfgate-candidate`` SPEC
    spec: str

    @property
    def name(self) -> str:
        return self.config.name


def candidate_of(perf: PerfRun) -> CandidateServer:
    """The test's record's config on the candidate arm; with no candidate, or an attached server, the record skips
    saying so. Records ``candidate`` (the SPEC) and ``candidate.stack.<key>`` where the candidate's stack differs."""
    case = case_of(perf.item)
    if case is None:
        raise RuntimeError("perf_candidate needs the test to use perf_server (it names the mode and variant)")
    st = perf.state
    cand = st.settings.candidate
    if cand is None or perf.servers.attached:
        why = ("stack-pair: no candidate stack to compare with; pass --perfgate-candidate SPEC (python=/other/venv/"
               "bin/python, env.NAME=VALUE, sim-stack=KEY=VER;...) and --perfgate-starts 3 to measure this config "
               "under both stacks on this box, starts interleaved (docs/gate.md)") if cand is None else \
            "stack-pair: an attached server (--perfgate-url) has one stack; launch the servers to compare two"
        perf.conclude(case, Verdict(outcome="skip", message=why), decides=DECIDES)
        raise AssertionError("unreachable: conclude() ends the test")
    perf.record(CANDIDATE, cand.spec)
    arm = case.on_candidate()
    config = st.config_for(arm)
    for k, v in candidate_stack_properties(st, config).items():
        perf.record(k, v)
    return CandidateServer(mode=case.mode, config=config, case=arm, current=case, spec=cand.spec)


def measure_candidate(perf: PerfRun, server: CandidateServer, workload: Workload | None) -> Measurement:
    """The candidate arm's measurement (``measure(perf_candidate)``): the record's own config measured first (its
    numbers are the record's), so the arms start in that order whichever the test measures first; the candidate's
    numbers recorded under ``candidate.``."""
    perf.measure(server.current, workload=workload)
    m = perf.measure(server.case, primary=False, workload=workload)
    perf._record_measurement(m, prefix=CANDIDATE_PREFIX)
    return m


def on_candidate_arm(st: PerfgateState, case: Case, m: Measurement) -> bool:
    """``m`` is the measurement of ``case``'s config on the candidate arm."""
    return st.settings.candidate is not None and m.config_key == st.config_for(case.on_candidate()).key


def stack_pair_verdict(perf: PerfRun, case: Case, candidate: Measurement, current: Measurement) -> Verdict:
    """The candidate arm against the current arm on this box: greedy tokens recorded (``token_match``), then the
    candidate/current ratio of each start pair (``perfgate.measuring.judge.paired``, with the gate's practical floor
    for decode tok/s, 0.5 %); ``pair_ratio``, its CI, ``pair_n`` and ``pair_decision`` recorded."""
    from perfgate.measuring.judge import Decision, default_min_effect, paired
    from perfgate.measuring.metrics import paired_ratios, token_match

    st = perf.state
    cand = st.settings.candidate
    own = st.config_for(case)
    if cand is None or not on_candidate_arm(st, case, candidate) or current.config_key != own.key:
        raise TypeError(f"perf_compare(): a {KIND} record compares its config on the candidate stack with the same "
                        f"config on the current one ({own.name}): perf_compare(measure(perf_candidate), "
                        f"measure(perf_server)); got {candidate.config_name} and {current.config_name}")
    if current.tok_s is None or candidate.tok_s is None:
        arm = "candidate" if candidate.tok_s is None else "current"
        return Verdict(outcome="fail", category="crash", message=f"stack-pair: no successful request on the {arm} arm")
    tm = token_match(candidate.outputs, current.outputs)
    if tm is not None:
        perf.record("token_match", tm)
    ratios = paired_ratios(candidate, current) or [candidate.tok_s.median / current.tok_s.median]
    w = st.settings.workload(st.profile.workload_for(case.mode))
    # the gate's practical floor for decode tok/s (0.5 %), not the profile's within-session min_effect: a paired
    # run is a stack gate, and it is the one that can see a regression that small (docs/gate.md)
    j = paired(ratios, min_effect=default_min_effect("tok_s"), confidence=w.confidence)
    assert j.ratio is not None and j.ci is not None
    for k, val in {PAIR_RATIO: j.ratio, PAIR_CI_LOW: j.ci[0], PAIR_CI_HIGH: j.ci[1], PAIR_N: j.n,
                   PAIR_DECISION: str(j.decision)}.items():
        perf.record(k, val)
    desc = (f"stack-pair {case.mode}: candidate ({cand.spec}) {candidate.tok_s.median:.1f} vs current "
            f"{current.tok_s.median:.1f} tok/s, paired {j.detail}")
    if j.decision is Decision.REGRESSED:
        return Verdict(outcome="fail", category="slower-than-baseline",
                       message=f"{desc}: the candidate stack is slower by {pct(1 - j.ratio)}")
    if j.decision in (Decision.SAME, Decision.IMPROVED):
        return Verdict(outcome="pass", message=f"{desc}: {j.decision}")
    more = "" if j.n >= 2 else " (one start per arm: the spread is the judge's prior; use --perfgate-starts 3)"
    return Verdict(outcome="inconclusive", message=f"inconclusive: undecided: {desc}; {j.needs}{more}")


def candidate_stack_properties(st: PerfgateState, config: ServerConfig) -> dict[str, str]:
    """``candidate.stack.<key>`` for each piece of the candidate arm's stack (``config``, on the candidate arm:
    :func:`perfgate.plugin.arms.arm_stack`) that differs from the current's."""
    cur = st.stack.as_properties()
    other = arm_stack(st, config).as_properties()
    return {CANDIDATE_PREFIX + k: v for k, v in other.items() if cur.get(k) != v}
