"""The simulated engine: ``python -m perfgate.sim`` with the same SGLang flags."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.engines.argv import render_flags
from perfgate.host.procs import perfgate_pythonpath
from perfgate.profiles.config import ServerConfig
from perfgate.sim.variation import MACHINE_ENV, SCALE_ENV, START_SEED_ENV

# The simulated server runs every step this many times faster than its cost model says (--sim-speedup) and says
# how far its clock has run ahead of the wall clock; perfgate's client adds the lead gained over each duration, so
# records keep the simulated figures while the client's own time and the network's count once (docs/measurement.md:
# every record within 0.2 % of real time). That holds while the client reacts within one sped-up step; with many
# streams its per-chunk work is s times denser, so a profile measuring above SPEEDUP_MAX_STREAMS runs at real time.
# PERFGATE_SIM_SPEEDUP overrides both (1: real time).
DEFAULT_SIM_SPEEDUP = 4.0
SPEEDUP_MAX_STREAMS = 8
#: how the simulated machine (PERFGATE_SIM_MACHINE), its start seed and PERFGATE_SIM_SCALE reach the server
SIM_VARIATION_FLAGS = ((MACHINE_ENV, "--sim-machine"), (START_SEED_ENV, "--sim-start-seed"), (SCALE_ENV, "--sim-scale"))


#: launches per config in this process: start n of a config is seeded "<seed key>:<n>" (perfgate.sim.variation)
_LAUNCHES: dict[str, int] = {}


def seed_key(config: ServerConfig) -> str:
    """The config's identity for its simulated start seeds, the same in every checkout: :attr:`ServerConfig.key`
    hashes the absolute paths the flags name (``--sim-hardware``, the model), so seeding with it gave each
    checkout directory its own start jitter, and figures that moved with the path a repository was cloned to."""
    def portable(v: object) -> object:
        return Path(v).name if isinstance(v, str) and os.path.isabs(v) else v

    blob = json.dumps([config.engine, portable(config.model_path), [(k, portable(v)) for k, v in config.flags],
                       config.env, [(k, portable(v)) for k, v in config.engine_options]], sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:10]


def sim_speedup(max_streams: int = 1, *, real_time: bool = False) -> float:
    """The speedup for a simulated profile measuring at most ``max_streams`` requests at once; ``real_time``: a
    client other than perfgate's measures it too (SGLang's own, for the cross-check), which cannot read the
    simulator's clock lead, so only PERFGATE_SIM_SPEEDUP can speed it up."""
    raw = os.environ.get("PERFGATE_SIM_SPEEDUP", "")
    default = DEFAULT_SIM_SPEEDUP if max_streams <= SPEEDUP_MAX_STREAMS and not real_time else 1.0
    try:
        s = float(raw) if raw.strip() else default
    except ValueError:
        s = default
    return s if 0 < s < float("inf") else default


@dataclass(kw_only=True)
class SimEngine:
    """Starts perfgate's simulated SGLang server; SGLang flags pass through unchanged."""

    sim_stack: str = ""  # "flashinfer=0.8.0,cuda=13.1": simulated stack overrides
    fault: str = ""  # fault injection for perfgate's own reliability tests
    teardown_grace_s: float = 5.0
    max_streams: int = 1  # the most requests the profile measures at once (sets the default speedup)
    real_time: bool = False  # SGLang's own benchmark measures it too (--perfgate-crosscheck on): no default speedup
    python: str = ""  # the server's interpreter (a stack-pair candidate's virtualenv; default: this one)
    name: str = field(default="sim", init=False)

    def argv_flags(self, config: ServerConfig) -> list[str]:
        return render_flags(config.flag_dict)

    def command(self, config: ServerConfig, *, host: str, port: int) -> list[str]:
        opts = dict(config.engine_options)
        argv = [self.python or sys.executable, "-m", "perfgate.sim", "--model-path", config.model_path,
                *self.argv_flags(config), "--host", host, "--port", str(port)]
        if opts.get("sim_hardware"):
            argv += ["--sim-hardware", str(opts["sim_hardware"])]
        if opts.get("sim_startup_s") is not None:
            argv += ["--sim-startup-s", str(opts["sim_startup_s"])]
        if self.sim_stack:
            argv += ["--sim-stack", self.sim_stack]
        if self.fault:
            argv += ["--sim-fault", self.fault]
        speedup = sim_speedup(self.max_streams, real_time=self.real_time)
        if speedup != 1.0:
            argv += ["--sim-speedup", f"{speedup:g}"]
        # the simulated machine, its start seed and a speed scale (perfgate.sim.variation), from this environment
        for env_name, flag in SIM_VARIATION_FLAGS:
            value = os.environ.get(env_name, "").strip()
            if value:
                argv += [flag, value]
        if not os.environ.get(START_SEED_ENV, "").strip():
            # each start of a config draws its own jitter, and the same sequence every session (reproducible runs)
            key = seed_key(config)
            n = _LAUNCHES[key] = _LAUNCHES.get(key, 0) + 1
            argv += ["--sim-start-seed", f"{key}:{n}"]
        return argv

    def environment(self, config: ServerConfig, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        env.update(config.env_dict)
        # the simulator must import this very perfgate, wherever pytest runs from
        env["PYTHONPATH"] = perfgate_pythonpath(env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env
