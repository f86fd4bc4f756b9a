"""One request's stream as its bytes arrive: the request and output types, SGLang's SSE events, the
cumulative (or incremental) token counts and ids, timed on arrival; the same for every transport."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Clock = Callable[[], float]


class SSEParser:
    """Incremental SSE parser: feed bytes split anywhere, get complete ``data`` payloads."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[str]:
        self._buf += data
        events: list[str] = []
        while True:
            # an event ends at a blank line; accept \n\n, \r\n\r\n and \r\r
            idx, sep = -1, 0
            for s in (b"\r\n\r\n", b"\n\n", b"\r\r"):
                i = self._buf.find(s)
                if i >= 0 and (idx < 0 or i < idx):
                    idx, sep = i, len(s)
            if idx < 0:
                break
            raw, self._buf = self._buf[:idx], self._buf[idx + sep :]
            ev = _event_data(raw)
            if ev is not None:
                events.append(ev)
        return events

    def flush(self) -> list[str]:
        """Whatever complete event is left when the stream ends without a blank line."""
        raw, self._buf = self._buf, b""
        ev = _event_data(raw) if raw.strip() else None
        return [ev] if ev is not None else []


def _event_data(raw: bytes) -> str | None:
    lines = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    data = [ln[5:].removeprefix(" ") for ln in lines if ln.startswith("data:")]
    return "\n".join(data) if data else None


@dataclass(frozen=True, kw_only=True)
class GenRequest:
    """One generation request (token ids, since real runs use --skip-tokenizer-init)."""

    input_ids: tuple[int, ...]
    max_new_tokens: int
    ignore_eos: bool = True
    temperature: float = 0.0
    rid: str | None = None

    def payload(self, stream: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {
            "input_ids": list(self.input_ids),
            "sampling_params": {
                "max_new_tokens": self.max_new_tokens,
                "temperature": self.temperature,
                "ignore_eos": self.ignore_eos,
            },
            "stream": stream,
        }
        if self.rid:
            body["rid"] = self.rid
        return body


@dataclass(frozen=True, kw_only=True)
class RequestOutput:
    """What one request produced, and when. ``success`` False carries ``error``."""

    success: bool
    error: str = ""
    ttft_s: float | None = None
    latency_s: float | None = None
    last_token_s: float | None = None  # arrival of the last token-bearing chunk, from the request's start
    itl_s: tuple[float, ...] = ()  # per-token inter-token latencies after the first chunk
    completion_tokens: int = 0
    first_chunk_tokens: int = 0
    prompt_tokens: int = 0
    output_ids: tuple[int, ...] = ()
    spec_verify_ct: int | None = None
    cached_tokens: int = 0  # prompt tokens SGLang served from its prefix cache (meta_info.cached_tokens)
    start_s: float = 0.0
    meta_info: dict[str, Any] = field(default_factory=dict)
    # open-loop runs only (perfgate.client.schedule): when the schedule said to send it and when it was sent,
    # seconds from the run's start, in the server's time (as every duration here)
    intended_s: float | None = None
    sent_s: float | None = None

    @property
    def send_lag_s(self) -> float | None:
        """How late the sender was on this request's schedule (open-loop runs only)."""
        if self.intended_s is None or self.sent_s is None:
            return None
        return self.sent_s - self.intended_s

    @property
    def decode_span(self) -> tuple[int, float] | None:
        """The request's decode after its first chunk: (the tokens after the first chunk, the seconds from the first
        to the last token-bearing chunk, or to the end where the last is unknown); None without the first chunk's
        time or the end, or with no token after the first chunk (one output token). The one home of a request's
        TPOT (:attr:`tpot_ms`) and decode rate (:attr:`decode_tok_s`)."""
        end = self.last_token_s if self.last_token_s is not None else self.latency_s
        n = self.completion_tokens - self.first_chunk_tokens
        if self.ttft_s is None or end is None or n <= 0:
            return None
        return n, end - self.ttft_s

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first chunk, in ms (:attr:`decode_span`; None where it is)."""
        span = self.decode_span
        return None if span is None else span[1] * 1000 / span[0]

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first chunk over the time from the first to the last token-bearing chunk
        (:attr:`decode_span`); None for a failed request or no time between them."""
        span = self.decode_span
        if not self.success or span is None or span[1] <= 0:
            return None
        return span[0] / span[1]

    @property
    def accept_len(self) -> float | None:
        if not self.spec_verify_ct:
            return None
        return self.completion_tokens / self.spec_verify_ct


class StreamState:
    """One request's stream as its bytes arrive; the same for every transport.

    Timestamps are the arrival times the caller passes (taken when the bytes arrive, not when they are
    looked at). SGLang's chunks are cumulative by default (every output id so far), so a chunk is not
    parsed: its ``completion_tokens`` is read from the end of the payload, where ``meta_info`` sits, and
    only the last payload is parsed whole (output ids for the lossless check, acceptance, cached tokens).
    With ``--incremental-streaming-output`` each chunk carries only its new ids (learnt at the second
    token-bearing chunk): those small deltas are parsed and collected. The decode window ends at the last
    token-bearing chunk, not at ``[DONE]`` or the connection's close.

    Framing works on the bytes as they came (the events SGLang sends, ``data: {...}`` and a blank line, are
    found with ``bytes.find`` and read in place, never decoded or copied); anything else (multi-line
    events, ``\\r`` line ends, comments) takes the general path, which gives the events :class:`SSEParser`
    gives, however the bytes are split.
    """

    def __init__(self, start: float) -> None:
        self.start = start
        self._pending = b""  # the bytes of an event not complete yet
        self.ttft: float | None = None
        self.last_t = start
        self.last_tokens = 0
        self.first_chunk_tokens = 0
        self.itl: list[float] = []
        self._last: tuple[Any, int, int] = ("", 0, 0)  # the last payload, in place: (buffer, start, end)
        self.done = False
        self.error = ""
        self.last_rx = start  # arrival of the last bytes (the batch's watchdog ends a stream silent too long)
        self.stalled = False
        self.incremental: bool | None = None  # learnt at the second token-bearing chunk
        self.ids: list[int] = []  # incremental streams only: the output ids so far
        # perfgate's simulated server run with --sim-speedup s sleeps 1/s of each step, and says how far its clock
        # was ahead of the wall clock when the request arrived (AHEAD_HEADER) and at each chunk's tokens (AHEAD_KEY
        # in meta_info). Every arrival time is moved on by the lead gained since the request arrived (``shift``), so
        # the durations are in simulated time and only what the server simulated is scaled: the client's, the
        # network's and the server's own time count once. A real server sends neither (ahead0 stays None).
        self.ahead0: float | None = None
        self.shift = 0.0

    @property
    def last_data(self) -> str:
        """The last data payload (a JSON object, or ``[DONE]``'s predecessor), as text."""
        buf, s, e = self._last
        d = buf[s:e]
        return d.decode("utf-8", "replace") if isinstance(d, bytes) else d

    def feed(self, raw: bytes, now: float) -> bool:
        """Take bytes that arrived at ``now``; False once the stream is known bad (``error`` says why)."""
        buf = self._pending + raw if self._pending else raw
        n = len(buf)
        pos = 0
        while pos < n:
            i = buf.find(b"\n", pos)
            if 0 <= i < n - 1 and buf[i + 1] == 10 and buf.find(b"\r", pos, i) < 0:
                # one line and a blank one (what SGLang sends): the event is buf[pos:i]
                end, nxt = i, i + 2
                if buf.startswith(b"data:", pos, end):
                    p = pos + 5
                    if p < end and buf[p] == 32:
                        p += 1
                    if p < end and buf[p] == 123 and buf[end - 1] == 125:  # '{' ... '}': read in place
                        ok = self._object(buf, p, end, now)
                    else:
                        ok = self._event(buf[p:end].decode("utf-8", "replace"), now)
                    if not ok:
                        self._pending = b""
                        return False
                pos = nxt
                continue
            # the general path: the earliest blank line of any kind (\r\n\r\n, \n\n, \r\r)
            idx, sep = -1, 0
            for s in (b"\r\n\r\n", b"\n\n", b"\r\r"):
                j = buf.find(s, pos)
                if j >= 0 and (idx < 0 or j < idx):
                    idx, sep = j, len(s)
            if idx < 0:
                break
            ev = _event_data(buf[pos:idx])
            pos = idx + sep
            if ev is not None and not self._event(ev, now):
                self._pending = b""
                return False
        self._pending = buf[pos:] if pos < n else b""
        return True

    def _object(self, buf: bytes, p: int, e: int, now: float) -> bool:
        """A ``{...}`` payload at buf[p:e]: its completion_tokens read from its end, in place."""
        i = buf.rfind(b'"completion_tokens"', p, e)
        m = _COMPLETION_B.match(buf, i, e) if i >= 0 else None
        if m is None:  # no meta_info to read cheaply (an error object, or another server): parse it
            return self._event(buf[p:e].decode("utf-8", "replace"), now)
        return self._tokens(int(m.group(1)), buf, p, e, now)

    def _event(self, data: str, now: float) -> bool:
        text = data.strip()
        if text == "[DONE]":
            self.done = True
            return True
        if not (text.startswith("{") and text.endswith("}")):
            self.error = f"malformed SSE data: {data[:200]!r}"
            return False
        ntok = _completion_tokens(text)
        if ntok is None:  # no meta_info to read cheaply (an error object, or another server): parse it
            try:
                obj = json.loads(text)
            except ValueError:
                self.error = f"malformed SSE data: {data[:200]!r}"
                return False
            if not isinstance(obj, dict):
                self.error = f"unexpected SSE payload: {data[:200]!r}"
                return False
            if "error" in obj:
                self.error = f"server error: {json.dumps(obj['error'])[:300]}"
                return False
            ids = obj.get("output_ids")
            ntok = len(ids) if isinstance(ids, list) else self.last_tokens
        return self._tokens(ntok, text, 0, len(text), now)

    def _tokens(self, ntok: int, buf: Any, p: int, e: int, now: float) -> bool:
        """A payload buf[p:e] that says ``ntok`` tokens so far, arrived at ``now``."""
        if ntok > self.last_tokens:
            if self.ahead0 is not None:
                lead = _ahead(buf, p, e)
                if lead is not None:
                    self.shift = lead - self.ahead0
                now += self.shift
            if self.last_tokens and self.incremental is None and not self._learn_mode(buf[p:e], ntok):
                return False
            if self.incremental and not self._append_ids(buf[p:e]):
                return False
            if self.ttft is None:
                self.ttft = now - self.start
                self.first_chunk_tokens = ntok
            else:
                k = ntok - self.last_tokens
                gap = (now - self.last_t) / k
                if k == 1:
                    self.itl.append(gap)
                else:
                    self.itl.extend([gap] * k)
            self.last_t = now
            self.last_tokens = ntok
        self._last = (buf, p, e)
        return True

    def _malformed(self, payload: Any) -> bool:
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
        self.error = f"malformed SSE data: {text[:200]!r}"
        return False

    def _learn_mode(self, payload: Any, ntok: int) -> bool:
        """At the second token-bearing chunk: cumulative ids (SGLang's default) or only the new ones
        (``--incremental-streaming-output``)? The first chunk cannot tell: both carry its one token."""
        ids = _ids(payload)
        if ids is None:
            return self._malformed(payload)
        self.incremental = len(ids) == ntok - self.last_tokens and len(ids) != ntok
        if self.incremental:
            buf, s, e = self._last
            first = _ids(buf[s:e])
            self.ids = list(first or [])
        return True

    def _append_ids(self, payload: Any) -> bool:
        ids = _ids(payload)  # a delta: small, so parsing it whole costs nothing
        if ids is None:
            return self._malformed(payload)
        self.ids.extend(ids)
        return True

    def failed(self, error: str) -> RequestOutput:
        return RequestOutput(success=False, error=error, start_s=self.start, completion_tokens=self.last_tokens)

    def finish(self, end: float) -> RequestOutput:
        """The request's output, once the stream has ended at ``end``."""
        if self.error:
            return self.failed(self.error)
        raw, self._pending = self._pending, b""
        if raw.strip():  # a last event without its blank line
            ev = _event_data(raw)
            if ev is not None and not self._event(ev, end):
                return self.failed(self.error)
        if not self.done:
            return self.failed(f"stream ended without [DONE] after {self.last_tokens} tokens")
        if self.ttft is None:
            return self.failed("stream produced no tokens")
        last = self.last_data
        try:
            obj = json.loads(last)
        except ValueError:
            return self.failed(f"malformed SSE data: {last[:200]!r}")
        meta = obj.get("meta_info") or {} if isinstance(obj, dict) else {}
        ids = self.ids if self.incremental else (obj.get("output_ids") if isinstance(obj, dict) else None)
        verify = meta.get("spec_verify_ct")
        return RequestOutput(
            success=True,
            ttft_s=self.ttft,
            latency_s=end + self.shift - self.start,
            last_token_s=self.last_t - self.start,
            itl_s=tuple(self.itl),
            completion_tokens=self.last_tokens,
            first_chunk_tokens=self.first_chunk_tokens,
            prompt_tokens=_int(meta.get("prompt_tokens")),
            output_ids=tuple(int(x) for x in ids) if isinstance(ids, list) else (),
            spec_verify_ct=int(verify) if verify else None,
            cached_tokens=_int(meta.get("cached_tokens")),
            start_s=self.start,
            meta_info=dict(meta),
        )


def _ids(payload: str) -> list[int] | None:
    try:
        obj = json.loads(payload)
    except ValueError:
        return None
    ids = obj.get("output_ids") if isinstance(obj, dict) else None
    return [int(x) for x in ids] if isinstance(ids, list) else None


# perfgate.sim.http.generation's names, read here without importing the simulator
SPEEDUP_HEADER = "X-Perfgate-Sim-Speedup"
AHEAD_HEADER = "X-Perfgate-Sim-Ahead"
AHEAD_KEY = "perfgate_sim_ahead_s"
_AHEAD = re.compile(r'"perfgate_sim_ahead_s"\s*:\s*([0-9.eE+-]+)')
_AHEAD_B = re.compile(rb'"perfgate_sim_ahead_s"\s*:\s*([0-9.eE+-]+)')


def _lead(value: Any) -> float | None:
    """A simulated clock's lead in seconds (AHEAD_HEADER's value); None when absent or not a finite number >= 0."""
    try:
        s = float(value)
    except (TypeError, ValueError):
        return None
    return s if 0 <= s < float("inf") else None


def _ahead(buf: Any, p: int, e: int) -> float | None:
    """The AHEAD_KEY of the payload buf[p:e] (bytes or text), read from its end; None when it has none."""
    if isinstance(buf, str):
        i = buf.rfind('"perfgate_sim_ahead_s"', p, e)
        m: re.Match[str] | re.Match[bytes] | None = _AHEAD.match(buf, i, e) if i >= 0 else None
    else:
        i = buf.rfind(b'"perfgate_sim_ahead_s"', p, e)
        m = _AHEAD_B.match(buf, i, e) if i >= 0 else None
    return _lead(m.group(1)) if m else None


_COMPLETION = re.compile(r'"completion_tokens"\s*:\s*(\d+)')
_COMPLETION_B = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')


def _completion_tokens(payload: str) -> int | None:
    """``meta_info.completion_tokens`` of a cumulative chunk, read from its end (meta_info follows the ids)."""
    i = payload.rfind('"completion_tokens"')
    if i < 0:
        return None
    m = _COMPLETION.match(payload, i)
    return int(m.group(1)) if m else None


def _stalled(timeout_s: float, tokens: int) -> str:
    what = f"after {tokens} token(s)" if tokens else "before the first token"
    return f"no data from the server for {timeout_s:g} s {what} (read timeout): the server stopped streaming"


def _int(x: Any) -> int:
    try:
        return max(0, int(x))
    except (TypeError, ValueError):
        return 0


