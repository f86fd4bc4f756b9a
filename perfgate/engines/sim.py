"""The simulated engine: ``python -m perfgate.sim`` with the same SGLang flags."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from perfgate.config import ServerConfig
from perfgate.engines.argv import render_flags
from perfgate.procs import perfgate_pythonpath


# The simulated server runs every step this many times faster than its cost model says (--sim-speedup) and says
# so on each stream; perfgate's client scales the stream's durations back, so records keep the simulated rates
# (docs/measurement.md: client accuracy at this speedup). PERFGATE_SIM_SPEEDUP overrides it (1: real time).
DEFAULT_SIM_SPEEDUP = 4.0


def sim_speedup() -> float:
    raw = os.environ.get("PERFGATE_SIM_SPEEDUP", "")
    try:
        s = float(raw) if raw.strip() else DEFAULT_SIM_SPEEDUP
    except ValueError:
        s = DEFAULT_SIM_SPEEDUP
    return s if 0 < s < float("inf") else DEFAULT_SIM_SPEEDUP


@dataclass(kw_only=True)
class SimEngine:
    """Starts perfgate's simulated SGLang server; SGLang flags pass through unchanged."""

    sim_stack: str = ""  # "flashinfer=0.8.0,cuda=13.1": simulated stack overrides
    fault: str = ""  # fault injection for perfgate's own reliability tests
    teardown_grace_s: float = 5.0
    name: str = field(default="sim", init=False)

    def argv_flags(self, config: ServerConfig) -> list[str]:
        return render_flags(config.flag_dict)

    def command(self, config: ServerConfig, *, host: str, port: int) -> list[str]:
        opts = dict(config.engine_options)
        argv = [sys.executable, "-m", "perfgate.sim", "--model-path", config.model_path, *self.argv_flags(config),
                "--host", host, "--port", str(port)]
        if opts.get("sim_hardware"):
            argv += ["--sim-hardware", str(opts["sim_hardware"])]
        if opts.get("sim_startup_s") is not None:
            argv += ["--sim-startup-s", str(opts["sim_startup_s"])]
        if self.sim_stack:
            argv += ["--sim-stack", self.sim_stack]
        if self.fault:
            argv += ["--sim-fault", self.fault]
        speedup = sim_speedup()
        if speedup != 1.0:
            argv += ["--sim-speedup", f"{speedup:g}"]
        return argv

    def environment(self, config: ServerConfig, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        env.update(config.env_dict)
        # the simulator must import this very perfgate, wherever pytest runs from
        env["PYTHONPATH"] = perfgate_pythonpath(env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env
