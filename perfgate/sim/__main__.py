"""``python -m perfgate.sim --model-path M [SGLang flags] --sim-hardware FILE [--sim-* options]``.

perfgate's simulated SGLang server: parses SGLang's flags (exit 2 on a bad one, like
``sglang serve``), binds the HTTP port early, prints SGLang's start-up log over
``--sim-startup-s`` seconds and then serves SGLang's HTTP API with the timing of the hardware
file's cost model, or dies the way SGLang does for this hardware, stack, flags and environment.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from perfgate.errors import ProfileSchemaError
from perfgate.sim.args import SIM_FAULTS, SglangArgError, build_parser, parse_argv
from perfgate.sim.behavior import plan_from_args
from perfgate.sim.engine_loop import EngineLoop
from perfgate.sim.hardware import Hardware, load_hardware, parse_stack_overrides
from perfgate.sim.http import ServerState, SimHTTPServer
from perfgate.sim.log import SimLog
from perfgate.sim.packages import PACKAGE_COST_ENV, import_failure, incompatibility, package_factor, parse_package_costs
from perfgate.sim.startup import RESET, YELLOW, Startup, die_sigkill, main_process_error, render_server_args
from perfgate.sim.variation import (
    MACHINE_ENV,
    PREFILL_DELAY_ENV,
    PREFILL_GPU_ENV,
    PREFILL_HOST_ENV,
    REFERENCE,
    SCALE_ENV,
    START_SEED_ENV,
    STEP_SD_ENV,
    TTFT_MODES_ENV,
    SimSpeed,
    check_machine_name,
    parse_prefill_delay_ms,
    parse_prefill_gpu_ms,
    parse_prefill_host_ms,
    parse_scale,
    parse_step_sd,
    parse_ttft_modes,
    prefill_levels,
    step_noise,
)

SLOW_START_FACTOR = 100.0
DEFAULT_VERSION = "0.5.23"


def _scan(argv: Sequence[str], name: str) -> str | None:
    """Value of ``--name V`` / ``--name=V`` in argv (last wins), before the real parse."""
    value = None
    for i, tok in enumerate(argv):
        if tok == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif tok.startswith(name + "="):
            value = tok.split("=", 1)[1]
    return value


def _usage_error(version: str, message: str) -> int:
    parser = build_parser(version)
    sys.stderr.write(f"{parser.format_usage()}sglang serve: error: {message}\n")
    return 2


def _install_signal_handlers(log: SimLog) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        log.line(f"{name} received. signum=None frame=None. Draining requests and shutting down...")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulated server; returns the exit code (SIGKILL paths never return)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    hw_path = _scan(argv, "--sim-hardware")
    stack_text = _scan(argv, "--sim-stack") or env.get("PERFGATE_SIM_STACK")

    hardware: Hardware | None = None
    hw_error = None
    if hw_path:
        try:
            hardware = load_hardware(hw_path, parse_stack_overrides(stack_text))
        except (ProfileSchemaError, ValueError) as e:
            hw_error = str(e)
    version = hardware.sglang_version if hardware else DEFAULT_VERSION
    try:
        parsed = parse_argv(argv, version)
    except SglangArgError as e:
        sys.stderr.write(e.render())
        return 2
    if hw_error or hardware is None:
        return _usage_error(version, f"argument --sim-hardware: {hw_error}")
    fault = parsed.sim.get("sim_fault") or env.get("PERFGATE_SIM_FAULT") or None
    if fault is not None and fault not in SIM_FAULTS:
        return _usage_error(version, f"PERFGATE_SIM_FAULT: invalid choice: {fault!r} "
                                     f"(choose from {', '.join(SIM_FAULTS)})")
    machine = parsed.sim.get("sim_machine") or env.get(MACHINE_ENV) or REFERENCE
    bad_machine = check_machine_name(machine)
    if bad_machine:
        return _usage_error(version, f"argument --sim-machine: {bad_machine}")
    numbers: dict[str, Any] = {}
    for dest, env_name, parse in (("sim_scale", SCALE_ENV, parse_scale), ("sim_step_sd", STEP_SD_ENV, parse_step_sd),
                                  ("sim_ttft_modes", TTFT_MODES_ENV, parse_ttft_modes),
                                  ("sim_prefill_delay_ms", PREFILL_DELAY_ENV, parse_prefill_delay_ms),
                                  ("sim_prefill_gpu_ms", PREFILL_GPU_ENV, parse_prefill_gpu_ms),
                                  ("sim_prefill_host_ms", PREFILL_HOST_ENV, parse_prefill_host_ms)):
        try:
            numbers[dest] = parse(parsed.sim.get(dest) or env.get(env_name))
        except ValueError as e:
            return _usage_error(version, f"argument --{dest.replace('_', '-')}: {e}")
    scale, step_sd = numbers["sim_scale"], numbers["sim_step_sd"]
    ttft_modes, prefill_delay_ms = numbers["sim_ttft_modes"], numbers["sim_prefill_delay_ms"]
    prefill_gpu_ms, prefill_host_ms = numbers["sim_prefill_gpu_ms"], numbers["sim_prefill_host_ms"]
    try:  # a cost planted in a package's version, or packages that do not import together (perfgate.sim.packages)
        effects = parse_package_costs(parsed.sim.get("sim_package_cost") or env.get(PACKAGE_COST_ENV))
    except ValueError as e:
        return _usage_error(version, f"argument --sim-package-cost: {e}")
    broken = incompatibility(effects, hardware.stack)
    if broken is not None:  # the import fails before SGLang logs anything
        return main_process_error(import_failure(broken))
    package_cost = package_factor(effects, hardware.stack)
    scale *= package_cost
    # a GPU's state at start is not seeded by the model's --random-seed (the shipped profiles fix one): each start
    # draws its own jitter unless PERFGATE_SIM_START_SEED / --sim-start-seed makes it reproducible
    start_seed = parsed.sim.get("sim_start_seed") or env.get(START_SEED_ENV)
    speed = SimSpeed.for_start(machine, seed=start_seed, scale=scale)
    startup_s = float(parsed.sim.get("sim_startup_s") or 0.0)
    if fault == "slow-start":
        startup_s *= SLOW_START_FACTOR

    log = SimLog(sys.stdout)
    _install_signal_handlers(log)
    log.line(f"*** perfgate SIMULATED SGLang server (not a real SGLang; no GPU, no model weights) — simulating "
             f"{hardware.describe()} from {hw_path}; sglang {version}, cuda {hardware.version('cuda')}, "
             f"torch {hardware.version('torch')}, nccl {hardware.version('nccl')}, "
             f"flashinfer {hardware.version('flashinfer')}"
             + f"; machine {machine} (speed x{speed.factor:.4f}, this start x{speed.jitter:.5f}"
             + (f", scale x{scale:g}" if scale != 1.0 else "")
             + (f" (package cost x{package_cost:g})" if package_cost != 1.0 else "")
             + (f", step noise sd {step_sd:.1%}" if step_sd else "")
             + (f", prefill levels x{'/'.join(f'{x:g}' for x in ttft_modes.levels)} "
                + (f"(the host's, a level per {ttft_modes.dwell:g} s)" if ttft_modes.clock
                   else f"(mean stay {ttft_modes.dwell:g} prefills)") if ttft_modes else "")
             + (f", prefill delay {prefill_delay_ms:g} ms" if prefill_delay_ms else "")
             + (f", prefill GPU +{prefill_gpu_ms:g} ms" if prefill_gpu_ms else "")
             + (f", prefill host +{prefill_host_ms:g} ms" if prefill_host_ms else "") + ")"
             + (f"; injected fault: {fault}" if fault else "") + " ***")

    plan = plan_from_args(hardware, parsed, env)
    for ln in plan.log:
        if ln.phase == "args":
            log.raw(f"{YELLOW}{ln.text}{RESET}")
    for ln in plan.log:
        if ln.phase == "validate":
            log.line(ln.text)
    if plan.failure is not None and plan.failure.phase == "validate":
        return main_process_error(plan.failure)

    host = str(parsed.fields.get("host") or "127.0.0.1")
    port = int(parsed.fields.get("port") or 30000)
    launch_command = "python -m perfgate.sim " + " ".join(shlex.quote(x) for x in argv)
    state = ServerState(plan=plan, engine=None, log=log, hardware_path=str(Path(hw_path).resolve()) if hw_path else "",
                        launch_command=launch_command, fault=fault,
                        fault_after=int(parsed.sim.get("sim_fault_after") or 0), sim_speed=speed)
    try:
        server = SimHTTPServer(host, port, state)
    except OSError as e:
        sys.stderr.write(
            "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py", line 1830, '
            "in launch_server\n    uvicorn.run(app, host=server_args.host, port=server_args.port)\n"
            f"OSError: [Errno {e.errno or 98}] {e.strerror or 'Address already in use'}\n")
        log.line(f"ERROR: [Errno {e.errno or 98}] error while attempting to bind on address ({host!r}, {port}): "
                 f"{(e.strerror or 'address already in use').lower()}")
        return 1
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="sim-http",
                     daemon=True).start()
    log.line(render_server_args(plan))

    if plan.ok:
        def crash() -> None:
            log.line("Scheduler hit an exception: Traceback (most recent call last):\n"
                     '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", '
                     "line 1205, in event_loop_overlap\n    batch_result = self.run_batch(batch)\n"
                     "torch.AcceleratorError: CUDA error: an illegal memory access was encountered "
                     "(injected by perfgate sim fault crash-mid-stream)")
            log.line("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
            die_sigkill()

        state.engine = EngineLoop(plan, log.line, seed=parsed.fields.get("random_seed"),
                                  speedup=float(parsed.sim.get("sim_speedup") or 1.0), speed=speed.speed,
                                  fault=fault, noise=step_noise(step_sd, start_seed, machine),
                                  prefill_factor=prefill_levels(ttft_modes, start_seed, machine,
                                                                speedup=float(parsed.sim.get("sim_speedup") or 1.0)),
                                  prefill_delay_s=prefill_delay_ms / 1000.0,
                                  prefill_gpu_s=prefill_gpu_ms / 1000.0, prefill_host_s=prefill_host_ms / 1000.0,
                                  fault_after=state.fault_after, on_crash=crash)
        state.engine.start()

    stop = threading.Event()
    t0 = time.monotonic()

    def on_ready() -> None:
        state.startup_time = time.monotonic() - t0
        state.ready.set()

    Startup(state, plan, log, startup_s=startup_s, stop=stop, host=host, port=port).run(
        fault=fault, on_ready=on_ready)
    while not stop.wait(0.5):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
