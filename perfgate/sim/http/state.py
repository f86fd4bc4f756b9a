"""What every request handler of the simulated server shares: :class:`ServerState`."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfgate.sim.behavior import LaunchPlan
from perfgate.sim.engine_loop import EngineLoop
from perfgate.sim.log import SimLog
from perfgate.sim.trace import TraceRecorder
from perfgate.sim.variation import SimSpeed


@dataclass(eq=False)
class ServerState:
    """Everything the HTTP layer needs; shared by all handler threads."""

    plan: LaunchPlan
    engine: EngineLoop | None
    log: SimLog
    hardware_path: str
    launch_command: str
    fault: str | None = None
    fault_after: int = 3
    ready: threading.Event = field(default_factory=threading.Event)
    shutdown: threading.Event = field(default_factory=threading.Event)
    startup_time: float | None = None
    sim_speed: SimSpeed = field(default_factory=SimSpeed)  # the simulated machine on this start
    tracer: TraceRecorder | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def args(self) -> Mapping[str, Any]:
        return self.plan.args
