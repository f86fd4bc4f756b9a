"""The judge: is a change beyond the noise it crosses *and* beyond a practical floor? (pure; no I/O)

A number varies at three levels (:class:`Level`), and a comparison is judged against the level it crosses:

- ``trials``: inside one server start (decode at batch 1 on an H200: CV 0.01-0.05 %). Decides only a
  comparison inside one session on one machine with one start per config (a variant against its baseline,
  :func:`perfgate.measuring.verdict.compare_verdict`); never a comparison between two runs.
- ``starts``: server starts on one machine. Measured by ``--perfgate-starts N`` (between-start CV of the record),
  learnt from history, or the prior :data:`PRIOR_START_CV`.
- ``side-by-side``: start pairs whose two servers ran at once on one machine, their requests interleaved
  (co-resident arms, perfgate.serving.coresident): the host's state at a moment moves both arms, and the pair's
  ratio keeps what differs. Its priors (perfgate.profiles.noise) are the ``starts`` level's unless measured apart.
- ``machines``: machines of one model. Learnt from history (reports of several machines) or the prior
  :data:`PRIOR_MACHINE_CV`; more starts on each side do not shrink it, a paired run on one machine removes it.

Three outcomes and two more (:class:`Decision`): ``regressed`` / ``improved`` need the ratio's confidence
interval wholly on one side of 1 *and* the ratio beyond ``min_effect``; ``same`` needs the whole interval inside
``[1 / (1 + min_effect), 1 + min_effect]``; anything else is ``undecided`` and says what would decide it
(:attr:`Judgement.needs`). ``not-comparable`` is a comparison of two different configs.

The priors come from real SGLang 0.5.17 on H200s (Llama-3.1-8B, dummy weights, decode at batch 1, one stack
and config; docs/gate.md "Noise at three levels"): machine A 5 starts 210.42-210.48 tok/s, machine B 3 starts
212.5-212.7, machines C 205.46 and D 212.7. The pooled between-start sd of log tok/s is 0.03 % (A 0.011 %,
B 0.047 %, the starts spread evenly over the ranges): the prior takes 0.1 %, three times that, so a prior
never claims more than was seen. The four machines' means have a CV of 1.6 %.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from perfgate.categories import Why, Word
from perfgate.host.conditions import RERUN_QUIET
from perfgate.measuring.notation import LOG_CAP, confidence_text, ratio_text
from perfgate.measuring.special import chi2_quantile, t_two_sided
from perfgate.profiles.noise import PRIORS, MetricClass

__all__ = [
    "Decision", "Level", "Judgement", "paired", "unpaired", "decide", "default_min_effect",
    "PRIOR_START_CV", "PRIOR_MACHINE_CV", "PRIOR_MACHINE_DF", "MIN_EFFECT_THROUGHPUT", "MIN_EFFECT_LATENCY",
    "Sequential", "ONE_LOOK", "pair_spread", "pairs_needed",
]

#: relative sd of one server start's decode tok/s around its machine's mean, where a caller names no prior of its own
#: (the H200's, perfgate.profiles.noise.PRIORS; a caller that knows its metric and GPU passes
#: :func:`perfgate.profiles.noise.prior_cv`)
PRIOR_START_CV = PRIORS[MetricClass.THROUGHPUT][("starts", "real")]
#: relative sd of one machine's mean around its model's mean (the same table's: the four H200s, 1.6 %)
PRIOR_MACHINE_CV = PRIORS[MetricClass.THROUGHPUT][("machines", "real")]
#: degrees of freedom of :data:`PRIOR_MACHINE_CV` (the sd of four machines' means)
PRIOR_MACHINE_DF = 3
#: the practical floor of a throughput-like metric (tok/s, goodput, acceptance): smaller changes are "same"
MIN_EFFECT_THROUGHPUT = 0.005
#: the practical floor of a latency (TTFT and ITL move more with the client and the arrival pattern)
MIN_EFFECT_LATENCY = 0.02


class Decision(Word):
    """What a comparison between two runs (or two arms of one run) came to."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    SAME = "same"
    UNDECIDED = "undecided"
    NOT_COMPARABLE = "not-comparable"


class Level(Word):
    """The noise a comparison crosses."""

    TRIALS = "trials"
    STARTS = "starts"
    SIDE_BY_SIDE = "side-by-side"
    MACHINES = "machines"


_LEVEL_WORDS = {Level.TRIALS: "between trials of one start", Level.STARTS: "between starts on one machine",
                Level.SIDE_BY_SIDE: "between side-by-side start pairs on one machine",
                Level.MACHINES: "between machines"}


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """A comparison's decision with the figures behind it."""

    decision: Decision
    ratio: float | None  # new/old (candidate/current), in the metric's own units
    ci: tuple[float, float] | None  # the ratio's confidence interval
    level: Level
    noise_cv: float | None  # relative sd of one observation at that level
    noise_source: str  # "starts" (measured in the reports), "history", "prior", "none"
    min_effect: float
    n: int  # starts (or pairs) behind the figure, the smaller side
    detail: str  # one line: the numbers, the interval, the level and where its noise came from
    needs: str = ""  # what would decide an undecided comparison
    pairs_needed: int | None = None  # an undecided paired comparison: the pairs in all that would decide it
    why: Why | None = None  # why it is undecided, in the record's vocabulary (perfgate.categories.Why)

    @property
    def blocks(self) -> bool:
        return self.decision is Decision.REGRESSED


def default_min_effect(metric: str, *, higher_is_better: bool | None = None,
                       floors: Mapping[str, float] | None = None) -> float:
    """The practical floor of a metric: the one ``floors`` names for it (or its ``default``: the project's
    ``[tool.perfgate.gate] min_effect``, perfgate.report.policy), else the documented one: 0.5 % for throughput-like
    metrics, 2 % for latencies. The one rule of every comparison across stacks (``perfgate gate``, a stack pair)."""
    if floors:
        if metric in floors:
            return floors[metric]
        if "default" in floors:
            return floors["default"]
    if higher_is_better is None:
        higher_is_better = not (metric.endswith("_ms") or "_ms_" in metric or metric.startswith(("ttft", "itl")))
    return MIN_EFFECT_THROUGHPUT if higher_is_better else MIN_EFFECT_LATENCY


def _logs(xs: Sequence[float]) -> list[float]:
    out = [math.log(x) for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if len(out) != len(xs):
        raise ValueError(f"a ratio needs positive finite values, got {list(xs)}")
    return out


# ------------------------------------------------------------------------------------------ decisions


def decide(ratio: float, ci: tuple[float, float], *, higher_is_better: bool, min_effect: float) -> Decision:
    """The rule of the module docstring, on a ratio new/old and its interval.

    The practical floor is symmetric on the log scale (worse means below ``1 / (1 + min_effect)``, better above
    ``1 + min_effect``), so A → B and B → A always get mirrored decisions.
    """
    good, lo, hi = (ratio, ci[0], ci[1]) if higher_is_better else (1 / ratio, 1 / ci[1], 1 / ci[0])
    up = 1.0 + min_effect
    if hi < 1.0 and good * up <= 1.0:
        return Decision.REGRESSED
    if lo > 1.0 and good >= up:
        return Decision.IMPROVED
    if lo * up >= 1.0 and hi <= up:
        return Decision.SAME
    return Decision.UNDECIDED


def _starts_needed(log_ratio: float, se_one: float, q: float, min_effect: float) -> int | None:
    """Starts (pairs, or starts per side) that would shrink the interval enough to decide, given the standard
    error ``se_one`` at one; None when no number would (a ratio sitting on the edge of the band)."""
    band, r = math.log1p(min_effect), abs(log_ratio)
    margin = band - r if r < band else r  # the distance to the band's edge (to "same") or to 1 (to a change)
    if margin <= 1e-12 or se_one <= 0:
        return None
    return max(2, math.ceil((q * se_one / margin) ** 2))


def _judgement(log_mean: float, se: float, q: float, *, level: Level, noise_cv: float | None, source: str,
               higher_is_better: bool, min_effect: float, n: int, confidence: float, what: str) -> tuple[
                   Judgement, float]:
    ratio = math.exp(log_mean)
    # an early look of the sequential rule on one degree of freedom has a quantile in the millions: its interval
    # is bounded at e^-LOG_CAP .. e^LOG_CAP (no decision lies out there) rather than overflowing
    half = min(q * se, LOG_CAP + abs(log_mean))
    ci = (math.exp(max(log_mean - half, -LOG_CAP)), math.exp(min(log_mean + half, LOG_CAP)))
    decision = decide(ratio, ci, higher_is_better=higher_is_better, min_effect=min_effect)
    noise = f"{noise_cv:.3%}" if noise_cv is not None else "?"
    detail = (f"{ratio_text(ratio, ci)} ({confidence_text(confidence)} CI {what}, {_LEVEL_WORDS[level]}: "
              f"sd {noise} from {source}; min effect {min_effect:.1%})")
    return Judgement(decision=decision, ratio=ratio, ci=ci, level=level, noise_cv=noise_cv, noise_source=source,
                     min_effect=min_effect, n=n, detail=detail), ratio


@dataclass(frozen=True, kw_only=True)
class Sequential:
    """A group-sequential design for a paired comparison: looks after each interleaved start pair, from the
    pairs measured first up to ``max_pairs``, and a budget of time for the pairs added.

    The false-alarm rate holds under the repeated looks by spending it over them (:mod:`perfgate.measuring.spending`:
    Lan-DeMets error spending of O'Brien-Fleming shape over the planned looks, information fraction = pairs /
    ``max_pairs``): each side's ``(1 - confidence) / 2`` is spent so that the chance that *any* look calls
    identical arms regressed is that budget under normal noise, strict at the first looks (the first of six at
    4e-8) and looser at the last (2.0 %), where the even split it replaces (Bonferroni, ``1 - alpha / looks`` at
    every look) spent about 0.1 % of a 2.5 % budget. A ``same`` at a look ends the comparison as well (a futility
    stop; it can only lower the false alarms); it is judged on its own interval, at the even split's
    ``1 - alpha / looks`` (:meth:`same_level`), so that calling a real change "same" stays as rare as before and
    identical arms still end ``same`` early, where the spending boundary is widest. Decode throughput, whose looks
    stand on a prior every measured start has stayed within, spends more from its second look on (Hwang-Shih-DeCani,
    gamma -3: the second of six looks at 2.3e-3 one-sided against 1e-4, the last at 1.9 %;
    :data:`perfgate.profiles.noise.SPENDING`); no shape's first look is looser than O'Brien-Fleming's, as one pair
    holds one order of the arms only (:func:`perfgate.measuring.spending.spent_by_look`).
    """

    first_pairs: int = 1  # pairs measured before the first look
    max_pairs: int = 6  # the most pairs the comparison may take
    max_time_s: float | None = None  # seconds the added pairs may take in the session (None: no limit)
    #: "metric": each metric's own spending shape (perfgate.profiles.noise.spending_shape: O'Brien-Fleming's, or
    #: decode throughput's Hwang-Shih-DeCani -3); "obf" or "hsd:GAMMA": that shape for every metric; "even": the even
    #: (Bonferroni) split it replaced, every look at :meth:`same_level` (kept to compare them:
    #: benchmarks/sequential_power.py --boundary even)
    boundary: str = "metric"

    def __post_init__(self) -> None:
        if self.boundary not in ("metric", "obf", "even") and not self.boundary.startswith("hsd:"):
            raise ValueError(f"Sequential.boundary is 'metric', 'obf', 'hsd:GAMMA' or 'even', got {self.boundary!r}")

    def shape(self, metric: str | None = None) -> str:
        """The spending shape the looks at ``metric`` use (``even`` for the even split)."""
        if self.boundary != "metric":
            return self.boundary
        from perfgate.profiles.noise import spending_shape

        return spending_shape(metric)

    @property
    def looks(self) -> int:
        return max(1, self.max_pairs - self.first_pairs + 1)

    def level(self, confidence: float, pairs: int | None = None, metric: str | None = None) -> float:
        """The two-sided confidence of the interval at the look after ``pairs`` pairs (None: the last look's) of
        ``metric`` (its :meth:`shape`): ``1 - 2 p`` for the look's one-sided nominal level ``p``
        (:func:`perfgate.measuring.spending.nominal_levels` of ``(1 - confidence) / 2``). Before the first planned
        look it is the first look's, after the last the last's; a plan of one look is the plain ``confidence``."""
        shape = self.shape(metric)
        if self.looks == 1 or shape == "even":
            return self.same_level(confidence)
        from perfgate.measuring.spending import nominal_levels

        first = max(1, self.first_pairs)
        fractions = tuple(n / self.max_pairs for n in range(first, self.max_pairs + 1))
        # a look after one pair has one order of the arms: it spends no more than O'Brien-Fleming's first look
        levels = nominal_levels(fractions, (1.0 - confidence) / 2, shape, one_order_looks=1 if first == 1 else 0)
        k = len(levels) - 1 if pairs is None else min(max(pairs - first, 0), len(levels) - 1)
        return 1.0 - 2.0 * levels[k]

    def same_level(self, confidence: float) -> float:
        """The two-sided confidence of the interval a ``same`` is judged on at every look: the even split of
        ``1 - confidence`` over the planned looks (``1 - (1 - confidence) / looks``)."""
        return 1.0 - (1.0 - confidence) / self.looks


#: one look: a fixed-size comparison (the gate's two reports, a record judged once)
ONE_LOOK = Sequential(first_pairs=1, max_pairs=1)


#: the lower chi-square quantile below which the pairs' own variance rejects the prior (:func:`pair_spread`)
PRIOR_REJECT_LOW = 0.005


def pair_spread(logs: Sequence[float], prior_cv: float, prior_df: float) -> tuple[float, float, str]:
    """(sd of one pair's log ratio, its degrees of freedom, its source) from the pairs and the prior of one start.

    The prior (``prior_cv`` of one start, so ``sqrt(2) x`` that for a ratio of two) is pooled with the pairs'
    own spread as ``prior_df`` degrees of freedom (a scaled inverse chi-square prior), and the result is never
    narrower than the pairs' own sd. Where the pairs reject the prior, the prior is dropped and the pairs' own
    t-interval decides (``starts``): their variance above its 99 % chi-square bound (the prior too calm), or below
    its :data:`PRIOR_REJECT_LOW` bound from three pairs on (pairs that agree far more closely than the prior says they
    can: a prior never outweighs such pairs; on identical arms with the prior right this happens in that share of
    looks; with two pairs the pairs' own interval, on one degree of freedom, would decide less than the prior).
    """
    n = len(logs)
    s0 = prior_cv * math.sqrt(2)
    if n < 2:
        return s0, prior_df, "prior"
    s = statistics.stdev(logs)
    ratio = (n - 1) * s * s / (s0 * s0) if s0 > 0 else math.inf
    if ratio > chi2_quantile(0.99, n - 1) or (n >= 3 and ratio < chi2_quantile(PRIOR_REJECT_LOW, n - 1)):
        return s, float(n - 1), "starts"
    df = prior_df + n - 1
    pooled = math.sqrt((prior_df * s0 * s0 + (n - 1) * s * s) / df) if math.isfinite(prior_df) else s0
    return max(pooled, s), df, "starts+prior"


def paired(ratios: Sequence[float], *, higher_is_better: bool = True, min_effect: float, confidence: float = 0.95,
           prior_cv: float | None = None, prior_df: float | None = None, plan: Sequential = ONE_LOOK,
           metric: str = "tok_s", level: Level = Level.STARTS, prior_name: str = "prior") -> Judgement:
    """Candidate/current ratios of interleaved start pairs (A1 B1 B2 A2 ..., alternated: perfgate.measuring.order)
    on one machine, at one look of ``plan``.

    The interval is a t-interval on the mean log ratio across pairs, at the look's confidence
    (:meth:`Sequential.level`), on the spread of :func:`pair_spread`: the pairs' own, pooled with the prior of
    one start's noise for ``metric`` (``prior_cv``, default :data:`PRIOR_START_CV`) worth ``prior_df`` degrees
    of freedom (default :data:`perfgate.profiles.noise.PRIOR_DF`). An undecided judgement says how many pairs in
    all would decide it at the ratio and spread seen (``needs``), or that the budget would not. ``level``: the
    pairs' (``starts``, or ``side-by-side`` for co-resident arms), said in the judgement. ``prior_name``: what the
    prior is, said in the judgement's noise source (``history``: measured by earlier paired runs on this machine,
    perfgate.report.pairnoise).
    """
    from perfgate.profiles.noise import PRIOR_DF

    logs = _logs(ratios)
    if not logs:
        raise ValueError("paired() needs at least one ratio")
    n = len(logs)
    mean = statistics.fmean(logs)
    noise = PRIOR_START_CV if prior_cv is None else prior_cv
    sd, df, source = pair_spread(logs, noise, PRIOR_DF if prior_df is None else prior_df)
    source = source.replace("prior", prior_name)

    def at(conf: float) -> Judgement:
        q = t_two_sided(conf, df)
        return _judgement(mean, sd / math.sqrt(n), q, level=level, noise_cv=sd / math.sqrt(2), source=source,
                          higher_is_better=higher_is_better, min_effect=min_effect, n=n, confidence=conf,
                          what=f"of {n} paired start(s), {metric}")[0]

    j = at(plan.level(confidence, n, metric))  # a change: on the error-spending boundary of this look
    if j.decision in (Decision.SAME, Decision.UNDECIDED):  # "same": on its own interval (Sequential.same_level)
        js = at(plan.same_level(confidence)) if plan.looks > 1 else j
        j = js if js.decision is Decision.SAME else replace(j, decision=Decision.UNDECIDED)
    if j.decision is Decision.UNDECIDED:
        need = pairs_needed(mean, sd, n, prior_df=df - n + 1 if source != "starts" else 0.0,
                            level=lambda m: plan.level(confidence, m, metric), same_level=plan.same_level(confidence),
                            higher_is_better=higher_is_better, min_effect=min_effect,
                            limit=max(plan.max_pairs, n) * 4)
        budget = plan.max_pairs
        j = replace(j, pairs_needed=need)
        if need is None:
            j = replace(_with_needs(j, _edge_text(j)), why=Why.MIN_EFFECT_EDGE)
        elif need <= budget or plan is ONE_LOOK:
            j = _with_needs(j, f"about {need} interleaved start pairs in all would decide it")
            if "prior" in source and n >= 2 and statistics.stdev(logs) < noise * math.sqrt(2) / 2:
                j = replace(j, why=Why.PRIOR_BOUND)  # the pairs agree; the prior's spread keeps it open
        else:
            j = replace(_with_needs(j, f"about {need} interleaved start pairs in all would decide it, more than the "
                                       f"budget of {budget} (--perfgate-max-starts)"), why=Why.BUDGET_SPENT)
    return j


def _edge_text(j: Judgement) -> str:
    """Why no number of pairs decides: the arms are indistinguishable (the interval holds 1), or the change sits on
    the practical floor (an interval that excludes 1 but straddles the min effect)."""
    if j.ci is not None and j.ci[0] <= 1.0 <= j.ci[1]:
        return "the two arms are indistinguishable at this min effect"
    return (f"a change of about the min effect ({j.min_effect:.1%}), on its edge: no number of pairs decides whether "
            f"it is beyond it")


def pairs_needed(mean: float, sd: float, n: int, *, prior_df: float, level: float | Callable[[int], float],
                 higher_is_better: bool, min_effect: float, limit: int, same_level: float | None = None) -> int | None:
    """The fewest pairs in all (> ``n``, at most ``limit``) whose interval, at the ratio and spread seen, the
    degrees of freedom ``m`` pairs would have (``prior_df + m - 1``; the prior's share 0 where the pairs rejected
    it) and the confidence of the look at ``m`` pairs (``level``: a number, or a function of ``m``:
    :meth:`Sequential.level`), would decide; a ``same`` on the interval at ``same_level`` where given
    (:meth:`Sequential.same_level`); None when none would (a ratio on the edge of the band)."""

    def decision(lv: float, m: int) -> Decision:
        half = min(t_two_sided(lv, max(prior_df + m - 1, 1.0)) * sd / math.sqrt(m), LOG_CAP + abs(mean))
        return decide(math.exp(mean), (math.exp(mean - half), math.exp(mean + half)),
                      higher_is_better=higher_is_better, min_effect=min_effect)

    for m in range(n + 1, limit + 1):
        d = decision(level(m) if callable(level) else level, m)
        if d in (Decision.REGRESSED, Decision.IMPROVED) or (d is Decision.SAME and same_level is None):
            return m
        if same_level is not None and decision(same_level, m) is Decision.SAME:
            return m
    return None


def unpaired(old: Sequence[float], new: Sequence[float], *, level: Level, higher_is_better: bool = True,
             min_effect: float, confidence: float = 0.95, band_cv: float | None = None, band_source: str = "prior",
             start_cv: float | None = None, machine_df: int = 0) -> Judgement:
    """Two runs' per-start values of one record (one value each for single-start reports).

    ``level`` ``starts``: the same machine; the interval comes from the runs' own starts when both have two or
    more (a pooled t-interval), else from ``band_cv`` (history or the prior :data:`PRIOR_START_CV`).
    ``level`` ``machines``: different (or unknown) machines; one machine's offset is not averaged away by its
    starts, so the interval is ``band_cv`` (default :data:`PRIOR_MACHINE_CV`) for each side plus the start noise
    (``start_cv``) over each side's starts, on a t-quantile with ``machine_df`` degrees of freedom (default
    :data:`PRIOR_MACHINE_DF`: the prior's four machines).
    """
    machine_df = machine_df or PRIOR_MACHINE_DF
    a, b = _logs(old), _logs(new)
    if not a or not b:
        raise ValueError("unpaired() needs at least one value on each side")
    na, nb = len(a), len(b)
    diff = statistics.fmean(b) - statistics.fmean(a)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    measured = na >= 2 and nb >= 2
    s_start = None
    if measured:
        pooled = ((na - 1) * statistics.variance(a) + (nb - 1) * statistics.variance(b)) / (na + nb - 2)
        s_start = math.sqrt(pooled)
    if level is Level.MACHINES:
        machine = PRIOR_MACHINE_CV if band_cv is None else band_cv
        within = s_start if s_start is not None else (PRIOR_START_CV if start_cv is None else start_cv)
        se = math.sqrt(2 * machine**2 + within**2 * (1 / na + 1 / nb))
        # the machines' spread rests on a few machines (the prior on four, a history on its own count): a
        # t-quantile on their degrees of freedom, not the normal's
        q = t_two_sided(confidence, float(machine_df))
        noise, source = machine, band_source if band_cv is not None else "prior"
    elif measured and band_cv is None:
        assert s_start is not None
        se = s_start * math.sqrt(1 / na + 1 / nb)
        q, noise, source = t_two_sided(confidence, na + nb - 2), s_start, "starts"
    else:
        noise = PRIOR_START_CV if band_cv is None else band_cv
        if s_start is not None:
            noise = max(noise, s_start)
        se = noise * math.sqrt(1 / na + 1 / nb)
        q, source = z, band_source if band_cv is not None else "prior"
    j, _ = _judgement(diff, se, q, level=level, noise_cv=noise, source=source, higher_is_better=higher_is_better,
                      min_effect=min_effect, n=min(na, nb), confidence=confidence,
                      what=f"of {na} vs {nb} start(s)")
    if j.decision is Decision.UNDECIDED:
        if level is Level.MACHINES:
            j = _with_needs(j, "the reports come from different (or unidentified) machines, whose spread "
                               f"(sd {noise:.1%} from {source}) covers this change; a paired run on one machine "
                               "(--perfgate-candidate) or a baseline report from the same machine would decide it")
        else:
            need = _starts_needed(diff, noise * math.sqrt(2), z, min_effect)
            j = _with_needs(j, f"about {need} starts per side (--perfgate-starts {need}) or a paired run would "
                               "decide it" if need else "the two runs are indistinguishable at this min effect")
    return j


def _with_needs(j: Judgement, needs: str) -> Judgement:
    return replace(j, needs=needs)


def discounted(j: Judgement, disturbed: Sequence[str]) -> Judgement:
    """A change measured on a disturbed host or a throttled GPU (``disturbed``: what disturbed it, one text per
    side; empty: quiet) is undecided, never regressed or improved: a quiet re-run decides it. The one rule, for the
    gate between reports (perfgate.report.diff) and the paired judge inside a session (perfgate.measuring.stackpair)."""
    if j.decision not in (Decision.REGRESSED, Decision.IMPROVED) or not disturbed:
        return j
    return replace(j, decision=Decision.UNDECIDED, detail=f"{j.detail}; would be {j.decision.value}, but "
                   f"{'; '.join(disturbed)}", needs=RERUN_QUIET, why=Why.HOST_BUSY)
