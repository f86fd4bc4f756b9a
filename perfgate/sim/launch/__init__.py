"""The rules of a simulated SGLang launch, one module per concern.

- :mod:`~perfgate.sim.launch.flags`        argument defaults, package checks, graph/attention/MoE backends
- :mod:`~perfgate.sim.launch.speculative`  speculative-decoding flags and the drafter's acceptance
- :mod:`~perfgate.sim.launch.memory`       memory defaults, the static-pool fraction, the per-GPU budget
- :mod:`~perfgate.sim.launch.allreduce`    which all-reduce backends and fusion end up in force
- :mod:`~perfgate.sim.launch.tracebacks`   the tracebacks SGLang prints when a launch fails

Each rule reads and updates a :class:`LaunchState`; :mod:`perfgate.sim.behavior` runs them in
SGLang's order and returns the :class:`~perfgate.sim.plan.LaunchPlan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfgate.sim.hardware import Hardware
from perfgate.sim.plan import Failure, LaunchPlan, LogLine
from perfgate.versions import version_at_least


def truthy(v: str | None) -> bool:
    """An environment switch as SGLang reads it."""
    return v is not None and str(v).strip().lower() in ("1", "true", "yes", "on")


def sm_probe(hw: Hardware) -> dict[str, bool]:
    """Which SM families the box's GPUs and CUDA version enable kernels for."""
    cuda = hw.version("cuda") or "0"
    major = hw.sm_major
    return {
        "sm90": major == 9 and version_at_least(cuda, "12.3"),
        "sm100": major == 10 and version_at_least(cuda, "12.8"),
        "sm120": major == 12 and version_at_least(cuda, "12.8"),
        "blackwell": major in (10, 11, 12),
    }


class LaunchState:
    """A launch being resolved: the hardware, the SGLang version, the resolved arguments (``a``), the
    environment, the log lines so far and the plan parts known so far (failure plans carry them too)."""

    def __init__(self, hw: Hardware, version: str, fields: Mapping[str, Any], env: Mapping[str, str]) -> None:
        self.hw = hw
        self.version = version
        self.a: dict[str, Any] = dict(fields)
        self.env = dict(env)
        self.log: list[LogLine] = []
        self.known: dict[str, Any] = {}  # plan parts known so far (failure plans carry them too)

    def info(self, phase: str, text: str) -> None:
        self.log.append(LogLine(phase=phase, text=text))

    def warn(self, phase: str, text: str) -> None:
        self.log.append(LogLine(phase=phase, text=text, warning=True))

    def plan(self, failure: Failure | None, **kw: Any) -> LaunchPlan:
        parts = {**self.known, **kw}
        return LaunchPlan(hardware=self.hw, version=self.version, args=dict(self.a), env=dict(self.env),
                          failure=failure, log=tuple(self.log), _cost=self.hw.cost, **parts)
