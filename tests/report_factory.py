"""Build JUnit reports that follow perfgate's JUnit contract (docs: notes/junit-contract.md).

Used by tests/test_report_*.py to write fixture reports with junitparser.xunit2, the way
pytest + perfgate's plugin would: outcome elements per the contract's mapping, testcase
properties (identity, outcome, numbers, stack) and suite properties (stack, perfgate.*).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from junitparser import Error, Failure, Skipped
from junitparser.xunit2 import JUnitXml, TestCase, TestSuite

DEFAULT_STACK: dict[str, str] = {
    "stack.gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "stack.gpu_count": "8",
    "stack.sm": "120",
    "stack.interconnect": "PCIe",
    "stack.driver": "580.65.06",
    "stack.cuda": "13.0",
    "stack.torch": "2.9.1",
    "stack.nccl": "2.28.3",
    "stack.sglang": "0.5.23",
    "stack.sgl_kernel": "0.4.9",
    "stack.flashinfer": "0.7.2",
    "stack.simulated": "true",
}


def fmt(x: float) -> str:
    """Numbers as plain decimal floats, as the contract says."""
    return repr(float(x))


@dataclass
class Case:
    """One testcase to write. ``tok_s``/``ci``/``cv`` etc. are left out when ``None``."""

    name: str
    outcome: str = "pass"
    classname: str = "perftests.test_backends"
    category: str = ""
    expected: str = "pass"
    reason: str = ""
    kind: str = "variant"
    profile: str = "kimi-k2.5-sim"
    mode: str = "baseline"
    variant: str = ""
    config: str = "0123abcd45"
    tok_s: float | None = None
    ci: tuple[float, float] | None = None
    cv: float | None = None
    n: int | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    stack: Mapping[str, str] | None = None
    with_outcome_property: bool = True


def perf_case(
    mode: str,
    variant: str = "",
    *,
    outcome: str = "pass",
    tok_s: float | None = None,
    spread: float | None = None,
    cv: float | None = None,
    category: str = "",
    expected: str = "pass",
    profile: str = "kimi-k2.5-sim",
    classname: str = "perftests.test_backends",
    test: str = "test_variant",
    **kw: object,
) -> Case:
    """A case named like the suite names them: ``test_variant[<profile>:<mode>+<variant>]``."""
    param = f"{profile}:{mode}" + (f"+{variant}" if variant else "")
    ci = (tok_s - spread, tok_s + spread) if tok_s is not None and spread is not None else None
    return Case(
        name=f"{test}[{param}]",
        classname=classname,
        outcome=outcome,
        mode=mode,
        variant=variant,
        profile=profile,
        tok_s=tok_s,
        ci=ci,
        cv=cv,
        category=category,
        expected=expected,
        **kw,  # type: ignore[arg-type]
    )


def _result(outcome: str, reason: str) -> list[object]:
    msg = reason or outcome
    if outcome == "pass":
        return []
    if outcome == "fail":
        return [Failure(msg)]
    if outcome == "xpass":
        return [Failure(f"[XPASS(strict)] {msg}")]
    if outcome == "error":
        return [Error(f'failed on setup with "{msg}"')]
    if outcome == "xfail":
        return [Skipped(msg, "pytest.xfail")]
    if outcome in ("skip", "inconclusive"):
        return [Skipped(msg, "pytest.skip")]
    raise ValueError(outcome)


def make_testcase(c: Case, suite_stack: Mapping[str, str]) -> TestCase:
    tc = TestCase(c.name, c.classname, 1.0)
    res = _result(c.outcome, c.reason)
    if res:
        tc.result = res  # type: ignore[assignment]
    props: list[tuple[str, str]] = [
        ("engine", "sim"),
        ("profile", c.profile),
        ("mode", c.mode),
        ("variant", c.variant),
        ("config", c.config),
        ("log", f"/tmp/perfgate-logs/{c.config}.log"),
        ("kind", c.kind),
    ]
    if c.with_outcome_property:
        props += [
            ("outcome", c.outcome),
            ("category", c.category),
            ("expected", c.expected),
            ("reason", c.reason),
        ]
    if c.tok_s is not None:
        props.append(("tok_s", fmt(c.tok_s)))
    if c.ci is not None:
        props += [("tok_s_ci_low", fmt(c.ci[0])), ("tok_s_ci_high", fmt(c.ci[1]))]
    if c.cv is not None:
        props.append(("tok_s_cv", fmt(c.cv)))
    if c.n is not None:
        props.append(("n", fmt(c.n)))
    props += list(c.extra.items())
    stack = dict(suite_stack)
    if c.stack is not None:
        stack.update(c.stack)
    props += sorted(stack.items())
    for k, v in props:
        tc.add_property(k, v)
    return tc


def make_suite(
    cases: Iterable[Case],
    *,
    stack: Mapping[str, str] | None = None,
    started_at: str | None = "2026-01-05T10:00:00+00:00",
    timestamp: str = "2026-01-05T10:00:01.000000+00:00",
    hostname: str = "gpu-box-a",
    engine: str = "sim",
    profile: str = "kimi-k2.5-sim",
    suite_properties: Sequence[tuple[str, str]] = (),
    perfgate_properties: bool = True,
) -> TestSuite:
    st = dict(DEFAULT_STACK if stack is None else stack)
    suite = TestSuite("pytest")
    suite.hostname = hostname
    suite.timestamp = timestamp
    if perfgate_properties:
        for k, v in sorted(st.items()):
            suite.add_property(k, v)
        suite.add_property("perfgate.engine", engine)
        suite.add_property("perfgate.profile", profile)
        if started_at is not None:
            suite.add_property("perfgate.started_at", started_at)
        suite.add_property("perfgate.version", "0.1.0")
        suite.add_property("perfgate.simulated", st.get("stack.simulated", "true"))
    for k, v in suite_properties:
        suite.add_property(k, v)
    for c in cases:
        suite.add_testcase(make_testcase(c, st if perfgate_properties else {}))
    return suite


def write_report(path: str | Path, cases: Iterable[Case], **suite_kw: object) -> Path:
    """Write one report (one ``<testsuite>``) and return its path."""
    xml = JUnitXml("pytest tests")
    xml.add_testsuite(make_suite(cases, **suite_kw))  # type: ignore[arg-type]
    xml.update_statistics()
    p = Path(path)
    xml.write(str(p))
    return p


def seed_cases() -> list[Case]:
    """The seed box's record, roughly (README, "The backend matrix on the simulated boxes"), as a baseline report."""
    cases = [
        perf_case("baseline", tok_s=89.5, spread=0.8, cv=0.01, kind="floor", classname="perftests.test_baseline",
                  test="test_floor"),
        perf_case("eagle3", tok_s=57.0, spread=1.5, cv=0.02, outcome="xfail", category="slower-than-baseline",
                  expected="xfail:slower-than-baseline", kind="speculation-vs-baseline",
                  classname="perftests.test_speculative", test="test_speculation_beats_baseline"),
        perf_case("baseline", "nccl-tree", outcome="xfail", category="cuda-graph-capture",
                  expected="xfail:cuda-graph-capture"),
        perf_case("baseline", "flashinfer-ar-fusion", outcome="xfail", category="unsupported-arch",
                  expected="xfail:unsupported-arch"),
        perf_case("baseline", "custom-ar-on", tok_s=38.0, spread=0.5, cv=0.01, outcome="xfail",
                  category="slower-than-baseline", expected="xfail:slower-than-baseline"),
        perf_case("baseline", "nccl-fewer-channels", tok_s=88.0, spread=1.0, outcome="inconclusive",
                  reason="confounded: mem-fraction-static differs"),
        perf_case("baseline", "mscclpp", outcome="skip", category="missing-dependency"),
    ]
    return cases
