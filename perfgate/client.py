"""The client: one streaming loop over SGLang's native ``/generate``; it never raises.

SGLang streams Server-Sent Events (``data: <json>`` + blank line, ending with
``data: [DONE]``). Chunks are cumulative: each carries every output id so far and
``meta_info.completion_tokens``; with speculation one chunk carries several tokens. So
tokens are counted from ``completion_tokens``, never from chunks.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    """

    def __init__(self, start: float) -> None:
        self.start = start
        self.parser = SSEParser()
        self.ttft: float | None = None
        self.last_t = start
        self.last_tokens = 0
        self.first_chunk_tokens = 0
        self.itl: list[float] = []
        self.last_data = ""
        self.done = False
        self.error = ""
        self.last_rx = start  # arrival of the last bytes (the batch's watchdog ends a stream silent too long)
        self.stalled = False
        self.incremental: bool | None = None  # learnt at the second token-bearing chunk
        self.ids: list[int] = []  # incremental streams only: the output ids so far

    def feed(self, raw: bytes, now: float) -> bool:
        """Take bytes that arrived at ``now``; False once the stream is known bad (``error`` says why)."""
        for data in self.parser.feed(raw):
            if not self._event(data, now):
                return False
        return True

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
        if ntok > self.last_tokens:
            if self.last_tokens and self.incremental is None and not self._learn_mode(text, ntok):
                return False
            if self.incremental and not self._append_ids(text):
                return False
            if self.ttft is None:
                self.ttft = now - self.start
                self.first_chunk_tokens = ntok
            else:
                gap = (now - self.last_t) / (ntok - self.last_tokens)
                self.itl.extend([gap] * (ntok - self.last_tokens))
            self.last_t = now
            self.last_tokens = ntok
        self.last_data = text
        return True

    def _learn_mode(self, text: str, ntok: int) -> bool:
        """At the second token-bearing chunk: cumulative ids (SGLang's default) or only the new ones
        (``--incremental-streaming-output``)? The first chunk cannot tell: both carry its one token."""
        ids = _ids(text)
        if ids is None:
            self.error = f"malformed SSE data: {text[:200]!r}"
            return False
        self.incremental = len(ids) == ntok - self.last_tokens and len(ids) != ntok
        if self.incremental:
            first = _ids(self.last_data)
            self.ids = list(first or [])
        return True

    def _append_ids(self, text: str) -> bool:
        ids = _ids(text)  # a delta: small, so parsing it whole costs nothing
        if ids is None:
            self.error = f"malformed SSE data: {text[:200]!r}"
            return False
        self.ids.extend(ids)
        return True

    def failed(self, error: str) -> RequestOutput:
        return RequestOutput(success=False, error=error, start_s=self.start, completion_tokens=self.last_tokens)

    def finish(self, end: float) -> RequestOutput:
        """The request's output, once the stream has ended at ``end``."""
        if self.error:
            return self.failed(self.error)
        for data in self.parser.flush():
            if not self._event(data, end):
                return self.failed(self.error)
        if not self.done:
            return self.failed(f"stream ended without [DONE] after {self.last_tokens} tokens")
        if self.ttft is None:
            return self.failed("stream produced no tokens")
        try:
            obj = json.loads(self.last_data)
        except ValueError:
            return self.failed(f"malformed SSE data: {self.last_data[:200]!r}")
        meta = obj.get("meta_info") or {} if isinstance(obj, dict) else {}
        ids = self.ids if self.incremental else (obj.get("output_ids") if isinstance(obj, dict) else None)
        verify = meta.get("spec_verify_ct")
        return RequestOutput(
            success=True,
            ttft_s=self.ttft,
            latency_s=end - self.start,
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


_COMPLETION = re.compile(r'"completion_tokens"\s*:\s*(\d+)')


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

    Every in-flight request streams on one event loop (aiohttp): one connection pool, no thread or
    session per request, each chunk timed when the loop hands it over. Never raises for a request; a
    Ctrl-C or SIGTERM ends the batch at once (the loop's tasks are cancelled, nothing waits out a timeout).
    """
    t0 = time.perf_counter()
    outs = asyncio.run(_run_batch(url, list(requests_), max(1, concurrency), timeout_s))
    return outs, time.perf_counter() - t0


async def _run_batch(url: str, reqs: list[GenRequest], concurrency: int, timeout_s: float) -> list[RequestOutput]:
    import aiohttp

    results: list[RequestOutput | None] = [None] * len(reqs)
    todo = iter(enumerate(reqs))  # shared by the workers: one loop, one thread, no lock needed
    # no per-read timeout (a timer armed and cancelled for every chunk costs more than parsing it): one
    # watchdog per batch ends any stream that has received nothing for timeout_s
    timeout = aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=None)
    connector = aiohttp.TCPConnector(limit=concurrency)
    live: dict[asyncio.Task[Any], StreamState] = {}
    async with aiohttp.ClientSession(timeout=timeout, connector=connector, auto_decompress=False) as session:

        async def worker() -> None:
            for i, r in todo:
                results[i] = await _stream(session, url, r, timeout_s, live)

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


async def _stream(session: Any, url: str, request: GenRequest, timeout_s: float,
                  live: dict[asyncio.Task[Any], StreamState]) -> RequestOutput:
    clock = time.perf_counter
    state = StreamState(clock())
    task = asyncio.current_task()
    assert task is not None
    live[task] = state
    try:
        async with session.post(f"{url}/generate", json=request.payload(stream=True)) as resp:
            if resp.status != 200:
                return state.failed(f"HTTP {resp.status}: {(await resp.text())[:500]}")
            deadline = state.start + timeout_s
            async for raw in resp.content.iter_any():
                now = clock()
                state.last_rx = now
                if not state.feed(raw, now):
                    return state.failed(state.error)
                if now > deadline:
                    return state.failed(f"timed out after {timeout_s:.0f} s ({state.last_tokens} tokens received)")
                if state.done:
                    break  # [DONE]: the request is over, whatever the connection does next
            end = clock()
    except asyncio.CancelledError:
        if not state.stalled:
            raise  # the batch itself is being cancelled (Ctrl-C, SIGTERM)
        task.uncancel() if hasattr(task, "uncancel") else None
        return state.failed(_stalled(timeout_s, state.last_tokens))
    except Exception as e:  # never raise: a failure is a counted output
        return state.failed(f"{type(e).__name__}: {e}"[:500])
    finally:
        live.pop(task, None)
    return state.finish(end)


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
