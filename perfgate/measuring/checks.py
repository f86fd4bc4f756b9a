"""The judgements of the built-in checks of a record, as pure functions: numbers and the profile's limits in, a
:class:`~perfgate.measuring.verdict.Verdict` with its properties out.

perfgate.plugin.checks gives them the profile's context and records what they return; a speculation's or a
variant's speed is :func:`perfgate.measuring.verdict.compare_verdict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from perfgate.categories import TRACE_FAMILIES, Category, Outcome
from perfgate.measuring.metrics import Measurement
from perfgate.measuring.trace import StepProfile
from perfgate.measuring.verdict import Verdict

if TYPE_CHECKING:
    from perfgate.profiles import Profile

__all__ = ["sweep_verdict", "token_match_failure", "not_exercised_verdict", "confounded_verdict", "profile_verdict",
           "speculation_explained", "SWEEP_FIGURES"]

#: the figures a concurrency sweep records per level, as ``c<N>_<figure>``
SWEEP_FIGURES = ("output_tok_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99")


def sweep_verdict(m: Measurement) -> Verdict:
    """A concurrency sweep's record: ``c<N>_output_tok_s`` and TTFT/ITL p50/p99 per level in its properties; a
    crash if the sweep has no points or a level lost requests."""
    props: dict[str, object] = {}
    for pt in m.sweep:
        for name in SWEEP_FIGURES:
            value = getattr(pt, name)
            if value is not None:
                props[f"c{pt.concurrency}_{name}"] = value
    if not m.sweep:
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH, properties=props,
                       message="the concurrency sweep produced no points")
    failed = {pt.concurrency: pt.failures for pt in m.sweep if pt.failures}
    if failed:
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH, properties=props,
                       message="requests failed in the concurrency sweep: " + ", ".join(
                           f"{n} at concurrency {c}" for c, n in failed.items()))
    levels = ", ".join(f"{pt.concurrency}: {pt.output_tok_s:.1f}" for pt in m.sweep if pt.output_tok_s)
    return Verdict(outcome=Outcome.PASS, message=f"output tok/s by concurrency {levels}", properties=props)


def token_match_failure(tm: float, minimum: float, *, what: str) -> Verdict | None:
    """``wrong-output`` where fewer than ``minimum`` of the baseline's greedy tokens matched (speculation and a
    variant must be lossless); None where enough did."""
    if tm >= minimum:
        return None
    return Verdict(outcome=Outcome.FAIL, category=Category.WRONG_OUTPUT, properties={"token_match": tm},
                   message=f"{what}: only {tm:.1%} of the baseline's greedy tokens matched (threshold "
                           f"{minimum:.0%}): the output changed")


def not_exercised_verdict(v: Verdict, *, variant: str, backend: str, why: str) -> Verdict:
    """A variant meant for ``backend`` whose log shows it never ran (``why``) tested nothing: whatever its speed,
    the difference is not the variant's doing, so it is inconclusive (``not-exercised``), keeping ``v``'s
    properties and saying what was measured."""
    return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOT_EXERCISED, properties=v.properties,
                   message=f"inconclusive: not exercised: {variant} is meant for {backend}, "
                           f"but {why}; measured: {v.message}")


def confounded_verdict(variant: str, mode: str, candidate: Mapping[str, object], reference: Mapping[str, object],
                       keys: set[str]) -> Verdict:
    """A variant's config differs from its baseline's (``candidate`` and ``reference``: their settings) in
    ``keys``, which the variant does not declare: inconclusive (``confounded``)."""
    diffs = ", ".join(f"{k}: {reference.get(k)!r} -> {candidate.get(k)!r}" for k in sorted(keys))
    return Verdict(
        outcome=Outcome.INCONCLUSIVE, category=Category.CONFOUNDED,
        message=(f"inconclusive: confounded: {variant} differs from the {_baseline_of(mode)} in "
                 f"{', '.join(sorted(keys))}, which the variant does not declare "
                 f"({diffs}); make the runs differ only in the variant's keys"))


def profile_verdict(prof: StepProfile, *, tp: int, backend: str = "", variant: str | None = None) -> Verdict:
    """The ``profile`` record's verdict from its step profile (``tp``: the config's tensor parallel size; ``backend``:
    the all-reduce family the variant is meant to exercise): pass, ``fallback`` where the trace shows another
    family carrying the all-reduces, ``not-exercised`` at tensor parallel 1 or with no all-reduce in the step."""
    what = "verify pass" if prof.speculative else "decode step"
    summary = (f"{prof.allreduce_count:g} all-reduce(s) per {what}, {prof.allreduce_us / 1000:.2f} of "
               f"{prof.step_us / 1000:.2f} ms ({prof.allreduce_share:.0%}), backend {prof.allreduce_backend}")
    if prof.skew_us > 0:
        summary += f", rank skew {prof.skew_us / 1000:.2f} ms"
    if backend in TRACE_FAMILIES and variant:
        if tp <= 1:
            return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOT_EXERCISED,
                           message=f"{variant} is meant to exercise {backend}, but at tensor parallel 1 there is no "
                                   f"all-reduce to carry ({summary})")
        if prof.allreduce_count == 0:
            return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOT_EXERCISED,
                           message=f"{variant}: no all-reduce in the profiled steps, so {backend} carried none")
        if prof.allreduce_backend != backend:
            return Verdict(outcome=Outcome.FAIL, category=Category.FALLBACK,
                           message=f"{variant} asks for {backend}, but its trace shows {prof.allreduce_backend} "
                                   f"carrying the all-reduces: {summary}")
    return Verdict(outcome=Outcome.PASS, message=summary)


def _baseline_of(mode: str) -> str:
    """'the baseline' for the mode named baseline, 'the eagle3 baseline' for others."""
    return "baseline" if mode == "baseline" else f"{mode} baseline"


def speculation_explained(p: Profile, mode: str, spec: Measurement, base: Measurement, v: Verdict, *,
                          step_profile: StepProfile | None = None) -> tuple[dict[str, object], Verdict]:
    """A speculative mode's verdict against the baseline, explained by the cost model: the breakdown's properties
    and the verdict, whose message says what it would take when the speculation is slower. ``step_profile``: the
    config's, when the session took one (the all-reduces per verify pass as SGLang's own trace measured them,
    not modelled). Nothing to explain without both speeds and an acceptance length: ({}, ``v``)."""
    if spec.tok_s is None or base.tok_s is None or not spec.accept_len:
        return {}, v
    from perfgate.measuring import costmodel

    verify_tokens = int(str(p.modes[mode].flags.get("speculative-num-draft-tokens", 0) or 0)) or None
    lat = costmodel.latency_interpolator(p.model.allreduce_latency_us) if p.model.allreduce_latency_us else None
    prof = step_profile
    measured = (prof.allreduce_count, prof.allreduce_us / 1000.0) if prof is not None and prof.allreduce_count \
        else None
    bd = costmodel.spec_breakdown(
        baseline_tok_s=base.tok_s.median, spec_tok_s=spec.tok_s.median, accept_len=spec.accept_len,
        layers=p.model.layers, allreduces_per_layer=p.model.allreduces_per_layer, hidden=p.model.hidden,
        verify_tokens=verify_tokens, allreduce_latency_us=lat, measured_allreduce=measured,
    )
    if v.outcome == "fail" and v.category == "slower-than-baseline":
        v = Verdict(outcome=v.outcome, category=v.category, message=f"{v.message}. {bd.what_it_would_take()}",
                    properties=v.properties)
    return dict(bd.as_properties()), v
