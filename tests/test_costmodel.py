"""The speculative-decoding cost model: the seed's arithmetic, and properties that must hold."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from perfgate.measuring import costmodel as cm

pos = st.floats(min_value=0.1, max_value=1e4, allow_nan=False, allow_infinity=False)
accept = st.floats(min_value=0.5, max_value=16.0, allow_nan=False, allow_infinity=False)
ms = st.floats(min_value=0.05, max_value=1e4, allow_nan=False, allow_infinity=False)


# ----------------------------------------------------------------------------- the seed


def test_seed_allreduce_count() -> None:
    assert cm.allreduce_count(61, 2) == 122
    assert cm.KIMI_K25.allreduces == 122


def test_seed_projection_167_tok_s() -> None:
    assert cm.projected_tok_s(2.0, 12.0) == pytest.approx(166.67, abs=0.01)
    assert cm.projected_tok_s(2.0, 12.0, draft_ms=0.0) == pytest.approx(1000 * 2.0 / 12.0)


def test_seed_breakdown_reproduces_the_seed() -> None:
    # EAGLE-3 at accept 2.0 measured 59.7 tok/s (cycle 33.5 ms) against the 89.5 tok/s baseline;
    # 122 all-reduces at ~205 µs each are the seed's "25 of 30 ms in communication".
    b = cm.spec_breakdown(
        baseline_tok_s=89.5,
        spec_tok_s=2.0 / 0.0335,
        accept_len=2.0,
        layers=61,
        allreduces_per_layer=2,
        hidden=7168,
        verify_tokens=3,
        allreduce_latency_us=lambda nbytes: 25_000 / 122,
        draft_ms=3.5,
        target_verify_ms=12.0,
    )
    assert b.allreduce_count == 122
    assert b.allreduce_bytes == 3 * 7168 * 2
    assert b.cycle_ms == pytest.approx(33.5)
    assert b.verify_ms == pytest.approx(30.0)
    assert b.allreduce_ms == pytest.approx(25.0)
    assert b.allreduce_share == pytest.approx(25.0 / 33.5)
    assert b.breakeven_cycle_ms == pytest.approx(22.35, abs=0.01)
    assert b.breakeven_accept_len == pytest.approx(3.0, abs=0.01)
    assert b.breakeven_verify_ms == pytest.approx(22.35 - 3.5, abs=0.01)
    assert not b.beats_baseline
    # the seed's projection counts verify only: 2.0 / 12 ms
    assert b.project(12.0) == pytest.approx(2.0 / 15.5 * 1000)
    assert cm.spec_breakdown(
        baseline_tok_s=89.5, spec_tok_s=59.7, accept_len=2.0, layers=61, allreduces_per_layer=2, hidden=7168,
        verify_tokens=3, target_verify_ms=12.0,
    ).projected_tok_s == pytest.approx(166.7, abs=0.05)
    msg = b.what_it_would_take()
    assert re.search(r"accept 2\.0 needs a cycle ≤ 22\.3 ms \(now 33\.5 ms\)", msg), msg
    assert "verify must fall to ≤ 18.8 ms" in msg
    assert "acceptance rise to ≥ 3.0" in msg
    assert "122 × 204.9 µs = 25.0 ms" in msg
    assert "a 12.0 ms verify would give" in msg


def test_baseline_decode_step() -> None:
    s = cm.step_breakdown(tok_s=89.5, shape=cm.KIMI_K25, tokens=1, allreduce_latency_us=lambda n: 50.0)
    assert s.step_ms == pytest.approx(11.173, abs=1e-3)
    assert s.allreduce_bytes == 7168 * 2
    assert s.allreduce_ms == pytest.approx(122 * 0.05)
    assert s.allreduce_share == pytest.approx(6.1 / s.step_ms)
    assert set(s.as_properties()) == {"cycle_ms", "allreduce_share"}


def test_message_when_draft_unknown_and_when_it_already_wins() -> None:
    kw = dict(layers=61, allreduces_per_layer=2, hidden=7168, verify_tokens=4)
    slow = cm.spec_breakdown(baseline_tok_s=89.5, spec_tok_s=54.1, accept_len=2.0, **kw)  # type: ignore[arg-type]
    assert "draft + verify must fall to ≤ 22.3 ms" in slow.what_it_would_take()
    assert "all-reduce" not in slow.what_it_would_take()
    fast = cm.spec_breakdown(baseline_tok_s=89.5, spec_tok_s=150.0, accept_len=2.0, **kw)  # type: ignore[arg-type]
    assert fast.beats_baseline
    assert fast.what_it_would_take().startswith("speculation at accept 2.0 beats the baseline")


def test_message_when_draft_alone_is_too_slow() -> None:
    b = cm.spec_breakdown(
        baseline_tok_s=100.0, spec_tok_s=40.0, accept_len=2.0, layers=1, allreduces_per_layer=2, hidden=8,
        verify_tokens=1, draft_ms=25.0,
    )
    assert b.breakeven_verify_ms < 0
    assert "no verify time can do it, the draft alone takes 25.0 ms" in b.what_it_would_take()


def test_properties_are_plain_decimals_and_absent_when_unknown() -> None:
    b = cm.spec_breakdown(
        baseline_tok_s=89.5, spec_tok_s=59.7, accept_len=2.0, layers=61, allreduces_per_layer=2, hidden=7168,
        verify_tokens=3,
    )
    props = b.as_properties()
    assert set(props) == {"cycle_ms", "breakeven_accept_len", "breakeven_verify_ms"}
    for v in props.values():
        assert re.fullmatch(r"-?\d+(\.\d+)?", v), v
    with_ar = cm.spec_breakdown(
        baseline_tok_s=89.5, spec_tok_s=59.7, accept_len=2.0, layers=61, allreduces_per_layer=2, hidden=7168,
        verify_tokens=3, allreduce_latency_us=lambda n: 1e-3,
    )
    assert re.fullmatch(r"\d+(\.\d+)?", with_ar.as_properties()["allreduce_share"])


def test_unknown_model_shape_leaves_the_allreduce_part_out() -> None:
    # what the runner passes when the profile or the mode lacks a number
    b = cm.spec_breakdown(
        baseline_tok_s=89.5, spec_tok_s=59.7, accept_len=2.0, layers=None, allreduces_per_layer=2, hidden=None,
        verify_tokens=None, allreduce_latency_us=lambda n: 200.0,
    )
    assert b.allreduce_count is None and b.allreduce_bytes is None and b.allreduce_share is None
    assert "allreduce_share" not in b.as_properties()
    assert b.breakeven_accept_len == pytest.approx(89.5 * 2.0 / 59.7)
    assert "all-reduce" not in b.what_it_would_take()


def test_model_shape_from_profile() -> None:
    class Model:
        layers = 61
        hidden = None
        allreduces_per_layer = 2

    class Profile:
        model = Model()

    shape = cm.ModelShape.from_profile(Profile(), default=cm.KIMI_K25)
    assert shape == cm.KIMI_K25
    with pytest.raises(ValueError, match="profile.model.hidden"):
        cm.ModelShape.from_profile(Profile())


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        cm.projected_tok_s(2.0, 0.0)
    with pytest.raises(ValueError, match="tok_s must be > 0"):
        cm.cycle_ms_from_tok_s(0.0)
    with pytest.raises(ValueError, match="at least one"):
        cm.latency_interpolator([])


# ----------------------------------------------------------------------------- properties


@given(a1=accept, a2=accept, v=ms, d=st.floats(min_value=0, max_value=100))
def test_projection_monotonic_in_acceptance(a1: float, a2: float, v: float, d: float) -> None:
    lo, hi = sorted((a1, a2))
    assert cm.projected_tok_s(lo, v, d) <= cm.projected_tok_s(hi, v, d)


@given(a=accept, v1=ms, v2=ms, d=st.floats(min_value=0, max_value=100))
def test_projection_monotonic_in_verify_time(a: float, v1: float, v2: float, d: float) -> None:
    lo, hi = sorted((v1, v2))
    assert cm.projected_tok_s(a, lo, d) >= cm.projected_tok_s(a, hi, d)


@given(baseline=pos, a=accept, d=st.floats(min_value=0, max_value=50))
@example(baseline=89.5, a=2.0, d=0.0)
def test_breakeven_verify_gives_the_baseline(baseline: float, a: float, d: float) -> None:
    v = cm.breakeven_verify_ms(baseline, a, d)
    if v > 1e-6 * (v + d):
        assert cm.projected_tok_s(a, v, d) == pytest.approx(baseline, rel=1e-6)
        # a faster verify beats the baseline, a slower one does not
        assert cm.projected_tok_s(a, v * 0.99, d) > baseline
        assert cm.projected_tok_s(a, v * 1.01, d) < baseline
    else:
        # the draft alone is already slower than the break-even cycle
        assert d * (1 + 1e-9) >= cm.breakeven_cycle_ms(baseline, a)


@given(baseline=pos, cycle=ms)
def test_breakeven_accept_len_gives_the_baseline(baseline: float, cycle: float) -> None:
    a = cm.breakeven_accept_len(baseline, cycle)
    assert cm.projected_tok_s(a, cycle) == pytest.approx(baseline, rel=1e-9)


@given(baseline=pos, spec=pos, a=accept, d=st.one_of(st.none(), st.floats(min_value=0, max_value=5)))
def test_breakdown_consistent_with_projection(baseline: float, spec: float, a: float, d: float | None) -> None:
    b = cm.spec_breakdown(
        baseline_tok_s=baseline, spec_tok_s=spec, accept_len=a, layers=61, allreduces_per_layer=2, hidden=7168,
        verify_tokens=4, draft_ms=d,
    )
    # the measured cycle reproduces the measured tok/s through the projection
    if b.verify_ms > 0:
        assert b.project(b.verify_ms) == pytest.approx(spec, rel=1e-9)
    # beats the baseline exactly when the measured tok/s is at least the baseline's
    if not math.isclose(spec, baseline, rel_tol=1e-9):
        assert b.beats_baseline == (spec > baseline)
    # the break-even acceptance length is above the measured one exactly when speculation loses
    if not math.isclose(spec, baseline, rel_tol=1e-9):
        assert (b.breakeven_accept_len > a) == (spec < baseline)
    assert b.breakeven_cycle_ms == pytest.approx(b.breakeven_verify_ms + (d or 0.0))


@given(lat1=st.floats(min_value=0, max_value=1e4), lat2=st.floats(min_value=0, max_value=1e4), spec=pos)
def test_allreduce_share_monotonic_in_latency(lat1: float, lat2: float, spec: float) -> None:
    def share(lat: float) -> float:
        b = cm.spec_breakdown(
            baseline_tok_s=89.5, spec_tok_s=spec, accept_len=2.0, layers=61, allreduces_per_layer=2, hidden=7168,
            verify_tokens=4, allreduce_latency_us=lambda n: lat,
        )
        assert b.allreduce_share is not None
        return b.allreduce_share

    lo, hi = sorted((lat1, lat2))
    assert 0 <= share(lo) <= share(hi)


sizes = st.integers(min_value=1, max_value=1 << 30)


@given(
    pts=st.dictionaries(sizes, st.floats(min_value=0, max_value=1e6), min_size=1, max_size=12),
    q=sizes,
)
def test_latency_interpolator_stays_within_neighbours(pts: dict[int, float], q: int) -> None:
    f = cm.latency_interpolator(pts)
    for b, lat in pts.items():
        assert f(b) == lat
    xs = sorted(pts)
    if q <= xs[0]:
        assert f(q) == pts[xs[0]]
    elif q >= xs[-1]:
        assert f(q) == pts[xs[-1]]
    else:
        lo = max(x for x in xs if x <= q)
        hi = min(x for x in xs if x >= q)
        assert min(pts[lo], pts[hi]) - 1e-9 <= f(q) <= max(pts[lo], pts[hi]) + 1e-9


@given(
    pts=st.lists(st.tuples(sizes, st.floats(min_value=0, max_value=1e6)), min_size=1, max_size=12),
    q1=sizes,
    q2=sizes,
)
def test_latency_interpolator_monotonic_through_monotonic_points(
    pts: list[tuple[int, float]], q1: int, q2: int
) -> None:
    # latencies that grow with size interpolate to a function that grows with size
    xs = sorted({b for b, _ in pts})
    ys = sorted(lat for _, lat in pts)[: len(xs)]
    f = cm.latency_interpolator(list(zip(xs, ys)))
    lo, hi = sorted((q1, q2))
    assert f(lo) <= f(hi) + 1e-9


def test_a_traced_allreduce_count_and_time_replace_the_model():
    """A profile record's measured all-reduces per verify pass (SGLang's own trace) take the modelled ones' place."""
    from perfgate.measuring.costmodel import spec_breakdown

    kw: dict[str, Any] = dict(baseline_tok_s=89.5, spec_tok_s=57.4, accept_len=2.0, layers=61, allreduces_per_layer=2,
                              hidden=7168, verify_tokens=4, allreduce_latency_us=lambda nbytes: 100.0)
    model = spec_breakdown(**kw)
    assert (model.allreduce_count, model.allreduce_source) == (122, "model")
    assert model.allreduce_ms == pytest.approx(12.2)
    traced = spec_breakdown(**kw, measured_allreduce=(122.0, 24.91))
    assert (traced.allreduce_count, traced.allreduce_ms, traced.allreduce_source) == (122, 24.91, "trace")
    assert traced.allreduce_share == pytest.approx(24.91 / traced.cycle_ms)
    assert "all-reduce (measured in the trace): 122 × 204.2 µs = 24.9 ms" in traced.what_it_would_take()
    assert traced.as_properties()["allreduce_source"] == "trace"
    assert spec_breakdown(**kw, measured_allreduce=(0.0, 0.0)).allreduce_source == "model"  # tp 1: nothing traced
