"""The speculation crossover on scripted measurements (no server): interpolation, never / always, its CI,
the cost model's prediction."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.measuring.crossover import Point, crossing, crossover, predicted

LOADS = (1, 2, 4, 8, 16, 32, 64)


def test_the_crossing_is_interpolated_in_log_load():
    res, x = crossing((4, 16), (1.5, 0.5))
    assert res == "at" and x == pytest.approx(8.0)  # halfway in log: 4 x 2
    assert crossing(LOADS, [0.9] * 7) == ("never", None)
    assert crossing(LOADS, [1.2] * 7) == ("always", None)
    # losing at low load, winning in the middle, losing at the top (the simulated seed box): the last fall
    res, x = crossing(LOADS, [0.6, 0.9, 1.2, 1.1, 1.04, 1.05, 0.9])
    assert res == "at" and x is not None and 32 < x < 64


@given(ratios=st.lists(st.floats(min_value=0.1, max_value=10), min_size=2, max_size=7))
def test_a_crossing_lies_between_the_levels_around_it(ratios):
    loads = LOADS[:len(ratios)]
    res, x = crossing(loads, ratios)
    if res == "at":
        assert x is not None
        i = max(j for j in range(len(ratios) - 1) if ratios[j] > 1 >= ratios[j + 1])
        assert loads[i] <= x * (1 + 1e-9) and x <= loads[i + 1] * (1 + 1e-9)
    else:
        assert x is None and res == ("always" if ratios[-1] > 1 else "never")


def test_the_ci_comes_from_the_trials_and_contains_the_estimate():
    base = [[100.0 * c ** 0.8 + d for d in (-1, 0, 1, 0.5, -0.5)] for c in LOADS]
    spec = [[150.0 * c ** 0.6 + d for d in (-2, 0, 2, 1, -1)] for c in LOADS]
    x = crossover(LOADS, base, spec)
    assert x.result == "at" and x.wins == (1, 2, 4)
    exact = math.exp(math.log(1.5) / 0.2)  # 150 c^0.6 = 100 c^0.8
    assert x.load == pytest.approx(exact, rel=0.15)
    assert x.load is not None and x.ci_low is not None and x.ci_high is not None
    assert x.ci_low <= x.load <= x.ci_high and x.ci_high - x.ci_low < x.load
    assert x.value == x.load
    never = crossover(LOADS, base, [[t * 0.5 for t in b] for b in base])
    assert never.result == "never" and never.value == 0.0 and never.ci_low == never.ci_high == 0.0
    always = crossover(LOADS, base, [[t * 2 for t in b] for b in base])
    assert always.result == "always" and always.value == 64.0 and always.ci_high == 64.0
    with pytest.raises(ValueError, match="trials of both modes"):
        crossover(LOADS, base, spec[:-1])


def test_the_cost_model_predicts_from_decode_step_times():
    # baseline decode step 10 ms at every load; the speculative cycle (2 tokens) grows 10, 15, 25, 40 ms:
    # it pays while the cycle is under the 20 ms break-even (accept 2 / 100 tok/s)
    pts = [Point(load=c, base_tok_s=1, spec_tok_s=1, ratio=1, base_decode_tok_s=100.0,
                 spec_decode_tok_s=2000.0 / cyc) for c, cyc in zip((1, 2, 4, 8), (10, 15, 25, 40))]
    res, x = predicted(pts, 2.0)
    assert res == "at" and x is not None and 2 < x < 4
    assert predicted(pts, None) == ("unknown", None)


def test_the_prediction_counts_only_the_requests_a_server_runs_at_once():
    # both modes decode at the same per-request pace scaled by acceptance: speculation pays while every stream
    # runs; past the speculative server's cap of 48 its extra streams wait, and it stops paying between 48 and 64
    pts = [Point(load=c, base_tok_s=1, spec_tok_s=1, ratio=1, base_decode_tok_s=100.0, spec_decode_tok_s=130.0)
           for c in (16, 32, 48, 64)]
    assert predicted(pts, 2.0)[0] == "always"
    res, x = predicted(pts, 2.0, base_cap=4096, spec_cap=48)
    assert res == "at" and x is not None and 48 < x < 64


def test_max_running_is_read_from_the_server_log(tmp_path):
    from perfgate.measuring.crossover import max_running
    from perfgate.measuring.metrics import summarize

    log = tmp_path / "s.log"
    log.write_text("server_args=ServerArgs(max_running_requests=None)\nmax_total_num_tokens=741945, "
                   "chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=8192\n")
    m = summarize(config_key="k", config_name="n", trials=[], log_path=str(log))
    assert max_running((m,)) == 48 and max_running((summarize(config_key="k", config_name="n", trials=[]),)) is None
