"""The paired stack comparison (record kind ``stack-pair``): the current stack against a candidate on one box.

The strongest way to gate a stack upgrade (issue 22): both stacks in one session on one machine, config by
config, their server starts interleaved and their order alternated (current 1, candidate 1, candidate 2, current 2, ...:
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
pass: same or improved; fail (``slower-than-baseline``): regressed (on any metric); inconclusive: undecided,
saying how many interleaved start pairs would decide it. Pairs are added while decode tok/s is undecided, and
while another metric is undecided that the budget's pairs would decide (a latency regression seen but not yet
shown). With one start per arm the pair's spread is the judge's prior.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome
from perfgate.measuring.outcomes import Claim, outcome_of
from perfgate.measuring.verdict import Verdict, judged_text, pct
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
    START_VALUES,
    Case,
    case_of,
)

if TYPE_CHECKING:
    from perfgate.measuring.judge import Judgement
    from perfgate.measuring.metrics import Measurement
    from perfgate.plugin.runner import PerfRun
    from perfgate.plugin.state import PerfgateState
    from perfgate.profiles import Workload
    from perfgate.profiles.config import ServerConfig

__all__ = ["CandidateServer", "candidate_of", "measure_candidate", "on_candidate_arm", "stack_pair_verdict",
           "pair_judgements", "candidate_stack_properties", "KIND", "DECIDES", "PAIR_METRICS", "PRIMARY"]

KIND = STACK_PAIR  # perfgate.plugin.kinds
#: the categories a stack-pair record decides (an expectation naming another does not apply to it)
DECIDES = ("slower-than-baseline", "crash", "wrong-output")


@dataclass(frozen=True)
class CandidateServer:
    """The record's own config on the candidate stack (``perf_candidate``; ``--perfgate-candidate SPEC``).

    Its server is not started for it: ``measure(perf_candidate)`` measures this record's own config first, then
    the candidate arm, their starts interleaved (current 1, candidate 1, candidate 2, current 2, ... with
    ``--perfgate-starts N``: the order alternated, ``pair_order``), and
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
        perf.conclude(case, Verdict(outcome=Outcome.SKIP, message=why), decides=DECIDES)
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


#: the metrics a stack pair judges, each against its own noise (perfgate.profiles.noise); decode tok/s decides
#: when the comparison has enough pairs (the sequential rule's target), a regression on any of them fails it
PAIR_METRICS = ("tok_s", "output_tok_s", "ttft_ms", "itl_ms", "ttft_ms_p99", "itl_ms_p99", "accept_len")
#: the metric the record concludes on; more start pairs are collected while it is undecided, and while another
#: metric of PAIR_METRICS is undecided that the budget's pairs would decide at the spread seen (Verdict.wants_more)
PRIMARY = "tok_s"


def _start_values(m: Measurement, metric: str) -> list[float]:
    """The per-start values of ``metric`` (:meth:`Measurement.start_values`; the acceptance length is no Stat)."""
    if metric == "accept_len":
        return [x.accept_len for x in (m.starts or (m,)) if x.accept_len]
    return [v for v in m.start_values(metric) if v > 0]


def pair_judgements(perf: PerfRun, case: Case, candidate: Measurement, current: Measurement) -> dict[str, Judgement]:
    """Each of :data:`PAIR_METRICS` both arms carry, judged on its candidate/current start-pair ratios at this
    look of the session's plan, against its own prior (perfgate.profiles.noise) and practical floor. Decode
    tok/s, the sequential rule's target, has the whole false-alarm rate of a look; the other metrics share one
    more (each at its share: a Bonferroni split), so an identical candidate fails the record at most twice the
    workload's ``1 - confidence`` in all (docs/gate.md "Deciding")."""
    from perfgate.measuring.judge import default_min_effect, paired
    from perfgate.measuring.metrics import METRICS, RECORD_METRICS
    from perfgate.profiles.noise import prior_cv

    st = perf.state
    w = st.settings.workload(st.profile.workload_for(case.mode))
    series = {}
    for metric in PAIR_METRICS:
        a, b = _start_values(current, metric), _start_values(candidate, metric)
        if a and b and len(a) == len(b):
            series[metric] = [y / x for x, y in zip(a, b)]
    out = {}
    for metric, ratios in series.items():
        conf = w.confidence if metric == PRIMARY else 1 - (1 - w.confidence) / max(1, len(series) - 1)
        spec = METRICS.get(metric) or RECORD_METRICS[metric]
        out[metric] = paired(ratios, higher_is_better=spec.higher_is_better, metric=metric,
                             min_effect=default_min_effect(metric, higher_is_better=spec.higher_is_better),
                             confidence=conf, plan=perf.plan(),
                             prior_cv=prior_cv(metric, "starts", simulated=st.profile.simulated))
    return out


def stack_pair_verdict(perf: PerfRun, case: Case, candidate: Measurement, current: Measurement) -> Verdict:
    """The candidate arm against the current arm on this box: greedy tokens recorded (``token_match``), then every
    metric of :data:`PAIR_METRICS` on the candidate/current ratio of each start pair
    (``perfgate.measuring.judge.paired`` at the look of the session's sequential plan, each metric against its own
    noise and practical floor, 0.5 % for decode tok/s); ``pair_ratio``, its CI, ``pair_n`` and ``pair_decision``
    (decode tok/s) and ``pair.<metric>.*`` recorded, with both arms' per-start values. Undecided on decode tok/s carries
    :attr:`Verdict.decision` so that :mod:`perfgate.plugin.compare` adds start pairs while the budget lasts."""
    from perfgate.measuring.judge import Decision
    from perfgate.measuring.metrics import token_match

    st = perf.state
    cand = st.settings.candidate
    own = st.config_for(case)
    if cand is None or not on_candidate_arm(st, case, candidate) or current.config_key != own.key:
        raise TypeError(f"perf_compare(): a {KIND} record compares its config on the candidate stack with the same "
                        f"config on the current one ({own.name}): perf_compare(measure(perf_candidate), "
                        f"measure(perf_server)); got {candidate.config_name} and {current.config_name}")
    if current.tok_s is None or candidate.tok_s is None:
        arm = "candidate" if candidate.tok_s is None else "current"
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH,
                       message=f"stack-pair: no successful request on the {arm} arm")
    tm = token_match(candidate.outputs, current.outputs)
    if tm is not None:
        perf.record("token_match", tm)
    js = pair_judgements(perf, case, candidate, current)
    j = js[PRIMARY]
    assert j.ratio is not None and j.ci is not None
    for k, val in {PAIR_RATIO: j.ratio, PAIR_CI_LOW: j.ci[0], PAIR_CI_HIGH: j.ci[1], PAIR_N: j.n,
                   PAIR_DECISION: str(j.decision)}.items():
        perf.record(k, val)
    for metric, mj in js.items():
        assert mj.ratio is not None and mj.ci is not None
        perf.record(f"pair.{metric}.ratio", mj.ratio)
        perf.record(f"pair.{metric}.ci_low", mj.ci[0])
        perf.record(f"pair.{metric}.ci_high", mj.ci[1])
        perf.record(f"pair.{metric}.decision", str(mj.decision))
        if len(current.starts) >= 2:
            perf.record(f"{START_VALUES}.{metric}", ",".join(f"{v:.6g}" for v in _start_values(current, metric)))
            perf.record(f"{CANDIDATE_PREFIX}{START_VALUES}.{metric}",
                        ",".join(f"{v:.6g}" for v in _start_values(candidate, metric)))
    desc = (f"stack-pair {case.mode}: candidate ({cand.spec}) {candidate.tok_s.median:.1f} vs current "
            f"{current.tok_s.median:.1f} tok/s, paired {j.detail}")
    others = "; ".join(f"{m} ×{x.ratio:.4f} [{x.ci[0]:.4f}, {x.ci[1]:.4f}] {x.decision}"
                       for m, x in js.items() if m != PRIMARY and x.ratio is not None and x.ci is not None)
    tail = f"; {others}" if others else ""
    # more evidence can be had: metrics undecided that the budget's pairs would decide at the spread seen
    budget = perf.plan().max_pairs
    wants = ",".join(m for m, x in js.items() if m != PRIMARY and x.decision is Decision.UNDECIDED
                     and x.pairs_needed is not None and x.pairs_needed <= budget)
    worse = [m for m, x in js.items() if outcome_of(x.decision, Claim.NOT_SLOWER) is Outcome.FAIL]
    if worse:
        what = ", ".join(f"{m} by {pct(abs(1 - r))}" for m in worse if (r := js[m].ratio) is not None)
        return Verdict(outcome=Outcome.FAIL, category=Category.SLOWER_THAN_BASELINE, decision=Decision.REGRESSED,
                       judged=judged_text(j.ratio, j.ci),
                       message=f"{desc}: the candidate stack is worse on {what}{tail}")
    if outcome_of(j.decision, Claim.NOT_SLOWER) is Outcome.PASS:
        return Verdict(outcome=Outcome.PASS, message=f"{desc}: {j.decision}{tail}", decision=j.decision,
                       judged=judged_text(j.ratio, j.ci), wants_more=wants)
    more = "" if j.n >= 2 else " (one start per arm: the spread is the judge's prior; use --perfgate-starts 2)"
    return Verdict(outcome=Outcome.INCONCLUSIVE, decision=j.decision, judged=judged_text(j.ratio, j.ci),
                   wants_more=wants, message=f"inconclusive: undecided: {desc}; {j.needs}{more}{tail}")


def candidate_stack_properties(st: PerfgateState, config: ServerConfig) -> dict[str, str]:
    """``candidate.stack.<key>`` for each piece of the candidate arm's stack (``config``, on the candidate arm:
    :func:`perfgate.plugin.arms.arm_stack`) that differs from the current's."""
    cur = st.stack.as_properties()
    other = arm_stack(st, config).as_properties()
    return {CANDIDATE_PREFIX + k: v for k, v in other.items() if cur.get(k) != v}
