"""perfgate diff: sections, noise rules, stack changes, renderings; hypothesis properties."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfgate.cli import main
from perfgate.report.diff import classify_transition, compare_throughput, diff
from perfgate.report.junit_read import read_report
from perfgate.report.records import OUTCOMES, Record, Report
from perfgate.report.render import render_diff
from tests.report_factory import DEFAULT_STACK, Case, perf_case, seed_cases, write_report

# --- generated pairs of reports ---------------------------------------------------------

_tok = st.floats(min_value=1.0, max_value=5000.0, allow_nan=False, allow_infinity=False)


@st.composite
def side(draw: st.DrawFn, variant: str) -> Case | None:
    if draw(st.integers(0, 5)) == 0:
        return None  # absent on this side
    tok = draw(st.none() | _tok)
    noise = draw(st.sampled_from(["ci", "cv", "none"])) if tok is not None else "none"
    spread = draw(st.floats(min_value=0.0, max_value=0.2)) * tok if tok is not None and noise == "ci" else None
    cv = draw(st.floats(min_value=0.0, max_value=0.2)) if noise == "cv" else None
    return perf_case(
        "baseline",
        variant,
        outcome=draw(st.sampled_from(OUTCOMES)),
        tok_s=tok,
        spread=spread,
        cv=cv,
        expected=draw(st.sampled_from(["pass", "xfail:oom"])),
    )


@st.composite
def report_pair(draw: st.DrawFn) -> tuple[list[Case], list[Case]]:
    variants = draw(st.lists(st.sampled_from([f"v{i}" for i in range(12)]), min_size=1, max_size=8, unique=True))
    a, b = [], []
    for v in variants:
        ca, cb = draw(side(v)), draw(side(v))
        if ca is not None:
            a.append(ca)
        if cb is not None:
            b.append(cb)
    return a, b


def _write_pair(tmp_path: Path, a: list[Case], b: list[Case]) -> tuple[Report, Report]:
    stack_b = dict(DEFAULT_STACK)
    return (
        read_report(write_report(tmp_path / "a.xml", a)),
        read_report(write_report(tmp_path / "b.xml", b, stack=stack_b, started_at="2026-01-06T10:00:00+00:00")),
    )


_hsettings = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_hsettings
@given(pair=report_pair())
def test_diff_of_a_report_with_itself_is_empty(tmp_path: Path, pair: tuple[list[Case], list[Case]]) -> None:
    a, _ = pair
    ra = read_report(write_report(tmp_path / "a.xml", a))
    d = diff(ra, ra)
    assert d.is_empty
    assert all(not any(v) for v in d.sections().values())


@_hsettings
@given(pair=report_pair())
def test_outcome_changes_are_symmetric(tmp_path: Path, pair: tuple[list[Case], list[Case]]) -> None:
    ra, rb = _write_pair(tmp_path, *pair)
    ab, ba = diff(ra, rb), diff(rb, ra)
    fwd = {(r.key, r.old_outcome, r.new_outcome) for r in ab.outcome_changes}
    back = {(r.key, r.new_outcome, r.old_outcome) for r in ba.outcome_changes}
    assert fwd == back
    assert {r.key for r in ab.new} == {r.key for r in ba.gone}
    assert {r.key for r in ab.regressed} == {r.key for r in ba.improved}
    assert {r.key for r in ab.unknown_noise} == {r.key for r in ba.unknown_noise}


@_hsettings
@given(pair=report_pair())
def test_sections_match_ground_truth(tmp_path: Path, pair: tuple[list[Case], list[Case]]) -> None:
    a, b = pair
    ra, rb = _write_pair(tmp_path, a, b)
    d = diff(ra, rb)
    oa = {f"{c.classname}::{c.name}": c.outcome for c in a}
    ob = {f"{c.classname}::{c.name}": c.outcome for c in b}
    both = oa.keys() & ob.keys()
    unblocked = {k for k in both if oa[k] == "xfail" and ob[k] in ("pass", "xpass")}
    expects_pass = {f"{c.classname}::{c.name}" for c in b if c.expected == "pass"}
    # still expected to fail: update the expectation; already expected to pass: nothing to update
    assert {r.key for r in d.unblocked} == unblocked - expects_pass
    assert {r.key for r in d.unblocked_expected} == unblocked & expects_pass
    assert {r.key for r in d.newly_broken} == {
        k for k in both if oa[k] in ("pass", "xpass") and ob[k] in ("fail", "error")
    }
    assert {r.key for r in d.new} == ob.keys() - oa.keys()
    assert {r.key for r in d.gone} == oa.keys() - ob.keys()
    # every rendering works on whatever was generated
    for fmt in ("text", "md", "json"):
        assert render_diff(d, fmt)


# --- the noise rules --------------------------------------------------------------------


def _rec(tmp_path: Path, name: str, **kw: object) -> Report:
    return read_report(write_report(tmp_path / f"{name}.xml", [perf_case("baseline", **kw)]))  # type: ignore[arg-type]


def test_ci_overlap_is_within_noise_and_separation_counts(tmp_path: Path) -> None:
    old = _rec(tmp_path, "o", tok_s=89.5, spread=1.0).records[0]
    overlapping = _rec(tmp_path, "n1", tok_s=88.0, spread=1.0).records[0]  # [87, 89] vs [88.5, 90.5]
    separated = _rec(tmp_path, "n2", tok_s=86.0, spread=1.0).records[0]  # [85, 87]
    higher = _rec(tmp_path, "n3", tok_s=93.0, spread=1.0).records[0]
    assert compare_throughput(old, overlapping).verdict == "within-noise"  # type: ignore[union-attr]
    tp = compare_throughput(old, separated)
    assert tp is not None and tp.verdict == "regressed" and tp.basis == "ci"
    assert compare_throughput(old, higher).verdict == "improved"  # type: ignore[union-attr]


def test_cv_fallback_uses_two_sigma_of_combined_cv(tmp_path: Path) -> None:
    old = _rec(tmp_path, "o", tok_s=100.0, cv=0.03).records[0]
    # threshold = 2 * sqrt(0.03² + 0.04²) * 100 = 10
    small = _rec(tmp_path, "n1", tok_s=91.0, cv=0.04).records[0]
    big = _rec(tmp_path, "n2", tok_s=89.0, cv=0.04).records[0]
    tp_small, tp_big = compare_throughput(old, small), compare_throughput(old, big)
    assert tp_small is not None and tp_small.verdict == "within-noise" and tp_small.basis == "cv"
    assert tp_small.threshold is not None and abs(tp_small.threshold - 10.0) < 1e-9
    assert tp_big is not None and tp_big.verdict == "regressed"


def test_no_noise_information_is_unknown_noise(tmp_path: Path) -> None:
    old = _rec(tmp_path, "o", tok_s=100.0).records[0]
    new = _rec(tmp_path, "n", tok_s=50.0).records[0]
    tp = compare_throughput(old, new)
    assert tp is not None and tp.verdict == "unknown-noise" and tp.basis == "none"
    same = compare_throughput(old, old)
    assert same is not None and same.verdict == "unchanged"


def test_one_trial_is_no_evidence_of_a_regression(tmp_path: Path) -> None:
    """`--perfgate-trials 1` once wrote a zero-width CI and the gate called a 0.03 % change 'regressed'."""
    old = _rec(tmp_path, "o", tok_s=89.50, spread=0.0, cv=0.0, n=1).records[0]
    new = _rec(tmp_path, "n", tok_s=89.47, spread=0.0, cv=0.0, n=1).records[0]
    tp = compare_throughput(old, new)
    assert tp is not None and tp.verdict == "unknown-noise" and tp.basis == "none"
    three = _rec(tmp_path, "t", tok_s=80.0, spread=0.5, n=3).records[0]
    assert compare_throughput(old, three).verdict == "unknown-noise"  # type: ignore[union-attr]
    assert compare_throughput(three, _rec(tmp_path, "u", tok_s=70.0, spread=0.5, n=3).records[0]).verdict == "regressed"  # type: ignore[union-attr]


def test_transitions() -> None:
    assert classify_transition("xfail", "xpass") == "unblocked"
    assert classify_transition("xfail", "pass") == "unblocked"
    assert classify_transition("pass", "error") == "newly-broken"
    assert classify_transition("xfail", "fail") == "changed"
    assert classify_transition(None, "pass") == "new"
    assert classify_transition("pass", None) == "gone"
    assert classify_transition("skip", "skip") == "unchanged"


# --- a stack upgrade, end to end through the CLI ----------------------------------------


def _upgrade(tmp_path: Path) -> tuple[Path, Path]:
    old = seed_cases()
    new = seed_cases()
    new[3] = perf_case(
        "baseline", "flashinfer-ar-fusion", outcome="xpass", tok_s=95.0, spread=1.0, expected="xfail:unsupported-arch"
    )
    new[2] = perf_case("baseline", "nccl-tree", outcome="xfail", category="oom", expected="xfail:cuda-graph-capture")
    new.append(perf_case("baseline", "deepep", outcome="xfail", category="assertion"))
    new.pop(6)  # mscclpp gone
    stack = dict(DEFAULT_STACK, **{"stack.cuda": "13.1", "stack.flashinfer": "0.8.0"})
    return (
        write_report(tmp_path / "old.xml", old),
        write_report(tmp_path / "new.xml", new, stack=stack, started_at="2026-01-06T10:00:00+00:00"),
    )


def test_diff_text_shows_sections_and_stack_change(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    old, new = _upgrade(tmp_path)
    assert main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "Stack: cuda 13.0 → 13.1; flashinfer 0.7.2 → 0.8.0" in out
    assert "Unblocked (xfail → pass/xpass): update the expectations: 1" in out
    assert "xfail(unsupported-arch) → xpass" in out
    assert "Other outcome changes: 1" in out and "xfail(cuda-graph-capture) → xfail(oom)" in out
    assert "New records: 1" in out and "Gone records: 1" in out


def test_diff_markdown_for_a_pr_comment(tmp_path: Path) -> None:
    old, new = _upgrade(tmp_path)
    out = tmp_path / "diff.md"
    assert main(["diff", str(old), str(new), "--format", "md", "-o", str(out)]) == 0
    md = out.read_text()
    assert md.startswith("### perfgate: stack diff")
    assert "| `stack.cuda` | 13.0 | 13.1 |" in md
    assert "#### Unblocked (xfail → pass/xpass): update the expectations (1)" in md
    assert "<details>" in md and "</details>" in md


def test_diff_json(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    old, new = _upgrade(tmp_path)
    assert main(["diff", str(old), str(new), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stack_changes"] == [
        {"key": "stack.cuda", "old": "13.0", "new": "13.1"},
        {"key": "stack.flashinfer", "old": "0.7.2", "new": "0.8.0"},
    ]
    assert data["sections"]["unblocked"] == [
        "perftests.test_backends::test_variant[kimi-k2.5-sim:baseline+flashinfer-ar-fusion]"
    ]
    assert len(data["sections"]["new"]) == 1 and len(data["sections"]["gone"]) == 1
    assert data["empty"] is False


def test_category_change_of_an_xfail_is_visible(tmp_path: Path) -> None:
    old, new = _upgrade(tmp_path)
    d = diff(read_report(old), read_report(new))
    (r,) = [r for r in d.records if r.key.endswith("+nccl-tree]")]
    assert r.transition == "changed" and r.category_changed


def test_a_latency_that_rises_is_the_regression(tmp_path: Path) -> None:
    """A user's record judged on ttft_ms (metric property): up beyond noise is regressed, down improved."""
    def rec(name: str, v: float) -> Record:
        extra = {"metric": "ttft_ms", "direction": "lower", "ttft_ms": str(v), "ttft_ms_ci_low": str(v - 1),
                 "ttft_ms_ci_high": str(v + 1), "n": "5"}
        return read_report(write_report(tmp_path / f"{name}.xml", [perf_case("baseline", kind="latency",
                                                                              extra=extra)])).records[0]

    old = rec("o", 100.0)
    up, down, same = rec("u", 120.0), rec("d", 80.0), rec("s", 100.5)
    assert compare_throughput(old, up).verdict == "regressed"  # type: ignore[union-attr]
    assert compare_throughput(old, down).verdict == "improved"  # type: ignore[union-attr]
    assert compare_throughput(old, same).verdict == "within-noise"  # type: ignore[union-attr]
    assert compare_throughput(old, up).metric == "ttft_ms"  # type: ignore[union-attr]
