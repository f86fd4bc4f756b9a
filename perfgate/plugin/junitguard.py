"""Keeps the ``--junitxml`` file current while the session runs, so no record that finished is lost.

pytest writes the JUnit file once, when the session ends. A pytest killed with SIGKILL, or ended
by pytest-timeout's ``os._exit`` (``--timeout-method thread``), never gets there; a Ctrl-C or
SIGTERM gets there but leaves the test that was running as a nameless ``<testcase>``. The guard
(registered by :mod:`perfgate.plugin` in the process that writes the file, also under xdist):

- rewrites the file when a test starts and when it ends (a temporary file, then an atomic
  rename), with every finished record and, for each test still running, an ``<error>`` record
  "did not finish" (property ``outcome`` = ``error``) that the real record replaces when the
  test ends — so after a SIGKILL the file holds what finished and names what was running;
- keeps that cheap on large suites: a rewrite is skipped while the time since the last one is
  under ten times what that one cost, except around slow tests (when a test that ran a second
  or more ends, and when the next one starts) and when a perf test starts (a perf test is never
  fast, and one that hangs must be named in the file);
- rewrites it when a running test asks (:func:`checkpoint`: a paired comparison about to add a start pair,
  minutes of server starts, writes what its looks so far said), so a kill in the middle of a long test keeps the
  properties it had recorded (without xdist: a worker's properties reach the controller only with its report);
- on Ctrl-C / SIGTERM, turns each running test into an ``<error>`` record "interrupted" that
  keeps the properties it had recorded so far (identity, config, log), before pytest writes
  the final file.

It drives pytest's own ``LogXML`` (``_pytest.junitxml``, a private API, pytest 8-9). If that
changes shape the guard switches itself off with one warning line, and pytest's end-of-session
file is written as before.
"""

from __future__ import annotations

import os
import platform
import time
import xml.etree.ElementTree as ET
from typing import Any

import pytest

DID_NOT_FINISH = "did not finish: pytest ended (killed, or os._exit by a timeout) while this test ran"


class JUnitGuard:
    """The plugin object (one per session, in the process that owns ``--junitxml``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.running: dict[str, pytest.Item | None] = {}
        self.locations: dict[str, tuple[str, int | None, str]] = {}
        self.started: dict[str, float] = {}
        self.disabled = ""
        self._last_end = 0.0
        self._last_cost = 0.0
        self._prev_slow = True

    # ----------------------------------------------------------------- hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        self.running[item.nodeid] = item
        self.locations[item.nodeid] = item.location

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.running.setdefault(nodeid, None)  # under xdist the controller only sees ids
        self.locations[nodeid] = location
        self.started[nodeid] = time.monotonic()
        self._write(force=self._prev_slow or _is_perf(self.running[nodeid]))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.running.pop(nodeid, None)
        took = time.monotonic() - self.started.pop(nodeid, time.monotonic())
        self._prev_slow = took >= 1.0
        self._write(force=self._prev_slow)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        what = str(excinfo.value) or "Ctrl-C (SIGINT)"
        xml = self._xml()
        if xml is None or self.disabled:
            return
        try:
            for nodeid in list(self.running):
                self._interrupted(xml, nodeid, f"interrupted by {what} while this test ran; its record is incomplete")
            self.running.clear()
        except Exception as e:  # pragma: no cover - depends on pytest internals
            self._disable(xml, e)

    # ----------------------------------------------------------------- internals

    def _xml(self) -> Any:
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover
            return None
        return self.config.stash.get(xml_key, None)

    def _disable(self, xml: Any, e: Exception) -> None:
        self.disabled = f"{type(e).__name__}: {e}"
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"perfgate: WARNING cannot keep {getattr(xml, 'logfile', 'the JUnit file')} current during "
                          f"the session ({self.disabled}); pytest writes it when the session ends", yellow=True)

    def _write(self, *, force: bool = False) -> None:
        xml = self._xml()
        if xml is None or self.disabled:
            return
        t0 = time.monotonic()
        if not force and t0 - self._last_end < 10 * self._last_cost:
            return  # a burst of fast tests: the next write catches up
        try:
            self._snapshot(xml)
        except Exception as e:  # pragma: no cover - depends on pytest internals
            self._disable(xml, e)
        self._last_end = time.monotonic()
        self._last_cost = self._last_end - t0

    def _pending(self, xml: Any) -> dict[int, tuple[str, Any]]:
        """id(reporter) -> (nodeid, reporter key) for reporters pytest has not finalized yet."""
        return {id(r): (str(key[0]), key) for key, r in xml.node_reporters.items()}

    def _snapshot(self, xml: Any) -> None:
        """What pytest's LogXML.pytest_sessionfinish writes, with running tests as 'did not finish' errors."""
        pending = self._pending(xml)
        cases: list[ET.Element] = []
        extra = 0
        covered = set()
        for r in xml.node_reporters_ordered:
            if id(r) not in pending:
                cases.append(r.to_xml())
                continue
            nodeid = pending[id(r)][0]
            covered.add(nodeid)
            el, added = self._running_case(r.to_xml(), nodeid, prefix=xml.prefix)
            cases.append(el)
            extra += added
        for nodeid in self.running:
            if nodeid not in covered:  # started, no report yet
                el, added = self._running_case(ET.Element("testcase", time="0.000"), nodeid, prefix=xml.prefix)
                cases.append(el)
                extra += added
        stats = xml.stats
        tests = stats["passed"] + stats["failure"] + stats["skipped"] + stats["error"] - xml.cnt_double_fail_tests
        suite = ET.Element(
            "testsuite", name=xml.suite_name, errors=str(stats["error"] + extra),
            failures=str(stats["failure"]), skipped=str(stats["skipped"]), tests=str(tests + extra),
            time=f"{xml.suite_start.elapsed().seconds:.3f}",
            timestamp=xml.suite_start.as_utc().astimezone().isoformat(), hostname=platform.node(),
        )
        props = xml._get_global_properties_node()
        if props is not None:
            suite.append(props)
        suite.extend(cases)
        root = ET.Element("testsuites", name="pytest tests")
        root.append(suite)
        path = xml.logfile
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.partial")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write('<?xml version="1.0" encoding="utf-8"?>')
            f.write(ET.tostring(root, encoding="unicode"))
        os.replace(tmp, path)

    def _item_props(self, nodeid: str) -> list[tuple[str, str]]:
        item = self.running.get(nodeid)
        return [(str(k), str(v)) for k, v in (getattr(item, "user_properties", None) or ())]

    def _props(self, nodeid: str, outcome: str, reason: str) -> list[tuple[str, str]]:
        """The test's properties so far, with ``outcome`` / ``reason`` unless it has its own."""
        props = self._item_props(nodeid)
        have = {k for k, _ in props}
        props += [(k, v) for k, v in (("outcome", outcome), ("reason", reason)) if k not in have]
        return props

    def _running_case(self, el: ET.Element, nodeid: str, *, prefix: str | None) -> tuple[ET.Element, int]:
        """A running test's ``<testcase>`` for a snapshot (built on a copy; pytest's reporter is untouched)."""
        from _pytest.junitxml import mangle_test_address

        if "name" not in el.attrib:
            names = mangle_test_address(nodeid)
            el.set("classname", ".".join(([prefix] if prefix else []) + names[:-1]))
            el.set("name", names[-1])
        decided = any(child.tag in ("failure", "error", "skipped") for child in el)
        props = self._item_props(nodeid) if decided else self._props(nodeid, "error", DID_NOT_FINISH)
        for old in el.findall("properties"):
            el.remove(old)
        if props:
            node = ET.Element("properties")
            node.extend(ET.Element("property", name=k, value=v) for k, v in props)
            el.insert(0, node)
        if decided:
            return el, 0
        err = ET.SubElement(el, "error", message=DID_NOT_FINISH)
        err.text = DID_NOT_FINISH
        return el, 1

    def _interrupted(self, xml: Any, nodeid: str, reason: str) -> None:
        """Give a running test a real ``<error>`` record in pytest's own reporter before the final write."""
        from _pytest.reports import TestReport

        key = next((k for k in xml.node_reporters if str(k[0]) == nodeid), (nodeid, None))
        location = self.locations.get(nodeid) or (nodeid.split("::")[0], None, nodeid)
        rep = TestReport(nodeid, location, {}, "failed", reason, "call",
                         user_properties=self._props(nodeid, "error", reason))
        if key[1] is not None:
            rep.node = key[1]  # type: ignore[attr-defined]  # xdist: the reporter key includes the worker
        reporter = xml.node_reporters.get(key) or xml.node_reporter(rep)
        if any(n.tag in ("failure", "error", "skipped") for n in reporter.nodes):
            xml.finalize(rep)
            return
        reporter.record_testreport(rep)
        reporter._add_simple("error", reason, reason)
        xml.finalize(rep)


def _is_perf(item: pytest.Item | None) -> bool:
    """A perf test (it starts or reaches a server and measures): never a fast one, so its start is always
    written, whatever the test before it took (a 0.97-s record before a hung one left the hung one out)."""
    from perfgate.plugin.state import PERF_FIXTURES

    return item is not None and bool(PERF_FIXTURES & set(getattr(item, "fixturenames", ())))


def checkpoint(config: pytest.Config) -> None:
    """Write the JUnit file now, with the running tests' properties as they stand (a no-op without ``--junitxml``,
    on an xdist worker, or where the guard switched itself off)."""
    guard = config.pluginmanager.get_plugin("perfgate-junitguard")
    if isinstance(guard, JUnitGuard):
        guard._write(force=True)


def install(config: pytest.Config) -> None:
    """Register the guard where the JUnit file is written (not on xdist workers)."""
    if hasattr(config, "workerinput") or not getattr(config.option, "xmlpath", None):
        return
    if config.pluginmanager.get_plugin("perfgate-junitguard") is None:
        config.pluginmanager.register(JUnitGuard(config), "perfgate-junitguard")
