"""The client: one streaming loop over SGLang's native ``/generate``; it never raises.

SGLang streams Server-Sent Events (``data: <json>`` + blank line, ending with
``data: [DONE]``). Chunks are cumulative: each carries every output id so far and
``meta_info.completion_tokens``; with speculation one chunk carries several tokens. So
tokens are counted from ``completion_tokens``, never from chunks.
"""

from __future__ import annotations

import json
import queue
import threading
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
        """Tokens after the first chunk over the time after the first chunk."""
        if not self.success or self.ttft_s is None or self.latency_s is None:
            return None
        dt = self.latency_s - self.ttft_s
        n = self.completion_tokens - self.first_chunk_tokens
        if dt <= 0 or n <= 0:
            return None
        return n / dt

    @property
    def accept_len(self) -> float | None:
        if not self.spec_verify_ct:
            return None
        return self.completion_tokens / self.spec_verify_ct


def stream_generate(
    url: str,
    request: GenRequest,
    *,
    session: requests.Session | None = None,
    timeout_s: float = 300.0,
    clock: Clock = time.perf_counter,
    chunks: Iterable[bytes] | None = None,
) -> RequestOutput:
    """POST one streaming ``/generate`` and time it; never raises.

    ``chunks`` replaces the HTTP response body (tests script the stream and the clock).
    """
    start = clock()
    ttft = None
    last_t = start
    last_tokens = 0
    itl: list[float] = []
    meta: dict[str, Any] = {}
    output_ids: list[int] = []
    first_chunk_tokens = 0
    done = False
    resp = None
    parser = SSEParser()
    try:
        if chunks is None:
            sess = session or requests.Session()
            resp = sess.post(f"{url}/generate", json=request.payload(stream=True), stream=True,
                             timeout=(10.0, timeout_s))
            if resp.status_code != 200:
                body = resp.text[:500]
                return RequestOutput(success=False, error=f"HTTP {resp.status_code}: {body}", start_s=start)
            source: Iterator[bytes] = resp.iter_content(chunk_size=None)
        else:
            source = iter(chunks)
        deadline = start + timeout_s
        for raw in source:
            now = clock()
            for data in parser.feed(raw):
                if data.strip() == "[DONE]":
                    done = True
                    continue
                try:
                    obj = json.loads(data)
                except ValueError:
                    return RequestOutput(success=False, error=f"malformed SSE data: {data[:200]!r}", start_s=start)
                if not isinstance(obj, dict):
                    return RequestOutput(success=False, error=f"unexpected SSE payload: {data[:200]!r}", start_s=start)
                if "error" in obj:
                    return RequestOutput(success=False, error=f"server error: {json.dumps(obj['error'])[:300]}",
                                         start_s=start)
                m = obj.get("meta_info") or {}
                ntok = m.get("completion_tokens")
                ids = obj.get("output_ids")
                if ntok is None:
                    ntok = len(ids) if isinstance(ids, list) else last_tokens
                ntok = int(ntok)
                if ntok > last_tokens:
                    if ttft is None:
                        ttft = now - start
                        first_chunk_tokens = ntok
                    else:
                        gap = (now - last_t) / (ntok - last_tokens)
                        itl.extend([gap] * (ntok - last_tokens))
                    last_t = now
                    last_tokens = ntok
                meta = m
                if isinstance(ids, list):
                    output_ids = ids
            if now > deadline:
                return RequestOutput(success=False, error=f"timed out after {timeout_s:.0f} s "
                                     f"({last_tokens} tokens received)", start_s=start)
        for data in parser.flush():
            if data.strip() == "[DONE]":
                done = True
    except requests.RequestException as e:
        if isinstance(e, requests.Timeout) or "Read timed out" in str(e):  # a hung server: say so plainly
            what = f"after {last_tokens} token(s)" if last_tokens else "before the first token"
            err = f"no data from the server for {timeout_s:g} s {what} (read timeout): the server stopped streaming"
        else:
            err = f"{type(e).__name__}: {e}"[:500]
        return RequestOutput(success=False, error=err, start_s=start, completion_tokens=last_tokens)
    except Exception as e:  # never raise: a failure is a counted output
        return RequestOutput(success=False, error=f"{type(e).__name__}: {e}"[:500], start_s=start)
    finally:
        if resp is not None:
            resp.close()
    end = clock()
    if not done:
        return RequestOutput(success=False, error=f"stream ended without [DONE] after {last_tokens} tokens",
                             start_s=start, completion_tokens=last_tokens)
    if ttft is None:
        return RequestOutput(success=False, error="stream produced no tokens", start_s=start)
    verify = meta.get("spec_verify_ct")
    return RequestOutput(
        success=True,
        ttft_s=ttft,
        latency_s=end - start,
        itl_s=tuple(itl),
        completion_tokens=last_tokens,
        first_chunk_tokens=first_chunk_tokens,
        prompt_tokens=int(meta.get("prompt_tokens") or 0),
        output_ids=tuple(int(x) for x in output_ids),
        spec_verify_ct=int(verify) if verify else None,
        cached_tokens=_int(meta.get("cached_tokens")),
        start_s=start,
        meta_info=dict(meta),
    )


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
    """Send requests with at most ``concurrency`` in flight; returns outputs (in order) and wall time."""
    t0 = time.perf_counter()
    if concurrency <= 1:
        with requests.Session() as s:
            outs = [stream_generate(url, r, session=s, timeout_s=timeout_s) for r in requests_]
        return outs, time.perf_counter() - t0

    # Daemon threads, not a ThreadPoolExecutor: Ctrl-C / SIGTERM during a hung request must end the
    # session at once (an executor joins its workers, i.e. waits out every request timeout first).
    todo: queue.SimpleQueue[tuple[int, GenRequest]] = queue.SimpleQueue()
    for item in enumerate(requests_):
        todo.put(item)
    results: list[RequestOutput | None] = [None] * len(requests_)

    def worker() -> None:
        while True:
            try:
                i, r = todo.get_nowait()
            except queue.Empty:
                return
            with requests.Session() as s:
                results[i] = stream_generate(url, r, session=s, timeout_s=timeout_s)

    threads = [threading.Thread(target=worker, name=f"perfgate-request-{k}", daemon=True)
               for k in range(min(concurrency, len(requests_)))]
    for th in threads:
        th.start()
    for th in threads:
        while th.is_alive():
            th.join(0.2)
    outs = [o if o is not None else RequestOutput(success=False, error="request not sent") for o in results]
    return outs, time.perf_counter() - t0


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
