"""perfgate's simulated SGLang server (``python -m perfgate.sim``) and its pure cost model.

CI has no GPU, so perfgate launches this stand-in exactly like ``sglang serve``: same flags,
same HTTP API, SGLang-shaped logs and exit paths. What it does is decided only by the hardware
file (``fixtures/sim/*.toml``), the flags and the environment:

- :mod:`perfgate.sim.hardware`    the box, its stack and cost constants (TOML)
- :mod:`perfgate.sim.args`        SGLang's flag table (as data) and the ``sglang serve`` parser
- :mod:`perfgate.sim.allreduce`   all-reduce backends and NCCL knobs -> latency
- :mod:`perfgate.sim.behavior`    a launch, start to end: :func:`simulate_launch`
- :mod:`perfgate.sim.launch`      its rules: flags, speculative decoding, memory, all-reduce, tracebacks
- :mod:`perfgate.sim.plan`        the outcome (failure, log lines) and the timing model
- :mod:`perfgate.sim.engine_loop` the continuous-batching scheduler thread
- :mod:`perfgate.sim.http`        the HTTP server (SGLang 0.5.23's API)
- :mod:`perfgate.sim.startup`     the start-up log and exit paths

Other code (and perfgate's own tests) can ask for the true rates without a server::

    from perfgate.sim import simulate_launch
    plan = simulate_launch("fixtures/sim/rtxpro6000-x8-pcie.toml", {"tp-size": 8}, {})
    plan.failure, plan.warnings, plan.decode_tok_s(concurrency=1)
"""

from perfgate.sim.behavior import Failure, LaunchPlan, simulate_launch
from perfgate.sim.engine_loop import expected_output
from perfgate.sim.hardware import Hardware, load_hardware

__all__ = ["Failure", "Hardware", "LaunchPlan", "expected_output", "load_hardware", "simulate_launch"]
