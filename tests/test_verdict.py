"""Verdicts: comparisons by the ratio CI with a minimum effect, and strict expectations."""

import pytest

from perfgate.categories import Category, Outcome
from perfgate.measuring.metrics import Trial, summarize
from perfgate.measuring.verdict import Verdict, apply_expectation, compare_verdict, warm_cache, within_noise_or_faster
from perfgate.profiles import Expectation


def meas(values, name="x"):
    trials = [Trial(tok_s=v, output_tok_s=v, ttft_ms=10.0, itl_ms=1000 / v, accept_len=None, completion_tokens=64,
                    failures=0) for v in values]
    return summarize(config_key=name, config_name=name, trials=trials)


BASE = meas([89.50, 89.52, 89.48, 89.51, 89.49], "baseline")


def cmp(values, **kw):
    return compare_verdict(meas(values), BASE, confidence=0.95, max_cv=0.05, what="v", **kw)


def test_clearly_faster_and_clearly_slower():
    fast = cmp([95.0, 95.1, 94.9, 95.2, 95.0], min_effect=0.02)
    assert fast.outcome == "pass" and fast.properties["vs_baseline_ci_low"] > 1
    slow = cmp([38.0, 38.1, 37.9, 38.0, 38.05], min_effect=0.02)
    assert slow.outcome == "fail" and slow.category == "slower-than-baseline"


def test_a_significant_but_negligible_drift_is_not_slower():
    # 0.05 % lower with a CV of 0.01 %: the CI excludes 1, the difference means nothing
    tiny = cmp([89.45, 89.46, 89.44, 89.45, 89.455], min_effect=0.02)
    assert tiny.outcome == "inconclusive" and "negligible" in tiny.message
    assert within_noise_or_faster(tiny).category == "within-noise"
    # without a minimum effect the same numbers are "slower": what the option exists for
    assert cmp([89.45, 89.46, 89.44, 89.45, 89.455]).outcome == "fail"


def test_straddling_says_how_many_trials_would_resolve_it():
    v = cmp([88.0, 91.0, 89.0, 90.5, 89.9], min_effect=0.0)
    assert v.outcome == "inconclusive" and "straddles" in v.message
    assert "trials per side" in v.message or "indistinguishable" in v.message


def test_too_noisy_is_inconclusive_never_pass():
    v = cmp([60.0, 120.0, 95.0, 130.0, 70.0], min_effect=0.02)
    assert v.outcome == "inconclusive" and v.category == "noisy"


XF = Expectation(expect=Outcome.XFAIL, category=Category.CUDA_GRAPH_CAPTURE, reason="Tree in graph capture",
                 key="expectations.nccl-tree.*", line=42)


@pytest.mark.parametrize("verdict, exp, outcome", [
    (Verdict(outcome=Outcome.PASS), None, "pass"),
    (Verdict(outcome=Outcome.FAIL, category=Category.OOM), None, "fail"),
    (Verdict(outcome=Outcome.FAIL, category=Category.CUDA_GRAPH_CAPTURE), XF, "xfail"),
    (Verdict(outcome=Outcome.FAIL, category=Category.OOM), XF, "fail"),
    (Verdict(outcome=Outcome.PASS), XF, "xpass"),
    (Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.CONFOUNDED), XF, "inconclusive"),
    (Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.WITHIN_NOISE, message="x: the CI straddles 1"), None, "pass"),
    (Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.WITHIN_NOISE), XF, "inconclusive"),
    (Verdict(outcome=Outcome.FAIL, category=Category.MISSING_DEPENDENCY), XF, "skip"),
])
def test_expectations(verdict, exp, outcome):
    final = apply_expectation(verdict, exp, profile_path="baselines/x.toml")
    assert final.outcome == outcome
    if outcome == "xpass":
        assert "UNBLOCKED" in final.message and "baselines/x.toml:42" in final.message
    if exp is not None and outcome == "fail":
        assert "cuda-graph-capture" in final.message and "oom" in final.message  # names both


def _trials_with_cache(hits: int) -> list[Trial]:
    return [Trial(tok_s=100.0 + i, output_tok_s=100.0, ttft_ms=30.0, itl_ms=10.0, accept_len=None,
                  completion_tokens=16, failures=0, cache_hits=hits if i == 0 else 0,
                  cached_tokens=127 * hits if i == 0 else 0) for i in range(5)]


@pytest.mark.parametrize("verdict, becomes", [
    (Verdict(outcome=Outcome.PASS, message="ok"), "warm-cache"),
    (Verdict(outcome=Outcome.FAIL, category=Category.SLOWER_THAN_BASELINE, message="slow"), "warm-cache"),
    (Verdict(outcome=Outcome.FAIL, category=Category.CRASH, message="died"), "crash"),  # not a number: stays
    (Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOISY, message="cv"), "noisy"),
])
def test_a_number_from_the_prefix_cache_is_no_verdict(verdict, becomes):
    warm = summarize(config_key="k", config_name="baseline", trials=_trials_with_cache(2))
    cold = summarize(config_key="k", config_name="baseline", trials=_trials_with_cache(0))
    assert warm.cache_hits == 2 and warm.cached_tokens == 254
    out = warm_cache(verdict, warm)
    assert (out.category or "") == (becomes if becomes != "pass" else "")
    if becomes == "warm-cache":
        assert out.outcome == "inconclusive" and "prefix cache" in out.message and verdict.message in out.message
    assert warm_cache(verdict, cold) is verdict


@pytest.mark.parametrize("n", [1, 2])
def test_fewer_trials_than_an_interval_needs_is_no_verdict(n):
    one = meas([89.47, 89.49][:n])
    assert one.tok_s.ci_low is None and one.tok_s.cv is None and not one.tok_s.noise_known
    v = compare_verdict(one, BASE, confidence=0.95, max_cv=0.05, what="v")
    assert v.outcome == "inconclusive" and v.category == "noise-unknown"
    assert f"{n} trial(s)" in v.message and "at least 3" in v.message
    from perfgate.measuring.verdict import limit_verdict

    fv = limit_verdict(one, "tok_s", 80.0, 0.03, max_cv=0.05, where="p.toml", update_hint="x")
    assert fv.outcome == "inconclusive" and fv.category == "noise-unknown"


def test_one_judge_built_in_floors_and_perf_check_agree_on_the_same_data():
    """Issue 23's two-judges case: Floor(tok_s=99, tolerance=0.03, max_cv=0.2) and trials with a 6.7 % CV. The built-in
    floor said inconclusive (noise bar: the workload's max_cv) while perf_check said pass (the floor table's); now the
    built-in floor record is perf_check(m, "tok_s") (perftests/test_baseline.py): one limit_verdict, the noise bar
    of Profile.max_cv_for."""
    import statistics

    from perfgate.measuring.verdict import limit_verdict
    from perfgate.profiles.load import load_profile

    values = [91.0, 100.0, 110.0, 98.0, 101.0]
    m = meas(values)
    assert 0.06 < statistics.stdev(values) / statistics.fmean(values) < 0.07 and m.tok_s.cv > 0.05
    from dataclasses import replace
    from pathlib import Path

    from perfgate.profiles import Floor

    shipped = load_profile(Path(__file__).resolve().parents[1] / "baselines/sim-rtxpro6000-x8/kimi-k2.5.toml")
    p = replace(shipped, workload=replace(shipped.workload, max_cv=0.05),
                floors={"baseline": Floor(mode="baseline", tok_s=99.0, tolerance=0.03, max_cv=0.2)})
    fl = p.floors["baseline"]
    bar = p.max_cv_for("baseline", fl)
    assert bar == 0.2
    v = limit_verdict(m, "tok_s", fl.limit("tok_s"), fl.tolerance, max_cv=bar, where="p", update_hint="x")
    assert v.outcome == "pass"
    # without the floor's own bar, the workload's applies: too noisy
    assert limit_verdict(m, "tok_s", fl.limit("tok_s"), fl.tolerance, max_cv=p.max_cv_for("baseline"), where="p",
                         update_hint="x").category == "noisy"
    text = (Path(__file__).resolve().parents[1] / "perftests/test_baseline.py").read_text()
    assert 'perf_check(measure(perf_server), "tok_s")' in text  # the built-in floor is the user's call


def test_one_judge_for_a_record_metric_with_its_own_interval_and_a_top_load():
    """The load records' values go through the same judge as decode floors (judge_limit): the crossover carries
    its own CI (no trial noise), and a floor above the highest load measured is undecided, not failed."""
    from perfgate.measuring.verdict import judge_limit

    def j(got: float, limit: float | None, highest: float | None = None) -> Verdict:
        return judge_limit("crossover", got, limit, 0.05, noise=None, max_cv=None, where="p.toml, [floors.m]",
                           update_hint="--perfgate-update-baselines", highest=highest)

    assert j(19.6, 18.0).outcome == "pass"
    assert j(16.0, 18.0).outcome == "fail" and j(16.0, 18.0).category == "slower-than-baseline"
    assert j(17.2, 18.0).outcome == "pass"  # 18 x (1 - 0.05) = 17.1
    top = j(48.0, 64.0, highest=48.0)
    assert top.outcome == "inconclusive" and top.category == "not-exercised"
    assert j(20.0, None).outcome == "skip"


def test_goodput_noise_is_judged_like_any_metric():
    from perfgate.measuring.metrics import stat
    from perfgate.measuring.verdict import judge_limit

    noisy = stat([14.0, 14.0, 7.9])
    quiet = stat([14.0, 14.1, 13.9])
    assert noisy is not None and quiet is not None
    v = judge_limit("goodput_rps", noisy.median, 10.0, 0.05, noise=noisy, max_cv=0.05, where="w", update_hint="u")
    assert v.outcome == "inconclusive" and v.category == "noisy"
    v = judge_limit("goodput_rps", quiet.median, 10.0, 0.05, noise=quiet, max_cv=0.05, where="w", update_hint="u")
    assert v.outcome == "pass"
    few = stat([14.0, 14.1])
    assert few is not None
    v = judge_limit("goodput_rps", few.median, 10.0, 0.05, noise=few, max_cv=0.05, where="w", update_hint="u")
    assert v.category == "noise-unknown"


def test_one_final_path_lost_verdict_warm_cache_expectation_and_missing_dependency():
    """perfgate.measuring.verdict.final_verdict, the one path from a check's verdict to the record's outcome."""
    from perfgate.measuring.verdict import Verdict, final_verdict

    noisy = Verdict(outcome=Outcome.INCONCLUSIVE, category=Category.NOISY, message="inconclusive: too noisy")
    lost = final_verdict(noisy, measurement=None, expectation=None, profile_path="p.toml", optional=False,
                         stored_floor="the baseline floor (89.5 tok/s)")
    assert lost.outcome == "fail" and lost.category == "noisy" and "lost verdict" in lost.message
    assert final_verdict(noisy, measurement=None, expectation=None, profile_path="p.toml",
                         optional=False).outcome == "inconclusive"  # no stored floor: nothing was lost
    missing = Verdict(outcome=Outcome.FAIL, category=Category.MISSING_DEPENDENCY, message="mscclpp is not installed")
    assert final_verdict(missing, measurement=None, expectation=None, profile_path="p.toml",
                         optional=True).outcome == "skip"  # a variant: an optional attempt
    own = final_verdict(missing, measurement=None, expectation=None, profile_path="p.toml", optional=False)
    assert own.outcome == "fail" and own.message.startswith("[missing-dependency]")


def test_a_limit_missed_on_a_busy_host_stays_inconclusive_through_the_final_path():
    """Issue 52: a stored floor missed by a measurement made beside other jobs is inconclusive (host-busy, "re-run
    quiet") to the end, not a lost verdict's failure: an unpaired check cannot tell the load from the change. The
    same miss measured quiet fails; a pass measured busy stands."""
    from dataclasses import replace

    from perfgate.measuring.verdict import final_verdict, limit_verdict

    def final(m, limit=89.5):
        v = limit_verdict(m, "tok_s", limit, 0.03, max_cv=0.05, where="[floors.baseline] tok_s", update_hint="u")
        return final_verdict(v, measurement=m, expectation=None, profile_path="p.toml", optional=False,
                             stored_floor="the baseline floor (89.5 tok/s)")

    slow = meas([86.4, 86.5, 86.45, 86.5, 86.48])  # 3.4 % below 89.5, past its 3 % tolerance
    quiet = final(slow)
    assert (quiet.outcome, quiet.category) == ("fail", "slower-than-baseline")
    busy = final(replace(slow, host_state=BUSY))
    assert busy.outcome == "inconclusive" and busy.why == "host-busy", busy
    assert "lost verdict" not in busy.message and "would miss its limit, but" in busy.message
    assert "re-run quiet" in busy.message, busy.message
    held = final(replace(meas([89.6, 89.5, 89.55, 89.6, 89.52]), host_state=BUSY))
    assert held.outcome == "pass"


def test_a_failure_without_a_category_is_refused_where_it_is_built():
    """A FAIL always says why: building one without a category raises, naming the fix; nothing prints "[None]"."""
    from perfgate.measuring.verdict import Final, lost_verdict

    with pytest.raises(ValueError, match=r"a fail verdict needs a category: pass category=Category\.<WHY> "
                                         r"\(perfgate\.categories\.Category.*message was 'slower'"):
        Verdict(outcome=Outcome.FAIL, message="slower")
    with pytest.raises(ValueError, match=r"a xfail verdict needs a category"):
        Final(outcome=Outcome.XFAIL, category=None, message="m", expected="xfail:oom")
    assert Verdict(outcome=Outcome.INCONCLUSIVE).category is None  # only a failure must say why
    failed = apply_expectation(Verdict(outcome=Outcome.FAIL, category=Category.OOM, message="boom"), None,
                               profile_path="p.toml")
    assert failed.message == "[oom] boom"
    # an inconclusive verdict that does not say why, on a stored floor: a lost verdict, categorized
    lost = lost_verdict(Verdict(outcome=Outcome.INCONCLUSIVE, message="undecided"), "the baseline floor (1 tok/s)")
    assert lost.category == "unresolved"
    assert "[None]" not in apply_expectation(lost, None, profile_path="p.toml").message


def _starts(per_start, name, states=None):
    """A measurement over starts (each of three trials at its rate), start i measured in ``states[i]``."""
    from dataclasses import replace

    starts = [replace(meas([v * 0.999, v, v * 1.001], name), host_state=(states or {}).get(i, "quiet"))
              for i, v in enumerate(per_start)]
    pooled = summarize(config_key=name, config_name=name, trials=[t for s in starts for t in s.trials])
    return replace(pooled, starts=tuple(starts))


BUSY = "disturbed: CPU steal 12 %"


def test_a_variant_over_starts_is_judged_on_its_trusted_pairs():
    """A pair with one arm on a busy host and the other quiet is left out; a pair both of whose arms were busy is kept
    (the load both saw cancels in their ratio); where every pair was one-sided, nothing decides, and it says why."""
    from perfgate.measuring.judge import Sequential

    plan = Sequential(first_pairs=2, max_pairs=6)
    base = _starts([100.0, 100.2, 99.9, 100.1], "baseline")
    # start pair 3: the variant's start alone ran on a busy host, 30 % slower there only
    variant = _starts([110.0, 110.2, 70.0, 110.1], "v", states={2: BUSY})
    v = compare_verdict(variant, base, confidence=0.95, max_cv=0.05, what="v", min_effect=0.02, plan=plan)
    assert v.outcome == "pass" and v.properties["pair_disturbed"] == "3" and v.properties["pair_n"] == 3
    assert v.message.endswith("(pair 3 of 4 left out: one arm measured on a busy host or a throttled GPU, the other "
                              "quiet)")
    # both arms of pair 2 on the busy host: kept, and said
    shared_b = _starts([100.0, 100.2, 99.9, 100.1], "baseline", states={1: BUSY})
    w = compare_verdict(_starts([110.0, 110.2, 109.9, 110.1], "v", states={1: BUSY}), shared_b, confidence=0.95,
                        max_cv=0.05, what="v", min_effect=0.02, plan=plan)
    assert w.outcome == "pass" and w.properties["pair_n"] == 4 and w.properties["pair_shared_load"] == "2"
    assert "pair 2 kept: both arms measured on a busy host" in w.message and "pair_disturbed" not in w.properties
    every = _starts([70.0, 70.1], "v", states={0: BUSY, 1: BUSY})
    u = compare_verdict(every, _starts([100.0, 100.1], "baseline"), confidence=0.95, max_cv=0.05, what="v", plan=plan)
    assert u.outcome == "inconclusive" and u.decision == "undecided" and "re-run quiet" in u.message
    assert u.why == "one-sided-pair"


def test_one_start_on_a_busy_host_decides_nothing():
    from dataclasses import replace

    slow = replace(meas([38.0, 38.1, 37.9, 38.0, 38.05]), host_state=BUSY)
    v = compare_verdict(slow, BASE, confidence=0.95, max_cv=0.05, what="v", min_effect=0.02)
    assert v.outcome == "inconclusive" and v.category is None and v.why == "one-sided-pair"
    assert f"would be slower, but x {BUSY} (the other arm quiet)" in v.message and "re-run quiet" in v.message
    # both on the busy host: a load they shared; the change stands
    both = compare_verdict(slow, replace(BASE, host_state=BUSY), confidence=0.95, max_cv=0.05, what="v",
                           min_effect=0.02)
    assert both.outcome == "fail" and both.category == "slower-than-baseline"


def test_a_variant_over_starts_is_judged_on_its_gpus_prior():
    # a variant 1.1 % slower in both of two start pairs: on the H200's decode prior (0.1 % a start, what its starts
    # moved) that is slower; on the H100's (0.5 %: its starts moved five times more, perfgate.profiles.noise.GPU_PRIORS)
    # two pairs do not decide it, and the verdict says how many would
    from perfgate.measuring.judge import Sequential
    from perfgate.profiles.noise import prior_cv

    plan = Sequential(first_pairs=1, max_pairs=6)
    base, variant = _starts([155.07, 154.64], "baseline"), _starts([153.4, 152.9], "v")
    on = {gpu: compare_verdict(variant, base, confidence=0.95, max_cv=0.05, what="v", min_effect=0.005, plan=plan,
                               prior_cv=prior_cv("tok_s", "starts", gpu=gpu))
          for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3")}
    assert on["NVIDIA H200"].outcome == "fail" and on["NVIDIA H200"].decision == "regressed"
    h100 = on["NVIDIA H100 80GB HBM3"]
    assert h100.outcome == "inconclusive" and h100.decision == "undecided"
    assert "sd 0.447% from starts+prior" in h100.message and "start pairs in all would decide it" in h100.message
