"""SGLang 0.5.23's HTTP API over the simulated engine (stdlib ``ThreadingHTTPServer``, HTTP/1.1).

Endpoints: ``/health``, ``/health_generate`` (503 until ready, then a 1-token generation
through the engine), ``/ready``, ``/model_info``, ``/server_info`` (and their deprecated
``/get_*`` names), ``/flush_cache``, ``/generate`` (native; SSE streaming with
``Transfer-Encoding: chunked``), ``/v1/completions``, ``/v1/models`` and ``/metrics`` (with
``--enable-metrics``). Errors are JSON ``{"error": {"message", "type", "code"}}``.

Batched requests (a list of prompts in one call) are simulated only for a batch of one (what
SGLang's bench_one_batch_server sends at --batch-size 1): the answer carries ``"index": 0`` (and is a
list of one when not streaming); larger batches answer 400.
"""

from __future__ import annotations

import hashlib
import json
import queue
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from perfgate.sim.behavior import LaunchPlan
from perfgate.sim.engine_loop import EngineLoop, SimRequest
from perfgate.sim.hardware import version_at_least
from perfgate.sim.log import SimLog

HEALTH_TIMEOUT_S = 20.0
# --sim-speedup s runs every simulated step s times faster; each stream says so in this header (a real SGLang never
# sends it) and the durations the server reports itself (meta_info) are in simulated time, as without the speedup
SPEEDUP_HEADER = "X-Perfgate-Sim-Speedup"
FLUSH_OK = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n")
FLUSH_FAIL = ("Cache not flushed.\nPlease check backend logs for more details. (When there are running or "
              "waiting requests, the operation will not be performed.)\n")


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

    @property
    def args(self) -> Mapping[str, Any]:
        return self.plan.args


class SimHTTPServer(ThreadingHTTPServer):
    """Binds at construction (``OSError`` errno 98 when the port is taken)."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, host: str, port: int, state: ServerState) -> None:
        self.state = state
        super().__init__((host, port), SimHandler)


class _ClientGone(Exception):
    pass


def _error(message: str, code: int, typ: str = "BadRequestError") -> dict[str, Any]:
    return {"error": {"message": message, "type": typ, "code": code}}


class SimHandler(BaseHTTPRequestHandler):
    """One connection; routes SGLang's endpoints."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    server: SimHTTPServer
    _batch_of_one = False  # set per /generate request (a batch of one prompt, as bench_one_batch_server sends)

    # ------------------------------------------------------------------ plumbing
    def setup(self) -> None:
        super().setup()
        # as uvicorn's sockets (asyncio sets TCP_NODELAY): a chunk is sent when written, not held by Nagle's
        # algorithm until the client's (delayed) ACK of the previous one, which made first tokens late
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    @property
    def state(self) -> ServerState:
        return self.server.state

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        try:
            c = int(code)
            reason = HTTPStatus(c).phrase
        except ValueError:
            c, reason = 0, ""
        client = f"{self.client_address[0]}:{self.client_address[1]}"
        self.state.log.access(client, self.command, self.path, c, reason)

    def _send_bytes(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, obj: Any) -> None:
        self._send_bytes(code, json.dumps(obj).encode(), "application/json")

    def _text(self, code: int, text: str) -> None:
        self._send_bytes(code, text.encode(), "text/plain; charset=utf-8")

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _json_body(self) -> dict[str, Any] | None:
        raw = self._read_body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError as e:
            self._json(400, _error(f"Invalid JSON body: {e}", 400))
            return None
        if not isinstance(body, dict):
            self._json(400, _error("The request body must be a JSON object.", 400))
            return None
        return body

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        eng = self.state.engine
        if eng is not None and eng.speedup != 1.0:  # perfgate's client scales this stream's durations back by it
            self.send_header(SPEEDUP_HEADER, repr(eng.speedup))
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            raise _ClientGone() from e

    def _event(self, obj: Any) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self._chunk(f"data: {payload}\n\n".encode())

    def _end_stream(self) -> None:
        self._chunk(b"")

    # ------------------------------------------------------------------ routing
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_HEAD(self) -> None:  # noqa: N802
        self._route("HEAD")

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        gets = {
            "/health": self._health, "/health_generate": self._health, "/ready": self._ready,
            "/model_info": self._model_info, "/get_model_info": self._model_info,
            "/server_info": self._server_info, "/get_server_info": self._server_info,
            "/flush_cache": self._flush_cache, "/v1/models": self._models, "/metrics": self._metrics,
        }
        posts = {"/generate": self._generate, "/v1/completions": self._completions, "/flush_cache": self._flush_cache}
        try:
            if method in ("GET", "HEAD") and path in gets:
                gets[path]()
            elif method == "POST" and path in posts:
                posts[path]()
            elif path in gets or path in posts:
                self._json(405, {"detail": "Method Not Allowed"})
            else:
                self._json(404, {"detail": "Not Found"})
        except _ClientGone:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # ------------------------------------------------------------------ info endpoints
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

    def _engine(self) -> EngineLoop:
        eng = self.state.engine
        assert eng is not None
        return eng

    def _not_up(self) -> bool:
        if self.state.engine is None:
            self._json(503, _error("The server is still starting.", 503, "ServiceUnavailableError"))
            return True
        return False

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
        })
        self._json(200, info)

    def _models(self) -> None:
        a = self.state.args
        name = a.get("served_model_name")
        self._json(200, {"object": "list", "data": [{
            "id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name,
            "max_model_len": a.get("context_length")}]})

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
            "# TYPE sglang:prompt_tokens_total counter", f"sglang:prompt_tokens_total{{{lab}}} {eng.prompt_tokens_total}",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{{{lab}}} {eng.generation_tokens_total}",
            "# TYPE sglang:num_requests_total counter", f"sglang:num_requests_total{{{lab}}} {eng.requests_total}",
        ]
        if st.plan.spec is not None:
            lines += ["# TYPE sglang:spec_accept_length gauge",
                      f"sglang:spec_accept_length{{{lab}}} {eng.avg_spec_accept_length or 0.0}"]
        self._send_bytes(200, ("\n".join(lines) + "\n").encode(), "text/plain; version=0.0.4; charset=utf-8")

    # ------------------------------------------------------------------ generation
    def _tokenize(self, text: str) -> list[int]:
        vocab = self.state.plan.hardware.model.vocab
        words = text.split() or [text]
        return [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") % vocab
                for w in words]

    def _detok(self, ids: list[int]) -> str:
        return " ".join(f"t{i}" for i in ids)

    def _prompt(self, body: Mapping[str, Any], *, key_text: str, key_ids: str) -> list[int] | str:
        """Prompt ids, or an error message."""
        ids, text = body.get(key_ids), body.get(key_text)
        if isinstance(text, list) and text and all(isinstance(x, int) for x in text) and key_text == "prompt":
            ids, text = text, None
        if ids is not None:
            if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], list):
                self._batch_of_one = True
                ids = ids[0]
            if isinstance(ids, list) and ids and isinstance(ids[0], list):
                return "Batched requests are not supported by perfgate's simulated SGLang server."
            if not isinstance(ids, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in ids):
                return f"{key_ids} must be a list of token ids."
            if not ids:
                return "The input_ids is empty."
            return list(ids)
        if text is None:
            return f"Either {key_text} or {key_ids} should be provided."
        if isinstance(text, list):
            return "Batched requests are not supported by perfgate's simulated SGLang server."
        if not isinstance(text, str):
            return f"{key_text} must be a string."
        if self.state.args.get("skip_tokenizer_init"):
            return ("The engine initialized with skip_tokenizer_init=True cannot accept text prompts. "
                    "Please provide input_ids or re-initialize the engine with skip_tokenizer_init=False.")
        return self._tokenize(text)

    def _admit(self, ids: list[int], max_new: Any) -> SimRequest | None:
        """Common checks of /generate and /v1/completions; None when an error was sent."""
        st = self.state
        if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 0:
            self._json(400, _error(f"max_new_tokens must be a non-negative integer, got {max_new!r}.", 400))
            return None
        ctx = int(st.args.get("context_length") or 0)
        if ctx and len(ids) + max_new > ctx:
            self._json(400, _error(
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You requested "
                f"a total of {len(ids) + max_new} tokens: {len(ids)} tokens from the input messages and {max_new} "
                "tokens for the completion. Please reduce the number of tokens in the input messages or the "
                "completion to fit within the limit.", 400))
            return None
        if not st.ready.is_set():
            self._json(503, _error("The server is not ready yet; wait for /health_generate.", 503,
                                   "ServiceUnavailableError"))
            return None
        if st.fault == "http-500":
            self._json(500, _error("Internal server error: CUDA error: an illegal memory access was encountered "
                                   "(injected by perfgate sim fault http-500)", 500, "InternalServerError"))
            return None
        return SimRequest(input_ids=ids, max_new_tokens=max_new)

    def _black_hole(self, stream: bool) -> None:
        """health-no-generate: accept the request, never produce a token."""
        if stream:
            self._start_stream()
        while not self.state.shutdown.wait(1.0):
            pass

    def _wait(self, req: SimRequest) -> int:
        """Next progress count of ``req`` (blocks; loops forever on a hung request)."""
        while True:
            try:
                return req.events.get(timeout=0.5)
            except queue.Empty:
                if self.state.shutdown.is_set():
                    raise _ClientGone() from None

    def _meta(self, req: SimRequest, produced: int, final: bool) -> dict[str, Any]:
        m: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": {"type": "length", "length": produced} if final else None,
            "prompt_tokens": len(req.input_ids),
            "weight_version": "default",
            "num_retractions": 0,
            "completion_tokens": produced,
            "reasoning_tokens": 0,
            "cached_tokens": req.cached_tokens,
        }
        s = self._engine().speedup  # durations in simulated time: the server's clock runs s times fast
        if final:
            end = req.finished_at or time.monotonic()
            m["e2e_latency"] = (end - req.created) * s
            spec = self.state.plan.spec
            if spec is not None and req.verify_ct > 0:
                m["spec_verify_ct"] = req.verify_ct
                m["spec_accept_length"] = produced / req.verify_ct
                m["spec_accept_rate"] = req.correct_drafts / max(1, req.proposed_drafts)
                m["spec_num_correct_drafts"] = req.correct_drafts
                m["spec_num_proposed_drafts"] = req.proposed_drafts
        if self.state.args.get("enable_metrics") and req.first_token_at is not None:
            m["first_token_latency"] = (req.first_token_at - req.created) * s
            m["queue_time"] = 0.0
            if final and req.finished_at is not None and produced > 1:
                m["decode_throughput"] = (produced - 1) / max(1e-9, (req.finished_at - req.first_token_at) * s)
        return m

    def _read_prompt(self, key_text: str) -> tuple[dict[str, Any], list[int]] | None:
        """The JSON body and its prompt ids (``key_text`` or ``input_ids``); None once an error was answered."""
        body = self._json_body()
        if body is None:
            return None
        prompt = self._prompt(body, key_text=key_text, key_ids="input_ids")
        if isinstance(prompt, str):
            self._json(400, _error(prompt, 400))
            return None
        return body, prompt

    def _submit(self, req: SimRequest, stream: bool) -> bool:
        """Hand an admitted request to the engine; False when the health-no-generate fault swallows it."""
        if self.state.fault == "health-no-generate":
            self._black_hole(stream)
            return False
        self._engine().submit(req)
        return True

    def _wait_finished(self, req: SimRequest) -> int:
        """Block until all of ``req``'s tokens are produced (a non-streaming response); their count."""
        produced = -1
        while produced < req.max_new_tokens:
            produced = self._wait(req)
        return produced

    def _generate(self) -> None:
        st = self.state
        self._batch_of_one = False  # handlers live as long as a keep-alive connection
        got = self._read_prompt("text")
        if got is None:
            return
        body, prompt = got
        sp = body.get("sampling_params") or {}
        if not isinstance(sp, dict):
            self._json(400, _error("sampling_params must be an object.", 400))
            return
        req = self._admit(prompt, sp.get("max_new_tokens", 128))
        if req is None:
            return
        if body.get("rid"):
            req.rid = str(body["rid"])
        stream = bool(body.get("stream"))
        if not self._submit(req, stream):
            return
        with_text = not st.args.get("skip_tokenizer_init")
        try:
            if not stream:
                produced = self._wait_finished(req)
                ids, _ = req.snapshot()
                out: dict[str, Any] = {"output_ids": ids[:produced], "meta_info": self._meta(req, produced, True)}
                if with_text:
                    out = {"text": self._detok(ids[:produced]), **out}
                if self._batch_of_one:
                    self._json(200, [{**out, "index": 0}])  # type: ignore[arg-type]
                    return
                self._json(200, out)
                return
            self._start_stream()
            malformed_sent = False
            # SGLang's output streamer with --stream-interval k > 1: 0.5.17 sends when the output length is
            # 1 mod k; 0.5.23 sends the first token at once, then whenever k or more are unsent (a speculative
            # step can jump past a multiple of k); both send at the end. --incremental-streaming-output sends
            # each chunk's new ids only (completion_tokens stays cumulative).
            interval = max(1, int(st.args.get("stream_interval") or 1))
            incremental = bool(st.args.get("incremental_streaming_output"))
            by_unsent = version_at_least(self.state.plan.version, "0.5.23")
            sent = 0
            while True:
                produced = self._wait(req)
                final = produced >= req.max_new_tokens
                if by_unsent:
                    due = interval == 1 or produced - sent >= interval or (sent == 0 and produced > 0)
                else:
                    due = produced % interval == (1 if interval > 1 else 0)
                if not (final or due):
                    continue
                ids, _ = req.snapshot()
                ids = ids[sent:produced] if incremental else ids[:produced]
                sent = produced
                if st.fault == "malformed-sse" and not malformed_sent and produced >= st.fault_after:
                    malformed_sent = True
                    self._chunk(b'data: {"output_ids": [' + ", ".join(map(str, ids)).encode() + b", <truncated\n\n")
                chunk: dict[str, Any] = {"output_ids": ids, "meta_info": self._meta(req, produced, final)}
                if with_text:
                    chunk = {"text": self._detok(ids), **chunk}
                if self._batch_of_one:
                    chunk["index"] = 0
                self._event(chunk)
                if final:
                    self._event("[DONE]")
                    self._end_stream()
                    return
        except _ClientGone:
            self._engine().abort(req)
            raise

    def _completions(self) -> None:
        st = self.state
        got = self._read_prompt("prompt")
        if got is None:
            return
        body, prompt = got
        req = self._admit(prompt, body.get("max_tokens", 16))
        if req is None:
            return
        stream = bool(body.get("stream"))
        if not self._submit(req, stream):
            return
        model = st.args.get("served_model_name")
        cid = "cmpl-" + uuid.uuid4().hex
        created = int(time.time())

        def usage(n: int) -> dict[str, Any]:
            return {"prompt_tokens": len(req.input_ids), "completion_tokens": n,
                    "total_tokens": len(req.input_ids) + n, "prompt_tokens_details": None, "reasoning_tokens": 0}

        try:
            if not stream:
                produced = self._wait_finished(req)
                ids, _ = req.snapshot()
                self._json(200, {
                    "id": cid, "object": "text_completion", "created": created, "model": model,
                    "choices": [{"index": 0, "text": self._detok(ids[:produced]), "logprobs": None,
                                 "finish_reason": "length", "matched_stop": None}],
                    "usage": usage(produced), "metadata": {"weight_version": "default"}})
                return
            self._start_stream()
            sent = 0
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            while True:
                produced = self._wait(req)
                ids, _ = req.snapshot()
                final = produced >= req.max_new_tokens
                delta = self._detok(ids[sent:produced])
                if sent and delta:
                    delta = " " + delta
                sent = produced
                self._event({"id": cid, "object": "text_completion", "created": created, "model": model,
                             "choices": [{"index": 0, "text": delta, "logprobs": None,
                                          "finish_reason": "length" if final else None, "matched_stop": None}],
                             "usage": None})
                if final:
                    if include_usage:
                        self._event({"id": cid, "object": "text_completion", "created": created, "model": model,
                                     "choices": [], "usage": usage(produced)})
                    self._event("[DONE]")
                    self._end_stream()
                    return
        except _ClientGone:
            self._engine().abort(req)
            raise
