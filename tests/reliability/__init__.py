"""Faults and bad input, measured: every scenario of issue 6 as a real subprocess run of pytest (perfgate's
own test machinery: ``tests/test_reliability.py`` asserts on the records in detail, and
``python -m tests.reliability --out docs/reliability.md`` writes the table of docs/reliability.md).

Each scenario builds a throw-away project (perftests, a small simulated profile, a conftest),
runs ``python -m pytest`` on it against perfgate's simulated server — faults are injected with
the simulator's ``PERFGATE_SIM_FAULT`` through a mode's ``env`` — optionally sends a signal
mid-measurement, then checks:

- **processes left**: every process whose environment carries the run's unique token (the
  servers, their children, the reapers) and every server process group named by a
  ``# pgid:`` line of a server log, after a grace period for the reaper (teardown grace + 5 s);
- **records lost**: tests that finished (a conftest hook appends each test's id to a ledger
  file at its teardown) but have no ``<testcase>`` in the JUnit file.

:mod:`~tests.reliability.runs` is one run, :mod:`~tests.reliability.scenarios` the scenarios,
``__main__`` the table. Nothing here needs a GPU.
"""

from tests.reliability.runs import REQUEST_TIMEOUT_S, STARTUP_TIMEOUT_S, Record, Run, run_pytest
from tests.reliability.scenarios import (
    BAD_INPUTS,
    FAULT_SESSIONS,
    FAULTS,
    RAISING_ARGS,
    STUCK_ARGS,
    TIMEOUT_ARGS,
    BadInput,
    Fault,
    bad_input_project,
    raising_project,
    run_faults,
    run_of,
    run_signalled,
    stuck_project,
)

__all__ = [
    "BAD_INPUTS", "FAULTS", "FAULT_SESSIONS", "RAISING_ARGS", "REQUEST_TIMEOUT_S", "STARTUP_TIMEOUT_S",
    "STUCK_ARGS", "TIMEOUT_ARGS", "BadInput", "Fault", "Record", "Run", "bad_input_project", "raising_project",
    "run_faults", "run_of", "run_pytest", "run_signalled", "stuck_project",
]
