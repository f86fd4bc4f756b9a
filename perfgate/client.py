"""The client: one streaming loop over SGLang's native ``/generate``; it never raises.

SGLang streams Server-Sent Events (``data: <json>`` + blank line, ending with
``data: [DONE]``). Chunks are cumulative: each carries every output id so far and
``meta_info.completion_tokens``; with speculation one chunk carries several tokens. So
tokens are counted from ``completion_tokens``, never from chunks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

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

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first chunk over the time from the first to the last token-bearing chunk."""
        end = self.last_token_s if self.last_token_s is not None else self.latency_s
        if not self.success or self.ttft_s is None or end is None:
            return None
        dt = end - self.ttft_s
        n = self.completion_tokens - self.first_chunk_tokens
        if dt <= 0 or n <= 0:
            return None
        return n / dt

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
        # perfgate's simulated server run with --sim-speedup s says so (SPEEDUP_HEADER): its steps take 1/s of
        # their simulated time, so this stream's durations are scaled back by s (a real server never sends it)
        self.scale = 1.0

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
        s = self.scale
        return RequestOutput(
            success=True,
            ttft_s=self.ttft * s,
            latency_s=(end - self.start) * s,
            last_token_s=(self.last_t - self.start) * s,
            itl_s=tuple(x * s for x in self.itl) if s != 1.0 else tuple(self.itl),
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


SPEEDUP_HEADER = "X-Perfgate-Sim-Speedup"  # perfgate.sim.http.generation's, read here without importing the simulator


def _speedup(value: Any) -> float:
    """The simulator's announced speedup (1.0 when absent or not a positive number)."""
    try:
        s = float(value)
    except (TypeError, ValueError):
        return 1.0
    return s if s > 0 and s == s and s != float("inf") else 1.0


_COMPLETION = re.compile(r'"completion_tokens"\s*:\s*(\d+)')
_COMPLETION_B = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')


def _completion_tokens(payload: str) -> int | None:
    """``meta_info.completion_tokens`` of a cumulative chunk, read from its end (meta_info follows the ids)."""
    i = payload.rfind('"completion_tokens"')
    if i < 0:
        return None
    m = _COMPLETION.match(payload, i)
    return int(m.group(1)) if m else None


def stream_generate(
    url: str,
    request: GenRequest,
    *,
    session: requests.Session | None = None,
    timeout_s: float = 300.0,
    clock: Clock = time.perf_counter,
    chunks: Iterable[bytes] | None = None,
) -> RequestOutput:
    """POST one streaming ``/generate`` and time it (one request, blocking); never raises.

    ``chunks`` replaces the HTTP response body (tests script the stream and the clock). Batches go
    through :func:`run_batch`, which streams every request on one event loop.
    """
    state = StreamState(clock())
    resp = None
    try:
        if chunks is None:
            sess = session or requests.Session()
            resp = sess.post(f"{url}/generate", json=request.payload(stream=True), stream=True,
                             timeout=(10.0, timeout_s))
            if resp.status_code != 200:
                return state.failed(f"HTTP {resp.status_code}: {resp.text[:500]}")
            state.scale = _speedup(resp.headers.get(SPEEDUP_HEADER))
            source: Iterator[bytes] = resp.iter_content(chunk_size=None)
        else:
            source = iter(chunks)
        deadline = state.start + timeout_s
        for raw in source:
            now = clock()
            if not state.feed(raw, now):
                return state.failed(state.error)
            if now > deadline:
                return state.failed(f"timed out after {timeout_s:.0f} s ({state.last_tokens} tokens received)")
    except requests.RequestException as e:
        if isinstance(e, requests.Timeout) or "Read timed out" in str(e):  # a hung server: say so plainly
            return state.failed(_stalled(timeout_s, state.last_tokens))
        return state.failed(f"{type(e).__name__}: {e}"[:500])
    except Exception as e:  # never raise: a failure is a counted output
        return state.failed(f"{type(e).__name__}: {e}"[:500])
    finally:
        if resp is not None:
            resp.close()
    return state.finish(clock())


def _stalled(timeout_s: float, tokens: int) -> str:
    what = f"after {tokens} token(s)" if tokens else "before the first token"
    return f"no data from the server for {timeout_s:g} s {what} (read timeout): the server stopped streaming"


def _int(x: Any) -> int:
    try:
        return max(0, int(x))
    except (TypeError, ValueError):
        return 0


def run_batch(
    url: str,
    requests_: Sequence[GenRequest],
    *,
    concurrency: int = 1,
    timeout_s: float = 300.0,
) -> tuple[list[RequestOutput], float]:
    """Send requests with at most ``concurrency`` in flight; returns outputs (in order) and wall time.

    Every in-flight request streams on one event loop (uvloop where installed), each over its own
    keep-alive connection read by :class:`_Connection`: the bytes are timed as they arrive, framed in
    place and never queued. Never raises for a request; a Ctrl-C or SIGTERM ends the batch at once (the
    loop's tasks are cancelled, nothing waits out a timeout).
    """
    t0 = time.perf_counter()
    scales: list[float] = []
    coro = _run_batch(url, list(requests_), max(1, concurrency), timeout_s, scales)
    factory = _loop_factory()
    if factory is not None and hasattr(asyncio, "Runner"):
        with asyncio.Runner(loop_factory=factory) as runner:
            outs = runner.run(coro)
    else:
        outs = asyncio.run(coro)
    # a simulated server run with --sim-speedup s: the batch's wall time in simulated time, as each request's
    return outs, (time.perf_counter() - t0) * (max(scales) if scales else 1.0)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop where it is installed (a cheaper wake-up per chunk), unless PERFGATE_CLIENT_LOOP=asyncio."""
    if os.environ.get("PERFGATE_CLIENT_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    ssl: bool
    path: str  # the URL's path prefix + /generate
    host_header: str


def _target(url: str) -> _Target:
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    tls = u.scheme == "https"
    port = u.port or (443 if tls else 80)
    host = u.hostname
    netloc = f"[{host}]" if ":" in host else host
    if u.port:
        netloc += f":{u.port}"
    return _Target(host=host, port=port, ssl=tls, path=(u.path.rstrip("/") or "") + "/generate", host_header=netloc)


def _request_bytes(target: _Target, request: GenRequest) -> bytes:
    body = json.dumps(request.payload(stream=True)).encode()
    head = (f"POST {target.path} HTTP/1.1\r\nHost: {target.host_header}\r\nUser-Agent: perfgate\r\n"
            f"Accept: */*\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


async def _run_batch(url: str, reqs: list[GenRequest], concurrency: int, timeout_s: float,
                     scales: list[float]) -> list[RequestOutput]:
    results: list[RequestOutput | None] = [None] * len(reqs)
    try:
        target = _target(url)
    except ValueError as e:
        return [RequestOutput(success=False, error=str(e)) for _ in reqs]
    todo = iter(enumerate(reqs))  # shared by the workers: one loop, one thread, no lock needed
    # no per-read timer (one armed and cancelled for every chunk costs more than reading it): one watchdog per
    # batch ends any stream that has received nothing for timeout_s
    live: dict[asyncio.Task[Any], StreamState] = {}

    async def worker() -> None:
        conn: _Connection | None = None
        try:
            for i, r in todo:
                state = StreamState(time.perf_counter())  # a request's time includes opening its connection
                if conn is not None and not conn.reusable():
                    conn.close()
                    conn = None
                if conn is None:
                    conn, err = await _connect(target)
                    if conn is None:
                        results[i] = state.failed(err)
                        continue
                results[i] = await _stream(conn, state, _request_bytes(target, r), timeout_s, live)
                if state.scale != 1.0:
                    scales.append(state.scale)
        finally:
            if conn is not None:
                conn.close()

    async def watchdog() -> None:
        while True:
            await asyncio.sleep(min(1.0, timeout_s / 4))
            now = time.perf_counter()
            for task, state in list(live.items()):
                if now - state.last_rx > timeout_s and not state.stalled:
                    state.stalled = True
                    task.cancel()

    dog = asyncio.ensure_future(watchdog())
    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(reqs)))))
    finally:
        dog.cancel()
    return [o if o is not None else RequestOutput(success=False, error="request not sent") for o in results]


async def _connect(target: _Target) -> tuple[_Connection | None, str]:
    loop = asyncio.get_running_loop()
    ctx = None
    if target.ssl:
        import ssl

        ctx = ssl.create_default_context()
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(_Connection, target.host, target.port, ssl=ctx), CONNECT_TIMEOUT_S)
    except asyncio.TimeoutError:
        return None, f"cannot connect to {target.host}:{target.port}: no answer within {CONNECT_TIMEOUT_S:g} s"
    except OSError as e:
        return None, f"cannot connect to {target.host}:{target.port}: {type(e).__name__}: {e}"[:500]
    return conn, ""


async def _stream(conn: _Connection, state: StreamState, data: bytes, timeout_s: float,
                  live: dict[asyncio.Task[Any], StreamState]) -> RequestOutput:
    task = asyncio.current_task()
    assert task is not None
    live[task] = state
    try:
        out = await conn.send(data, state, state.start + timeout_s, timeout_s)
        if conn.busy():
            if out.success:  # [DONE] came: the response's end (its last chunk) is normally right behind it
                await conn.wait_idle(DRAIN_S)
            else:  # a failed stream is not read to its end
                conn.close()
        return out
    except asyncio.CancelledError:
        conn.close()
        if not state.stalled:
            raise  # the batch itself is being cancelled (Ctrl-C, SIGTERM)
        task.uncancel() if hasattr(task, "uncancel") else None
        return state.failed(_stalled(timeout_s, state.last_tokens))
    except Exception as e:  # never raise: a failure is a counted output
        conn.close()
        return state.failed(f"{type(e).__name__}: {e}"[:500])
    finally:
        live.pop(task, None)


CONNECT_TIMEOUT_S = 10.0
DRAIN_S = 1.0  # after [DONE], how long to wait for the response's end before dropping the connection
_BUF = 1 << 16
_MAX_HEAD = 1 << 16
_SPEEDUP_KEY = SPEEDUP_HEADER.lower().encode()
_STATUS = re.compile(rb"HTTP/1\.([01]) (\d{3})")


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive HTTP/1.1 connection, one response at a time: status line, headers, then a body in
    chunked transfer-encoding, with a Content-Length, or up to the close.

    The loop reads into this connection's own buffer (no allocation per read) and the body goes to the
    request's :class:`StreamState` as it arrives, timed at arrival. A request ends at ``[DONE]`` (its
    future gets the output then); the rest of the response is read before the connection is reused.
    """

    def __init__(self) -> None:
        self._buf = bytearray(_BUF)
        self._view = memoryview(self._buf)
        self._start = 0  # unread bytes are _buf[_start:_end]
        self._end = 0
        self.transport: asyncio.Transport | None = None
        self._lost = False
        self._phase = "idle"  # head, chunk-size, chunk-data, chunk-crlf, trailer, length, eof, idle
        self._left = 0  # bytes left of the current chunk or Content-Length body
        self._keep_alive = True
        self._state: StreamState | None = None
        self._fut: asyncio.Future[RequestOutput] | None = None
        self._idle: asyncio.Future[None] | None = None
        self._status = 0
        self._error_body = b""
        self._deadline = 0.0
        self._timeout_s = 0.0

    # ------------------------------------------------------------------ the worker's side
    def send(self, data: bytes, state: StreamState, deadline: float, timeout_s: float) -> asyncio.Future[RequestOutput]:
        self._expect(state, asyncio.get_running_loop().create_future(), deadline, timeout_s)
        assert self._fut is not None
        if self._lost or self.transport is None:
            self._resolve(state.failed("connection closed before the request was sent"))
        else:
            self.transport.write(data)
        return self._fut

    def _expect(self, state: StreamState, fut: Any, deadline: float, timeout_s: float) -> None:
        """The next response is ``state``'s; its output goes to ``fut``."""
        self._fut, self._state, self._deadline, self._timeout_s = fut, state, deadline, timeout_s
        self._phase, self._status, self._error_body = "head", 0, b""

    def busy(self) -> bool:
        return self._phase != "idle" and not self._lost

    def reusable(self) -> bool:
        return self._phase == "idle" and self._keep_alive and not self._lost

    async def wait_idle(self, timeout: float) -> None:
        self._idle = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._idle, timeout)
        except asyncio.TimeoutError:
            self.close()
        finally:
            self._idle = None

    def close(self) -> None:
        self._keep_alive = False
        if self.transport is not None and not self._lost:
            self.transport.abort()

    # ------------------------------------------------------------------ the loop's side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._keep_alive = False
        now = time.perf_counter()
        if self._phase == "eof" and exc is None:
            self._response_end(now)
        elif self._fut is not None and not self._fut.done() and self._state is not None:
            st = self._state
            if self._phase == "head" or self._status != 200:
                self._resolve(st.failed(f"connection closed by the server{' (' + str(exc) + ')' if exc else ''} "
                                        f"before a complete response"[:500]))
            else:
                out = st.finish(now)
                if not out.success and not st.done and not st.error:
                    out = st.failed(f"connection closed by the server after {st.last_tokens} tokens, "
                                    f"without [DONE]{': ' + str(exc) if exc else ''}"[:500])
                self._resolve(out)
        self._phase = "idle"
        self._wake_idle()

    def eof_received(self) -> bool | None:
        return False  # close the transport: connection_lost follows

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._buf):
            if self._start > 0:  # move the unread bytes to the front
                n = self._end - self._start
                self._buf[:n] = self._buf[self._start:self._end]
                self._start, self._end = 0, n
            else:  # an unread line longer than the buffer (a huge header): grow it
                self._view.release()
                self._buf = self._buf + bytearray(len(self._buf))
                self._view = memoryview(self._buf)
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        now = time.perf_counter()
        self._end += nbytes
        st = self._state
        if st is not None:
            st.last_rx = now
        try:
            self._parse(now)
        except _HTTPError as e:
            if self._fut is not None and not self._fut.done() and st is not None:
                self._resolve(st.failed(f"bad HTTP response: {e}"[:500]))
            self.close()
            return
        if st is not None and self._fut is not None and not self._fut.done() and now > self._deadline:
            self._resolve(st.failed(f"timed out after {self._timeout_s:.0f} s ({st.last_tokens} tokens received)"))
            self.close()

    # ------------------------------------------------------------------ parsing
    def _parse(self, now: float) -> None:
        buf, end = self._buf, self._end
        while self._start < end:
            phase = self._phase
            pos = self._start
            if phase == "chunk-size":
                # the usual case first: a whole chunk (size line, data, CRLF) is here
                i = buf.find(b"\r\n", pos, end)
                if i > pos:
                    try:
                        size = int(buf[pos:i], 16)
                    except ValueError:
                        size = -1  # an extension or garbage: the general path says which
                    e = i + 2 + size
                    if size > 0 and e + 2 <= end and buf[e] == 13 and buf[e + 1] == 10:
                        self._start = e + 2
                        self._body(bytes(self._view[i + 2:e]), now)
                        continue
                i = buf.find(b"\r\n", pos, end)
                if i < 0:
                    if end - pos > 1024:
                        raise _HTTPError("chunk size line too long")
                    return
                line = bytes(buf[pos:i]).split(b";", 1)[0].strip()
                try:
                    size = int(line, 16)
                except ValueError:
                    raise _HTTPError(f"bad chunk size {line[:40]!r}") from None
                if size < 0:
                    raise _HTTPError(f"bad chunk size {line[:40]!r}")
                self._start = i + 2
                if size == 0:
                    self._phase = "trailer"
                else:
                    self._left, self._phase = size, "chunk-data"
            elif phase == "chunk-data":
                n = min(self._left, end - pos)
                self._start = pos + n
                self._left -= n
                if self._left == 0:
                    self._phase = "chunk-crlf"
                self._body(bytes(self._view[pos:pos + n]), now)
            elif phase == "chunk-crlf":
                if end - pos < 2:
                    return
                if buf[pos] != 13 or buf[pos + 1] != 10:
                    raise _HTTPError("chunk not followed by CRLF")
                self._start, self._phase = pos + 2, "chunk-size"
            elif phase == "length":
                n = min(self._left, end - pos)
                self._start = pos + n
                self._left -= n
                self._body(bytes(self._view[pos:pos + n]), now)
                if self._left == 0:
                    self._response_end(now)
            elif phase == "eof":
                self._start = end
                self._body(bytes(self._view[pos:end]), now)
            elif phase == "trailer":
                i = buf.find(b"\r\n", pos, end)
                if i < 0:
                    if end - pos > _MAX_HEAD:
                        raise _HTTPError("trailer too long")
                    return
                self._start = i + 2
                if i == pos:
                    self._response_end(now)
            elif phase == "head":
                i = buf.find(b"\r\n\r\n", pos, end)
                if i < 0:
                    if end - pos > _MAX_HEAD:
                        raise _HTTPError("response head too long")
                    return
                self._start = i + 4
                self._head(bytes(buf[pos:i]), now)
            else:  # idle: bytes nobody asked for
                raise _HTTPError("data after the response")

    def _head(self, head: bytes, now: float) -> None:
        lines = head.split(b"\r\n")
        m = _STATUS.match(lines[0])
        if m is None:
            raise _HTTPError(f"bad status line {lines[0][:80]!r}")
        status = int(m.group(2))
        if 100 <= status < 200:  # an interim response (100 Continue): the real one follows
            return
        headers: dict[bytes, bytes] = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if sep:
                headers[k.strip().lower()] = v.strip()
        self._status = status
        if self._state is not None and _SPEEDUP_KEY in headers:
            self._state.scale = _speedup(headers[_SPEEDUP_KEY].decode("latin-1"))
        conn_hdr = headers.get(b"connection", b"").lower()
        self._keep_alive = m.group(1) == b"1" and b"close" not in conn_hdr or b"keep-alive" in conn_hdr
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            self._phase = "chunk-size"
        elif b"content-length" in headers:
            try:
                self._left = int(headers[b"content-length"])
            except ValueError:
                raise _HTTPError("bad Content-Length") from None
            self._phase = "length"
            if self._left == 0:
                self._response_end(now)
        else:
            self._keep_alive = False
            self._phase = "eof"

    def _body(self, data: bytes, now: float) -> None:
        st = self._state
        if self._status != 200:
            if len(self._error_body) < 4096:
                self._error_body += data
            return
        if st is None or self._fut is None or self._fut.done():
            return  # after [DONE] (or a failure): the rest of the response is read and dropped
        if not st.feed(data, now):
            self._resolve(st.failed(st.error))
        elif st.done:
            self._resolve(st.finish(now))  # [DONE]: the request is over, whatever the connection does next

    def _response_end(self, now: float) -> None:
        st = self._state
        if self._fut is not None and not self._fut.done() and st is not None:
            if self._status != 200:
                self._resolve(st.failed(f"HTTP {self._status}: {self._error_body.decode('utf-8', 'replace')[:500]}"))
            else:
                self._resolve(st.finish(now))
        self._phase = "idle"
        self._state = None
        self._wake_idle()

    def _resolve(self, out: RequestOutput) -> None:
        if self._fut is not None and not self._fut.done():
            self._fut.set_result(out)

    def _wake_idle(self) -> None:
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)


class _HTTPError(Exception):
    pass


def get_json(url: str, path: str, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """GET a JSON endpoint; None on any failure."""
    try:
        r = requests.get(f"{url}{path}", timeout=timeout_s)
        if r.status_code != 200:
            return None
        obj = r.json()
        return obj if isinstance(obj, dict) else None
    except (requests.RequestException, ValueError):
        return None


def flush_cache(url: str) -> bool:
    try:
        return requests.post(f"{url}/flush_cache", timeout=30).status_code == 200
    except requests.RequestException:
        return False
