"""One line on pytest's terminal, from anywhere in the pytest layer (imports nothing of perfgate)."""

from __future__ import annotations

import pytest


def say(config: pytest.Config, msg: str, *, live: bool = True) -> None:
    """Write ``msg`` as one terminal line, on the controller only under xdist; ``live``: past output capture,
    now (a start-up's progress is not held back until the test ends)."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or hasattr(config, "workerinput"):
        return
    capman = config.pluginmanager.get_plugin("capturemanager") if live else None
    if capman is None:
        tr.write_line(msg)
        return
    with capman.global_and_fixture_disabled():
        tr.ensure_newline()
        tr.write_line(msg)
