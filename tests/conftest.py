"""perfgate's own test suite: hypothesis profiles, warnings as errors, and the four tiers.

Every test gets exactly one tier marker, applied here at collection (as pytest's own ``testing/conftest.py``
marks its pytester tests), so ``-m`` selects a tier without anyone remembering to mark a test:

``unit``
    pure, in process: no subprocess, no socket, no sleep on the test's thread. Enforced: a unit test that
    starts a process, binds or connects a socket or sleeps fails with ``TierViolation`` naming the fix.
``process``
    subprocesses, pytester sessions, simulated servers, the built wheel; asserts structure (records,
    outcomes, categories, properties, exit codes, files), never measured time. A test whose module
    uses any of those is here automatically (``_PROCESS_SIGNS``), or by ``pytestmark = pytest.mark.process``.
``timing``
    asserts on measured time (a live simulated server's figures, a wall-clock bound): its verdict depends on
    how loaded the runner is. Only by an explicit ``pytest.mark.timing``; run serially, in a step of its own.
``records``
    the product's own records (``perftests/`` against the simulator), long and timed; nightly.

The PR gate (``.ci/run``, the README's test command) runs ``-m "unit or process"`` in parallel (pytest-xdist).
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import requests  # noqa: F401  (urllib3 binds a socket when first imported, to probe IPv6: here, not in a unit test)
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

pytest_plugins = ["pytester", "tests.wheelenv"]

TIERS = ("unit", "process", "timing", "records")
#: fixtures that make a test a process test wherever it is
_PROCESS_FIXTURES = frozenset({"pytester", "testdir", "wheel_env"})
#: what in a test module's source makes its tests process tests: it starts processes or serves over sockets
_PROCESS_SIGNS = ("subprocess", "Popen", "runpytest", "sys.executable", "multiprocessing", "ServerManager",
                  "wheelenv", "simproject", "tests.reliability", "SimProcess", "free_port", "run_allreduce_bench")


def pytest_configure(config: pytest.Config) -> None:
    # the suite's own parallel workers and simulated servers are the host's load: records made here are not judged
    # by it (perfgate.host.conditions.WATCH_ENV); tests of the watch turn it back on
    os.environ.setdefault("PERFGATE_HOST_WATCH", "off")
    # nor judged on the noise of the suite's earlier sessions in one folder (perfgate.report.pairnoise.NOISE_AUTO_ENV):
    # a test's second paired session would else be judged on its first's; tests of it turn it back on
    os.environ.setdefault("PERFGATE_NOISE_AUTO", "off")
    # the simulated servers of the suite's sessions at half the default speed-up (perfgate.engines.sim): a stall of
    # the suite's own workers is then half the share of a trial it is at 4, where a loaded runner turned single
    # trials 10-12 % slow and decided comparisons by it; a test that needs another speed sets its own
    os.environ.setdefault("PERFGATE_SIM_SPEEDUP", "2")
    try:  # matplotlib's first import runs a font-cache subprocess: done once here, so plot tests stay unit tests
        import matplotlib.backends.backend_agg  # noqa: F401
    except ImportError:  # pragma: no cover - the dev extra installs it
        pass
    # scipy.stats's first import (numpy.fft and scipy.sparse under it, a second or more on a loaded runner) is made
    # once here, not inside the first test that judges, under that test's warnings-as-errors and its deadline
    import scipy.stats  # noqa: F401
    for line in ("unit: pure and in process (no subprocess, socket or sleep; enforced)",
                 "process: subprocesses, pytester sessions, simulated servers; asserts structure, not time",
                 "timing: asserts on measured time; its verdict depends on the runner's load (run serially)",
                 "records: the product's own long records (perftests/ on the simulator; nightly)"):
        config.addinivalue_line("markers", line)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (the README's test command): two workers a free CPU, up to 8 (:func:`auto_workers`). The process
    tier mostly waits on simulated servers, which model a GPU's time by sleeping: one of its longest tests used 24 %
    of a CPU over its 3 minutes, and the whole gate on a quiet 2-CPU box used 147 % of the two at 4 workers, in 13
    minutes against 22 at 2. A CPU another job keeps busy is not free: beside a hog on one of 2 CPUs, 4 workers
    starved the simulated servers enough for a floor record to read 26 % slow. ``PYTEST_XDIST_AUTO_NUM_WORKERS``
    still sets the number (pytest-xdist's own variable)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return auto_workers(len(cpus), _idle_cpus(cpus))


def auto_workers(cpus: int, idle: float | None) -> int:
    """Workers for ``cpus`` CPUs of which ``idle`` (CPUs' worth, None: unknown, all) were idle a moment ago: two a
    free CPU, at most 8, never fewer than one a free CPU."""
    free = cpus if idle is None else max(1, min(cpus, round(idle)))
    return max(free, min(2 * free, 8))


def _idle_cpus(cpus: list[int], seconds: float = 0.5) -> float | None:
    """CPUs' worth of idle time over ``seconds`` on the CPUs the suite may run on (``cpus``, its affinity: in a
    container limited to a few of the host's CPUs the host's other CPUs are no one's to use), read per CPU with
    psutil, as perfgate's own host watch reads the CPUs; None without it."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - a dependency of perfgate
        return None
    busy: list[float] = psutil.cpu_percent(interval=seconds, percpu=True)
    return sum(1 - busy[c] / 100 for c in cpus if c < len(busy))


@cache
def _module_starts_processes(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return any(sign in text for sign in _PROCESS_SIGNS)


def tier_of(item: pytest.Item, root: Path) -> str:
    """The one tier of ``item``: an explicit tier marker wins (timing over records over process over unit)."""
    explicit = {m.name for m in item.iter_markers() if m.name in TIERS}
    for tier in ("timing", "records", "process", "unit"):
        if tier in explicit:
            return tier
    path = Path(str(item.path))
    if root / "perftests" in path.parents:
        return "records"
    if _PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())) or _module_starts_processes(path):
        return "process"
    return "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Warnings are errors in perfgate's own tests (perftests/ on a GPU box keep them); one tier per test;
    the unit tier first (pytest's own order: fast before slow), so a broken unit fails in seconds."""
    here = config.rootpath / "tests"
    for item in items:
        tier = tier_of(item, config.rootpath)
        for m in [m for m in item.own_markers if m.name in TIERS and m.name != tier]:
            item.own_markers.remove(m)  # an explicit tier replaces the one its module would give
        if not item.get_closest_marker(tier):
            item.add_marker(getattr(pytest.mark, tier))
        item.stash[_TIER] = tier
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.filterwarnings("error"), append=False)
    items.sort(key=lambda it: TIERS.index(it.stash.get(_TIER, "unit")))


_TIER = pytest.StashKey[str]()


class TierViolation(BaseException):
    """A unit test did what only the process tier may (a BaseException: code under test that catches
    ``Exception`` cannot swallow it; the guard also fails the test at teardown if it was)."""


@pytest.fixture(autouse=True)
def _unit_tier_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In a unit test, starting a process, using a socket or sleeping on the test's thread fails, naming the fix."""
    if request.node.stash.get(_TIER, "unit") != "unit":
        yield
        return
    main = threading.current_thread()
    name = request.node.nodeid
    seen: list[str] = []

    def refuse(what: str) -> Any:
        def guard(*args: Any, **kwargs: Any) -> Any:
            seen.append(what)
            raise TierViolation(f"{name} is a unit test but {what}; fix: mark it (or its module) "
                                "pytest.mark.process, or give it a fake in place of the real thing")
        return guard

    real_sleep, real_connect, real_bind = time.sleep, socket.socket.connect, socket.socket.bind

    def sleep(seconds: float) -> None:
        if threading.current_thread() is main and seconds > 0:
            refuse("sleeps")()
        real_sleep(seconds)

    def on_main(real: Any, what: str) -> Any:
        def call(self: socket.socket, *args: Any) -> Any:
            if threading.current_thread() is main:
                refuse(what)()
            return real(self, *args)
        return call

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("starts a subprocess"))
    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(socket.socket, "connect", on_main(real_connect, "connects a socket"))
    monkeypatch.setattr(socket.socket, "bind", on_main(real_bind, "binds a socket"))
    yield
    if seen:
        pytest.fail(f"{name} is a unit test but {seen[0]} (the code under test caught the refusal); fix: mark it "
                    "pytest.mark.process", pytrace=False)
