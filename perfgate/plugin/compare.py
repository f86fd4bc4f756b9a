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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfgate.plugin.kinds import Compares, compares_of, kind_of

if TYPE_CHECKING:
    from perfgate.measuring.metrics import Measurement
    from perfgate.plugin.runner import PerfRun
    from perfgate.profiles.config import ServerConfig
    from perfgate.record import Case

__all__ = ["BaselineServer", "Compare", "baseline_of"]


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
    """The baseline of ``case``'s record, as the kind registry says (perfgate.plugin.kinds ``compares``); a user's
    kind: a variant's own mode for a variant, the profile's baseline mode for a mode."""
    own = Compares.OWN_MODE in compares_of(case.kind, variant=case.variant is not None, fixtures=("perf_baseline",))
    base = case.baseline(case.mode if own else perf.state.profile.baseline_mode())
    return BaselineServer(mode=base.mode, config=perf.state.config_for(base), case=base)


class Compare:
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
    whatever the record's kind. Through the profile's expectations; this ends the test: call it last.
    """

    def __init__(self, perf: PerfRun) -> None:
        self._perf = perf

    def __call__(self, m: Measurement, base: Measurement) -> None:
        perf = self._perf
        from perfgate.record import case_of

        case = case_of(perf.item)
        if case is None:
            raise RuntimeError("perf_compare() needs the test to use perf_server (it names the mode and variant)")
        from perfgate.plugin.stackpair import DECIDES, on_candidate_arm, stack_pair_verdict

        k = kind_of(case.kind)
        if on_candidate_arm(perf.state, case, m) or (k is not None and k.compares is Compares.CANDIDATE):
            return perf.conclude(case, stack_pair_verdict(perf, case, m, base), decides=DECIDES)
        if case.variant:
            v = perf.variant_verdict(case, m, base)
        else:
            v = perf.compare(case, m, base, what=f"{case.mode} vs {base.config_name}")
            if perf.state.profile.modes[case.mode].speculative:
                v = perf.explain_speculation(case, m, base, v)
        perf.conclude(case, v)
