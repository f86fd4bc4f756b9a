"""A measurement over N server starts (perfgate.measuring.starts): pooled, its spread, its properties; pure."""

from __future__ import annotations

import pytest

from perfgate.measuring.metrics import Measurement, Trial, summarize
from perfgate.measuring.starts import combine, start_properties, start_stats


def _start(tok: float, *, log: str = "") -> Measurement:
    return summarize(config_key="k", config_name="n", log_path=log, trials=[
        Trial(tok_s=tok + d, output_tok_s=None, ttft_ms=40.0, itl_ms=None, accept_len=None, completion_tokens=64,
              failures=0) for d in (-0.5, 0.0, 0.5)])


def test_starts_pool_their_trials_and_take_the_median_of_their_medians():
    one = _start(100.0)
    assert combine([one]) is one
    m = combine([_start(100.0, log="a"), _start(110.0), _start(104.0, log="c")])
    assert m.starts and len(m.starts) == 3 and m.tok_s is not None and m.tok_s.n == 9
    assert m.tok_s.median == 104.0 and m.log_path == "c" and m.start_values("tok_s") == (100.0, 110.0, 104.0)
    with pytest.raises(ValueError, match="at least one start"):
        combine([])


def test_the_spread_between_starts_and_the_properties_a_record_carries():
    assert start_stats([100.0]) == (None, None, None)
    cv, lo, hi = start_stats([100.0, 110.0, 104.0])
    assert cv == pytest.approx(0.0484, abs=1e-3) and lo is not None and hi is not None and lo < 104.67 < hi
    assert start_properties(_start(100.0)) == {}  # one start: nothing between starts
    p = start_properties(combine([_start(100.0), _start(110.0), _start(104.0)]))
    assert p["n_starts"] == 3 and p["start_values"] == "100,110,104" and p["start_values.ttft_ms"] == "40,40,40"
    assert p["start_cv"] == cv and (p["start_ci_low"], p["start_ci_high"]) == (lo, hi)
