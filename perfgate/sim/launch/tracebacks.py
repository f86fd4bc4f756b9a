"""The tracebacks a failing SGLang launch prints (paths and lines of the simulated SGLang version)."""

from __future__ import annotations

from perfgate.sim.plan import Failure
from perfgate.versions import version_at_least

SGL = "/usr/local/lib/python3.12/dist-packages/sglang/srt"


def traceback(frames: list[tuple[str, int, str, str]], *exc_lines: str) -> tuple[str, ...]:
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines.append(f'  File "{path}", line {line}, in {func}')
        lines.append(f"    {code}")
    lines.extend(exc_lines)
    return tuple(lines)


SCHED_FRAMES = [
    (f"{SGL}/managers/scheduler.py", 3254, "run_scheduler_process",
     "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
    (f"{SGL}/managers/scheduler.py", 412, "__init__", "self.init_model_worker()"),
    (f"{SGL}/managers/tp_worker.py", 248, "__init__", "self.model_runner = ModelRunner("),
]
MAIN_FRAMES = [
    ("/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py", 71, "<module>", "run_server(server_args)"),
    (f"{SGL}/server_args.py", 1120, "resolve_once", "self._handle_speculative_decoding()"),
]


def sched_fail(category: str, phase: str, frames: list[tuple[str, int, str, str]], *exc: str) -> Failure:
    return Failure(category=category, message=exc[0], exit_code=-9, phase=phase,
                   traceback=traceback(SCHED_FRAMES + frames, *exc), in_scheduler=True)


def main_fail(category: str, frames: list[tuple[str, int, str, str]], *exc: str) -> Failure:
    return Failure(category=category, message=exc[0], exit_code=1, phase="validate",
                   traceback=traceback(MAIN_FRAMES[:1] + frames, *exc))


def capture_failed_hint(version: str) -> str:
    """CUDA_GRAPH_CAPTURE_FAILED_MSG of the simulated SGLang version."""
    if version_at_least(version, "0.5.18"):
        return ("Possible solutions:\n"
                "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
                "3. disable CUDA graph by --cuda-graph-backend-decode=disabled. "
                "(Not recommended. Huge performance loss)\n"
                "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")
    return ("Possible solutions:\n"
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
            "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
            "3. disable torch compile by not using --enable-torch-compile\n"
            "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
            "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")


def capture_fail(version: str, phase_frames: list[tuple[str, int, str, str]], err: str, category: str) -> Failure:
    hint = capture_failed_hint(version).split("\n")
    return sched_fail(category, "cuda_graph", phase_frames,
                       f"Exception: Capture cuda graph failed: {err}", *hint)


CAPTURE_FRAMES = [
    (f"{SGL}/model_executor/model_runner.py", 2210, "init_device_graphs",
     "self.graph_runner = DecodeCudaGraphRunner(self)"),
    (f"{SGL}/model_executor/runner/decode_cuda_graph_runner.py", 388, "__init__",
     'raise Exception(f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")'),
]


