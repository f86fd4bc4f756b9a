"""One line on pytest's terminal, from anywhere in the pytest layer (imports nothing of perfgate)."""

from __future__ import annotations

import contextlib
import sys

import pytest


def say(config: pytest.Config, msg: str, *, live: bool = True) -> None:
    """Write ``msg`` as one terminal line; ``live``: past output capture, now (a start-up's progress is not held
    back until the test ends). Under xdist a worker's line goes out live, prefixed with the worker's id
    (:func:`_from_worker`), so a 10-minute load on a worker is not a silent hang either."""
    if hasattr(config, "workerinput"):
        _from_worker(config, msg)
        return
    capman = config.pluginmanager.get_plugin("capturemanager") if live else None
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return
    if capman is None:
        tr.write_line(msg)
        return
    with capman.global_and_fixture_disabled():
        tr.ensure_newline()
        tr.write_line(msg)


def _from_worker(config: pytest.Config, msg: str) -> None:
    """An xdist worker has no terminal (execnet speaks over its stdin and stdout) but inherits the controller's
    stderr: the line goes there, past the worker's own output capture, whole in one write (``[gw1] perfgate: ...``).
    Where that stream is gone, the line is dropped: the server log has it."""
    worker = config.workerinput.get("workerid", "gw?")  # type: ignore[attr-defined]  # set by xdist on workers
    err, capman = sys.__stderr__, config.pluginmanager.get_plugin("capturemanager")
    if err is None:
        return
    uncaptured = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    try:
        with uncaptured:
            err.write(f"[{worker}] {msg}\n")
            err.flush()
    except (OSError, ValueError):  # a closed or broken stream: nothing to say it on
        return
