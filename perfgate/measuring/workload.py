"""Workload: prompt sets from ``fixtures/prompts`` turned into requests."""

from __future__ import annotations

import json
from pathlib import Path

from perfgate.client import GenRequest
from perfgate.errors import ProfileSchemaError
from perfgate.profiles import Workload


def load_prompts(path: Path) -> list[tuple[int, ...]]:
    """A JSONL prompt set: one ``{"input_ids": [...]}`` per line."""
    out: list[tuple[int, ...]] = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                obj = json.loads(line)
                ids = obj["input_ids"]
                if not isinstance(ids, list) or not ids or not all(isinstance(x, int) and x >= 0 for x in ids):
                    raise ValueError("input_ids must be a non-empty list of token ids")
            except (ValueError, KeyError, TypeError) as e:
                raise ProfileSchemaError(path, f"line {n}", '{"input_ids": [non-negative ints]}', line.strip()[:80],
                                         fix=str(e)) from None
            out.append(tuple(ids))
    if not out:
        raise ProfileSchemaError(path, "(file)", "at least one prompt", "an empty prompt set")
    return out


def unseen_prompt(prompts: list[tuple[int, ...]], index: int, shift: int = 0) -> tuple[int, ...]:
    """Prompt ``index`` of an endless sequence: prompt ``index % n`` rotated left by ``index // n`` tokens.

    The same tokens, so the same prefill cost, but on each pass through the set a different first
    token, so SGLang's prefix cache cannot serve one pass from another. ``shift`` rotates further.
    """
    p = prompts[index % len(prompts)]
    k = (index // len(prompts) + shift) % len(p)
    return p[k:] + p[:k]


def requests_for(workload: Workload, prompts: list[tuple[int, ...]], count: int, offset: int = 0) -> list[GenRequest]:
    """``count`` requests from index ``offset`` of the endless prompt sequence, no two starting alike.

    A request whose first token another request of the batch already starts with would share a cached
    prefix with it, so it is rotated on until it starts with a token of its own (where one exists).
    """
    out: list[GenRequest] = []
    firsts: set[int] = set()
    for i in range(count):
        p = unseen_prompt(prompts, offset + i)
        for shift in range(1, len(p)):
            if p[0] not in firsts:
                break
            p = unseen_prompt(prompts, offset + i, shift)
        firsts.add(p[0])
        out.append(GenRequest(input_ids=p, max_new_tokens=workload.max_new_tokens))
    return out
