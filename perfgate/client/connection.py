"""One keep-alive HTTP/1.1 connection read by an ``asyncio.BufferedProtocol`` into its own buffer: bytes timed on
arrival, status line and headers, chunked / Content-Length / close-delimited bodies, SGLang's SSE events found
in place (docs/measurement.md says why this and not an HTTP library)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from perfgate.client.stream import AHEAD_HEADER, RequestOutput, StreamState, _lead

CONNECT_TIMEOUT_S = 10.0
DRAIN_S = 1.0  # after [DONE], how long to wait for the response's end before dropping the connection
_BUF = 1 << 16
_MAX_HEAD = 1 << 16
_AHEAD_KEY = AHEAD_HEADER.lower().encode()
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
        # create_connection hands a stream protocol a Transport, but the hook is typed with the base class, and
        # uvloop's TCPTransport is no asyncio.Transport subclass (an isinstance narrowing would refuse it)
        self.transport = transport  # type: ignore[assignment]  # a Transport (write, abort), see above

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
        if self._state is not None and _AHEAD_KEY in headers:  # perfgate's sped-up simulator (StreamState.ahead0)
            self._state.ahead0 = _lead(headers[_AHEAD_KEY].decode("latin-1"))
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


