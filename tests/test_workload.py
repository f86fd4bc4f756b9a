"""Requests never share a prefix with one sent before in the same batch (perfgate.measuring.workload)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from perfgate.measuring.workload import requests_for, unseen_prompt
from perfgate.profiles import Workload

W = Workload(prompts=Path("unused.jsonl"), max_new_tokens=8)
_TOKENS = st.lists(st.integers(0, 150_000), min_size=4, max_size=400, unique=True)


@given(tokens=_TOKENS, data=st.data())
def test_a_batch_never_repeats_a_first_token(tokens, data):
    # prompts of random ids, as fixtures/prompts/random-ids-128.jsonl; some share tokens with others
    sizes = data.draw(st.lists(st.integers(2, 30), min_size=1, max_size=12))
    prompts = [tuple(data.draw(st.permutations(tokens))[:s]) for s in sizes]
    count = data.draw(st.integers(1, 200))
    offset = data.draw(st.integers(0, 500))
    reqs = requests_for(W, prompts, count, offset=offset)
    assert len(reqs) == count
    for i, r in enumerate(reqs):
        assert sorted(r.input_ids) == sorted(prompts[(offset + i) % len(prompts)])  # same tokens, same cost
    # every request starts with a token no earlier request of the batch started with, unless every
    # token of its prompt is taken already (then no rotation of it could be cold)
    seen: set[int] = set()
    for r in reqs:
        assert r.input_ids[0] not in seen or set(r.input_ids) <= seen
        seen.add(r.input_ids[0])


def test_the_first_pass_is_the_prompt_set_itself_then_rotations():
    prompts: list[tuple[int, ...]] = [(1, 2, 3), (4, 5, 6)]
    assert [unseen_prompt(prompts, i) for i in range(4)] == [(1, 2, 3), (4, 5, 6), (2, 3, 1), (5, 6, 4)]
    assert [r.input_ids for r in requests_for(W, prompts, 4)] == [(1, 2, 3), (4, 5, 6), (2, 3, 1), (5, 6, 4)]


def test_prompts_that_are_rotations_of_each_other_are_rotated_apart():
    prompts: list[tuple[int, ...]] = [(0, 1, 2), (1, 2, 0)]
    firsts = [r.input_ids[0] for r in requests_for(W, prompts, 3)]
    assert sorted(firsts) == [0, 1, 2]
