"""The paired stack comparison (record kind ``stack-pair``): the current stack against a candidate on one box.

The strongest way to gate a stack upgrade (issue 22): both stacks in one session on one machine, config by
config, their server starts interleaved and their order alternated (current 1, candidate 1, candidate 2, current 2, ...:
``--perfgate-starts N``, at least 2 recommended), and the verdict from the candidate/current ratio of each
start pair (``perfgate.measuring.judge.paired``, with the judge's practical floor for throughput, 0.5 %), so the
machine's own offset, which a comparison of two reports from two machines cannot tell from a regression,
cancels. The candidate arm is ``--perfgate-candidate SPEC``
(:func:`perfgate.profiles.settings.parse_candidate`): its server runs with another Python (and its SGLang), extra
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

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from perfgate.categories import Outcome
from perfgate.kinds import STACK_PAIR
from perfgate.measuring.verdict import Verdict
from perfgate.record import CANDIDATE, CANDIDATE_PREFIX, Case, case_of
from perfgate.serving.arms import arm_stack

if TYPE_CHECKING:
    from perfgate.measuring.metrics import Measurement
    from perfgate.plugin.runner import PerfRun
    from perfgate.plugin.state import PerfgateState
    from perfgate.profiles import Workload
    from perfgate.profiles.config import ServerConfig

__all__ = ["CandidateServer", "candidate_of", "measure_candidate", "on_candidate_arm", "stack_pair_verdict",
           "candidate_stack_properties", "KIND", "DECIDES"]

KIND = STACK_PAIR  # perfgate.kinds
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


def stack_pair_verdict(perf: PerfRun, case: Case, candidate: Measurement, current: Measurement) -> Verdict:
    """The candidate arm against the current arm on this box (:func:`perfgate.measuring.stackpair.stack_pair_verdict`
    at the look of the session's sequential plan, with the workload's confidence and the profile's noise priors),
    its properties recorded at each look. Undecided on decode tok/s carries :attr:`Verdict.decision` so that
    :mod:`perfgate.plugin.compare` adds start pairs while the budget lasts."""
    from perfgate.measuring import stackpair
    from perfgate.measuring.starts import pairs_level
    from perfgate.profiles.noise import prior_cv

    st = perf.state
    cand = st.settings.candidate
    own = st.config_for(case)
    if cand is None or not on_candidate_arm(st, case, candidate) or current.config_key != own.key:
        raise TypeError(f"perf_compare(): a {KIND} record compares its config on the candidate stack with the same "
                        f"config on the current one ({own.name}): perf_compare(measure(perf_candidate), "
                        f"measure(perf_server)); got {candidate.config_name} and {current.config_name}")
    w = st.settings.workload(st.profile.workload_for(case.mode))
    simulated, gpu = st.profile.simulated, str(st.stack.gpu)
    level = pairs_level(candidate, current)
    v = stackpair.stack_pair_verdict(candidate, current, mode=case.mode, spec=cand.spec, confidence=w.confidence,
                                     plan=perf.plan(),
                                     prior_cv=lambda metric: prior_cv(metric, level, simulated=simulated, gpu=gpu),
                                     measured=measured_noise(perf, own.key, str(level)), floors=st.min_effect)
    for k, val in v.properties.items():
        perf.record(k, val)
    # recorded at this look; the record concludes without them, so that the pooled starts' values recorded after
    # the last look (perfgate.plugin.compare.until_decided) stand
    return replace(v, properties={})


def measured_noise(perf: PerfRun, config: str, level: str) -> dict[str, tuple[float, float]]:
    """One start's noise (and its degrees of freedom) per judged values name, from the paired runs of
    ``--perfgate-noise-from`` (else this box's earlier ones perfgate kept: perfgate.report.pairnoise.kept_reports)
    like this one (perfgate.report.pairnoise.Match: the config, the pairing ``level``, this
    machine, the same server CPUs): measured once per config and level (the reports do not change during the session)
    and said on the terminal then, with what was left out and why. Empty without the option."""
    from perfgate.host.affinity import cpus_text
    from perfgate.record import MACHINE_ID
    from perfgate.report.junit_read import read_reports
    from perfgate.report.pairnoise import NOISE_AUTO_ENV, Match, kept_reports, noise_auto, pair_noise

    st = perf.state
    given = st.settings.noise_from
    sources = list(given) or (kept_reports(st.log_root) if noise_auto() else [])
    if not sources:
        return {}
    if (config, level) not in st.noise_measured:
        cpus = st.settings.server_cpus
        match = Match(config=config, level=level, machine=st.fingerprint.as_properties().get(MACHINE_ID),
                      server_cpus=cpus_text(cpus) if cpus else "")
        got = pair_noise(read_reports(sources), match)
        whence = ("--perfgate-noise-from" if given else
                  f"this box's earlier paired runs, {len(sources)} report(s) kept in {st.log_root / 'pairs'}; "
                  f"{NOISE_AUTO_ENV}=off judges on the priors")
        perf.servers.note(f"perfgate: noise measured on this machine ({level}, {whence}): {got.text(level)}",
                          live=True)
        st.noise_measured[(config, level)] = got.at(level)
    return st.noise_measured[(config, level)]


def candidate_stack_properties(st: PerfgateState, config: ServerConfig) -> dict[str, str]:
    """``candidate.stack.<key>`` for each piece of the candidate arm's stack (``config``, on the candidate arm:
    :func:`perfgate.plugin.arms.arm_stack`) that differs from the current's."""
    cur = st.stack.as_properties()
    other = arm_stack(st, config).as_properties()
    return {CANDIDATE_PREFIX + k: v for k, v in other.items() if cur.get(k) != v}
