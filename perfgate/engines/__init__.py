"""Engines: how a ServerConfig becomes a command line and an environment.

Every engine implements :class:`Engine`; adding one touches one module and one line of
``ENGINES``. Both engines go through the same :class:`perfgate.serving.server.Server` lifecycle, so
CI (which only has the simulated engine) exercises the code that launches real SGLang.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from perfgate.profiles.config import ServerConfig


class Engine(Protocol):
    """What the server lifecycle needs from an engine."""

    name: str
    #: seconds to wait after SIGTERM before SIGKILL of the process group
    teardown_grace_s: float

    def command(self, config: ServerConfig, *, host: str, port: int) -> list[str]:
        """The argv that starts a server for ``config`` listening on host:port."""
        ...

    def environment(self, config: ServerConfig, base: Mapping[str, str]) -> dict[str, str]:
        """The process environment: ``base`` plus the config's environment."""
        ...


def get_engine(name: str, **kw: object) -> Engine:
    """The engine registered under ``name``."""
    from perfgate.engines.sglang import SGLangEngine
    from perfgate.engines.sim import SimEngine

    engines: dict[str, type[Engine]] = {"sglang": SGLangEngine, "sim": SimEngine}
    if name not in engines:
        from perfgate.errors import ConfigError

        raise ConfigError(f"unknown engine '{name}'; known engines: {', '.join(engines)}")
    return engines[name](**kw)
