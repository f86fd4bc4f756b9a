"""``-n auto``'s worker count for perfgate's own suite (tests/conftest.py): two workers a free CPU, up to 8."""

from __future__ import annotations

from tests.conftest import auto_workers


def test_two_workers_a_free_cpu_up_to_eight() -> None:
    assert auto_workers(2, 1.97) == 4  # a quiet 2-CPU runner
    assert auto_workers(2, 1.02) == 2  # one CPU kept busy by another job
    assert auto_workers(2, 0.1) == 2  # both busy: counted as one free CPU, so 2 workers (-n auto before)
    assert auto_workers(16, 15.9) == 16  # a large box: at least one a CPU, not capped below that
    assert auto_workers(4, 3.9) == 8
    assert auto_workers(4, None) == 8  # no /proc/stat: every CPU counted free
    assert auto_workers(2, 7.5) == 4  # idle is never more than the CPUs the suite may use
