"""The floor every endpoint module stands on: :class:`StateServer` (a threading HTTP server that holds the
:class:`ServerState`) and the request handler's plumbing, shared by every endpoint mixin: access log,
JSON/text answers, request bodies (Content-Length or chunked), SGLang's error shape and the engine-not-up
check. It imports no endpoint module and not :mod:`perfgate.sim.http.server`, which composes them."""

from __future__ import annotations

import json
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from perfgate.sim.engine_loop import EngineLoop
from perfgate.sim.http.state import ServerState


class ClientGone(Exception):
    """The client closed the connection (or the server is shutting down) mid-response."""


def error(message: str, code: int, typ: str = "BadRequestError") -> dict[str, Any]:
    return {"error": {"message": message, "type": typ, "code": code}}


class StateServer(ThreadingHTTPServer):
    """A threading HTTP server whose handlers share one :class:`ServerState`; binds at construction
    (``OSError`` errno 98 when the port is taken). :class:`perfgate.sim.http.server.SimHTTPServer`
    names the handler that routes the endpoints."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, host: str, port: int, state: ServerState, handler: type[HandlerBase]) -> None:
        self.state = state
        super().__init__((host, port), handler)


class HandlerBase(BaseHTTPRequestHandler):
    """One connection of the simulated server: what all its endpoints use."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    server: StateServer

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
            self._json(400, error(f"Invalid JSON body: {e}", 400))
            return None
        if not isinstance(body, dict):
            self._json(400, error("The request body must be a JSON object.", 400))
            return None
        return body

    def _engine(self) -> EngineLoop:
        eng = self.state.engine
        assert eng is not None
        return eng

    def _not_up(self) -> bool:
        if self.state.engine is None:
            self._json(503, error("The server is still starting.", 503, "ServiceUnavailableError"))
            return True
        return False
