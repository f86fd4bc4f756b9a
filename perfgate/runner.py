"""PerfRun: what a perf test does — measure a case, record it, conclude it.

Numbers are recorded as JUnit properties *before* any assertion, so failing tests still carry
their measurements. Conclusions go through the profile's expectations: an xfail is strict and
must fail for its stated reason.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from perfgate.metrics import Measurement, Trial, compute_trial, summarize, sweep_point, token_match
from perfgate.verdict import (
    Verdict,
    acceptance_verdict,
    apply_expectation,
    compare_verdict,
    floor_verdict,
    within_noise_or_faster,
)

if TYPE_CHECKING:
    from perfgate.config import ServerConfig
    from perfgate.plugin import Case, PerfgateState


class _Concluded(Exception):
    """Internal: a case was concluded while measuring (never escapes PerfRun)."""


@dataclass
class PerfRun:
    """Per-test helper handed out by the ``perf`` fixture."""

    item: pytest.Item
    state: PerfgateState
    _identity_done: bool = field(default=False, init=False)

    # ------------------------------------------------------------------ recording

    def record(self, name: str, value: object) -> None:
        from perfgate.plugin import _fmt

        props = self.item.user_properties
        for i, (k, _) in enumerate(props):
            if k == name:
                props[i] = (name, _fmt(value))
                return
        props.append((name, _fmt(value)))

    def _identity(self, case: Case, config: ServerConfig | None = None) -> None:
        if self._identity_done:
            return
        self._identity_done = True
        p = self.state.profile
        self.record("engine", p.engine.name)
        self.record("profile", p.name)
        self.record("mode", case.mode)
        self.record("variant", case.variant or "")
        self.record("kind", case.kind)
        cfg = config or self.state.config_for(case)
        self.record("config", cfg.key)
        for k, v in self.state.stack.as_properties().items():
            self.record(k, v)

    def _record_measurement(self, m: Measurement, prefix: str = "") -> None:
        if m.tok_s is not None:
            self.record(prefix + "tok_s", m.tok_s.median)
            self.record(prefix + "tok_s_ci_low", m.tok_s.ci_low)
            self.record(prefix + "tok_s_ci_high", m.tok_s.ci_high)
            self.record(prefix + "n", m.tok_s.n)
            if m.tok_s.cv is not None:
                self.record(prefix + "cv", m.tok_s.cv)
        if m.ttft_ms is not None:
            self.record(prefix + "ttft_ms", m.ttft_ms.median)
        if m.itl_ms is not None:
            self.record(prefix + "itl_ms", m.itl_ms.median)
        if m.accept_len is not None:
            self.record(prefix + "accept_len", m.accept_len)
        if m.startup_s is not None:
            self.record(prefix + "startup_s", m.startup_s)
        if m.failures:
            self.record(prefix + "failed_requests", m.failures)

    # ------------------------------------------------------------------ measuring

    def measure(self, case: Case, *, primary: bool = True) -> Measurement:
        """Measure the case's config (once per session); on a server failure, conclude the case."""
        st = self.state
        config = st.config_for(case)
        if primary:
            self._identity(case, config)
        try:
            st.check_hardware()
        except Exception as e:
            pytest.fail(f"perfgate: {e}", pytrace=False)
        key = config.key
        log = st.manager.logs.get(key) if st._manager else None
        if key in st.measurements:
            m = st.measurements[key]
            if primary:
                self.record("log", m.log_path)
                self._record_measurement(m)
            return m
        if key in st.failed:
            v = st.failed[key]
            if primary:
                if log:
                    self.record("log", log)
                self.conclude(case, v)
            self._fail_dependency(case, config, v)
        try:
            m = self._measure_config(case, config)
        except _ServerFailed as f:
            st.failed[key] = f.verdict
            if f.log and primary:
                self.record("log", f.log)
            if primary:
                self.conclude(case, f.verdict)
            self._fail_dependency(case, config, f.verdict)
        st.measurements[key] = m
        if primary:
            self.record("log", m.log_path)
            self._record_measurement(m)
        return m

    def _fail_dependency(self, case: Case, config: ServerConfig, v: Verdict) -> NoReturn:
        self.conclude(case, Verdict(outcome="fail", category=v.category,
                                    message=f"the {config.name} server this record compares against failed: {v.message}"))
        raise AssertionError("unreachable")  # pragma: no cover

    def _measure_config(self, case: Case, config: ServerConfig) -> Measurement:
        from perfgate.client import flush_cache, run_batch
        from perfgate.errors import ServerError
        from perfgate.workload import load_prompts, requests_for

        st = self.state
        p = st.profile
        w = p.workload_for(config.mode)
        url = st.opt("perfgate_url")
        startup_s = None
        log_path = ""
        if url:
            self._check_attached(url.rstrip("/"), config)
            url = url.rstrip("/")
        else:
            try:
                server = st.manager.ensure(config)
            except ServerError as e:
                raise _ServerFailed(Verdict(outcome="fail", category=e.category or "crash", message=str(e)),
                                    st.manager.logs.get(config.key, "")) from None
            url, startup_s, log_path = server.url, server.startup_s, str(server.log_path)
            fb = self._fallback(config, server.log_path)
            if fb is not None:
                raise _ServerFailed(fb, log_path)
        prompts = load_prompts(w.prompts)
        flush_cache(url)
        per = w.per_trial
        if w.warmup:
            run_batch(url, requests_for(w, prompts, w.warmup), concurrency=min(w.concurrency, w.warmup),
                      timeout_s=w.request_timeout_s)
        trials: list[Trial] = []
        outputs: dict[int, tuple[int, ...]] = {}
        n_trials = st.opt("perfgate_trials") or w.trials
        for t in range(n_trials):
            reqs = requests_for(w, prompts, per, offset=t * per)
            outs, wall = run_batch(url, reqs, concurrency=w.concurrency, timeout_s=w.request_timeout_s)
            trials.append(compute_trial(outs, wall))
            for i, o in enumerate(outs):
                idx = (t * per + i) % len(prompts)
                if o.success and idx not in outputs:
                    outputs[idx] = o.output_ids
            if any(not o.success for o in outs) and not url_alive(st, config):
                break
        sweep = []
        if case.kind == "sweep":
            for c in w.concurrency_sweep:
                reqs = requests_for(w, prompts, 2 * c)
                outs, wall = run_batch(url, reqs, concurrency=c, timeout_s=w.request_timeout_s)
                sweep.append(sweep_point(c, outs, wall))
        m = summarize(config_key=config.key, config_name=config.name, trials=trials, confidence=w.confidence,
                      outputs=tuple(outputs.get(i, ()) for i in range(len(prompts))), startup_s=startup_s,
                      log_path=log_path, sweep=sweep)
        if m.failures:
            # a server that died while serving is classified from its log
            if not url_alive(st, config):
                err = st.manager.current._exited_error("while serving") if st.manager.current else None
                st.manager.stop()
                if err is not None:
                    st.manager.failures[config.key] = err
                    raise _ServerFailed(Verdict(outcome="fail", category=err.category or "crash", message=str(err)),
                                        log_path)
            uniq = list(dict.fromkeys(m.errors))
            self._record_measurement(m)
            raise _ServerFailed(Verdict(outcome="fail", category="crash",
                                        message=f"{m.failures} request(s) failed while measuring {config.name}: "
                                                f"{'; '.join(uniq[:3])}"),
                                log_path)
        return m

    def _fallback(self, config: ServerConfig, log_path: Any) -> Verdict | None:
        """A backend that silently fell back to NCCL did not run: that is the record."""
        if not config.variant:
            return None
        variant = self.state.variants.get(config.variant)
        if not variant.backend:
            return None
        from perfgate.classify import classify

        from pathlib import Path

        text = Path(log_path).read_text(errors="replace") if log_path else ""
        cls = classify(None, text)
        for fb in cls.fallbacks:
            if fb.backend == variant.backend:
                return Verdict(outcome="fail", category=fb.category,
                               message=f"{variant.name}: {variant.backend} did not run, SGLang fell back: {fb.line.strip()}")
        return None

    def _check_attached(self, url: str, config: ServerConfig) -> None:
        from perfgate.attach import mismatches

        probs = mismatches(url, config)
        if probs is None:
            pytest.fail(f"perfgate: cannot read {url}/server_info; is a server running there?", pytrace=False)
        if probs:
            pytest.skip(f"attached server at {url} runs a different config than {config.name}: " + "; ".join(probs))

    # ------------------------------------------------------------------ checks

    @property
    def profile(self) -> Any:
        return self.state.profile

    def where(self) -> str:
        return str(self.state.profile.path)

    def update_hint(self) -> str:
        return "`pytest perftests/ -m baseline --perfgate-update-baselines`"

    def floor(self, case: Case, m: Measurement) -> Verdict:
        p = self.profile
        fl = p.floors.get(case.mode)
        if fl is not None and fl.tok_s is not None:
            self.record("floor", fl.tok_s)
            self.record("tolerance", fl.tolerance)
        self._note_update(case.mode, "tok_s", fl.tok_s if fl else None, m)
        return floor_verdict(m, fl, max_cv=p.workload.max_cv, where=f"{self.where()}, mode {case.mode}",
                             update_hint=self.update_hint())

    def acceptance(self, case: Case, m: Measurement) -> Verdict:
        fl = self.profile.floors.get(case.mode)
        self._note_update(case.mode, "accept_len", fl.accept_len if fl else None, m)
        return acceptance_verdict(m.accept_len, fl, where=f"{self.where()}, mode {case.mode}")

    def compare(self, case: Case, candidate: Measurement, baseline: Measurement, *, what: str) -> Verdict:
        """Candidate vs the baseline measured in this run: outputs first, then speed."""
        w = self.profile.workload
        tm = token_match(candidate.outputs, baseline.outputs)
        if tm is not None:
            self.record("token_match", tm)
            if tm < w.token_match_min:
                return Verdict(outcome="fail", category="wrong-output",
                               message=f"{what}: only {tm:.1%} of the baseline's greedy tokens matched (threshold "
                                       f"{w.token_match_min:.0%}): the output changed")
        v = compare_verdict(candidate, baseline, confidence=w.confidence, max_cv=w.max_cv, what=what)
        for k, val in v.properties.items():
            self.record(k, val)
        return v

    def variant_verdict(self, case: Case, m: Measurement, base: Measurement) -> Verdict:
        v = self.compare(case, m, base, what=f"{case.variant} in {case.mode}")
        return within_noise_or_faster(v)

    def controlled(self, case: Case) -> None:
        """A variant's config may differ from the baseline's only in the keys it declares."""
        from perfgate.config import confounders

        cand = self.state.config_for(case)
        ref = self.state.config_for(type(case)(case.profile, "floor", case.mode, None))
        bad = confounders(cand, ref)
        if bad:
            self._identity(case, cand)
            self.conclude(case, Verdict(
                outcome="inconclusive", category="confounded",
                message=(f"inconclusive: confounded: {case.variant} differs from the {case.mode} baseline in "
                         f"{', '.join(sorted(bad))}, which the variant does not declare "
                         f"({_diffs(cand, ref, bad)}); make the runs differ only in the variant's keys")))

    def _note_update(self, mode: str, key: str, old: object, m: Measurement) -> None:
        if not self.state.opt("perfgate_update_baselines"):
            return
        new = m.tok_s.median if key == "tok_s" and m.tok_s else m.accept_len if key == "accept_len" else None
        if new is None:
            return
        st = self.state
        st.updates.append((mode, key, old, round(float(new), 2)))
        meta = st.update_meta.setdefault(mode, {})
        meta.update({
            "date": _dt.date.today().isoformat(),
            "n": m.tok_s.n if m.tok_s else 0,
            "cv": round(m.tok_s.cv, 4) if m.tok_s and m.tok_s.cv is not None else 0.0,
            "engine": st.profile.engine.name,
            **{k.removeprefix("stack."): v for k, v in st.stack.as_properties().items()},
        })

    def crosscheck(self, case: Case) -> None:
        """Measure with perfgate, then with SGLang's bench_one_batch_server on the same live server."""
        from pathlib import Path

        from perfgate import crosscheck as cc

        st = self.state
        p = st.profile
        import sys

        py = p.engine.python or sys.executable
        if not cc.sglang_importable(py):
            pytest.skip(f"sglang.bench_one_batch_server is not importable by {py}")
        m = self.measure(case)
        config = st.config_for(case)
        server = st.manager.ensure(config)  # the same, still running server
        w = p.workload_for(case.mode)
        from perfgate.workload import load_prompts

        input_len = len(load_prompts(w.prompts)[0])
        tok = cc.make_tokenizer(py, p.model.path, st.log_dir)
        log = Path(st.log_dir) / f"{config.slug}.sglang-bench.log"
        bench = cc.run_bench(python=py, url=server.url, tokenizer=tok, input_len=input_len,
                             output_len=w.max_new_tokens, log_path=log)
        self.record("sglang_bench_tok_s", bench.output_throughput)
        self.record("sglang_bench_tok_s_comparable", bench.comparable_tok_s)
        if bench.acc_length is not None:
            self.record("sglang_bench_accept_len", bench.acc_length)
        self.record("sglang_bench_log", str(log))
        assert m.tok_s is not None
        ratio = m.tok_s.median / bench.comparable_tok_s
        self.record("vs_sglang_bench", ratio)
        msg = (f"perfgate {m.tok_s.median:.2f} tok/s vs SGLang bench_one_batch_server {bench.output_throughput:.2f} "
               f"({bench.comparable_tok_s:.2f} counted as perfgate counts): ratio {ratio:.4f}")
        if abs(ratio - 1) <= 0.01:
            self.conclude(case, Verdict(outcome="pass", message=msg))
        else:
            self.conclude(case, Verdict(outcome="fail", category="measurement-mismatch",
                                        message=msg + " differs by more than 1 %; see " + str(log)))

    # ------------------------------------------------------------------ conclude

    def conclude(self, case: Case, v: Verdict) -> None:
        """Apply the expectation and end the test with the matching pytest outcome."""
        self._identity(case)
        for k, val in v.properties.items():
            self.record(k, val)
        exp = self.state.profile.expectation(case.expectation_key, case.mode, self.state.stack)
        final = apply_expectation(v, exp, profile_path=str(self.state.profile.path))
        self.record("outcome", final.outcome)
        self.record("category", final.category or "")
        self.record("expected", final.expected)
        self.record("reason", final.message[:300])
        if final.outcome == "pass":
            return
        if final.outcome in ("fail", "xpass"):
            pytest.fail(final.message, pytrace=False)
        if final.outcome == "xfail":
            pytest.xfail(final.message)
        if final.outcome == "inconclusive":
            msg = final.message if final.message.startswith("inconclusive") else f"inconclusive: {final.message}"
            pytest.skip(msg)
        pytest.skip(final.message)


class _ServerFailed(Exception):
    def __init__(self, verdict: Verdict, log: str) -> None:
        self.verdict = verdict
        self.log = log


def url_alive(st: PerfgateState, config: ServerConfig) -> bool:
    if st.opt("perfgate_url"):
        return True
    cur = st.manager.current
    return cur is not None and cur.config.key == config.key and cur.alive()


def _diffs(a: ServerConfig, b: ServerConfig, keys: set[str]) -> str:
    sa, sb = a.settings(), b.settings()
    return ", ".join(f"{k}: {sb.get(k)!r} -> {sa.get(k)!r}" for k in sorted(keys))


def _explain_speculation(self: PerfRun, case: Case, spec: Measurement, base: Measurement, v: Verdict) -> Verdict:
    """Attach the cost model's breakdown; a slower speculation says what it would take."""
    p = self.profile
    if spec.tok_s is None or base.tok_s is None or not spec.accept_len:
        return v
    try:
        from perfgate import costmodel
    except ImportError:  # pragma: no cover
        return v
    mode = p.modes[case.mode]
    verify_tokens = int(mode.flags.get("speculative-num-draft-tokens", 0) or 0) or None
    lat = costmodel.latency_interpolator(p.model.allreduce_latency_us) if p.model.allreduce_latency_us else None
    bd = costmodel.spec_breakdown(
        baseline_tok_s=base.tok_s.median, spec_tok_s=spec.tok_s.median, accept_len=spec.accept_len,
        layers=p.model.layers, allreduces_per_layer=p.model.allreduces_per_layer, hidden=p.model.hidden,
        verify_tokens=verify_tokens, allreduce_latency_us=lat,
    )
    for k in ("cycle_ms", "breakeven_accept_len", "breakeven_verify_ms", "allreduce_share"):
        val = getattr(bd, k, None)
        if val is not None:
            self.record(k, val)
    if v.outcome == "fail" and v.category == "slower-than-baseline":
        return Verdict(outcome=v.outcome, category=v.category, message=f"{v.message}. {bd.what_it_would_take()}",
                       properties=v.properties)
    return v


PerfRun.explain_speculation = _explain_speculation  # type: ignore[attr-defined]
