"""The JUnit reader: contract properties, XML fallback, @group stripping, round trips."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import Failure, Skipped
from junitparser.xunit2 import JUnitXml, TestCase, TestSuite

from perfgate.errors import ReportError
from perfgate.report.junit_read import read_report
from perfgate.report.records import OUTCOMES, record_id, strip_group
from tests.report_factory import DEFAULT_STACK, Case, perf_case, seed_cases, write_report

# --- properties of generated reports ----------------------------------------------------

_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)
_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=20)
_pos = st.floats(min_value=0.01, max_value=1e5, allow_nan=False, allow_infinity=False)


@st.composite
def cases(draw: st.DrawFn) -> list[Case]:
    variants = draw(st.lists(_names, min_size=1, max_size=6, unique=True))
    out = []
    for v in variants:
        tok = draw(st.none() | _pos)
        spread = draw(st.none() | st.floats(min_value=0, max_value=50)) if tok is not None else None
        out.append(
            perf_case(
                draw(st.sampled_from(["baseline", "eagle3", "ngram"])),
                v,
                outcome=draw(st.sampled_from(OUTCOMES)),
                tok_s=tok,
                spread=spread,
                cv=draw(st.none() | st.floats(min_value=0, max_value=1)),
                category=draw(st.sampled_from(["", "oom", "unsupported-arch", "nccl-error"])),
                reason=draw(_text),
            )
        )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cs=cases())
def test_round_trip_preserves_outcomes_numbers_and_properties(tmp_path: Path, cs: list[Case]) -> None:
    path = write_report(tmp_path / "r.xml", cs)
    rep = read_report(path)
    assert len(rep.records) == len(cs)
    for c in cs:
        rid = f"{c.classname}::{c.name}"
        rec = rep.by_key[rid]
        assert rec.outcome == c.outcome
        assert rec.outcome_source == "property"
        assert rec.category == c.category
        assert rec.mode == c.mode and rec.variant == c.variant
        if c.tok_s is None:
            assert rec.num("tok_s") is None  # absent, never -1
        else:
            assert math.isclose(rec.num("tok_s") or 0.0, c.tok_s)
        if c.ci is not None:
            assert math.isclose(rec.num("tok_s_ci_low") or 0.0, c.ci[0], abs_tol=1e-9)
        assert rec.stack_dict["stack.cuda"] == DEFAULT_STACK["stack.cuda"]
        # the xml element agrees with the property, as pytest writes it
    again = read_report(path)
    assert again.records == rep.records


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cs=cases())
def test_xml_fallback_matches_contract_mapping(tmp_path: Path, cs: list[Case]) -> None:
    """Without the outcome property, the XML element gives the outcome (inconclusive reads as skip)."""
    for c in cs:
        c.with_outcome_property = False
    rep = read_report(write_report(tmp_path / "r.xml", cs))
    for c in cs:
        rec = rep.by_key[f"{c.classname}::{c.name}"]
        expected = "skip" if c.outcome == "inconclusive" else c.outcome
        assert rec.outcome == expected
        assert rec.outcome_source == "xml"


# --- examples --------------------------------------------------------------------------


def test_strip_group_and_record_id() -> None:
    assert strip_group("test_v[a:b+c]@kimi") == "test_v[a:b+c]"
    assert strip_group("test_v[a@b]") == "test_v[a@b]"  # an @ inside the parameters stays
    assert strip_group("test_plain@grp") == "test_plain"
    assert record_id("perftests.test_backends", "test_v[x]@g") == "perftests.test_backends::test_v[x]"


def test_xdist_group_suffix_is_stripped(tmp_path: Path) -> None:
    c = perf_case("baseline", "nccl-tree", outcome="xfail", category="cuda-graph-capture")
    c.name += "@kimi-k2.5-sim"
    rep = read_report(write_report(tmp_path / "r.xml", [c]))
    (rec,) = rep.records
    assert rec.key == "perftests.test_backends::test_variant[kimi-k2.5-sim:baseline+nccl-tree]"


def test_suite_properties_time_and_engine(tmp_path: Path) -> None:
    rep = read_report(
        write_report(
            tmp_path / "r.xml",
            seed_cases(),
            suite_properties=[("hypothesis-statistics-tests/x.py::t", "ZGF0YQ=="), ("odd", "not a number")],
        )
    )
    assert rep.engine == "sim"
    assert rep.simulated is True
    assert rep.started_at is not None and rep.started_at.isoformat() == "2026-01-05T10:00:00+00:00"
    assert rep.stack["stack.cuda"] == "13.0"
    assert next(iter(rep.stack)) == "stack.gpu"


def test_started_at_falls_back_to_timestamp(tmp_path: Path) -> None:
    rep = read_report(write_report(tmp_path / "r.xml", seed_cases(), started_at=None, timestamp="2026-02-01T08:30:00"))
    assert rep.started_at is not None
    assert rep.started_at.isoformat() == "2026-02-01T08:30:00+00:00"  # naive = UTC


def test_report_of_another_project(tmp_path: Path) -> None:
    """No perfgate properties at all: outcomes from XML, arbitrary numeric properties kept."""
    suite = TestSuite("pytest")
    ok = TestCase("test_ok", "tests.test_x", 0.1)
    ok.add_property("tok_per_s", "1234.5")
    ok.add_property("gpu_name", "H200")
    xf = TestCase("test_xf", "tests.test_x", 0.1)
    xf.result = [Skipped("known", "pytest.xfail")]
    xp = TestCase("test_xp", "tests.test_x", 0.1)
    xp.result = [Failure("[XPASS(strict)] should still be slow")]
    sk = TestCase("test_sk", "tests.test_x", 0.1)
    sk.result = [Skipped("needs 8 GPUs", "pytest.skip")]
    for tc in (ok, xf, xp, sk):
        suite.add_testcase(tc)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    xml.write(str(tmp_path / "o.xml"))
    rep = read_report(tmp_path / "o.xml")
    got = {r.name: r.outcome for r in rep.records}
    assert got == {"test_ok": "pass", "test_xf": "xfail", "test_xp": "xpass", "test_sk": "skip"}
    assert rep.by_key["tests.test_x::test_ok"].num("tok_per_s") == 1234.5
    assert rep.by_key["tests.test_x::test_ok"].num("gpu_name") is None
    assert rep.stack == {}
    assert rep.engine == ""


def test_config_hash_and_non_finite_values_are_not_numbers(tmp_path: Path) -> None:
    c = perf_case("baseline", tok_s=10.0, extra={"ttft_ms": "nan", "itl_ms": "inf"})
    c.config = "1234567890"
    (rec,) = read_report(write_report(tmp_path / "r.xml", [c])).records
    assert rec.num("config") is None and rec.config == "1234567890"
    assert rec.num("ttft_ms") is None and rec.num("itl_ms") is None


def test_unknown_outcome_property_falls_back_with_a_note(tmp_path: Path) -> None:
    c = perf_case("baseline", outcome="fail", extra={})
    c.with_outcome_property = False
    c.extra = {"outcome": "exploded"}
    rep = read_report(write_report(tmp_path / "r.xml", [c]))
    assert rep.records[0].outcome == "fail"
    assert any("exploded" in n for n in rep.notes)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "no such report file"),
        ("<testsuites><testsuite", "cannot parse the XML"),
        ("<html><body/></html>", "not a JUnit report"),
    ],
)
def test_unreadable_reports_raise_report_error(tmp_path: Path, content: str | None, match: str) -> None:
    p = tmp_path / "bad.xml"
    if content is not None:
        p.write_text(content)
    with pytest.raises(ReportError, match=match):
        read_report(p)


def test_reads_what_pytest_itself_writes(pytester: pytest.Pytester) -> None:
    """A real pytest run (xunit2), with and without the contract's outcome property."""
    pytester.makepyfile(
        test_outcomes="""
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("server failed to start")

        def test_pass(request):
            request.node.user_properties.append(("tok_s", "89.5"))

        def test_fail(request):
            request.node.user_properties.append(("tok_s", "41.0"))
            assert False, "slower than the floor"

        @pytest.mark.xfail(reason="unsupported-arch", strict=True)
        def test_xfail():
            raise RuntimeError("no SM120 kernel")

        @pytest.mark.xfail(reason="should still be slow", strict=True)
        def test_xpass():
            pass

        def test_skip():
            pytest.skip("needs 8 GPUs")

        def test_error(broken):
            pass

        @pytest.mark.parametrize("p", ["kimi:baseline+nccl-tree"])
        def test_inconclusive(request, p):
            request.node.user_properties.append(("outcome", "inconclusive"))
            pytest.skip("inconclusive: confounded")
        """
    )
    result = pytester.runpytest("--junitxml=out.xml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2, xfailed=1, skipped=2, errors=1)
    rep = read_report(pytester.path / "out.xml")
    got = {r.name: r.outcome for r in rep.records}
    assert got == {
        "test_pass": "pass",
        "test_fail": "fail",
        "test_xfail": "xfail",
        "test_xpass": "xpass",
        "test_skip": "skip",
        "test_error": "error",
        "test_inconclusive[kimi:baseline+nccl-tree]": "inconclusive",
    }
    assert rep.by_key["test_outcomes::test_fail"].num("tok_s") == 41.0  # numbers survive a failure
    assert rep.by_key["test_outcomes::test_pass"].outcome_source == "xml"
    assert rep.started_at is not None  # from the testsuite timestamp
