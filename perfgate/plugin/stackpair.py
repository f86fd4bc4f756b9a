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

pass: same or improved; fail (``slower-than-baseline``): regressed; inconclusive: undecided, saying how many
interleaved start pairs would decide it. With one start per arm the pair's spread is the judge's prior.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfgate.measuring.verdict import Verdict, pct
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
)

if TYPE_CHECKING:
    from perfgate.plugin.runner import PerfRun
    from perfgate.plugin.state import PerfgateState

__all__ = ["stack_pair_verdict", "candidate_stack_properties", "KIND"]

KIND = STACK_PAIR  # perfgate.plugin.kinds
#: the categories a stack-pair record decides (an expectation naming another does not apply to it)
DECIDES = ("slower-than-baseline", "crash", "wrong-output")


def stack_pair_verdict(perf: PerfRun, case: Case) -> Verdict:
    """Measure ``case``'s config on both arms, starts interleaved, and judge the paired ratio."""
    from perfgate.measuring.judge import Decision, default_min_effect, paired
    from perfgate.measuring.metrics import paired_ratios, token_match

    st = perf.state
    cand = st.settings.candidate
    if cand is None:
        return Verdict(outcome="skip", message=(
            "stack-pair: no candidate stack to compare with; pass --perfgate-candidate SPEC (python=/other/venv/"
            "bin/python, env.NAME=VALUE, sim-stack=KEY=VER;...) and --perfgate-starts 3 to measure this config "
            "under both stacks on this box, starts interleaved (docs/gate.md)"))
    if perf.servers.attached:
        return Verdict(outcome="skip", message="stack-pair: an attached server (--perfgate-url) has one stack; "
                                               "launch the servers to compare two")
    perf.record(CANDIDATE, cand.spec)
    for k, v in candidate_stack_properties(st).items():
        perf.record(k, v)
    current = perf.measure(case)
    other = perf.measure(case.on_candidate(), primary=False)
    perf._record_measurement(other, prefix=CANDIDATE_PREFIX)
    if current.tok_s is None or other.tok_s is None:
        bad = other if other.tok_s is None else current
        return Verdict(outcome="fail", category="crash",
                       message=f"stack-pair: no successful request on the {_arm(bad, current)} arm")
    tm = token_match(other.outputs, current.outputs)
    if tm is not None:
        perf.record("token_match", tm)
    ratios = paired_ratios(other, current) or [other.tok_s.median / current.tok_s.median]
    w = st.settings.workload(st.profile.workload_for(case.mode))
    # the gate's practical floor for decode tok/s (0.5 %), not the profile's within-session min_effect: a paired
    # run is a stack gate, and it is the one that can see a regression that small (docs/gate.md)
    j = paired(ratios, min_effect=default_min_effect("tok_s"), confidence=w.confidence)
    assert j.ratio is not None and j.ci is not None
    for k, val in {PAIR_RATIO: j.ratio, PAIR_CI_LOW: j.ci[0], PAIR_CI_HIGH: j.ci[1], PAIR_N: j.n,
                   PAIR_DECISION: str(j.decision)}.items():
        perf.record(k, val)
    desc = (f"stack-pair {case.mode}: candidate ({cand.spec}) {other.tok_s.median:.1f} vs current "
            f"{current.tok_s.median:.1f} tok/s, paired {j.detail}")
    if j.decision is Decision.REGRESSED:
        return Verdict(outcome="fail", category="slower-than-baseline",
                       message=f"{desc}: the candidate stack is slower by {pct(1 - j.ratio)}")
    if j.decision in (Decision.SAME, Decision.IMPROVED):
        return Verdict(outcome="pass", message=f"{desc}: {j.decision}")
    more = "" if j.n >= 2 else " (one start per arm: the spread is the judge's prior; use --perfgate-starts 3)"
    return Verdict(outcome="inconclusive", message=f"inconclusive: undecided: {desc}; {j.needs}{more}")


def _arm(m: object, current: object) -> str:
    return "current" if m is current else "candidate"


def candidate_stack_properties(st: PerfgateState) -> dict[str, str]:
    """``candidate.stack.<key>`` for each piece of the candidate's stack that differs from the current's."""
    cand = st.settings.candidate
    assert cand is not None
    cur = st.stack.as_properties()
    if st.profile.simulated:
        from perfgate import stack as sk

        hw = st.profile.engine.sim_hardware
        assert hw is not None
        over = sk.parse_overrides(",".join(x for x in (st.sim_stack, cand.sim_stack) if x))
        other = sk.simulated_stack(hw, over).as_properties()
    elif cand.python:
        from perfgate.engines.sglang import installed_sglang_version

        other = {**cur, "stack.sglang": installed_sglang_version(cand.python) or "unknown"}
    else:
        other = cur
    return {CANDIDATE_PREFIX + k: v for k, v in other.items() if cur.get(k) != v}
