"""The built-in checks of a record, with the profile's context: speculation and variants
against the baseline measured in the same run, the concurrency sweep, preflight and controlled comparisons.

Each returns a :class:`~perfgate.measuring.verdict.Verdict` (or concludes the record itself where the check ends it:
``preflight``, ``controlled``); the verdict rules live in :mod:`perfgate.measuring.verdict`, this module gives them
the profile's limits and records the numbers they used. :class:`Checks` is mixed into
:class:`perfgate.plugin.runner.PerfRun`, whose ``record``/``conclude`` it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfgate.kinds import FLOOR
from perfgate.measuring.checks import (
    confounded_verdict,
    not_exercised_verdict,
    speculation_explained,
    sweep_verdict,
    token_match_failure,
)
from perfgate.measuring.metrics import Measurement, token_match
from perfgate.measuring.verdict import (
    Verdict,
    compare_verdict,
    within_noise_or_faster,
)
from perfgate.plugin.pool import pool_of
from perfgate.record import Case

if TYPE_CHECKING:
    from collections.abc import Collection

    from perfgate.measuring.judge import Sequential
    from perfgate.plugin.state import PerfgateState
    from perfgate.profiles import Expectation
    from perfgate.profiles.config import ServerConfig

__all__ = ["Checks"]


class Checks:
    """The checks of :class:`perfgate.plugin.runner.PerfRun` (``perf.compare(...)``, ``perf.sweep_verdict(...)``)."""

    state: PerfgateState

    def record(self, name: str, value: object) -> None:  # pragma: no cover - PerfRun's
        raise NotImplementedError

    def conclude(self, case: Case, v: Verdict, *, decides: Collection[str] | None = None,
                 default: Expectation | None = None) -> None:  # pragma: no cover - PerfRun's
        raise NotImplementedError

    def _identity(self, case: Case, config: ServerConfig | None = None) -> None:  # pragma: no cover - PerfRun's
        raise NotImplementedError

    def plan(self) -> Sequential:  # pragma: no cover - PerfRun's
        raise NotImplementedError

    @property
    def profile(self) -> Any:
        return self.state.profile

    def compare(self, case: Case, candidate: Measurement, baseline: Measurement, *, what: str) -> Verdict:
        """Candidate vs the baseline measured in this run: outputs first, then speed."""
        w = self.profile.workload
        tm = token_match(candidate.outputs, baseline.outputs)
        if tm is not None:
            self.record("token_match", tm)
            wrong = token_match_failure(tm, w.token_match_min, what=what)
            if wrong is not None:
                return wrong
        # the session's sequential plan: a paired comparison judged again as start pairs are added keeps its
        # false-alarm rate (perfgate.measuring.judge.Sequential)
        from perfgate.profiles.noise import prior_cv

        prior = prior_cv("tok_s", "starts", simulated=self.profile.simulated, gpu=str(self.state.stack.gpu))
        v = compare_verdict(candidate, baseline, confidence=w.confidence, max_cv=w.max_cv, what=what,
                            min_effect=w.min_effect, plan=self.plan(), prior_cv=prior)
        for k, val in v.properties.items():
            self.record(k, val)
        return v

    def sweep_verdict(self, m: Measurement) -> Verdict:
        """Record ``c<N>_output_tok_s`` and TTFT/ITL p50/p99 per level; fail if a level lost requests
        (:func:`perfgate.measuring.checks.sweep_verdict`)."""
        v = sweep_verdict(m)
        for k, val in v.properties.items():
            self.record(k, val)
        return v

    def explain_speculation(self, case: Case, spec: Measurement, base: Measurement, v: Verdict) -> Verdict:
        """Record the cost model's breakdown (:func:`perfgate.measuring.checks.speculation_explained`); a slower
        speculation says what it would take."""
        props, v = speculation_explained(self.profile, case.mode, spec, base, v,
                                         step_profile=self.state.ledger.step_profile(self.state.config_for(case).key))
        for k, val in props.items():
            self.record(k, val)
        return v

    def variant_verdict(self, case: Case, m: Measurement, base: Measurement) -> Verdict:
        v = within_noise_or_faster(self.compare(case, m, base, what=f"{case.variant} in {case.mode}"))
        return self._unexercised(case, m, v)

    def _unexercised(self, case: Case, m: Measurement, v: Verdict) -> Verdict:
        """A variant meant for NCCL's all-reduce whose all-reduces NCCL never saw tested nothing: inconclusive.

        Whatever its speed (same, faster or slower), the difference is not the variant's doing, so it
        is neither a pass nor a slower-than-baseline failure. Decided only where NCCL logged its calls.
        """
        from perfgate.serving.evidence import not_exercised, read_evidence

        variant = self.state.variants.get(case.variant) if case.variant else None
        if variant is None or not variant.backend or not m.log_path or v.category == "wrong-output":
            return v
        why = not_exercised(variant.backend, read_evidence(m.log_path))
        if why is None:
            return v
        return not_exercised_verdict(v, variant=str(case.variant), backend=variant.backend, why=why)

    def preflight(self, case: Case) -> None:
        """Before any launch: SGLang's own parser on this record's flags (bad-flag record) and the variant's
        required packages (missing-dependency record); real engine only."""
        config = self.state.config_for(case)
        v = pool_of(self.state).launch_problem(config)
        if v is not None:
            self._identity(case, config)
            self.conclude(case, v)

    def controlled(self, case: Case) -> None:
        """A variant's config may differ from the baseline's only in the keys it declares."""
        from perfgate.profiles.config import confounders

        cand = self.state.config_for(case)
        ref = self.state.config_for(type(case)(case.profile, FLOOR, case.mode, None))
        bad = confounders(cand, ref)
        if bad:
            self._identity(case, cand)
            self.conclude(case, confounded_verdict(str(case.variant), case.mode, cand.settings(), ref.settings(), bad))
