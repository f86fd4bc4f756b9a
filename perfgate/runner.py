"""PerfRun: what a perf test does — measure a case, record it, conclude it.

Numbers are recorded as JUnit properties *before* any assertion, so failing tests still carry
their measurements. Conclusions go through the profile's expectations: an xfail is strict and
must fail for its stated reason.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from perfgate.metrics import Measurement, Trial, compute_trial, summarize, sweep_point, token_match
from perfgate.record import Case, case_of, fmt
from perfgate.verdict import (
    Verdict,
    acceptance_verdict,
    apply_expectation,
    compare_verdict,
    floor_verdict,
    lost_verdict,
    pct,
    within_noise_or_faster,
)

if TYPE_CHECKING:
    from perfgate.config import ServerConfig
    from perfgate.plugin import PerfgateState
    from perfgate.profiles import Expectation
    from perfgate.profiles import Workload


@dataclass
class PerfRun:
    """Per-test helper handed out by the ``perf`` fixture."""

    item: pytest.Item
    state: PerfgateState
    _identity_done: bool = field(default=False, init=False)
    _measured: Measurement | None = field(default=None, init=False)  # this record's own measurement

    # ------------------------------------------------------------------ recording

    def record(self, name: str, value: object) -> None:
        props = self.item.user_properties
        for i, (k, _) in enumerate(props):
            if k == name:
                props[i] = (name, fmt(value))
                return
        props.append((name, fmt(value)))

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
            if m.tok_s.ci_low is not None and m.tok_s.ci_high is not None:  # else: noise unknown, no interval
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
        self.record(prefix + "cached_tokens", m.cached_tokens)

    # ------------------------------------------------------------------ measuring

    def measure(self, case: Case, *, primary: bool = True, workload: Workload | None = None) -> Measurement:
        """Measure the case's config (once per session and workload); on a server failure, conclude the case.

        ``workload`` replaces the mode's (a user test measuring at another concurrency, say); each distinct
        workload of a config is measured once per session, on the config's one server.
        """
        st = self.state
        config = st.config_for(case)
        if primary:
            self._identity(case, config)
        refused = None
        try:
            st.check_hardware()
        except Exception as e:
            refused = f"perfgate: {e}"
        if refused is not None:  # failed outside the except block: no "during handling" chain in the report
            pytest.fail(refused, pytrace=False)
        url = st.opt("perfgate_url")
        if url:
            self._check_attached(url.rstrip("/"), config, case if primary else None)
        key = config.key
        mkey = key if workload is None else f"{key}@{workload_key(workload)}"
        log = st.manager.logs.get(key) if st._manager else None
        if mkey in st.measurements:
            m = st.measurements[mkey]
        elif key in st.failed:
            v = st.failed[key]
            if primary:
                if log:
                    self.record("log", log)
                self._refuse_update(case, f"the {config.name} server failed ({v.category})")
                self.conclude(case, v)
            self._fail_dependency(case, config, v)
        else:
            failed: _ServerFailed | None = None
            try:
                m = self._measure_config(case, config, record_log=primary, workload=workload)
            except _ServerFailed as e:
                failed = e
            if failed is not None:  # concluded outside the except block: no "during handling" chain
                f = failed
                st.failed[key] = f.verdict
                if f.log and primary:
                    self.record("log", f.log)
                if primary:
                    self._refuse_update(case, f"the measurement failed ({f.verdict.category})")
                    self.conclude(case, f.verdict)
                self._fail_dependency(case, config, f.verdict)
            st.measurements[mkey] = m
        if primary and case.kind == "sweep" and not m.sweep:
            m = self._sweep(case, config, m)
        if primary:
            self.record("log", m.log_path)
            self._record_measurement(m)
            self._measured = m
        return m

    def _fail_dependency(self, case: Case, config: ServerConfig, v: Verdict) -> NoReturn:
        self.conclude(case, Verdict(outcome="fail", category=v.category,
                                    message=f"the {config.name} server this record compares against failed: {v.message}"))
        raise AssertionError("unreachable")  # pragma: no cover

    def _measure_config(self, case: Case, config: ServerConfig, *, record_log: bool = False,
                        workload: Workload | None = None) -> Measurement:
        from perfgate.client import flush_cache, run_batch
        from perfgate.workload import load_prompts, requests_for

        st = self.state
        p = st.profile
        w = workload or p.workload_for(config.mode)
        url = st.opt("perfgate_url")
        startup_s = None
        log_path = ""
        if url:
            url = url.rstrip("/")
        else:
            server = self.server_for(config, record_log=record_log)
            url, startup_s, log_path = server.url, server.startup_s, str(server.log_path)
        prompts = load_prompts(w.prompts)
        flush_cache(url)
        per = w.per_trial
        trials: list[Trial] = []
        outputs: dict[int, tuple[int, ...]] = {}
        during = ""
        n_trials = st.opt("perfgate_trials") or w.trials
        if w.warmup:  # prompts after the trials' (and before the sweep's): none is measured warm, flush or not
            outs, wall = run_batch(url, requests_for(w, prompts, w.warmup, offset=n_trials * per),
                                   concurrency=min(w.concurrency, w.warmup), timeout_s=w.request_timeout_s)
            if any(not o.success for o in outs):  # a failing warm-up is the record: no trials to wait for
                trials.append(compute_trial(outs, wall))
                during = " (warm-up)"
        for t in range(0 if trials else n_trials):
            # each trial measures the model, not SGLang's prefix cache: flushed before it, prompts unseen in it
            flush_cache(url)
            reqs = requests_for(w, prompts, per, offset=t * per)
            outs, wall = run_batch(url, reqs, concurrency=w.concurrency, timeout_s=w.request_timeout_s)
            trials.append(compute_trial(outs, wall))
            for i, o in enumerate(outs):
                idx = (t * per + i) % len(prompts)
                if o.success and idx not in outputs:
                    outputs[idx] = o.output_ids
            if any(not o.success for o in outs):  # the record fails anyway: no more timeouts to wait out
                break
        m = summarize(config_key=config.key, config_name=config.name, trials=trials, confidence=w.confidence,
                      outputs=tuple(outputs.get(i, ()) for i in range(len(prompts))), startup_s=startup_s,
                      log_path=log_path, concurrency=w.concurrency)
        if m.failures:
            # a server that died while serving is classified from its log
            if not url_alive(st, config):
                err = st.manager.current._exited_error("while serving") if st.manager.current else None
                st.manager.stop()
                if err is not None:
                    st.manager.failures[config.key] = err
                    raise _ServerFailed(Verdict(outcome="fail", category=err.category or "crash", message=str(err)),
                                        log_path)
            from perfgate.procs import tail

            uniq = list(dict.fromkeys(m.errors))
            self._record_measurement(m)
            msg = f"{m.failures} request(s) failed while measuring {config.name}{during}: {'; '.join(uniq[:3])}"
            if log_path:
                msg += f"\n  log: {log_path}\n  last lines of the log:\n" + "\n".join(
                    "    | " + ln for ln in tail(log_path, 15).splitlines())
            raise _ServerFailed(Verdict(outcome="fail", category="crash", message=msg), log_path)
        return m

    def server_for(self, config: ServerConfig, *, record_log: bool = True) -> Any:
        """The running server of ``config`` (started if needed); raises _ServerFailed with the classified
        failure: flags SGLang's parser rejects, a missing backend package, a failed start, a backend that
        fell back to NCCL."""
        from perfgate.errors import ServerError

        st = self.state
        try:
            refused = st.launch_problem(config)
            if refused is not None:
                raise _ServerFailed(refused, "")
            server = st.manager.ensure(config)
        except ServerError as e:
            hint = self._bad_flag_hint(config, e) if e.category == "bad-flag" else ""
            raise _ServerFailed(Verdict(outcome="fail", category=e.category or "crash", message=hint + str(e)),
                                st.manager.logs.get(config.key, "")) from None
        if record_log:  # before measuring: an interrupted record still names its server log
            self.record("log", str(server.log_path))
        fb = self._fallback(config, server.log_path)
        if fb is not None:
            raise _ServerFailed(fb, str(server.log_path))
        return server

    def _bad_flag_hint(self, config: ServerConfig, e: Exception) -> str:
        """Where an unrecognized flag came from (file and key) and the closest flag the launcher knows."""
        import difflib
        import re
        from pathlib import Path

        log_path = getattr(e, "log_path", None)
        text = Path(log_path).read_text(errors="replace") if log_path else ""
        m = re.search(r"unrecognized arguments: (--[\w-]+)", text)
        if m is None:
            return ""
        flag = m.group(1)
        known = sorted(set(re.findall(r"(?<![\w-])--[a-z0-9][\w-]*", text)) - {flag})
        close = difflib.get_close_matches(flag, known, n=1)
        name = flag[2:]
        p = self.state.profile
        where = f"{p.path} [server]"
        if config.variant and name in self.state.variants.get(config.variant).flags:
            where = f"{self.state.variants.path} [variants.{config.variant}] flags"
        elif name in p.mode(config.mode).flags:
            where = f"{p.path} [modes.{config.mode}] flags"
        fix = f"did you mean {close[0]}?" if close else "remove it, or use the flag's name in this SGLang version"
        return f"{where}: key '{name}': {flag} is not a flag of this SGLang; fix: {fix}\n"

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

    def _sweep(self, case: Case, config: ServerConfig, m: Measurement) -> Measurement:
        """The optional concurrency sweep on the config's (still running) server: 2 x c requests per level."""
        from dataclasses import replace

        from perfgate.client import flush_cache, run_batch
        from perfgate.errors import ServerError
        from perfgate.workload import load_prompts, requests_for

        st = self.state
        w = st.profile.workload_for(config.mode)
        url = st.opt("perfgate_url")
        if url:
            url = url.rstrip("/")
        else:
            err: ServerError | None = None
            try:
                url = st.manager.ensure(config).url
            except ServerError as e:
                err = e
            if err is not None:  # concluded outside the except block: no "during handling" chain
                self.conclude(case, Verdict(outcome="fail", category=err.category or "crash", message=str(err)))
        prompts = load_prompts(w.prompts)
        points = []
        offset = (st.opt("perfgate_trials") or w.trials) * w.per_trial + w.warmup  # past the floor's prompts
        for c in w.concurrency_sweep:
            flush_cache(url)
            outs, wall = run_batch(url, requests_for(w, prompts, 2 * c, offset=offset), concurrency=c,
                                   timeout_s=w.request_timeout_s)
            offset += 2 * c
            points.append(sweep_point(c, outs, wall))
        m = replace(m, sweep=tuple(points))
        st.measurements[config.key] = m
        return m

    def _check_attached(self, url: str, config: ServerConfig, case: Case | None) -> None:
        """Attach mode: skip this test's record unless ``config`` is what the attached server runs."""
        from perfgate import attach

        st = self.state
        checks: dict[str, Any] = st.attach_checks
        chk = checks.get(config.key)
        if chk is None:
            if st.attach_info is None:
                st.attach_info = attach.server_info(url)
            if st.attach_info is None:
                primary = case or case_of(self.item)
                if primary is not None:
                    self._identity(primary)
                self.record("outcome", "fail")
                self.record("reason", f"cannot read {url}/server_info")
                pytest.fail(f"perfgate: cannot read {url}/server_info (--perfgate-url); is a server running there?",
                            pytrace=False)
            chk = checks[config.key] = attach.check(st.attach_info, config, _session_configs(st))
        if case is not None or not chk.runs:
            self.record("attached", url)
            if chk.unverified:
                self.record("attach_unverified", ", ".join(chk.unverified))
        if not chk.runs:
            primary = case or case_of(self.item)
            assert primary is not None
            self._identity(primary)
            self.conclude(primary, Verdict(outcome="skip", message=chk.reason))

    # ------------------------------------------------------------------ checks

    @property
    def profile(self) -> Any:
        return self.state.profile

    def where(self) -> str:
        return str(self.state.profile.path)

    def update_hint(self) -> str:
        return f"`pytest perftests/ -m baseline --perfgate-profile {self.state.profile.name} --perfgate-update-baselines`"

    def floor(self, case: Case, m: Measurement) -> Verdict:
        p = self.profile
        fl = p.floors.get(case.mode)
        if fl is not None and fl.tok_s is not None:
            self.record("floor", fl.tok_s)
            self.record("tolerance", fl.tolerance)
        v = floor_verdict(m, fl, max_cv=p.workload.max_cv, where=f"{self.where()}, mode {case.mode}",
                          update_hint=self.update_hint())
        self._note_update(case.mode, "tok_s", fl.tok_s if fl else None, m, v)
        return lost_verdict(v, f"the {case.mode} floor ({fl.tok_s:g} tok/s)" if fl and fl.tok_s is not None else None)

    def acceptance(self, case: Case, m: Measurement) -> Verdict:
        fl = self.profile.floors.get(case.mode)
        v = acceptance_verdict(m.accept_len, fl, where=f"{self.where()}, mode {case.mode}")
        self._note_update(case.mode, "accept_len", fl.accept_len if fl else None, m, v)
        return lost_verdict(v, f"the {case.mode} acceptance floor ({fl.accept_len:g})"
                            if fl and fl.accept_len is not None else None)

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
        v = compare_verdict(candidate, baseline, confidence=w.confidence, max_cv=w.max_cv, what=what,
                            min_effect=w.min_effect)
        for k, val in v.properties.items():
            self.record(k, val)
        return v

    def sweep_verdict(self, case: Case, m: Measurement) -> Verdict:
        """Record ``c<N>_output_tok_s`` and TTFT/ITL p50/p99 per level; fail if a level lost requests."""
        for pt in m.sweep:
            for name in ("output_tok_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99"):
                value = getattr(pt, name)
                if value is not None:
                    self.record(f"c{pt.concurrency}_{name}", value)
        if not m.sweep:
            return Verdict(outcome="fail", category="crash", message="the concurrency sweep produced no points")
        failed = {pt.concurrency: pt.failures for pt in m.sweep if pt.failures}
        if failed:
            return Verdict(outcome="fail", category="crash",
                           message="requests failed in the concurrency sweep: " + ", ".join(
                               f"{n} at concurrency {c}" for c, n in failed.items()))
        levels = ", ".join(f"{pt.concurrency}: {pt.output_tok_s:.1f}" for pt in m.sweep if pt.output_tok_s)
        return Verdict(outcome="pass", message=f"output tok/s by concurrency {levels}")

    def explain_speculation(self, case: Case, spec: Measurement, base: Measurement, v: Verdict) -> Verdict:
        """Attach the cost model's breakdown; a slower speculation says what it would take."""
        p = self.profile
        if spec.tok_s is None or base.tok_s is None or not spec.accept_len:
            return v
        from perfgate import costmodel

        mode = p.modes[case.mode]
        verify_tokens = int(mode.flags.get("speculative-num-draft-tokens", 0) or 0) or None
        lat = costmodel.latency_interpolator(p.model.allreduce_latency_us) if p.model.allreduce_latency_us else None
        bd = costmodel.spec_breakdown(
            baseline_tok_s=base.tok_s.median, spec_tok_s=spec.tok_s.median, accept_len=spec.accept_len,
            layers=p.model.layers, allreduces_per_layer=p.model.allreduces_per_layer, hidden=p.model.hidden,
            verify_tokens=verify_tokens, allreduce_latency_us=lat,
        )
        for k, val in bd.as_properties().items():
            self.record(k, val)
        if v.outcome == "fail" and v.category == "slower-than-baseline":
            return Verdict(outcome=v.outcome, category=v.category, message=f"{v.message}. {bd.what_it_would_take()}",
                           properties=v.properties)
        return v

    def variant_verdict(self, case: Case, m: Measurement, base: Measurement) -> Verdict:
        v = within_noise_or_faster(self.compare(case, m, base, what=f"{case.variant} in {case.mode}"))
        return self._unexercised(case, m, v)

    def _unexercised(self, case: Case, m: Measurement, v: Verdict) -> Verdict:
        """A variant meant for NCCL's all-reduce whose all-reduces NCCL never saw tested nothing: inconclusive.

        Whatever its speed (same, faster or slower), the difference is not the variant's doing, so it
        is neither a pass nor a slower-than-baseline failure. Decided only where NCCL logged its calls.
        """
        from perfgate.evidence import not_exercised, read_evidence

        variant = self.state.variants.get(case.variant) if case.variant else None
        if variant is None or not variant.backend or not m.log_path or v.category == "wrong-output":
            return v
        why = not_exercised(variant.backend, read_evidence(m.log_path))
        if why is None:
            return v
        return Verdict(outcome="inconclusive", category="not-exercised", properties=v.properties,
                       message=f"inconclusive: not exercised: {case.variant} is meant for {variant.backend}, but {why}; "
                               f"measured: {v.message}")

    def preflight(self, case: Case) -> None:
        """Before any launch: SGLang's own parser on this record's flags (bad-flag record) and the variant's
        required packages (missing-dependency record); real engine only."""
        config = self.state.config_for(case)
        v = self.state.launch_problem(config)
        if v is not None:
            self._identity(case, config)
            self.conclude(case, v)

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
                message=(f"inconclusive: confounded: {case.variant} differs from the {_baseline_of(case.mode)} in "
                         f"{', '.join(sorted(bad))}, which the variant does not declare "
                         f"({_diffs(cand, ref, bad)}); make the runs differ only in the variant's keys")))

    def _refuse_update(self, case: Case, why: str) -> None:
        """--perfgate-update-baselines: this record's floor is not written, and the summary says why."""
        key = {"floor": "tok_s", "acceptance": "accept_len"}.get(case.kind)
        if key is not None and self.state.opt("perfgate_update_baselines"):
            self.state.update_refused.append((case.mode, key, why))

    def _note_update(self, mode: str, key: str, old: object, m: Measurement, v: Verdict) -> None:
        """Remember a floor to write; never from a failed, noisy or inconclusive measurement."""
        st = self.state
        if not st.opt("perfgate_update_baselines"):
            return
        new = m.tok_s.median if key == "tok_s" and m.tok_s else m.accept_len if key == "accept_len" else None
        why = ""
        if m.failures:
            why = f"{m.failures} request(s) failed"
        elif new is None:
            why = "nothing was measured"
        elif v.category == "noisy" or v.outcome == "inconclusive":
            why = v.message.removeprefix("inconclusive: ")
        elif m.tok_s is not None and m.tok_s.cv is not None and m.tok_s.cv > st.profile.workload.max_cv:
            why = (f"too noisy: CV {pct(m.tok_s.cv)} of {m.tok_s.n} trials exceeds the profile's max_cv "
                   f"{pct(st.profile.workload.max_cv)}")
        elif v.outcome == "fail" and v.category != "slower-than-baseline":
            why = f"the measurement failed ({v.category})"
        if why:
            st.update_refused.append((mode, key, why))
            return
        assert new is not None
        st.updates.append((mode, key, old, round(float(new), 2)))
        meta = st.update_meta.setdefault(mode, {})
        meta.update({
            "date": _dt.date.today().isoformat(),
            "n": m.tok_s.n if m.tok_s else 0,
            "cv": round(m.tok_s.cv, 4) if m.tok_s and m.tok_s.cv is not None else 0.0,
            "engine": st.profile.engine.name,
            "attention_backend": str(st.config_for(_case_like(st, mode)).flag_dict.get("attention-backend", "auto")),
            **({"attached": st.opt("perfgate_url")} if st.opt("perfgate_url") else {}),
            **{k.removeprefix("stack."): v for k, v in st.stack.as_properties().items()},
        })

    def crosscheck(self, case: Case) -> None:
        """Measure with perfgate, then with SGLang's bench_one_batch_server on the same live server."""
        import sys
        from pathlib import Path

        from perfgate import crosscheck as cc
        from perfgate.workload import load_prompts

        st = self.state
        p = st.profile
        py = p.engine.python or sys.executable
        module, problem = cc.sglang_bench_module(py)
        if module is None:
            pytest.skip(f"SGLang's one-batch benchmark does not import in {py}: {problem}")
        m = self.measure(case)
        config = st.config_for(case)
        server = st.manager.ensure(config)  # the same, still running server
        w = p.workload_for(case.mode)
        input_len = len(load_prompts(w.prompts)[0])
        tok = cc.make_tokenizer(py, p.model.path, st.log_dir)
        log = Path(st.log_dir) / f"{config.slug}.sglang-bench.log"
        bench = cc.run_bench(python=py, url=server.url, tokenizer=tok, input_len=input_len,
                             output_len=w.max_new_tokens, log_path=log, repeats=w.trials, module=module)
        self.record("sglang_bench_module", module)
        self.record("sglang_bench_n", bench.n)
        self.record("sglang_bench_tok_s", bench.output_throughput)
        self.record("sglang_bench_tok_s_comparable", bench.comparable_tok_s)
        if bench.acc_length is not None:
            self.record("sglang_bench_accept_len", bench.acc_length)
        self.record("sglang_bench_log", str(log))
        assert m.tok_s is not None
        ag = cc.agreement([(t.tok_s, t.accept_len) for t in m.trials if t.tok_s is not None], bench,
                          tok_s=m.tok_s.median, accept_len=m.accept_len)
        self.record("vs_sglang_bench", ag.ratio)
        if ag.per_cycle:
            self.record("cycles_s", ag.perfgate_cycles_s)
            self.record("sglang_bench_cycles_s", ag.bench_cycles_s)
            self.record("vs_sglang_bench_per_cycle", ag.judged)
        self.record("vs_sglang_bench_judged_ci_low", ag.ci[0])
        self.record("vs_sglang_bench_judged_ci_high", ag.ci[1])
        if ag.outcome == "fail":
            v = Verdict(outcome="fail", category="measurement-mismatch", message=f"{ag.message()}; see {log}")
        else:
            v = Verdict(outcome=ag.outcome, message=ag.message())
        self.conclude(case, v)

    # ------------------------------------------------------------------ conclude

    def _warm_cache(self, case: Case, v: Verdict) -> Verdict:
        """A number SGLang's prefix cache helped produce is no verdict on the model (verdict.warm_cache)."""
        from perfgate.verdict import warm_cache

        m = self._measured or self.state.measurements.get(self.state.config_for(case).key)
        return v if m is None else warm_cache(v, m)

    def _quiet(self, message: str) -> str:
        """An expected failure in one line (category and evidence) and its log; the log tail only with -v."""
        if self.item.config.getoption("verbose") > 0:
            return message
        first = message.splitlines()[0] if message else ""
        first = first if len(first) <= 400 else first[:399] + "…"
        log = dict(self.item.user_properties).get("log")
        return first + (f"  (log: {log})" if log else "")

    def _record_evidence(self, case: Case) -> None:
        """What the run exercised, from NCCL's lines in the server log (when the profile turns them on)."""
        from perfgate.evidence import read_evidence, summarize

        st = self.state
        if st.opt("perfgate_url") or st._manager is None:
            return
        log = st.manager.logs.get(st.config_for(case).key)
        if not log:
            return
        ev = read_evidence(log)
        if ev.nccl_logging or ev.backends:
            for k, val in summarize(ev).items():
                self.record(k, val)

    def conclude(self, case: Case, v: Verdict, *, decides: Collection[str] | None = None,
                 default: Expectation | None = None) -> None:
        """Apply the expectation and end the test with the matching pytest outcome.

        ``decides``: the categories this kind of record can decide (None: any). A variant's expectation
        naming another category (``slower-than-baseline`` for a record that compares no speed) does not
        apply to it. ``default``: the expectation where the profile has none for this record (a kind's
        built-in one, e.g. the micro tier's perfgate.allreduce.records.CANNOT_RUN).
        """
        self._identity(case)
        for k, val in v.properties.items():
            self.record(k, val)
        self._record_evidence(case)
        v = self._warm_cache(case, v)
        exp = self.state.profile.expectation(case.expectation_key, case.mode, self.state.stack) or default
        if exp is not None and decides is not None and exp.category not in decides:
            exp = None
        final = apply_expectation(v, exp, profile_path=str(self.state.profile.path))
        if final.outcome == "skip" and final.category == "missing-dependency" and not case.variant:
            # only an optional attempt (a variant) is skipped for a missing package; a profile's own mode that
            # cannot start (SGLang itself not installed) measured nothing: that must not pass CI as a skip
            from dataclasses import replace

            final = replace(final, outcome="fail", message=f"[missing-dependency] {v.message}")
        self.record("outcome", final.outcome)
        self.record("category", final.category or "")
        self.record("expected", final.expected)
        self.record("reason", final.message[:300])
        if final.outcome == "pass":
            return
        if final.outcome in ("fail", "xpass"):
            pytest.fail(final.message, pytrace=False)
        if final.outcome == "xfail":
            pytest.xfail(self._quiet(final.message))
        if final.outcome == "inconclusive":
            msg = final.message if final.message.startswith("inconclusive") else f"inconclusive: {final.message}"
            pytest.skip(msg)
        pytest.skip(final.message)


class _ServerFailed(Exception):
    def __init__(self, verdict: Verdict, log: str) -> None:
        self.verdict = verdict
        self.log = log


def _session_configs(st: PerfgateState) -> list[ServerConfig]:
    """Every config this profile can produce: each mode, and each variant in the variant modes."""
    p = st.profile
    out = {}
    for mode in p.modes:
        c = p.config(mode)
        out[c.key] = c
    for name in st.variants.variants:
        for mode in p.variant_modes:
            c = p.config(mode, variant=st.variants.get(name))
            out.setdefault(c.key, c)
    return list(out.values())


def _case_like(st: PerfgateState, mode: str) -> Case:

    return Case(st.profile.name, "floor", mode, None)


def url_alive(st: PerfgateState, config: ServerConfig) -> bool:
    if st.opt("perfgate_url"):
        return True
    cur = st.manager.current
    return cur is not None and cur.config.key == config.key and cur.alive()


def _diffs(a: ServerConfig, b: ServerConfig, keys: set[str]) -> str:
    sa, sb = a.settings(), b.settings()
    return ", ".join(f"{k}: {sb.get(k)!r} -> {sa.get(k)!r}" for k in sorted(keys))


def _baseline_of(mode: str) -> str:
    """'the baseline' for the mode named baseline, 'the eagle3 baseline' for others."""
    return "baseline" if mode == "baseline" else f"{mode} baseline"


def workload_key(w: Workload) -> str:
    """A short stable id of a workload (measurements of one config are cached per workload)."""
    import hashlib

    text = repr(sorted((k, str(v)) for k, v in vars(w).items()))
    return hashlib.sha1(text.encode()).hexdigest()[:10]
