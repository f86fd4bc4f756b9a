"""perfgate.plugin.junitguard.checkpoint: a long test (a paired comparison adding start pairs) writes the JUnit file
with what it has recorded so far, so a run killed in the middle of it (SIGKILL, os._exit) keeps those properties
under the 'did not finish' record; until_decided records each look (``pair_looks``) and asks for it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from perfgate.plugin.junitguard import DID_NOT_FINISH

KILLED_MID_TEST = '''
import os

from perfgate.plugin.junitguard import checkpoint


def test_done():
    pass


def test_long(record_property, request):
    record_property("pair_looks", "1: undecided x1.0005 [0.9562, 1.0469]")
    checkpoint(request.config)
    record_property("after_checkpoint", "not written")
    os._exit(3)  # as a SIGKILL or pytest-timeout's thread method: no session end, pytest never writes the file
'''


def _cases(path) -> dict[str, ET.Element]:
    return {tc.get("name", ""): tc for tc in ET.parse(path).getroot().iter("testcase")}


def test_a_run_killed_after_a_checkpoint_keeps_what_the_test_had_recorded(pytester):
    pytester.makeini("[pytest]\nperfgate = true\n")  # perfgate on (the guard is its), on the simulator
    pytester.makepyfile(test_killed=KILLED_MID_TEST)
    r = pytester.runpytest_subprocess("--junitxml=r.xml", "-p", "no:cacheprovider")
    assert r.ret == 3
    cases = _cases(pytester.path / "r.xml")
    assert set(cases) == {"test_done", "test_long"}
    long = cases["test_long"]
    props = {p.get("name"): p.get("value") for p in long.iter("property")}
    assert props["pair_looks"] == "1: undecided x1.0005 [0.9562, 1.0469]"  # written at the checkpoint
    assert "after_checkpoint" not in props  # nothing after it: the file is what the checkpoint wrote
    error = long.find("error")
    assert error is not None and error.get("message") == DID_NOT_FINISH


def test_a_checkpoint_without_junitxml_is_a_no_op(pytester):
    pytester.makeini("[pytest]\nperfgate = true\n")
    pytester.makepyfile(test_killed=KILLED_MID_TEST.replace("os._exit(3)", "pass"))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=2)
