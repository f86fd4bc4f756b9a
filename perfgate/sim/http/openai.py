"""The OpenAI-compatible ``/v1/completions``: one ``text_completion`` object, or SSE deltas ending
with an optional usage chunk (``stream_options.include_usage``) and ``[DONE]``."""

from __future__ import annotations

import time
import uuid
from typing import Any

from perfgate.sim.http.base import ClientGone
from perfgate.sim.http.generation import GenerationBase


class OpenAICompletions(GenerationBase):
    """``POST /v1/completions``."""

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
            self._start_stream(req)
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
        except ClientGone:
            self._engine().abort(req)
            raise
