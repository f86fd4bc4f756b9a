"""A TTFT probe split at the server's timestamps (perfgate.measuring.ttft_parts), pure: the legs add up to the
client's TTFT, a response without every stamp (or with stamps out of order) has no legs, and a record names the leg
with the widest spread."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from perfgate.measuring.ttft_parts import PARTS, STAMPS, part_properties, parts_ms, spread, start_medians

ms = st.floats(min_value=0.0, max_value=500.0, allow_nan=False)


@given(st.floats(min_value=1.7e9, max_value=1.8e9), st.lists(ms, min_size=3, max_size=3), ms)
def test_the_legs_add_up_to_the_clients_ttft(t0, gaps_ms, rest_ms):
    stamps = [t0]
    for g in gaps_ms:
        stamps.append(stamps[-1] + g / 1000)
    ttft_s = stamps[-1] - t0 + rest_ms / 1000
    legs = parts_ms(ttft_s, dict(zip(STAMPS, stamps)))
    assert legs is not None and list(legs) == list(PARTS)
    assert math.isclose(sum(legs.values()), ttft_s * 1000, rel_tol=1e-9, abs_tol=1e-6)
    for name, g in zip(PARTS, gaps_ms):  # each server leg is its stamps' difference (realtime: ~0.2 us resolution)
        assert math.isclose(legs[name], g, abs_tol=1e-3)


def test_a_response_without_every_stamp_or_out_of_order_has_no_legs():
    meta = {"request_received_ts": 100.0, "api_server_dispatch_finish_ts": 100.001, "forward_entry_time": 100.002,
            "prefill_finished_time": 100.020}
    assert parts_ms(0.025, meta) is not None
    assert parts_ms(None, meta) is None
    for k in STAMPS:
        assert parts_ms(0.025, {kk: v for kk, v in meta.items() if kk != k}) is None, k
    assert parts_ms(0.025, {**meta, "forward_entry_time": 99.0}) is None  # runs backwards
    assert parts_ms(0.025, {**meta, "forward_entry_time": "soon"}) is None


def test_the_record_names_the_leg_whose_spread_is_widest():
    # a host at two levels on the way back (rest 2 or 17 ms), the GPU's prefill steady at 15 ms
    probes = [{"dispatch": 0.3, "to_forward": 0.5, "prefill": 15.0 + 0.01 * (i % 3), "rest": 2.0 if i % 2 else 17.0}
              for i in range(20)]
    props = part_properties(probes)
    assert props["ttft_spread_in"] == "rest"
    assert math.isclose(float(str(props["ttft_part.rest_spread_ms"])), 15.0)
    assert math.isclose(float(str(props["ttft_part.prefill_ms"])), 15.01)
    assert props["ttft_part.dispatch_spread_ms"] == 0.0
    assert part_properties([]) == {}


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), max_size=50))
def test_spread_is_never_negative_and_zero_for_one_value(values):
    s = spread(values)
    assert s >= 0
    if len(set(values)) <= 1:
        assert s == 0


def test_start_medians_need_every_start_stamped():
    a = [{"dispatch": 0.1, "to_forward": 0.2, "prefill": 15.0, "rest": r} for r in (2.0, 3.0, 17.0)]
    b = [{"dispatch": 0.1, "to_forward": 0.2, "prefill": 16.0, "rest": 2.5}]
    got = start_medians([a, b])
    assert got["rest"] == [3.0, 2.5] and got["prefill"] == [15.0, 16.0] and list(got) == list(PARTS)
    assert start_medians([a, ()]) == {} and start_medians([]) == {}
