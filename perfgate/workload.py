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


def requests_for(workload: Workload, prompts: list[tuple[int, ...]], count: int, offset: int = 0) -> list[GenRequest]:
    """``count`` requests cycling through the prompt set from ``offset``."""
    return [
        GenRequest(input_ids=prompts[(offset + i) % len(prompts)], max_new_tokens=workload.max_new_tokens)
        for i in range(count)
    ]
