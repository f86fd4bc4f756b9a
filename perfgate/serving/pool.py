"""The session's server pool: where a record's server comes from (launched by perfgate, or attached with
``--perfgate-url``) behind one interface, and the one place that knows a config failed.

Every pool answers, for a config:

- :meth:`Pool.admit`: may this record run against the server at all? Launching always admits (a config gets
  its own server); attaching admits only the config the running server is (``perfgate.serving.attach``) and
  answers a skip naming the difference for any other, or a failure when the server cannot be read.
- :meth:`Pool.endpoint`: the running server's URL, log and start-up time. Launching starts the config's
  server if it is not the one running (one at a time, through the pool's own
  :class:`~perfgate.serving.manager.ServerManager`) and raises :class:`ServerFailed` with the classified
  verdict when it cannot start, when the launch checks refuse it (perfgate.serving.launch_checks), or when
  the variant's backend fell back (the log says so); attaching returns the attached URL.
- :meth:`Pool.failure`: the config's failure, once one is known. A failure met here is remembered here;
  a record that finds its server broken otherwise (requests failed while measuring) tells the pool with
  :meth:`Pool.fail`. A failed config is never launched again.

``log_of`` is the server log of a config, when perfgate has one. Nothing else in perfgate branches on
attach mode to reach a server. The pool reads the session through :class:`PoolSession` (the pytest layer's
``PerfgateState`` is one; it keeps the session's pool in pytest's stash, ``perfgate.plugin.pool``): it needs no
pytest, so a session run by anything else launches and attaches the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perfgate.categories import Category, Outcome
from perfgate.measuring.verdict import Verdict
from perfgate.profiles.settings import CANDIDATE_ARM
from perfgate.serving.arms import StackSource
from perfgate.serving.launch_log import bad_flag_hint, fallback_verdict
from perfgate.stack.probes import UNKNOWN

if TYPE_CHECKING:
    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig
    from perfgate.profiles.settings import Settings
    from perfgate.profiles.variants import VariantSet
    from perfgate.serving.attach import AttachCheck
    from perfgate.serving.manager import ServerManager
    from perfgate.serving.server import Progress, Server

__all__ = ["Admission", "Endpoint", "ServerFailed", "Pool", "PoolSession", "Launcher", "Attacher", "servers_for"]


class PoolSession(StackSource, Protocol):
    """What the pool reads of the session (perfgate.plugin.state.PerfgateState is one): an arm's stack source
    (perfgate.serving.arms: the profile, the stack, the sim stack) and the session's configs, settings and
    terminal."""

    selected_configs: dict[str, ServerConfig]
    attach_info: dict[str, Any] | None
    log_dir: Path

    @property
    def variants(self) -> VariantSet: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def fingerprint(self) -> Any: ...

    def session_configs(self) -> list[ServerConfig]: ...

    def say(self, msg: str, *, live: bool = False) -> None:
        """One line on the session's terminal; ``live``: now, past output capture."""


@dataclass(frozen=True)
class Endpoint:
    """A running server: its URL, its log (empty when attached) and how long it took to start."""

    url: str
    log_path: str = ""
    startup_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class Admission:
    """Whether a record runs on the pool's server: the properties to record on it, and the verdict that
    concludes it instead of running (a skip: the attached server is another config; a failure: it cannot
    be read), or None when it runs."""

    properties: Mapping[str, str] = field(default_factory=dict)
    verdict: Verdict | None = None


class ServerFailed(Exception):
    """The config's server could not serve: the verdict to record, and its log."""

    def __init__(self, verdict: Verdict, log: str) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict
        self.log = log


class Pool:
    """What launching and attaching share: the failures of the session's configs, the launch checks and the
    engine of a config."""

    attached = False

    def __init__(self, state: PoolSession) -> None:
        self.state = state
        self._failed: dict[str, ServerFailed] = {}
        self.flag_results: dict[str, Any] | None = None  # perfgate.serving.launch_checks.flag_problem's answers

    # ------------------------------------------------------------------ failures: the one home

    def failure(self, config: ServerConfig) -> ServerFailed | None:
        """The config's failure (its verdict and log), or None while none is known."""
        return self._failed.get(config.key)

    def fail(self, config: ServerConfig, failed: ServerFailed) -> None:
        """Remember that the config failed (the first failure stays): no record starts it again."""
        self._failed.setdefault(config.key, failed)

    def _raise(self, config: ServerConfig, verdict: Verdict, log: str) -> ServerFailed:
        self.fail(config, ServerFailed(verdict, log))
        return self._failed[config.key]

    # ------------------------------------------------------------------ the interface

    def admit(self, config: ServerConfig) -> Admission:
        return Admission()

    def endpoint(self, config: ServerConfig, *, on_log: Callable[[str], None] | None = None) -> Endpoint:
        raise NotImplementedError  # pragma: no cover

    def log_of(self, config: ServerConfig) -> str:
        return ""

    def alive(self, config: ServerConfig) -> bool:
        return True

    def exit_error(self, config: ServerConfig) -> Any:
        """The ServerError of the config's server if it exited while serving (it is stopped then), else None."""
        return None

    @property
    def launched(self) -> ServerManager | None:
        """The manager of the servers launched so far (None when none was, or when attached)."""
        return None

    def stop(self) -> None:
        """Tear down the running server, if perfgate launched one."""

    # ------------------------------------------------------------------ launch checks (perfgate.serving.launch_checks)

    @property
    def profile(self) -> Profile:
        return self.state.profile

    @property
    def variants(self) -> VariantSet:
        return self.state.variants

    @property
    def selected_configs(self) -> Mapping[str, ServerConfig]:
        """The configs this session may launch: the selected ones and, with ``--perfgate-candidate``, each one's
        candidate arm (so both arms' flags are checked before the first launch, perfgate.serving.launch_checks)."""
        sel = self.state.selected_configs
        cand = self.state.settings.candidate
        if cand is None:
            return sel
        arms = (cand.apply(c) for c in list(sel.values()) if dict(c.engine_options).get("arm") != CANDIDATE_ARM)
        return {**sel, **{a.key: a for a in arms}}

    def launch_problem(self, config: ServerConfig) -> Verdict | None:
        """Why this config must not be launched (rejected flags, a missing backend package), or None."""
        from perfgate.serving.launch_checks import flag_problem, missing_module

        return flag_problem(self, config) or missing_module(self, config)

    def engine_for(self, config: ServerConfig) -> Any:
        """The engine that launches ``config`` (a stack-pair candidate's with its own interpreter and stack)."""
        from perfgate.engines import get_engine

        st = self.state
        p, s = st.profile, st.settings
        arm = dict(config.engine_options)
        python = str(arm.get("python", "") or "")
        if config.engine == "sim":
            w = p.workload
            streams = max([w.concurrency, *w.concurrency_sweep, *(p.workload_for(m).concurrency for m in p.modes)])
            sim_stack = ",".join(x for x in (s.sim_stack, str(arm.get("sim_stack", "") or "")) if x)
            return get_engine("sim", sim_stack=sim_stack, fault=s.sim_fault, max_streams=streams,
                              python=python, real_time=s.crosscheck == "on")
        spell = tuple(st.variants.spellings)
        if config.variant:
            spell = st.variants.get(config.variant).spellings + spell
        version = p.engine.sglang_version
        if arm.get("arm") == CANDIDATE_ARM:
            # the candidate's flags are spelled for its own SGLang, as its own environment reports it
            from perfgate.serving.arms import arm_stack

            found = arm_stack(st, config).sglang
            version = found if found != UNKNOWN else version
        return get_engine("sglang", python=python or p.engine.python, launcher=p.engine.launcher,
                          sglang_version=version, spellings=spell,
                          teardown_grace_s=p.engine.teardown_timeout_s)

    def note(self, msg: str, *, live: bool = False) -> None:
        """One terminal line (the controller only under xdist); ``live``: past output capture, now."""
        self.state.say(msg, live=live)


class Launcher(Pool):
    """perfgate launches each config's server (one at a time, through the pool's ServerManager)."""

    def __init__(self, state: PoolSession) -> None:
        super().__init__(state)
        self._manager: ServerManager | None = None

    @property
    def manager(self) -> ServerManager:
        if self._manager is None:
            from perfgate.serving.coresident import SideBySide
            from perfgate.serving.manager import ServerManager

            st = self.state
            p, s = st.profile, st.settings
            frac = s.co_resident
            self._manager = ServerManager(
                engine_for=self.engine_for if frac is None else lambda c: SideBySide(self.engine_for(c), frac),
                resident=1 if frac is None else 2,
                log_dir=st.log_dir,
                startup_timeout_s=lambda c: s.startup_timeout(p.engine.startup_timeout_s),
                on_progress=self._progress,
                progress_every_s=s.progress_interval_s,
                cpus=s.server_cpus,
            )
        return self._manager

    @property
    def launched(self) -> ServerManager | None:
        return self._manager

    def _progress(self, ev: Progress) -> None:
        """A start-up progress line, written live (past output capture) so a long load is not a silent hang."""
        msg = f"perfgate: [{ev.config}] {ev.phase} ({ev.elapsed_s:.0f} s)"
        if ev.line:
            msg += f": {ev.line[:120]}"
        if ev.phase == "launching" and ev.log_path:
            msg += f"  log: {ev.log_path}"
        self.note(msg, live=True)

    def endpoint(self, config: ServerConfig, *, on_log: Callable[[str], None] | None = None) -> Endpoint:
        """``on_log``: called with the server's log path once it serves, before the fallback check (an
        interrupted record still names its server log)."""
        from perfgate.errors import ServerError

        known = self.failure(config)
        if known is not None:
            raise known
        refused = self.launch_problem(config)
        if refused is not None:
            raise self._raise(config, refused, "")
        failed: ServerError | None = None
        try:
            _ = self.state.fingerprint  # the machine is calibrated while its GPU is free: before the first server
            server = self.manager.ensure(config)
        except ServerError as e:
            failed = e
        if failed is not None:  # raised outside the except block: no "during handling" chain in the report
            err = failed
            hint = bad_flag_hint(self, config, getattr(err, "log_path", None)) if err.category == "bad-flag" else ""
            raise self._raise(config, Verdict(outcome=Outcome.FAIL,
                                              category=Category(err.category or Category.CRASH),
                                              message=hint + str(err)), self.log_of(config))
        if on_log is not None:
            on_log(str(server.log_path))
        fb = fallback_verdict(self, config, server.log_path)
        if fb is not None:
            raise self._raise(config, fb, str(server.log_path))
        return Endpoint(url=server.url, log_path=str(server.log_path), startup_s=server.startup_s)

    def log_of(self, config: ServerConfig) -> str:
        return self._manager.logs.get(config.key, "") if self._manager is not None else ""

    def _running(self, config: ServerConfig) -> Server | None:
        """The config's server among those running (co-resident arms: two), or None."""
        running = self._manager.running() if self._manager is not None else []
        return next((s for s in running if s.config.key == config.key), None)

    def alive(self, config: ServerConfig) -> bool:
        server = self._running(config)
        return server is not None and server.alive()

    def exit_error(self, config: ServerConfig) -> Any:
        if self.alive(config) or self._manager is None:
            return None
        server = self._running(config)
        err = server._exited_error("while serving") if server is not None else None
        self._manager.stop()
        return err

    def stop(self) -> None:
        if self._manager is not None:
            self._manager.stop()


class Attacher(Pool):
    """``--perfgate-url``: one server someone else runs; records of any other config are skipped."""

    attached = True

    def __init__(self, state: PoolSession, url: str) -> None:
        super().__init__(state)
        self.url = url.rstrip("/")
        self.info: dict[str, Any] | None = state.attach_info  # the attached server's /server_info
        self.checks: dict[str, AttachCheck] = {}  # config key -> how it relates to the attached server

    def admit(self, config: ServerConfig) -> Admission:
        """A skip unless ``config`` is what the attached server runs; a failure when it cannot be read."""
        from perfgate.serving import attach

        known = self.failure(config)
        if known is not None:
            return Admission(verdict=known.verdict)
        chk = self.checks.get(config.key)
        if chk is None:
            if self.info is None:
                self.info = attach.server_info(self.url)
            if self.info is None:
                v = Verdict(outcome=Outcome.FAIL, category=Category.CONFIG_ERROR,
                            message=f"perfgate: cannot read {self.url}/server_info (--perfgate-url); "
                                    f"is a server running there?")
                self.fail(config, ServerFailed(v, ""))
                return Admission(verdict=v)
            chk = self.checks[config.key] = attach.check(self.info, config, self.state.session_configs())
        props = {"attached": self.url}
        if chk.unverified:
            props["attach_unverified"] = ", ".join(chk.unverified)
        return Admission(properties=props,
                         verdict=None if chk.runs else Verdict(outcome=Outcome.SKIP, message=chk.reason))

    def endpoint(self, config: ServerConfig, *, on_log: Callable[[str], None] | None = None) -> Endpoint:
        known = self.failure(config)
        if known is not None:
            raise known
        return Endpoint(url=self.url)

    def unverified(self) -> list[str]:
        """What attach mode could not verify on the server, for the configs that ran on it."""
        return sorted({u for c in self.checks.values() if c.runs for u in c.unverified})


def servers_for(state: PoolSession) -> Pool:
    """A new pool for the session: an :class:`Attacher` with ``--perfgate-url``, else a :class:`Launcher`."""
    url = state.settings.url
    return Attacher(state, url) if url else Launcher(state)
