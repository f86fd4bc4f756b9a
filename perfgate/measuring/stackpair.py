"""The stack-pair record's judgement, pure: the candidate arm against the current arm on one box, on the
candidate/current ratio of each interleaved start pair (:func:`perfgate.measuring.judge.paired`), every metric
against its own noise and practical floor.

perfgate.plugin.stackpair checks that the two measurements are the record's config on the two arms and records
what :func:`stack_pair_verdict` returns; perfgate.plugin.compare adds start pairs while it is undecided.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from perfgate.categories import Category, Outcome, Why
from perfgate.host.conditions import RERUN_QUIET
from perfgate.measuring.judge import (
    Decision,
    Judgement,
    Sequential,
    default_min_effect,
    discounted,
    paired,
)
from perfgate.measuring.metrics import METRICS, RECORD_METRICS, Measurement, token_match
from perfgate.measuring.outcomes import Claim, outcome_of
from perfgate.measuring.starts import one_sided_single, pairs_level, part_values, trusted_pairs
from perfgate.measuring.ttft_parts import LEG_METRICS, part_of, said
from perfgate.measuring.verdict import Verdict, judged_text, pct
from perfgate.record import (
    CANDIDATE_PREFIX,
    PAIR_CI_HIGH,
    PAIR_CI_LOW,
    PAIR_DECISION,
    PAIR_DISTURBED,
    PAIR_N,
    PAIR_RATIO,
    PAIR_SHARED_LOAD,
    START_VALUES,
    TTFT_PROBE_MS,
    pair_of,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["PAIR_METRICS", "PRIMARY", "start_values", "values_name", "pair_judgements", "leg_floor",
           "metric_confidence",
           "stack_pair_verdict"]

#: the metrics a stack pair judges, each against its own noise (perfgate.profiles.noise); decode tok/s decides
#: when the comparison has enough pairs (the sequential rule's target), a regression on any of them fails it
PAIR_METRICS = ("tok_s", "output_tok_s", "ttft_ms", "itl_ms", "ttft_ms_p99", "itl_ms_p99", "accept_len")
#: the metric the record concludes on; more start pairs are collected while it is undecided, and while another
#: metric of PAIR_METRICS is undecided that the budget's pairs would decide at the spread seen (Verdict.wants_more)
PRIMARY = "tok_s"


def start_values(m: Measurement, metric: str) -> list[float]:
    """The per-start values of ``metric`` above zero that the pair judges (:meth:`Measurement.judged_values`: TTFT's
    from the probes where every start has them; the acceptance length is no Stat)."""
    if metric == "accept_len":
        return [x.accept_len for x in (m.starts or (m,)) if x.accept_len]
    if part := part_of(metric):  # each start's median of that leg over its probes, where every start has parts
        return [v for v in part_values(m).get(part, ()) if v > 0]
    return [v for v in m.judged_values(metric) if v > 0]


def values_name(m: Measurement, metric: str) -> str:
    """The name the record gives the per-start values of ``metric`` the pair judged: ``ttft_probe_ms`` for TTFT from
    the probes (the record's ``start_values.ttft_ms`` stays the trials', as its ``ttft_ms``), else the metric's."""
    return TTFT_PROBE_MS if m.probed(metric) else metric


def pair_judgements(candidate: Measurement, current: Measurement, *, confidence: float, plan: Sequential,
                    prior_cv: Callable[[str], float],
                    measured: Mapping[str, tuple[float, float]] | None = None,
                    floors: Mapping[str, float] | None = None) -> dict[str, Judgement]:
    """Each of :data:`PAIR_METRICS` both arms carry for the same starts, judged on its candidate/current start-pair
    ratios at this look of ``plan``, against its own prior (``prior_cv(metric)``: one start's noise) and practical
    floor. Decode tok/s, the sequential rule's target, has the whole false-alarm rate of a look (``1 -
    confidence``); the other metrics share one more (each at its share: a Bonferroni split), so an identical
    candidate fails the record at most twice ``1 - confidence`` in all (docs/gate.md "Deciding").

    ``measured``: one start's noise and its degrees of freedom measured by earlier paired runs on this machine,
    by the name of the values judged (:func:`values_name`; perfgate.report.pairnoise); where a metric has one, it
    stands in for the prior with those degrees of freedom, said as ``history`` in the judgement.

    ``floors``: the practical floor per metric (the project's ``[tool.perfgate.gate] min_effect``, as ``perfgate gate``
    judges with it; :func:`perfgate.measuring.judge.default_min_effect` where it names none).

    Where TTFT is judged on probes that both arms' servers stamped, each of its legs (perfgate.measuring.ttft_parts
    ``LEG_METRICS``: a change one calm leg carries is seen through the levels another leg carries) is judged too, on
    its own start-pair ratios against its own noise (``measured``'s, else the ttft-leg prior), its practical floor
    TTFT's expressed in the leg (2 % of the current arm's TTFT over the leg's share of it: a leg's change counts when
    it moves TTFT by 2 %); TTFT and its legs share TTFT's false-alarm share, half to TTFT and half to the legs."""
    series = {}
    for metric in PAIR_METRICS:
        a, b = start_values(current, metric), start_values(candidate, metric)
        if a and b and len(a) == len(b):
            series[metric] = [y / x for x, y in zip(a, b)]
    legs: dict[str, tuple[list[float], list[float]]] = {}
    if "ttft_ms" in series and current.probed("ttft_ms") and candidate.probed("ttft_ms"):
        for name in LEG_METRICS:
            a, b = start_values(current, name), start_values(candidate, name)
            if len(a) == len(b) == len(series["ttft_ms"]):
                legs[name] = (a, b)
    out = {}
    level = pairs_level(current, candidate)

    def judge(metric: str, ratios: list[float], conf: float, floor: float, higher_is_better: bool) -> Judgement:
        own = (measured or {}).get(values_name(current, metric))  # this box's noise, else the documented prior
        cv, df, name = (own[0], own[1], "history") if own else (prior_cv(metric), None, "prior")
        return paired(ratios, higher_is_better=higher_is_better, metric=metric, min_effect=floor, confidence=conf,
                      plan=plan, level=level, prior_cv=cv, prior_df=df, prior_name=name)

    for metric, ratios in series.items():
        conf = metric_confidence(metric, confidence, metrics=len(series), legs=len(legs))
        spec = METRICS.get(metric) or RECORD_METRICS[metric]
        out[metric] = judge(metric, ratios, conf,
                            default_min_effect(metric, higher_is_better=spec.higher_is_better, floors=floors),
                            spec.higher_is_better)
    ttft = statistics.median(start_values(current, "ttft_ms")) if legs else 0.0
    for name, (a, b) in legs.items():
        floor = leg_floor(statistics.median(a) / ttft, floors)
        out[name] = judge(name, [y / x for x, y in zip(a, b)],
                          metric_confidence(name, confidence, metrics=len(series), legs=len(legs)), floor, False)
    return out


def metric_confidence(metric: str, confidence: float, *, metrics: int, legs: int) -> float:
    """The confidence ``metric`` is judged at in a stack pair that judges ``metrics`` metrics of
    :data:`PAIR_METRICS` and ``legs`` TTFT legs (:func:`pair_judgements`): decode tok/s at ``confidence``; the other
    metrics split one more ``1 - confidence`` evenly (Bonferroni), and where legs are judged, TTFT's share is halved
    between TTFT and its legs, split evenly among them. benchmarks/sequential_power.py judges its rows at these."""
    if metric == PRIMARY:
        return confidence
    share = (1 - confidence) / max(1, metrics - 1)  # a metric's share of the record's second false-alarm budget
    if metric in LEG_METRICS:
        return 1 - share / 2 / max(1, legs)
    return 1 - share / 2 if metric == "ttft_ms" and legs else 1 - share


def leg_floor(share: float, floors: Mapping[str, float] | None = None) -> float:
    """The practical floor of a TTFT leg that is ``share`` of TTFT: TTFT's own (``floors``' where it names one),
    expressed in the leg (a leg's change counts when it moves TTFT by TTFT's floor)."""
    return default_min_effect("ttft_ms", higher_is_better=False, floors=floors) / share


def stack_pair_verdict(candidate: Measurement, current: Measurement, *, mode: str, spec: str, confidence: float,
                       plan: Sequential, prior_cv: Callable[[str], float],
                       measured: Mapping[str, tuple[float, float]] | None = None,
                       floors: Mapping[str, float] | None = None) -> Verdict:
    """The candidate arm (``spec``: the ``--perfgate-candidate`` SPEC) against the current arm of ``mode``'s config:
    greedy tokens (``token_match``), then every metric of :data:`PAIR_METRICS` (:func:`pair_judgements`).

    pass: same or improved on decode tok/s and no metric regressed; fail (``slower-than-baseline``): regressed on
    any metric; inconclusive: decode tok/s undecided, saying how many start pairs would decide it. Undecided
    carries :attr:`Verdict.decision`, and :attr:`Verdict.wants_more` names the other metrics undecided that
    ``plan``'s pairs would decide at the spread seen. Its properties: ``token_match``, ``pair_ratio``, its CI,
    ``pair_n`` and ``pair_decision`` (decode tok/s), ``pair.<metric>.*`` (its ``noise_source``: ``prior``,
    ``history`` where ``measured`` has it, :func:`pair_judgements`, and ``starts+`` either where the pairs' own
    spread joined it), and with two starts or more both arms' per-start values."""
    if current.tok_s is None or candidate.tok_s is None:
        arm = "candidate" if candidate.tok_s is None else "current"
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH,
                       message=f"stack-pair: no successful request on the {arm} arm")
    props: dict[str, object] = {}
    tm = token_match(candidate.outputs, current.outputs)
    if tm is not None:
        props["token_match"] = tm
    # a load on one arm of a pair fakes changes (and hides them): such pairs are left out; a load both arms saw
    # cancels in their ratio and stays (perfgate.host.conditions.pair_kind); a single start pair with one arm
    # disturbed decides nothing (perfgate.measuring.judge.discounted)
    all_current, all_candidate = current, candidate
    trusted = trusted_pairs(all_current, all_candidate)
    current, candidate, left_out = trusted.a, trusted.b, trusted.left_out
    assert current.tok_s is not None and candidate.tok_s is not None  # the pooled figures stay
    if left_out:
        props[PAIR_DISTURBED] = ",".join(map(str, left_out))
        if not current.starts:
            return Verdict(outcome=Outcome.INCONCLUSIVE, decision=Decision.UNDECIDED, properties=props,
                           why=Why.ONE_SIDED,
                           message=f"inconclusive: undecided: stack-pair {mode}: every start pair "
                                   f"({len(left_out)}) had one arm measured on a busy host and the other quiet; "
                                   f"{RERUN_QUIET}")
    if trusted.shared:
        props[PAIR_SHARED_LOAD] = ",".join(map(str, trusted.shared))
    js = pair_judgements(candidate, current, confidence=confidence, plan=plan, prior_cv=prior_cv, measured=measured,
                         floors=floors)
    single = one_sided_single(current, candidate, ("current", "candidate"))
    js = {metric: discounted(x, single) for metric, x in js.items()}
    j = js[PRIMARY]
    assert j.ratio is not None and j.ci is not None
    props.update({PAIR_RATIO: j.ratio, PAIR_CI_LOW: j.ci[0], PAIR_CI_HIGH: j.ci[1], PAIR_N: j.n,
                  PAIR_DECISION: str(j.decision)})
    for metric, mj in js.items():
        assert mj.ratio is not None and mj.ci is not None
        props[pair_of(metric, "ratio")] = mj.ratio
        props[pair_of(metric, "ci_low")] = mj.ci[0]
        props[pair_of(metric, "ci_high")] = mj.ci[1]
        props[pair_of(metric, "decision")] = str(mj.decision)
        props[pair_of(metric, "noise_source")] = mj.noise_source
        props[pair_of(metric, "min_effect")] = mj.min_effect  # the practical floor it was decided against
        if len(all_current.starts) >= 2:  # every start's values, disturbed or not: the record's evidence
            props[f"{START_VALUES}.{values_name(all_current, metric)}"] = ",".join(
                f"{v:.6g}" for v in start_values(all_current, metric))
            props[f"{CANDIDATE_PREFIX}{START_VALUES}.{values_name(all_candidate, metric)}"] = ",".join(
                f"{v:.6g}" for v in start_values(all_candidate, metric))
    desc = (f"stack-pair {mode}: candidate ({spec}) {candidate.tok_s.median:.1f} vs current "
            f"{current.tok_s.median:.1f} tok/s, paired {j.detail}")
    if trusted.said(len(all_current.starts)):
        desc += f" ({trusted.said(len(all_current.starts))})"
    others = "; ".join(f"{said(m)} {judged_text(x.ratio, x.ci)} {x.decision}"
                       for m, x in js.items() if m != PRIMARY and x.ratio is not None and x.ci is not None)
    tail = f"; {others}" if others else ""
    # more evidence can be had: metrics undecided that the budget's pairs would decide at the spread seen
    wants = ",".join(m for m, x in js.items() if m != PRIMARY and x.decision is Decision.UNDECIDED
                     and x.pairs_needed is not None and x.pairs_needed <= plan.max_pairs)
    worse = [m for m, x in js.items() if outcome_of(x.decision, Claim.NOT_SLOWER) is Outcome.FAIL]
    if worse:
        what = ", ".join(_worse_text(m, r, current) for m in worse if (r := js[m].ratio) is not None)
        # the record fails; where TTFT's parts moved, the budget's pairs still go to the first-token metrics they
        # would decide (a leg regressed: did TTFT itself?), and to nothing else (a bisect step is decided)
        kin = ",".join(m for m in wants.split(",") if m and _first_token(m) and any(_first_token(w) for w in worse))
        # the look's figures are the metric that decided it (a leg's, where decode tok/s stayed same)
        lead = PRIMARY if PRIMARY in worse else worse[0]
        x = js[lead]
        assert x.ratio is not None and x.ci is not None
        look = judged_text(x.ratio, x.ci) if lead == PRIMARY else f"{lead} {judged_text(x.ratio, x.ci)}"
        return Verdict(outcome=Outcome.FAIL, category=Category.SLOWER_THAN_BASELINE, decision=Decision.REGRESSED,
                       judged=look, properties=props, wants_more=kin,
                       # what is worse first: a record's reason keeps the message's first 300 characters
                       message=f"stack-pair {mode}: the candidate stack ({spec}) is worse on {what}; "
                               f"{desc.removeprefix(f'stack-pair {mode}: ')}{tail}")
    if outcome_of(j.decision, Claim.NOT_SLOWER) is Outcome.PASS:
        return Verdict(outcome=Outcome.PASS, message=f"{desc}: {j.decision}{tail}", decision=j.decision,
                       judged=judged_text(j.ratio, j.ci), wants_more=wants, properties=props)
    more = "" if j.n >= 2 else " (one start per arm: the spread is the judge's prior; use --perfgate-starts 2)"
    return Verdict(outcome=Outcome.INCONCLUSIVE, decision=j.decision, judged=judged_text(j.ratio, j.ci),
                   wants_more=wants, properties=props, why=j.why,
                   message=f"inconclusive: undecided: {desc}; {j.needs}{more}{tail}")


def _first_token(metric: str) -> bool:
    """TTFT, its tails and its parts: one family, where a change one of them shows is worth deciding in the others."""
    return metric.startswith("ttft")


def _worse_text(metric: str, ratio: float, current: Measurement) -> str:
    """How much worse ``metric`` is: its change in per cent, a TTFT leg's in ms and in per cent of TTFT."""
    if not part_of(metric):
        return f"{metric} by {pct(abs(1 - ratio))}"
    leg, ttft = start_values(current, metric), start_values(current, "ttft_ms")
    added = (ratio - 1) * statistics.median(leg)
    return f"{said(metric)} by {added:+.2f} ms ({pct(abs(added) / statistics.median(ttft))} of TTFT)"
