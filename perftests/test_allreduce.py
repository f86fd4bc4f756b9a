"""The fast tier (marker ``micro``): all-reduce micro-benchmarks, no server, written only with perfgate's public
fixtures.

One record per backend × world size × message size × timing (eager; CUDA graph on GPUs), its
``micro_case`` (a ``MicroCase``, as perfgate exports it: kind ``allreduce``, mode ``eager`` or ``graph``,
variant = the backend) given by perfgate from the session's plan, measured and concluded by ``micro_check``.
Sizes are the model's decode and verify shapes (tokens × hidden × 2 bytes of bf16, from the profile's
``[model]`` and ``[micro]``), plus a sweep; each backend × world size is measured in one launch of ranks,
shared by its records.

Outcomes: a measured size passes (its numbers are properties: ``backend``, ``world_size``, ``bytes``,
``latency_us``, ``latency_p99_us``, ``busbw_gbps``); where the profile has a floor for the record
(``[micro.floors]`` "<backend>.<eager|graph>.<bytes>", at its world size), the median latency must be
<= ``latency_us × (1 + tolerance)`` or the record fails as ``slower-than-baseline``. The profile's
``[expectations."allreduce:<backend>"]`` decide like any expectation (strict xfail); without one, a backend
or size that cannot run here (no GPU, not importable, arch, capture, SGLang's own fallback to NCCL) is an
xfail with its category, and a wrong sum, a crashed rank or a hang is a failure (docs/allreduce.md).

Settings, first found wins: env ``PERFGATE_MICRO_WORLD_SIZES`` ("2,4"), the profile's ``[micro]``
(``world_sizes``, ``tokens``, ``sweep_bytes``, ``iters``, ``warmup``), defaults (world size min(GPUs, 8),
or 2 with gloo where there is no GPU; hidden 7168; tokens 1, 4, 8). ``PERFGATE_MICRO_ITERS`` overrides the
iteration count.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.micro,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="torch is not installed (the all-reduce micro-benchmarks need torch.distributed)"),
]


def test_allreduce(micro_case, micro_check) -> None:
    """Time one all-reduce backend at one size; the numbers travel as JUnit properties."""
    micro_check(micro_case)
