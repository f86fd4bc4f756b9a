"""PerfRun: what a perf test does — measure a case, record it, conclude it.

Numbers are recorded as JUnit properties *before* any assertion, so failing tests still carry
their measurements. Conclusions go through the profile's expectations: an xfail is strict and
must fail for its stated reason.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NoReturn

import pytest

from perfgate.categories import Category, Outcome
from perfgate.kinds import kind_of
from perfgate.measuring.judge import Sequential
from perfgate.measuring.ledger import refuse_update
from perfgate.measuring.metrics import Measurement
from perfgate.measuring.verdict import Verdict, final_verdict
from perfgate.plugin.checks import Checks
from perfgate.plugin.pool import Pool, ServerFailed, pool_of
from perfgate.record import Case, case_of, cv_name, fmt

if TYPE_CHECKING:
    from perfgate.plugin.state import PerfgateState
    from perfgate.procedure import TrialsRun
    from perfgate.profiles import Expectation, Workload
    from perfgate.profiles.config import ServerConfig


@dataclass
class PerfRun(Checks):
    """Per-test helper handed out by the private ``_perfgate_run`` fixture: record, measure, check
    (:class:`perfgate.plugin.checks.Checks`),
    conclude."""

    item: pytest.Item
    state: PerfgateState
    _identity_done: bool = field(default=False, init=False)
    _measured: Measurement | None = field(default=None, init=False)  # this record's own measurement
    # how each measurement this test was handed came about (case, config, workload, ledger key): what
    # more_starts() needs to add a start of the same thing
    _how: list[tuple[Measurement, Case, ServerConfig, Workload | None, str]] = field(default_factory=list, init=False)

    @property
    def servers(self) -> Pool:
        """The session's server pool (perfgate.plugin.pool): launched or attached, and its failures."""
        return pool_of(self.state)

    def update_command(self) -> str:
        """The command that writes this test's limit (its directory, its perfgate marker, the profile): what a
        record without a limit, or failing one on purpose, tells the user to run."""
        import os

        item = self.item
        here = item.config.invocation_params.dir
        folder = os.path.relpath(item.path.parent, here) if item.path.is_relative_to(here) else str(item.path.parent)
        # perfgate's selection markers (baseline, speculative, load, ...): registered with "(perfgate)" at the end
        tiers = {line.split(":")[0] for line in item.config.getini("markers") if str(line).endswith("(perfgate)")}
        marks = [mk.name for mk in item.iter_markers() if mk.name in tiers]
        select = f" -m {marks[0]}" if marks else ""
        from perfgate.profiles.shipped import is_shipped_copy

        p = self.state.profile
        if is_shipped_copy(p.path):  # the installed copy is never written: a project of the user's first
            return (f"`perfgate init --from {p.name}` (this profile is perfgate's installed copy, which it never "
                    f"writes), then, in that project, `pytest {folder}/{select} --perfgate-update-baselines`")
        return f"`pytest {folder}/{select} --perfgate-profile {p.name} --perfgate-update-baselines`"

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
        for k, v in self.state.fingerprint.as_properties().items():  # machine.*, calib.* (perfgate.plugin.fingerprint)
            self.record(k, v)

    def _record_measurement(self, m: Measurement, prefix: str = "") -> None:
        if m.tok_s is not None:
            self.record(prefix + "tok_s", m.tok_s.median)
            if m.tok_s.ci_low is not None and m.tok_s.ci_high is not None:  # else: noise unknown, no interval
                self.record(prefix + "tok_s_ci_low", m.tok_s.ci_low)
                self.record(prefix + "tok_s_ci_high", m.tok_s.ci_high)
            self.record(prefix + "n", m.tok_s.n)
            if m.tok_s.cv is not None:
                self.record(prefix + cv_name("tok_s"), m.tok_s.cv)
        for name in ("ttft_ms", "itl_ms"):  # with their CV over trials: the within-start noise beside start_values.*
            stat = m.stat(name)
            if stat is not None:
                self.record(prefix + name, stat.median)
                if stat.cv is not None:
                    self.record(prefix + cv_name(name), stat.cv)
        if m.accept_len is not None:
            self.record(prefix + "accept_len", m.accept_len)
        if m.startup_s is not None:
            self.record(prefix + "startup_s", m.startup_s)
        if m.failures:
            self.record(prefix + "failed_requests", m.failures)
        self.record(prefix + "cached_tokens", m.cached_tokens)
        from perfgate.measuring.probes import mode_properties

        for k, v in mode_properties(m).items():  # ttft_probes, ttft_modes, itl_modes, ...
            self.record(prefix + k, v)
        from perfgate.measuring.starts import placement_properties, start_properties

        for k, v in (placement_properties(m) if prefix else start_properties(m)).items():  # a candidate: where it ran
            self.record(prefix + k, v)

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
        self.admit(config, case if primary else None)
        servers = self.servers
        key = config.key
        mkey = key if workload is None else f"{key}@{workload_key(workload)}"
        if (st.ledger.measurement(mkey) is None and servers.failure(config) is None
                and (st.settings.starts > 1 or st.settings.co_resident is not None)):
            self._measure_starts(case, config, workload, mkey)
        log = servers.log_of(config)
        known = servers.failure(config)
        cached = st.ledger.measurement(mkey)
        if cached is not None:
            m = cached
        elif known is not None:
            v = known.verdict
            if primary:
                if log:
                    self.record("log", log)
                refuse_update(self.state, case, f"the {config.name} server failed ({v.category})")
                self.conclude(case, v)
            self._fail_dependency(case, config, v)
        else:
            failed: ServerFailed | None = None
            try:
                m = self._measure_config(case, config, record_log=primary, workload=workload)
            except ServerFailed as e:
                failed = e
            if failed is not None:  # concluded outside the except block: no "during handling" chain
                f = failed
                servers.fail(config, f)
                if f.log and primary:
                    self.record("log", f.log)
                if primary:
                    refuse_update(self.state, case, f"the measurement failed ({f.verdict.category})")
                    self.conclude(case, f.verdict)
                self._fail_dependency(case, config, f.verdict)
            st.ledger.note_measurement(mkey, m)
        k = kind_of(case.kind)
        if primary and k is not None and k.sweeps and not m.sweep:
            m = self.sweep(case, config, m)
        if primary:
            self.record("log", m.log_path)
            self._record_measurement(m)
            self._measured = m
        self._how.append((m, case, config, workload, mkey))
        return m

    def plan(self) -> Sequential:
        """The sequential design of this session's paired comparisons (perfgate.measuring.judge.Sequential): the
        first look after ``starts`` pairs, at most ``max_starts``."""
        s = self.state.settings
        return Sequential(first_pairs=s.starts, max_pairs=s.max_starts, max_time_s=s.max_time_s)

    def no_more_starts(self, *measured: Measurement) -> str:
        """Why :meth:`more_starts` would add no start pair to these measurements (empty: it would): the budget
        (``--perfgate-max-starts``, ``--perfgate-max-time``) is spent, the servers are attached, or a
        measurement was not taken by this record."""
        st = self.state
        if self.servers.attached:
            return "the servers are attached (--perfgate-url): none can be restarted"
        if any(not any(h[0] is m for h in self._how) for m in measured):
            return "a measurement was not taken by this record"
        from perfgate.serving.starts import ServerStarts

        return ServerStarts(st).budget_spent(max(len(m.starts) or 1 for m in measured))

    def more_starts(self, *measured: Measurement) -> tuple[Measurement, ...] | None:
        """One more server start of each measured config, each measured as before and pooled with its earlier
        starts in the ledger, returned in the order given (current then candidate, baseline then variant); started
        in the order of the pair's number (perfgate.measuring.order.in_pair_order: the pair after ``n`` pairs is
        number ``n``, as given when even, reversed when odd: A B, B A, A B ...); None when :meth:`no_more_starts`
        says why not, or a start failed."""
        from perfgate.measuring.starts import combine
        from perfgate.serving.starts import ServerStarts

        st = self.state
        if self.no_more_starts(*measured):
            return None
        hows = [next(h for h in self._how if h[0] is m) for m in measured]
        starts = ServerStarts(st)
        launched = self.servers.launched
        if launched is not None and launched.current is not None:  # what runs now was measured: a new start each
            starts.measured()
        pair = max(len(m.starts) or 1 for m in measured)  # the pairs so far: this one's number, 0-based
        pooled_of: dict[int, Measurement] = {}
        for h in hows:
            st.selected_configs.setdefault(h[2].key, h[2])  # named in the summary's starts line
        for how, one in starts.round(hows, pair, lambda h: h[2],
                                     lambda h, c: self._measure_config(h[1], c, workload=h[3]), added=True,
                                     together=lambda cs: self._measure_servers(cs, hows[0][3])):
            m, case, config, workload, mkey = how
            if one is None or isinstance(one, ServerFailed):
                if one is not None:
                    self.servers.fail(config, one)
                return None
            w = workload or st.settings.workload(st.profile.workload_for(config.mode))
            pooled = combine([*(m.starts or (m,)), one], confidence=w.confidence)
            st.ledger.note_measurement(mkey, pooled)
            self._how.append((pooled, case, config, workload, mkey))
            if self._measured is m:
                self._measured = pooled
            pooled_of[id(m)] = pooled
        return tuple(pooled_of[id(m)] for m in measured)

    def _measure_starts(self, case: Case, config: ServerConfig, workload: Workload | None, mkey: str) -> None:
        """--perfgate-starts N > 1: this config and those compared with it, N starts each, interleaved."""
        from perfgate.serving.starts import group_for, measure_interleaved

        st = self.state
        group = group_for(st, config, self.item) if workload is None else [config]
        w = workload or st.settings.workload(st.profile.workload_for(config.mode))

        def one(c: ServerConfig) -> Measurement:
            return self._measure_config(case, c, record_log=c.key == config.key, workload=workload)

        measure_interleaved(st, group, st.settings.starts, one, confidence=w.confidence, on_failure=self.servers.fail,
                            key_of=lambda c: mkey if c.key == config.key else c.key,
                            together=lambda cs: self._measure_servers(cs, workload))

    def admit(self, config: ServerConfig, case: Case | None) -> None:
        """Run this test's record on ``config``'s server only if the pool admits it (attached: the server is that
        config); else conclude it (``case``, or the test's own record) with the pool's verdict."""
        adm = self.servers.admit(config)
        if case is not None or adm.verdict is not None:
            for k, v in adm.properties.items():
                self.record(k, v)
        if adm.verdict is None:
            return
        primary = case or case_of(self.item)
        if primary is None:
            self.record("outcome", adm.verdict.outcome)
            self.record("reason", adm.verdict.message[:300])
            pytest.fail(adm.verdict.message, pytrace=False)
        self._identity(primary)
        self.conclude(primary, adm.verdict)

    def _fail_dependency(self, case: Case, config: ServerConfig, v: Verdict) -> NoReturn:
        self.conclude(case, Verdict(outcome=Outcome.FAIL, category=v.category,
                                    message=f"the {config.name} server this record compares against failed: "
                                            f"{v.message}"))
        raise AssertionError("unreachable")  # pragma: no cover

    def _measure_config(self, case: Case, config: ServerConfig, *, record_log: bool = False,
                        workload: Workload | None = None) -> Measurement:
        """The config's closed-loop trials on its server (:meth:`_measure_servers` of it alone); its failure raised."""
        log = (lambda path: self.record("log", path)) if record_log else None
        m = self._measure_servers([config], workload, on_log=log)[0]
        if isinstance(m, ServerFailed):
            raise m
        assert m is not None
        return m

    def _measure_servers(self, configs: Sequence[ServerConfig], workload: Workload | None = None, *,
                         on_log: Callable[[str], None] | None = None) -> list[Measurement | ServerFailed | None]:
        """The configs' trials (perfgate.procedure.run_side_by_side: one config, or co-resident arms started in this
        order and interleaved) on ``workload`` or the mode's as the session resolves it. Per config its measurement
        (:meth:`_checked`), its failure, or None where another's start failed first; ``on_log``: the first's log."""
        from perfgate.plugin.hostwatch import watched
        from perfgate.procedure import Arm, run_side_by_side

        st = self.state
        w = workload or st.settings.workload(st.profile.workload_for(configs[0].mode))
        arms = []
        for c in configs:
            try:
                ep = self.servers.endpoint(c, on_log=on_log if c is configs[0] else None)
            except ServerFailed as e:
                return [e if x is c else None for x in configs]
            arms.append(Arm(url=ep.url, config_key=c.key, config_name=c.name, startup_s=ep.startup_s,
                            log_path=ep.log_path))
        with watched(st, *(c.key for c in configs)) as seen:  # the host's and the GPUs' state (host.* properties)
            runs = run_side_by_side(arms, w)
        out: list[Measurement | ServerFailed | None] = []
        for c, run, other in zip(configs, runs, reversed(configs)):
            try:
                m = replace(self._checked(run, c, seen.state, seen.conditions.others_cpu if seen.conditions else None),
                            placement=seen.placement)
                out.append(replace(m, beside=other.key) if len(configs) > 1 else m)
            except ServerFailed as e:
                out.append(e)
        return out

    def _checked(self, run: TrialsRun, config: ServerConfig, host_state: str,
                 others_cpu: float | None = None) -> Measurement:
        """A start's measurement with the host's state (and the others' CPU) and its start number; failed requests
        are a ServerFailed, from the server's log when it died."""
        launched = self.servers.launched  # start_no: which start it was, the order of a pair's arms
        m = replace(run.measurement, host_state=host_state, others_cpu=others_cpu,
                    start_no=launched.number(config.key) if launched is not None else 0)
        log_path = m.log_path
        if m.failures:
            # a server that died while serving is classified from its log
            err = self.servers.exit_error(config)
            if err is not None:
                raise ServerFailed(Verdict(outcome=Outcome.FAIL, category=Category(err.category or Category.CRASH),
                                           message=str(err)),
                                   log_path)
            from perfgate.serving.launch_log import failed_requests_verdict

            self._record_measurement(m)
            raise ServerFailed(failed_requests_verdict(config.name, m.failures, m.errors, log_path,
                                                       warmup=run.warmup_failed), log_path)
        return m

    def sweep(self, case: Case, config: ServerConfig, m: Measurement) -> Measurement:
        """The optional concurrency sweep on the config's (still running) server (perfgate.procedure.run_sweep):
        2 x c requests per level, on the mode's workload as the session resolves it."""
        from perfgate.procedure import run_sweep

        st = self.state
        w = st.settings.workload(st.profile.workload_for(config.mode))
        failed: ServerFailed | None = None
        try:
            url = self.servers.endpoint(config).url
        except ServerFailed as e:
            failed = e
        if failed is not None:  # concluded outside the except block: no "during handling" chain
            self.conclude(case, failed.verdict)
        m = replace(m, sweep=run_sweep(url, w))
        st.ledger.note_measurement(config.key, m)
        return m

    # ------------------------------------------------------------------ conclude

    def _served(self, case: Case) -> Measurement | None:
        """The measurement of the record's server, whose prefix-cache hits the final verdict checks (a record
        with no server, the micro tier's, has none)."""
        return self._measured or self.state.ledger.measurement(self.state.config_for(case).key)

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
        from perfgate.serving.evidence import read_evidence, summarize

        st = self.state
        log = self.servers.log_of(st.config_for(case))
        if not log:
            return
        ev = read_evidence(log)
        if ev.nccl_logging or ev.backends:
            for k, val in summarize(ev).items():
                self.record(k, val)

    def _record_conditions(self) -> None:
        """The host's and the GPUs' state over the starts this record measured or compares with (host.*)."""
        from perfgate.plugin.hostwatch import conditions_of

        cond = conditions_of(self.state, (h[2].key for h in self._how))
        for k, val in (cond.properties() if cond is not None else {}).items():
            self.record(k, val)

    def conclude(self, case: Case, v: Verdict, *, decides: Collection[str] | None = None,
                 default: Expectation | None = None, stored_floor: str | None = None) -> None:
        """Apply the expectation and end the test with the matching pytest outcome.

        ``decides``: the categories this kind of record can decide (None: any). A variant's expectation
        naming another category (``slower-than-baseline`` for a record that compares no speed) does not
        apply to it. ``default``: the expectation where the profile has none for this record (a kind's
        built-in one, e.g. the micro tier's perfgate.plugin.microcheck.CANNOT_RUN). ``stored_floor``: the stored
        limit the verdict checked (a record that cannot check it is a lost verdict). The final outcome comes from
        :func:`perfgate.measuring.verdict.final_verdict`, the one path.
        """
        self._identity(case)
        self._record_conditions()
        for k, val in v.properties.items():
            self.record(k, val)
        self._record_evidence(case)
        exp = self.state.profile.expectation(case.expectation_key, case.mode, self.state.stack) or default
        if exp is not None and decides is not None and exp.category not in decides:
            exp = None
        final = final_verdict(v, measurement=self._served(case), expectation=exp,
                              profile_path=str(self.state.profile.path), optional=bool(case.variant),
                              stored_floor=stored_floor)
        self.record("outcome", final.outcome)
        self.record("category", final.category or "")
        self.record("expected", final.expected)
        self.record("reason", final.message[:300])
        if final.why is not None:
            from perfgate.record import WHY_UNDECIDED

            self.record(WHY_UNDECIDED, str(final.why))
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


def workload_key(w: Workload) -> str:
    """A short stable id of a workload (measurements of one config are cached per workload)."""
    import hashlib

    text = repr(sorted((k, str(v)) for k, v in vars(w).items()))
    return hashlib.sha1(text.encode()).hexdigest()[:10]
