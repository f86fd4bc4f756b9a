"""Usage errors found while collecting (a kind an expectation names, a config the visible GPUs cannot hold, a
marker's mistake): pytest reports one raised there as a usage error (exit 4, one line). In a pytest-xdist worker it
would crash the worker instead (an INTERNALERROR on the controller, exit 3, no message), so there the worker keeps
the message, deselects everything, and hands it to the controller (``workeroutput``), which says it once and
exits 4, as a session without workers does."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["guarded", "from_worker", "at_finish"]

_KEY = "perfgate_usage_error"
_SEEN = pytest.StashKey[str]()


def guarded(config: pytest.Config, items: list[pytest.Item], check: Callable[[], None]) -> None:
    """Run a collection-time check; in an xdist worker, a usage error it raises is kept for the controller."""
    try:
        check()
    except pytest.UsageError as e:
        out = getattr(config, "workeroutput", None)
        if out is None:
            raise
        out.setdefault(_KEY, str(e))
        if items:
            config.hook.pytest_deselected(items=list(items))
            items[:] = []


def from_worker(node: Any) -> None:
    """On the controller, when a worker ends: the usage error it kept, if any."""
    msg = getattr(node, "workeroutput", {}).get(_KEY)
    if msg:
        node.config.stash.setdefault(_SEEN, str(msg))


def at_finish(session: pytest.Session) -> None:
    """On the controller, at session finish: a worker's usage error said once, and the exit code pytest gives one."""
    msg = session.config.stash.get(_SEEN, None)
    if msg is not None:
        sys.stderr.write(f"ERROR: {msg}\n")
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
