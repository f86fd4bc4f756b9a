"""Verdicts: floors, comparisons and expectations -> pass / fail / xfail / xpass / inconclusive.

Pure functions: measurements and profile data in, a :class:`Verdict` out. The plugin turns
a final verdict into the pytest outcome; messages say what, the numbers, and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from perfgate.categories import Category, Outcome, Why
from perfgate.measuring.judge import ONE_LOOK, Decision, Sequential
from perfgate.measuring.metrics import (
    MIN_TRIALS,
    Measurement,
    Stat,
    bootstrap_ratio_ci,
    trials_to_resolve,
)
from perfgate.measuring.notation import ratio_text
from perfgate.measuring.outcomes import Claim, noise_gate, outcome_of
from perfgate.profiles import Expectation
from perfgate.record import metric_spec


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Outcome of one check before expectations: pass, fail (with category) or inconclusive."""

    outcome: Outcome  # PASS | FAIL | INCONCLUSIVE | SKIP
    category: Category | None = None
    message: str = ""
    properties: dict[str, object] = field(default_factory=dict)
    # a comparison that could not tell the two apart (CI straddles 1, or a difference below min_effect):
    # "not slower" for a variant, no verdict for speculation
    indistinct: bool = False
    # the judge's decision where a paired comparison made this verdict (perfgate.measuring.judge): UNDECIDED asks
    # for more start pairs (perfgate.plugin.compare collects them while the budget lasts)
    decision: Decision | None = None
    # that comparison's figures in a few words (``×0.9952 [0.9901, 1.0003]``): the terminal's line while more start
    # pairs are collected (perfgate.plugin.compare.until_decided)
    judged: str = ""
    # metrics still undecided that more start pairs would decide within the budget (comma-separated; empty: none):
    # the comparison is concluded on its primary metric, but perfgate.plugin.compare collects those pairs
    wants_more: str = ""
    # why it is undecided or inconclusive, in the record's vocabulary (perfgate.categories.Why; the record's
    # ``why_undecided``); None: decided, or a reason the category already says (noisy, not-exercised, ...)
    why: Why | None = None

    def __post_init__(self) -> None:
        _refuse_uncategorized_failure(self.outcome, self.category, self.message)

    def led_by(self, props: dict[str, object]) -> Verdict:
        """This verdict with ``props`` recorded before its own properties (a record's figures, then the judge's)."""
        return replace(self, properties={**props, **self.properties})


def _refuse_uncategorized_failure(outcome: str, category: Category | None, message: str) -> None:
    """A FAIL (or an XFAIL) always says why: the record's ``category``, the terminal's ``[<category>]``, the
    expectation it is matched against. Refused here, where the verdict is built, rather than printed as "[None]"."""
    if outcome in (Outcome.FAIL, Outcome.XFAIL) and category is None:
        raise ValueError(f"a {outcome} verdict needs a category: pass category=Category.<WHY> (perfgate.categories."
                         f"Category: crash, wrong-output, slower-than-baseline, ...) where it is built; message was "
                         f"{message[:200]!r}")


def judged_text(ratio: float | None, ci: tuple[float, float] | None) -> str:
    """A ratio and its interval as :attr:`Verdict.judged` carries them
    (:func:`perfgate.measuring.notation.ratio_text`)."""
    return ratio_text(ratio, ci)


@dataclass(frozen=True, kw_only=True)
class Final:
    """A verdict after its expectation: what pytest should do and what the record says."""

    outcome: Outcome  # PASS | FAIL | XFAIL | XPASS | INCONCLUSIVE | SKIP
    category: Category | None
    message: str
    expected: str  # "pass" | "xfail:<category>"
    why: Why | None = None  # the verdict's (Verdict.why), where the final outcome is still undecided

    def __post_init__(self) -> None:
        _refuse_uncategorized_failure(self.outcome, self.category, self.message)


def pct(x: float) -> str:
    """A fraction as a percentage with the digits it needs: 0.0001 is 0.01 %, not 0.0 %."""
    if x != 0 and abs(x) < 0.01:
        return f"{x * 100:.2g}%"
    return f"{x:.1%}"


def _noisy(m: Measurement, max_cv: float) -> Verdict | None:
    if m.tok_s is None:
        return None
    gate = noise_gate(m.tok_s, max_cv)
    if gate is Category.NOISE_UNKNOWN:
        return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOISE_UNKNOWN,
                       message=(f"inconclusive: noise unknown: {m.tok_s.n} trial(s) of {m.config_name} give no "
                                f"confidence interval (it needs at least {MIN_TRIALS}); decode {m.tok_s.median:.1f} "
                                f"tok/s is recorded without a verdict; raise [workload] trials or --perfgate-trials"))
    if gate is Category.NOISY:
        assert m.tok_s.cv is not None
        return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOISY,
                       message=f"inconclusive: too noisy, CV {pct(m.tok_s.cv)} of {m.tok_s.n} trials exceeds the "
                               f"profile's max_cv {pct(max_cv)}; quiet the box or raise [workload] trials")
    return None


def limit_verdict(m: Measurement, metric: str, limit: float | None, tolerance: float, *, max_cv: float,
                  where: str, update_hint: str) -> Verdict:
    """A measurement's metric of :data:`~perfgate.measuring.metrics.METRICS` against its limit: :func:`judge_limit`
    on the metric's statistic (no statistic: every request failed, a crash)."""
    st = m.stat(metric)
    if st is None:
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH,
                       message=f"no {metric} measured ({m.failures} request(s) failed: {_errs(m)})")
    v = judge_limit(metric, st.median, limit, tolerance, noise=st, max_cv=max_cv, where=where,
                    update_hint=update_hint, of=m.config_name, at=f" measured at concurrency {m.concurrency}")
    return busy_miss(v, m)


def busy_miss(v: Verdict, m: Measurement) -> Verdict:
    """A limit missed by a measurement made on a busy host or a throttled GPU decides nothing: an unpaired check
    cannot cancel the load (perfgate.host.conditions.unpaired_miss), so the miss is inconclusive with the reason and
    what would decide it, never a failure; a pass stands (the load slowed it and it still held)."""
    from perfgate.host.conditions import unpaired_miss

    if v.outcome != Outcome.FAIL or v.category != Category.SLOWER_THAN_BASELINE:
        return v
    why = unpaired_miss(disturbed_state(m))
    if not why:
        return v
    return Verdict(outcome=Outcome.INCONCLUSIVE, why=Why.HOST_BUSY, properties=v.properties,
                   message=f"inconclusive: would miss its limit, but {why}: {v.message}")


def disturbed_state(m: Measurement) -> str:
    """The ``host_state`` of a measurement, or of the first of its starts measured disturbed ("" for none)."""
    from perfgate.host.conditions import is_quiet

    return next((x.host_state for x in (m, *m.starts) if not is_quiet(x.host_state)), "")


def judge_limit(metric: str, got: float, limit: float | None, tolerance: float, *, noise: Stat | None,
                max_cv: float | None, where: str, update_hint: str, of: str = "", at: str = "",
                highest: float | None = None, what: str = "") -> Verdict:
    """The one judge of a limit: a value of any metric (:data:`~perfgate.measuring.metrics.METRICS` or
    :data:`~perfgate.measuring.metrics.RECORD_METRICS`) against it, in the metric's direction.

    Built-in floors, a user's ``perf_check`` and the load records (goodput, crossover) all come here, with the
    noise bar of :meth:`perfgate.profiles.Profile.max_cv_for`, so the same data gives the same verdict whichever
    test asked. Higher-is-better metrics pass at ``value >= floor x (1 - tolerance)``, latencies at
    ``value <= ceiling x (1 + tolerance)``. ``noise`` is the statistic over trials the value came from: too few
    trials or a CV above ``max_cv`` is inconclusive (``None``: the value carries its own interval, e.g. the
    crossover's bootstrap over both modes' trials). ``highest`` is the most the measurement could show (the
    crossover at the top load measured): a floor above it is undecided, not failed. ``what`` describes the
    value in the message (default: ``<metric> <value> <unit>``).
    """
    spec = metric_spec(metric)
    what = what or f"{metric} {got:.4g} {spec.unit}"
    gate = noise_gate(noise, max_cv)
    if gate is Category.NOISE_UNKNOWN:
        assert noise is not None
        return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOISE_UNKNOWN,
                       message=(f"inconclusive: noise unknown: {noise.n} trial(s){' of ' + of if of else ''} give no "
                                f"confidence interval (it needs at least {MIN_TRIALS}); {what} is recorded without a "
                                f"verdict; raise [workload] trials or --perfgate-trials"))
    if gate is Category.NOISY:
        assert noise is not None and noise.cv is not None and max_cv is not None
        return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOISY,
                       message=(f"inconclusive: too noisy, {metric} CV {pct(noise.cv)} of {noise.n} trials exceeds "
                                f"the profile's max_cv {pct(max_cv)}; {what}; quiet the box or raise [workload] "
                                f"trials"))
    if limit is None:
        return Verdict(outcome=Outcome.SKIP, message=f"{what}{at}; no limit for it in {where}; record one with "
                                                     f"{update_hint}")
    if spec.higher_is_better:
        bound, word, sign, rel, bad = limit * (1 - tolerance), "floor", "−", ">=", "<"
        ok = got >= bound
        if not ok and highest is not None and got >= highest:
            return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOT_EXERCISED,
                           message=f"inconclusive: {what}, the highest measured, is below the floor {limit:g}; "
                                   f"measure higher to decide")
    else:
        bound, word, sign, rel, bad = limit * (1 + tolerance), "ceiling", "+", "<=", ">"
        ok = got <= bound
    if ok:
        return Verdict(outcome=Outcome.PASS, message=f"{what} {rel} {word} {limit:g} × (1 {sign} {tolerance:g})")
    return Verdict(
        outcome=Outcome.FAIL, category=Category.SLOWER_THAN_BASELINE,
        message=(f"{what} {bad} {word} {limit:g} × (1 {sign} {tolerance:g}) = {bound:.4g} {spec.unit} [{where}]; "
                 f"if intended, run {update_hint}"),
    )


def acceptance_verdict(accept_len: float | None, limit: float | None, tolerance: float, *, where: str,
                       update_hint: str) -> Verdict:
    """A speculative mode's acceptance length against its floor: :func:`judge_limit` on ``accept_len`` (a sum over
    the trials, no noise of its own). None measured: speculation did not run (a crash); below 1 token per verify
    pass, whatever the floor: the output is wrong."""
    if accept_len is None:
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH,
                       message="no acceptance length: the responses carried no spec_verify_ct (is speculation on?)")
    v = judge_limit("accept_len", accept_len, limit, tolerance, noise=None, max_cv=None, where=where,
                    update_hint=update_hint, what=f"acceptance length {accept_len:.2f}")
    if v.outcome == Outcome.FAIL and accept_len < 1.0:
        return replace(v, category=Category.WRONG_OUTPUT)
    return v


def compare_verdict(candidate: Measurement, baseline: Measurement, *, confidence: float, max_cv: float,
                    what: str, min_effect: float = 0.0, plan: Sequential = ONE_LOOK,
                    prior_cv: float | None = None) -> Verdict:
    """Candidate vs baseline decode tok/s, decided by :func:`perfgate.measuring.judge.decide` (the one rule of
    slower / faster / same): with one start each on the bootstrap CI of the ratio of medians over the trials
    (the trials level), with ``--perfgate-starts N`` on the paired start ratios (the starts level, at the look of
    ``plan``: :func:`paired_verdict`, against ``prior_cv``: one start's decode noise on this GPU,
    :func:`perfgate.profiles.noise.prior_cv`).

    Faster or slower needs the CI to exclude 1 *and* the ratio to differ from 1 by at least
    ``min_effect``: with very quiet trials a 0.05 % drift is significant but means nothing.
    """
    if candidate.tok_s is None:
        return Verdict(outcome=Outcome.FAIL, category=Category.CRASH,
                       message=f"{what}: no successful request ({candidate.failures} failed: {_errs(candidate)})")
    if baseline.tok_s is None:
        return Verdict(outcome=Outcome.INCONCLUSIVE, message=f"{what}: the baseline has no measurement to compare with")
    from perfgate.host.conditions import RERUN_QUIET
    from perfgate.measuring.metrics import paired_ratios
    from perfgate.measuring.starts import one_sided_single, trusted_pairs
    from perfgate.record import PAIR_DISTURBED, PAIR_SHARED_LOAD

    # pairs with one arm on a busy host and the other quiet are left out; a load both arms saw stays
    # (perfgate.measuring.starts.trusted_pairs)
    trusted = trusted_pairs(candidate, baseline)
    quiet_c, quiet_b, left_out = trusted.a, trusted.b, trusted.left_out
    if left_out and not quiet_c.starts:
        return Verdict(outcome=Outcome.INCONCLUSIVE, decision=Decision.UNDECIDED, indistinct=True, why=Why.ONE_SIDED,
                       properties={PAIR_DISTURBED: ",".join(map(str, left_out))},
                       message=f"{what}: undecided: every start pair ({len(left_out)}) had one arm measured on a "
                               f"busy host and the other quiet; {RERUN_QUIET}")
    # the noise gate: on the pooled trials, or where busy pairs were left out on each quiet start's own trials (the
    # pooled trials' spread would be the busy starts')
    for m in (candidate, baseline) if not left_out else (*quiet_c.starts, *quiet_b.starts):
        noisy = _noisy(m, max_cv)
        if noisy:
            return Verdict(outcome=Outcome.INCONCLUSIVE, category=noisy.category,
                           message=f"{what} ({m.config_name}): {noisy.message}")
    pairs = paired_ratios(quiet_c, quiet_b)
    if pairs is not None:  # --perfgate-starts N >= 2: the start is the unit, judged on the interleaved pairs
        v = paired_verdict(quiet_c, quiet_b, pairs, confidence=confidence, what=what, min_effect=min_effect,
                           plan=plan, prior_cv=prior_cv)
        said = trusted.said(len(candidate.starts))
        if not said:
            return v
        extra = {PAIR_DISTURBED: ",".join(map(str, left_out))} if left_out else {}
        if trusted.shared:
            extra[PAIR_SHARED_LOAD] = ",".join(map(str, trusted.shared))
        return replace(v, properties={**v.properties, **extra}, message=f"{v.message} ({said})")
    busy = one_sided_single(candidate, baseline)
    from perfgate.measuring.judge import decide

    ratio = candidate.tok_s.median / baseline.tok_s.median
    lo, hi = bootstrap_ratio_ci(candidate.tok_s.samples, baseline.tok_s.samples, confidence)
    props: dict[str, object] = {"vs_baseline": ratio, "vs_baseline_ci_low": lo, "vs_baseline_ci_high": hi}
    desc = (f"{what}: {candidate.tok_s.median:.1f} vs {baseline.tok_s.median:.1f} tok/s, ratio {ratio:.3f} "
            f"[{confidence:.0%} CI {lo:.3f}–{hi:.3f}]")
    outcome = outcome_of(decide(ratio, (lo, hi), higher_is_better=True, min_effect=min_effect), Claim.FASTER)
    if busy and outcome in (Outcome.PASS, Outcome.FAIL):  # a change on a busy host decides nothing
        would = "faster" if outcome is Outcome.PASS else "slower"
        return Verdict(outcome=Outcome.INCONCLUSIVE, properties=props, indistinct=True, why=Why.ONE_SIDED,
                       message=f"{desc}: would be {would}, but {'; '.join(busy)} (the other arm quiet); {RERUN_QUIET}")
    if outcome is Outcome.PASS:
        return Verdict(outcome=Outcome.PASS, message=desc + ": faster", properties=props)
    if outcome is Outcome.FAIL:
        return Verdict(outcome=Outcome.FAIL, category=Category.SLOWER_THAN_BASELINE, message=desc + ": slower",
                       properties=props)
    if lo > 1.0 or hi < 1.0:  # beyond the trials' noise, within the practical floor
        return Verdict(outcome=Outcome.INCONCLUSIVE, properties=props, indistinct=True,
                       message=desc + f": a {ratio - 1:+.2%} difference, below the profile's min_effect "
                                      f"{pct(min_effect)}: negligible")
    n = min(candidate.tok_s.n, baseline.tok_s.n)
    need = trials_to_resolve(n, ratio, lo, hi)
    more = f"; about {need} trials per side would resolve it" if need else "; the two are indistinguishable"
    return Verdict(outcome=Outcome.INCONCLUSIVE, message=desc + ": the CI straddles 1" + more, properties=props,
                   indistinct=True)


def paired_verdict(candidate: Measurement, baseline: Measurement, ratios: list[float], *, confidence: float,
                   what: str, min_effect: float, plan: Sequential = ONE_LOOK, prior_cv: float | None = None) -> Verdict:
    """Candidate vs baseline on the per-start ratios of interleaved starts (``perfgate.measuring.judge.paired`` at
    the look of ``plan``): faster or slower when the paired CI excludes 1 beyond ``min_effect``; same or undecided
    is no verdict (indistinct), and undecided carries its decision so that more pairs can be collected."""
    from perfgate.measuring.judge import paired
    from perfgate.record import PAIR_DECISION, PAIR_N

    assert candidate.tok_s is not None and baseline.tok_s is not None
    j = paired(ratios, min_effect=min_effect, confidence=confidence, plan=plan, prior_cv=prior_cv)
    assert j.ratio is not None and j.ci is not None
    props: dict[str, object] = {"vs_baseline": j.ratio, "vs_baseline_ci_low": j.ci[0], "vs_baseline_ci_high": j.ci[1],
                                PAIR_N: j.n, PAIR_DECISION: str(j.decision)}
    desc = (f"{what}: {candidate.tok_s.median:.1f} vs {baseline.tok_s.median:.1f} tok/s (medians over "
            f"{len(candidate.starts)} and {len(baseline.starts)} starts), paired {j.detail}")
    outcome = outcome_of(j.decision, Claim.FASTER)
    if outcome is Outcome.FAIL:
        return Verdict(outcome=Outcome.FAIL, category=Category.SLOWER_THAN_BASELINE, message=desc + ": slower",
                       properties=props, decision=j.decision, judged=judged_text(j.ratio, j.ci))
    if outcome is Outcome.PASS:
        return Verdict(outcome=Outcome.PASS, message=desc + ": faster", properties=props, decision=j.decision,
                       judged=judged_text(j.ratio, j.ci))
    if j.decision is Decision.SAME:
        return Verdict(outcome=Outcome.INCONCLUSIVE, properties=props, indistinct=True, decision=j.decision,
                       judged=judged_text(j.ratio, j.ci),
                       message=desc + f": the same within the profile's min_effect {pct(min_effect)}")
    return Verdict(outcome=Outcome.INCONCLUSIVE, properties=props, indistinct=True, decision=j.decision,
                   judged=judged_text(j.ratio, j.ci), message=desc + f": undecided; {j.needs}", why=j.why)


def lost_verdict(v: Verdict, floor: str | None) -> Verdict:
    """A floor this box has passed before that cannot be checked now is a failure, not a green skip.

    ``floor`` names the stored floor (None: there is none, and an inconclusive record stays one). The
    category keeps why (noisy, noise-unknown, warm-cache); the message says what would resolve it. A miss measured
    on a busy host stays inconclusive (``host-busy``): an unpaired check cannot tell the load from the change, and
    identical runs beside other jobs would fail (issue 52); it says "re-run quiet" and blocks no job.
    """
    if floor is None or v.outcome != "inconclusive":
        return v
    if v.why is Why.HOST_BUSY:  # the load, not the change, may be what missed: re-run quiet or pair (busy_miss)
        return v
    # an inconclusive verdict that does not say why (none reaches here today): undecided, more data would decide it
    return Verdict(outcome=Outcome.FAIL, category=v.category or Category.UNRESOLVED, properties=v.properties,
                   message=f"lost verdict: {floor} was not checked: {v.message.removeprefix('inconclusive: ')}")


def warm_cache(v: Verdict, m: Measurement) -> Verdict:
    """A pass or a numeric failure measured partly from SGLang's prefix cache becomes inconclusive.

    perfgate flushes the cache before every trial and sweep level and never repeats a prompt, so this
    happens only where the flush did not take (an attached server serving other clients, a server that
    refuses /flush_cache) and a request shared a prefix with one seen before.
    """
    numeric = v.outcome == "pass" or v.category in ("slower-than-baseline", "wrong-output")
    if not m.cache_hits or not numeric:
        return v
    return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.WARM_CACHE, properties=v.properties,
                   message=(f"inconclusive: warm cache: {m.cache_hits} measured request(s) of {m.config_name} were "
                            f"served partly from SGLang's prefix cache ({m.cached_tokens} cached prompt tokens), so "
                            f"TTFT and throughput measure the cache, not the model; check that the server accepts "
                            f"POST /flush_cache and serves no other client; measured: {v.message}"))


def within_noise_or_faster(v: Verdict) -> Verdict:
    """For variants: a ratio CI straddling 1 means 'not slower beyond noise' (category ``within-noise``).

    Expected to pass, that is a pass; expected to be slower, it is inconclusive (see apply_expectation).
    """
    if v.outcome == "inconclusive" and v.indistinct:
        return Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.WITHIN_NOISE,
                       message=v.message, properties=v.properties)
    return v


def apply_expectation(v: Verdict, exp: Expectation | None, *, profile_path: str) -> Final:
    """An xfail is strict and must fail for its stated reason."""
    if exp is None or exp.expect == "pass":
        expected = "pass"
        if v.outcome == "inconclusive" and v.category == "within-noise":
            return Final(outcome=Outcome.PASS, category=None, expected=expected,
                         message=v.message.replace(": the CI straddles 1", ": within noise of the baseline"))
        if v.outcome == "pass":
            return Final(outcome=Outcome.PASS, category=None, message=v.message, expected=expected)
        if v.outcome in ("inconclusive", "skip"):
            return Final(outcome=v.outcome, category=v.category, message=v.message, expected=expected)
        if v.category == "missing-dependency":
            return Final(outcome=Outcome.SKIP, category=v.category,
                         message=f"skipped [missing-dependency]: {v.message}", expected=expected)
        return Final(outcome=Outcome.FAIL, category=v.category, message=f"[{v.category}] {v.message}",
                     expected=expected)
    expected = f"xfail:{exp.category}"
    where = f"{profile_path}" + (f":{exp.line}" if exp.line else "") + f" ({exp.key})"
    if v.outcome == "pass":
        return Final(outcome=Outcome.XPASS, category=None, expected=expected,
                     message=(f"[XPASS(strict)] UNBLOCKED: expected to fail with {exp.category} ({exp.reason}) but it "
                              f"passed: {v.message}. Update the expectation at {where} to expect = \"pass\"."))
    if v.outcome in ("inconclusive", "skip"):
        return Final(outcome=v.outcome, category=v.category, message=v.message, expected=expected)
    if v.category == exp.category:
        return Final(outcome=Outcome.XFAIL, category=v.category, expected=expected,
                     message=f"[{v.category}] {exp.reason} — observed: {v.message}")
    if v.category == "missing-dependency":
        return Final(outcome=Outcome.SKIP, category=v.category, expected=expected,
                     message=f"skipped [missing-dependency]: {v.message}")
    return Final(outcome=Outcome.FAIL, category=v.category, expected=expected,
                 message=(f"expected to fail with {exp.category} ({exp.reason}) but failed with {v.category}: "
                          f"{v.message} [{where}]"))


def _errs(m: Measurement) -> str:
    if not m.errors:
        return "no errors recorded"
    uniq = list(dict.fromkeys(m.errors))
    return "; ".join(uniq[:3])


def final_verdict(v: Verdict, *, measurement: Measurement | None, expectation: Expectation | None,
                  profile_path: str, optional: bool, stored_floor: str | None = None) -> Final:
    """The one path from a check's verdict to the record's final outcome, in this order: a stored floor that could
    not be checked is a lost verdict (:func:`lost_verdict`); a number SGLang's prefix cache helped produce is
    inconclusive (:func:`warm_cache`); the expectation applies (:func:`apply_expectation`: strict xfail, for its
    stated reason); a missing dependency skips only an ``optional`` attempt (a variant): a profile's own mode that
    cannot start measured nothing, which must not pass CI as a skip."""
    v = lost_verdict(v, stored_floor)
    if measurement is not None:
        v = warm_cache(v, measurement)
    final = apply_expectation(v, expectation, profile_path=profile_path)
    if final.outcome == Outcome.SKIP and final.category == Category.MISSING_DEPENDENCY and not optional:
        return replace(final, outcome=Outcome.FAIL, message=f"[missing-dependency] {v.message}")
    if final.outcome == Outcome.INCONCLUSIVE and v.why is not None:
        return replace(final, why=v.why)
    return final

