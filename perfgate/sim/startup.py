"""The simulated start-up: SGLang's log lines phase by phase, spread over ``--sim-startup-s``,
ending in the ready line, or in the failure the :class:`LaunchPlan` says, the way SGLang exits.

Exit paths (as SGLang 0.5.23): a scheduler exception logs ``Scheduler hit an exception:
<traceback>`` and ``Received sigquit from a child process. It usually means the child failed.``
and the process SIGKILLs itself (returncode -9); a main-process error prints a traceback and
exits 1.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from perfgate.sim.behavior import Failure, LaunchPlan
from perfgate.sim.engine_loop import SimRequest
from perfgate.sim.http import ServerState
from perfgate.sim.log import SimLog

# share of the start-up time each phase takes
PHASE_WEIGHTS = {"distributed": 0.05, "load": 0.45, "model_init": 0.05, "kv_cache": 0.05,
                 "cuda_graph": 0.30, "serve": 0.10}
WARMUP_TIMEOUT_S = 60.0
YELLOW, RESET = "\x1b[1;33m", "\x1b[0m"


def die_sigkill() -> None:
    """SGLang's kill_process_tree(os.getpid()): the launcher SIGKILLs itself (returncode -9)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(5)  # pragma: no cover - never reached
    os._exit(137)  # pragma: no cover


def scheduler_death(log: SimLog, traceback_lines: tuple[str, ...] | list[str]) -> None:
    """Log a scheduler exception, the SIGQUIT line, and SIGKILL the process."""
    log.line("Scheduler hit an exception: " + "\n".join(traceback_lines))
    log.line("Received sigquit from a child process. It usually means the child failed.")
    die_sigkill()


def main_process_error(failure: Failure) -> int:
    """Print a main-process traceback on stderr; the caller exits with the returned code."""
    sys.stderr.write("\n".join(failure.traceback) + "\n")
    sys.stderr.flush()
    return failure.exit_code


def render_server_args(plan: LaunchPlan) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in plan.args.items())
    return f"server_args=ServerArgs({inner})"


class Startup:
    """Runs the start-up phases against the clock; stops at the plan's failure."""

    def __init__(self, state: ServerState, plan: LaunchPlan, log: SimLog, *, startup_s: float,
                 stop: threading.Event, host: str, port: int) -> None:
        self.state = state
        self.plan = plan
        self.log = log
        self.total = max(0.0, startup_s)
        self.stop = stop
        self.host, self.port = host, port
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ helpers
    def _wait(self, phase: str, share: float = 1.0) -> float:
        dur = self.total * PHASE_WEIGHTS.get(phase, 0.0) * share
        end = time.monotonic() + dur
        while not self.stop.is_set():
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 0.1))
        return dur

    def _lines(self, phase: str) -> None:
        for ln in self.plan.log:
            if ln.phase == phase:
                self.log.line(ln.text)

    def _fail_here(self, phase: str) -> None:
        f = self.plan.failure
        if f is not None and f.phase == phase:
            if f.in_scheduler:
                scheduler_death(self.log, f.traceback)
            sys.exit(main_process_error(f))

    # ------------------------------------------------------------------ phases
    def run(self, *, fault: str | None, on_ready: Callable[[], None]) -> None:
        plan, log, hw = self.plan, self.log, self.plan.hardware
        mem = plan.memory
        a = plan.args
        avail = hw.memory_gb - 0.9

        log.line("Init torch distributed begin.")
        self._lines("distributed")
        d = self._wait("distributed")
        self._fail_here("distributed")
        log.line(f"Init torch distributed ends. elapsed={d:.2f} s, mem usage=0.09 GB")

        log.line(f"Load weight begin. avail mem={avail:.2f} GB")
        self._lines("load")
        d = self._wait("load", 0.8)
        if fault == "crash-at-start":
            sys.stderr.write(
                "Traceback (most recent call last):\n"
                '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_loader/loader.py", line 640, '
                "in load_weights_and_postprocess\n"
                "    model.load_weights(weights)\n"
                "RuntimeError: Error while deserializing header: MetadataIncompleteBuffer "
                "(injected by perfgate sim fault crash-at-start)\n")
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(1)
        self._fail_here("load")
        weights = mem.weights_gb if mem else hw.model.weights_gb / max(1, int(a.get("tp_size") or 1))
        avail -= weights
        log.line(f"Load weight end. elapsed={d:.2f} s, type={hw.model.architecture}, avail mem={avail:.2f} GB, "
                 f"mem usage={weights:.2f} GB.")
        self.timings["load_weight"] = d
        if plan.spec is not None and plan.spec.algorithm != "NGRAM" and mem is not None:
            log.line(f"Load weight begin. avail mem={avail:.2f} GB")
            d2 = self._wait("load", 0.2)
            avail -= mem.draft_weights_gb
            draft_type = hw.model.architecture.replace("ForCausalLM", "").replace("ForConditionalGeneration", "")
            log.line(f"Load weight end. elapsed={d2:.2f} s, type={draft_type}ForCausalLMEagle3, "
                     f"avail mem={avail:.2f} GB, mem usage={mem.draft_weights_gb:.2f} GB.")
        self._lines("model_init")
        self._wait("model_init")
        self._fail_here("model_init")

        self._lines("kv_cache")
        d = self._wait("kv_cache")
        self._fail_here("kv_cache")
        assert mem is not None
        kv = max(0.0, mem.kv_gb)
        if hw.model.attention == "mla":
            log.line(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {mem.kv_tokens}, KV size: {kv:.2f} GB")
        else:
            log.line(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {mem.kv_tokens}, "
                     f"K size: {kv / 2:.2f} GB, V size: {kv / 2:.2f} GB")
        avail -= kv + mem.reserved_gb
        log.line(f"Memory pool end. avail mem={avail:.2f} GB")
        self.timings["kv_cache_allocation"] = d

        self._lines("cuda_graph")
        graphs = self._graph_list()
        if a.get("cuda_graph_backend_prefill") == "disabled":
            log.line("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
                     "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).")
        if not graphs:
            log.line("Disable decode CUDA graph because cuda_graph_config resolved decode.backend='disabled' "
                     "(e.g. via --cuda-graph-backend-decode=disabled or auto-disable rules).")
        share = 1.0 / max(1, len(graphs))
        bs = list(plan.decode_graph_bs)
        for i, (role, per_req) in enumerate(graphs):
            log.line(f"Capture {role} CUDA graph begin. backend={a.get('cuda_graph_backend_decode')}, "
                     f"num_tokens_per_req={per_req}, bs={bs}, avail mem={avail:.2f} GB")
            d = self._wait("cuda_graph", share)
            if i == 0:
                self._fail_here("cuda_graph")
            used = mem.graph_gb * share
            avail -= used
            log.line(f"Capture {role} CUDA graph end. elapsed={d:.2f} s, mem usage={used:.2f} GB, "
                     f"avail mem={avail:.2f} GB.")
            self.timings[role.replace(" ", "_")] = d
        self._fail_here("cuda_graph")
        log.line(f"max_total_num_tokens={mem.kv_tokens}, chunked_prefill_size={a.get('chunked_prefill_size')}, "
                 f"max_prefill_tokens={a.get('max_prefill_tokens')}, max_running_requests="
                 f"{a.get('max_running_requests')}, context_len={a.get('context_length')}, "
                 f"available_gpu_mem={avail:.2f} GB")
        t = self.timings
        log.line("Engine startup timings (s): "
                 f"load_weight={t.get('load_weight', 0):.2f}, "
                 f"kv_cache_allocation={t.get('kv_cache_allocation', 0):.2f}, "
                 f"scheduler_e2e={sum(t.values()):.2f}, cuda_graph={{prefill=0.00, "
                 f"decode={t.get('target_decode', 0):.2f}, target_verify={t.get('target_verify', 0):.2f}, "
                 f"draft_prefill=0.00, draft_decode={t.get('draft_decode', 0):.2f}, "
                 f"draft_extend={t.get('draft_extend', 0):.2f}}}")

        self._wait("serve", 0.5)
        log.line(f"INFO:     Started server process [{os.getpid()}]")
        log.line("INFO:     Waiting for application startup.")
        log.line("INFO:     Application startup complete.")
        log.line(f"INFO:     Uvicorn running on http://{self.host}:{self.port} (Press CTRL+C to quit)")
        if fault == "hang-before-ready":
            while not self.stop.wait(1.0):
                pass
            return
        self._wait("serve", 0.5)
        engine = self.state.engine
        assert engine is not None
        if not a.get("skip_server_warmup"):
            req = engine.submit(SimRequest(input_ids=[0, 1, 2], max_new_tokens=1, internal=True))
            try:
                req.events.get(timeout=WARMUP_TIMEOUT_S)
            except Exception:
                log.line("Initialization failed. warmup error: timed out waiting for the warm-up generation")
                die_sigkill()
            log.access("127.0.0.1:0", "POST", "/generate", 200, "OK")
        on_ready()
        log.line("The server is fired up and ready to roll!")

    def _graph_list(self) -> list[tuple[str, int]]:
        plan = self.plan
        if not plan.decode_graph_bs:
            return []
        if plan.spec is None:
            return [("target decode", 1)]
        s = plan.spec
        graphs = [("target verify", s.num_draft_tokens)]
        if s.algorithm != "NGRAM":
            graphs += [("draft decode", s.topk), ("draft extend", s.num_draft_tokens)]
        return graphs
