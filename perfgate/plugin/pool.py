"""Where a record's server comes from: launched by perfgate, or attached (``--perfgate-url``), behind one interface.

Both answer two questions for a config:

- :meth:`admit`: may this record run against the server at all? Launching always admits (a config gets
  its own server); attaching admits only the config the running server is (``perfgate.serving.attach``) and
  concludes any other record as a skip naming the difference.
- :meth:`endpoint`: the running server's URL, log and start-up time. Launching starts the config's
  server if it is not the one running (one at a time) and raises :class:`ServerFailed` with the
  classified verdict when it cannot start, or when the variant's backend fell back (the log says so);
  attaching returns the attached URL.

``log_of`` is the server log of a config, when perfgate has one. Nothing else in perfgate branches on
attach mode to reach a server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from perfgate.measuring.verdict import Verdict

if TYPE_CHECKING:
    from perfgate.plugin.runner import PerfRun
    from perfgate.plugin.state import PerfgateState
    from perfgate.profiles.config import ServerConfig
    from perfgate.record import Case

__all__ = ["Endpoint", "ServerFailed", "Servers", "Launcher", "Attacher", "servers_for", "fallback_verdict"]


@dataclass(frozen=True)
class Endpoint:
    """A running server: its URL, its log (empty when attached) and how long it took to start."""

    url: str
    log_path: str = ""
    startup_s: float | None = None


class ServerFailed(Exception):
    """The config's server could not serve: the verdict to record, and its log."""

    def __init__(self, verdict: Verdict, log: str) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict
        self.log = log


class Servers(Protocol):
    attached: bool

    def admit(self, perf: PerfRun, config: ServerConfig, case: Case | None) -> None: ...

    def endpoint(self, perf: PerfRun, config: ServerConfig, *, record_log: bool = False) -> Endpoint: ...

    def log_of(self, config: ServerConfig) -> str: ...

    def alive(self, config: ServerConfig) -> bool: ...


def fallback_verdict(state: PerfgateState, config: ServerConfig, log_path: str | Path | None) -> Verdict | None:
    """A variant whose backend SGLang disabled (its log says so, e.g. an unsupported GPU) did not run."""
    if not config.variant or not log_path:
        return None
    variant = state.variants.get(config.variant)
    if not variant.backend:
        return None
    from perfgate.classify import classify

    cls = classify(None, Path(log_path).read_text(errors="replace"))
    for fb in cls.fallbacks:
        if fb.backend == variant.backend:
            return Verdict(outcome="fail", category=fb.category,
                           message=f"{variant.name}: {variant.backend} did not run, SGLang fell back: "
                                   f"{fb.line.strip()}")
    return None


def bad_flag_hint(state: PerfgateState, config: ServerConfig, log_path: str | Path | None) -> str:
    """Where an unrecognized flag came from (file and key) and the closest flag the launcher knows."""
    import difflib
    import re

    text = Path(log_path).read_text(errors="replace") if log_path else ""
    m = re.search(r"unrecognized arguments: (--[\w-]+)", text)
    if m is None:
        return ""
    flag = m.group(1)
    known = sorted(set(re.findall(r"(?<![\w-])--[a-z0-9][\w-]*", text)) - {flag})
    close = difflib.get_close_matches(flag, known, n=1)
    name = flag[2:]
    p = state.profile
    where = f"{p.path} [server]"
    if config.variant and name in state.variants.get(config.variant).flags:
        where = f"{state.variants.path} [variants.{config.variant}] flags"
    elif name in p.mode(config.mode).flags:
        where = f"{p.path} [modes.{config.mode}] flags"
    fix = f"did you mean {close[0]}?" if close else "remove it, or use the flag's name in this SGLang version"
    return f"{where}: key '{name}': {flag} is not a flag of this SGLang; fix: {fix}\n"


class Launcher:
    """perfgate launches each config's server (one at a time, through the session's ServerManager)."""

    attached = False

    def __init__(self, state: PerfgateState) -> None:
        self.state = state

    def admit(self, perf: PerfRun, config: ServerConfig, case: Case | None) -> None:
        return None

    def endpoint(self, perf: PerfRun, config: ServerConfig, *, record_log: bool = False) -> Endpoint:
        from perfgate.errors import ServerError

        st = self.state
        try:
            refused = st.launch_problem(config)
            if refused is not None:
                raise ServerFailed(refused, "")
            _ = st.fingerprint  # the machine is calibrated while its GPU is free: before the first server
            server = st.manager.ensure(config)
        except ServerError as e:
            hint = bad_flag_hint(st, config, getattr(e, "log_path", None)) if e.category == "bad-flag" else ""
            raise ServerFailed(Verdict(outcome="fail", category=e.category or "crash", message=hint + str(e)),
                               st.manager.logs.get(config.key, "")) from None
        if record_log:  # before measuring: an interrupted record still names its server log
            perf.record("log", str(server.log_path))
        fb = fallback_verdict(st, config, server.log_path)
        if fb is not None:
            raise ServerFailed(fb, str(server.log_path))
        return Endpoint(url=server.url, log_path=str(server.log_path), startup_s=server.startup_s)

    def log_of(self, config: ServerConfig) -> str:
        st = self.state
        return st.manager.logs.get(config.key, "") if st._manager is not None else ""

    def alive(self, config: ServerConfig) -> bool:
        cur = self.state.manager.current
        return cur is not None and cur.config.key == config.key and cur.alive()


class Attacher:
    """``--perfgate-url``: one server someone else runs; records of any other config are skipped."""

    attached = True

    def __init__(self, state: PerfgateState, url: str) -> None:
        self.state = state
        self.url = url.rstrip("/")

    def admit(self, perf: PerfRun, config: ServerConfig, case: Case | None) -> None:
        """Skip this test's record unless ``config`` is what the attached server runs."""
        from perfgate.record import case_of
        from perfgate.serving import attach

        st = self.state
        chk = st.attach_checks.get(config.key)
        if chk is None:
            if st.attach_info is None:
                st.attach_info = attach.server_info(self.url)
            if st.attach_info is None:
                primary = case or case_of(perf.item)
                if primary is not None:
                    perf._identity(primary)
                perf.record("outcome", "fail")
                perf.record("reason", f"cannot read {self.url}/server_info")
                pytest.fail(f"perfgate: cannot read {self.url}/server_info (--perfgate-url); is a server running "
                            f"there?", pytrace=False)
            chk = st.attach_checks[config.key] = attach.check(st.attach_info, config, st.session_configs())
        if case is not None or not chk.runs:
            perf.record("attached", self.url)
            if chk.unverified:
                perf.record("attach_unverified", ", ".join(chk.unverified))
        if not chk.runs:
            primary = case or case_of(perf.item)
            assert primary is not None
            perf._identity(primary)
            perf.conclude(primary, Verdict(outcome="skip", message=chk.reason))

    def endpoint(self, perf: PerfRun, config: ServerConfig, *, record_log: bool = False) -> Endpoint:
        return Endpoint(url=self.url)

    def log_of(self, config: ServerConfig) -> str:
        return ""

    def alive(self, config: ServerConfig) -> bool:
        return True


def servers_for(state: PerfgateState) -> Any:
    """The session's way to its servers: an :class:`Attacher` with ``--perfgate-url``, else a :class:`Launcher`."""
    url = state.opt("perfgate_url")
    return Attacher(state, url) if url else Launcher(state)
