"""The simulated server's info and housekeeping endpoints: ``/health`` and ``/health_generate`` (503
until ready, then a 1-token generation through the engine), ``/ready``, ``/model_info``,
``/server_info`` (and their deprecated ``/get_*`` names), ``/v1/models``, ``/flush_cache`` and
``/metrics`` (with ``--enable-metrics``)."""

from __future__ import annotations

import queue
import time
from typing import Any

from perfgate.sim.engine_loop import SimRequest
from perfgate.sim.http.base import HandlerBase, error

HEALTH_TIMEOUT_S = 20.0
FLUSH_OK = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n")
FLUSH_FAIL = ("Cache not flushed.\nPlease check backend logs for more details. (When there are running or "
              "waiting requests, the operation will not be performed.)\n")


class InfoEndpoints(HandlerBase):
    """The endpoints that answer about the server (or flush its cache); none generates for a client."""

    def _ready(self) -> None:
        st = self.state
        self._send_bytes(200 if st.ready.is_set() and not st.shutdown.is_set() else 503, b"", "application/json")

    def _health(self) -> None:
        st = self.state
        if not st.ready.is_set() or st.shutdown.is_set():
            self._send_bytes(503, b"", "application/json")
            return
        if st.fault == "health-no-generate":
            self._send_bytes(200, b"", "application/json")
            return
        assert st.engine is not None
        req = st.engine.submit(SimRequest(input_ids=[0], max_new_tokens=1, internal=True))
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while time.monotonic() < deadline and not st.shutdown.is_set():
            try:
                req.events.get(timeout=min(0.5, max(0.01, deadline - time.monotonic())))
                self._send_bytes(200, b"", "application/json")
                return
            except queue.Empty:
                continue
        st.engine.abort(req)
        st.log.line(f"Health check failed. Server couldn't get a response from detokenizer for last "
                    f"{HEALTH_TIMEOUT_S:g} seconds. tic start time: {time.time() - HEALTH_TIMEOUT_S:.0f}. "
                    f"last_heartbeat time: {time.time():.0f}")
        self._send_bytes(503, b"", "application/json")

    def _model_info(self) -> None:
        a, hw = self.state.args, self.state.plan.hardware
        self._json(200, {
            "model_path": a.get("model_path"), "tokenizer_path": a.get("tokenizer_path"),
            "served_model_name": a.get("served_model_name"), "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
            "load_format": a.get("load_format", "auto"), "reasoning_parser": a.get("reasoning_parser"),
            "tool_call_parser": a.get("tool_call_parser"), "disaggregation_mode": "null",
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": hw.model.architecture.lower().replace("forcausallm", "").replace(
                "forconditionalgeneration", ""),
            "architectures": [hw.model.architecture],
        })

    def _server_info(self) -> None:
        st = self.state
        if self._not_up():
            return
        plan, eng = st.plan, st.engine
        assert eng is not None
        hw = plan.hardware
        args = dict(plan.args)
        args["random_seed"] = eng.seed
        mem = plan.memory
        internal: dict[str, Any] = dict(args)
        internal.update({
            "world_size": int(args.get("tp_size") or 1),
            "last_gen_throughput": eng.last_gen_throughput,
            "effective_max_running_requests_per_dp": eng.max_running,
            "memory_usage": {
                "weight": round(mem.weights_gb + mem.draft_weights_gb, 2) if mem else None,
                "kvcache": round(mem.kv_gb, 2) if mem else None,
                "token_capacity": mem.kv_tokens if mem else None,
                "graph": round(mem.graph_gb, 2) if mem else None,
            },
            "decode_cuda_graph_bs": list(plan.decode_graph_bs),
        })
        if plan.spec is not None:
            internal["avg_spec_accept_length"] = eng.avg_spec_accept_length
        info: dict[str, Any] = dict(args)
        info.update({
            "version": plan.version,
            "launch_command": st.launch_command,
            "status": "ready" if st.ready.is_set() else "starting",
            "max_total_num_tokens": mem.kv_tokens if mem else None,
            "max_req_input_len": int(args.get("context_length") or 0) - 1,
            "startup_time": st.startup_time,
            "kv_events": None,
            "frontend": "http",
            "internal_states": [internal],
            "perfgate_simulated": True,
            "perfgate_sim_hardware": st.hardware_path,
            "perfgate_sim_gpu": {"name": hw.gpu, "count": hw.count, "sm": hw.sm, "memory_gb": hw.memory_gb,
                                 "interconnect": hw.interconnect, "driver": hw.driver},
            "perfgate_sim_stack": dict(hw.stack),
            "perfgate_sim_installed": sorted(hw.installed),
            "perfgate_sim_allreduce_backend": plan.allreduce_backend_name,
            "perfgate_sim_fault": st.fault,
            "perfgate_sim_speedup": eng.speedup,
            # the simulated machine (perfgate.sim.variation): its speed factor, this start's jitter, the scale
            "perfgate_sim_machine": st.sim_speed.machine,
            "perfgate_sim_machine_factor": st.sim_speed.factor,
            "perfgate_sim_start_jitter": st.sim_speed.jitter,
            "perfgate_sim_scale": st.sim_speed.scale,
        })
        self._json(200, info)

    def _models(self) -> None:
        a = self.state.args
        name = a.get("served_model_name")
        self._json(200, {"object": "list", "data": [{
            "id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name,
            "max_model_len": a.get("context_length")}]})

    def _sim_speedup(self) -> None:
        """``GET|POST /perfgate/sim_speedup`` (perfgate's simulator only, never SGLang): the speed-up in force;
        a POST of ``{"speedup": s}`` sets it while the server is idle (409 while requests are in flight).
        perfgate's open-loop levels run at speed-up 1 (perfgate.procedure.openloop): an open loop's arrivals cannot
        be kept in simulated time at a higher one."""
        body = self._json_body() if self.command == "POST" else {}
        if body is None or self._not_up():
            return
        eng = self.state.engine
        assert eng is not None
        was = eng.speedup
        if "speedup" in body:
            try:
                s = float(body["speedup"])
            except (TypeError, ValueError):
                s = -1.0
            if not s > 0:
                self._json(400, error(f"speedup must be a number > 0, got {body['speedup']!r}", 400))
                return
            if not eng.set_speedup(s):
                self._json(409, error("requests are in flight: the speed-up changes only while idle", 409))
                return
            self.state.log.line(f"perfgate sim: speed-up {was:g} -> {s:g}")
        self._json(200, {"speedup": eng.speedup, "was": was})

    def _flush_cache(self) -> None:
        if self.command == "POST":
            self._read_body()
        if self._not_up():
            return
        assert self.state.engine is not None
        if self.state.fault == "flush-refused":  # as SGLang answers while requests are still running
            self._text(400, FLUSH_FAIL)
            return
        if self.state.engine.flush_cache():
            self.state.log.line("Cache flushed successfully!")
            self._text(200, FLUSH_OK)
        else:
            self._text(400, FLUSH_FAIL)

    def _metrics(self) -> None:
        st = self.state
        if not st.args.get("enable_metrics"):
            self._json(404, {"detail": "Not Found"})
            return
        if self._not_up():
            return
        eng = st.engine
        assert eng is not None
        running, queued = eng.counts()
        name = st.args.get("served_model_name")
        lab = f'model_name="{name}",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
        lines = [
            "# TYPE sglang:num_running_reqs gauge", f"sglang:num_running_reqs{{{lab}}} {running}",
            "# TYPE sglang:num_queue_reqs gauge", f"sglang:num_queue_reqs{{{lab}}} {queued}",
            "# TYPE sglang:gen_throughput gauge", f"sglang:gen_throughput{{{lab}}} {eng.last_gen_throughput}",
            "# TYPE sglang:is_cuda_graph gauge",
            f"sglang:is_cuda_graph{{{lab}}} {1 if st.plan.decode_graph_bs else 0}",
            "# TYPE sglang:prompt_tokens_total counter",
            f"sglang:prompt_tokens_total{{{lab}}} {eng.prompt_tokens_total}",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{{{lab}}} {eng.generation_tokens_total}",
            "# TYPE sglang:num_requests_total counter", f"sglang:num_requests_total{{{lab}}} {eng.requests_total}",
        ]
        if st.plan.spec is not None:
            lines += ["# TYPE sglang:spec_accept_length gauge",
                      f"sglang:spec_accept_length{{{lab}}} {eng.avg_spec_accept_length or 0.0}"]
        self._send_bytes(200, ("\n".join(lines) + "\n").encode(), "text/plain; version=0.0.4; charset=utf-8")

