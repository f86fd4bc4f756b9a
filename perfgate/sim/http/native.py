"""SGLang's native ``/generate``: one JSON answer, or SSE chunks with cumulative (or, with
``--incremental-streaming-output``, incremental) ``output_ids``, sent per ``--stream-interval`` the
way the served SGLang version's output streamer sends them; ``meta_info`` as SGLang fills it. The
``malformed-sse`` fault slips in one truncated chunk."""

from __future__ import annotations

import time
from typing import Any

from perfgate.sim.engine_loop import SimRequest
from perfgate.sim.http.base import ClientGone, error
from perfgate.sim.http.generation import AHEAD_KEY, GenerationBase
from perfgate.versions import version_at_least

#: realtime at monotonic 0: SGLang's timestamps are realtime seconds, the simulator's clocks monotonic
_REALTIME = time.time() - time.monotonic()


class NativeGenerate(GenerationBase):
    """``POST /generate``."""

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
        if final:
            end = req.finished_at or time.monotonic()
            # durations in simulated time: wall time plus the lead the simulated clock gained (--sim-speedup)
            m["e2e_latency"] = end - req.created + req.finished_ahead - req.created_ahead
            spec = self.state.plan.spec
            if spec is not None and req.verify_ct > 0:
                m["spec_verify_ct"] = req.verify_ct
                m["spec_accept_length"] = produced / req.verify_ct
                m["spec_accept_rate"] = req.correct_drafts / max(1, req.proposed_drafts)
                m["spec_num_correct_drafts"] = req.correct_drafts
                m["spec_num_proposed_drafts"] = req.proposed_drafts
        if self.state.args.get("enable_metrics") and req.first_token_at is not None:
            m["first_token_latency"] = req.first_token_at - req.created + req.first_token_ahead - req.created_ahead
            # SGLang's timestamps (realtime seconds; here of the simulated clock): the scheduler's on every chunk,
            # the tokenizer manager's on the finished one (perfgate.measuring.ttft_parts cuts a probe's TTFT at them)
            entry = req.forward_entry_at + req.forward_entry_ahead  # set by its prefill step, before its first token
            m["forward_entry_time"] = _REALTIME + entry
            m["prefill_finished_time"] = _REALTIME + req.first_token_at + req.first_token_ahead
            m["queue_time"] = entry - req.created - req.created_ahead
            if final:
                received = _REALTIME + req.created + req.created_ahead
                m["request_received_ts"] = m["api_server_dispatch_finish_ts"] = received
            if final and req.finished_at is not None and produced > 1:
                span = req.finished_at - req.first_token_at + req.finished_ahead - req.first_token_ahead
                m["decode_throughput"] = (produced - 1) / max(1e-9, span)
        if self._engine().speedup != 1.0:  # the clock lead at this chunk's tokens: perfgate's client adds its gain
            m[AHEAD_KEY] = req.ahead_at(produced)
        return m

    def _generate(self) -> None:
        st = self.state
        self._batch_of_one = False  # handlers live as long as a keep-alive connection
        got = self._read_prompt("text")
        if got is None:
            return
        body, prompt = got
        sp = body.get("sampling_params") or {}
        if not isinstance(sp, dict):
            self._json(400, error("sampling_params must be an object.", 400))
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
                    self._json(200, [{**out, "index": 0}])
                    return
                self._json(200, out)
                return
            self._start_stream(req)
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
        except ClientGone:
            self._engine().abort(req)
            raise

