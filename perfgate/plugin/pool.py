"""The session's server pool in pytest's stash (``POOL``, PerfgateState.pool): one
:class:`perfgate.serving.pool.Pool` per session (launched, or attached with ``--perfgate-url``), made when first
asked for, stopped at session finish. The pool itself, and everything it knows (failures, launch checks, engines),
is perfgate.serving.pool's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from perfgate.plugin.state import POOL
from perfgate.serving.pool import Admission, Attacher, Endpoint, Launcher, Pool, ServerFailed, servers_for

if TYPE_CHECKING:
    from perfgate.plugin.state import PerfgateState

__all__ = ["Admission", "Endpoint", "ServerFailed", "Pool", "Launcher", "Attacher", "POOL", "pool_of",
           "servers_for", "stop_servers"]

def pool_of(state: PerfgateState) -> Pool:
    """The session's server pool (one per session: PerfgateState.pool)."""
    return state.pool


def stop_servers(config: pytest.Config) -> None:
    """Stop the session's running server, if any (session finish, unconfigure)."""
    pool = config.stash.get(POOL, None)
    if pool is not None:
        pool.stop()
