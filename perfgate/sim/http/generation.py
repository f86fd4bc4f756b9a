"""What both generation endpoints share: SSE over ``Transfer-Encoding: chunked``, the toy tokenizer
(whitespace words hashed into the vocabulary; ids detokenize to ``t<id>`` words), prompt parsing,
admission (``max_new_tokens``, the context length, readiness, the ``http-500`` fault), the hand-off to
the engine (or to the ``health-no-generate`` fault's black hole) and waiting for its progress.

Batched requests (a list of prompts in one call) are simulated only for a batch of one (what
SGLang's bench_one_batch_server sends at --batch-size 1: ``input_ids`` as a list of one list);
:meth:`GenerationBase._prompt` notes it in ``_batch_of_one`` for /generate's answer, and refuses
other batches (400).
"""

from __future__ import annotations

import hashlib
import json
import queue
from collections.abc import Mapping
from typing import Any

from perfgate.sim.engine_loop import SimRequest
from perfgate.sim.http.base import ClientGone, HandlerBase, error

# --sim-speedup s runs every simulated step s times faster; each stream says so in SPEEDUP_HEADER (a real SGLang never
# sends it), with AHEAD_HEADER: how far the simulated clock was ahead of the wall clock when the request arrived
# (EngineLoop.ahead), and each /generate chunk's meta_info carries AHEAD_KEY, the lead at its tokens' emission.
# perfgate's client adds the lead gained over each duration it measures: only what the server simulated is scaled,
# its own and the network's time count once. The durations the server reports itself (meta_info) are in
# simulated time too, as without the speedup.
SPEEDUP_HEADER = "X-Perfgate-Sim-Speedup"
AHEAD_HEADER = "X-Perfgate-Sim-Ahead"
AHEAD_KEY = "perfgate_sim_ahead_s"


class GenerationBase(HandlerBase):
    """The request path shared by ``/generate`` and ``/v1/completions``: all but the shapes of their answers."""

    _batch_of_one = False  # set per /generate request (a batch of one prompt, as bench_one_batch_server sends)

    # ------------------------------------------------------------------ SSE over chunked encoding
    def _start_stream(self, req: SimRequest | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        eng = self.state.engine
        if eng is not None and eng.speedup != 1.0:  # perfgate's client adds the lead its clock gains (AHEAD_KEY)
            self.send_header(SPEEDUP_HEADER, repr(eng.speedup))
            if req is not None:
                self.send_header(AHEAD_HEADER, repr(req.created_ahead))
        self.end_headers()


    def _chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            raise ClientGone() from e


    def _event(self, obj: Any) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self._chunk(f"data: {payload}\n\n".encode())


    def _end_stream(self) -> None:
        self._chunk(b"")


    # ------------------------------------------------------------------ the toy tokenizer
    def _tokenize(self, text: str) -> list[int]:
        vocab = self.state.plan.hardware.model.vocab
        words = text.split() or [text]
        return [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") % vocab
                for w in words]


    def _detok(self, ids: list[int]) -> str:
        return " ".join(f"t{i}" for i in ids)


    # ------------------------------------------------------------------ prompts and admission
    def _read_prompt(self, key_text: str) -> tuple[dict[str, Any], list[int]] | None:
        """The JSON body and its prompt ids (``key_text`` or ``input_ids``); None once an error was answered."""
        body = self._json_body()
        if body is None:
            return None
        prompt = self._prompt(body, key_text=key_text, key_ids="input_ids")
        if isinstance(prompt, str):
            self._json(400, error(prompt, 400))
            return None
        return body, prompt


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
            self._json(400, error(f"max_new_tokens must be a non-negative integer, got {max_new!r}.", 400))
            return None
        ctx = int(st.args.get("context_length") or 0)
        if ctx and len(ids) + max_new > ctx:
            self._json(400, error(
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You requested "
                f"a total of {len(ids) + max_new} tokens: {len(ids)} tokens from the input messages and {max_new} "
                "tokens for the completion. Please reduce the number of tokens in the input messages or the "
                "completion to fit within the limit.", 400))
            return None
        if not st.ready.is_set():
            self._json(503, error("The server is not ready yet; wait for /health_generate.", 503,
                                   "ServiceUnavailableError"))
            return None
        if st.fault == "http-500":
            self._json(500, error("Internal server error: CUDA error: an illegal memory access was encountered "
                                   "(injected by perfgate sim fault http-500)", 500, "InternalServerError"))
            return None
        return SimRequest(input_ids=ids, max_new_tokens=max_new)


    # ------------------------------------------------------------------ the engine: hand-off and progress
    def _submit(self, req: SimRequest, stream: bool) -> bool:
        """Hand an admitted request to the engine; False when the health-no-generate fault swallows it."""
        if self.state.fault == "health-no-generate":
            self._black_hole(stream)
            return False
        self._engine().submit(req)
        return True


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
                    raise ClientGone() from None


    def _wait_finished(self, req: SimRequest) -> int:
        """Block until all of ``req``'s tokens are produced (a non-streaming response); their count."""
        produced = -1
        while produced < req.max_new_tokens:
            produced = self._wait(req)
        return produced
