"""The simulated server itself: :class:`SimHTTPServer` and :class:`SimHandler`, which routes each
request to its endpoint mixin (info, profiler, native generation, OpenAI completions)."""

from __future__ import annotations

from http.server import ThreadingHTTPServer

from perfgate.sim.http.base import ClientGone
from perfgate.sim.http.info import InfoEndpoints
from perfgate.sim.http.native import NativeGenerate
from perfgate.sim.http.openai import OpenAICompletions
from perfgate.sim.http.profile import ProfileEndpoints
from perfgate.sim.http.state import ServerState


class SimHTTPServer(ThreadingHTTPServer):
    """Binds at construction (``OSError`` errno 98 when the port is taken)."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, host: str, port: int, state: ServerState) -> None:
        self.state = state
        super().__init__((host, port), SimHandler)


class SimHandler(InfoEndpoints, ProfileEndpoints, NativeGenerate, OpenAICompletions):
    """One connection; routes SGLang's endpoints."""

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
        posts = {"/generate": self._generate, "/v1/completions": self._completions, "/flush_cache": self._flush_cache,
                 "/start_profile": self._start_profile, "/stop_profile": self._stop_profile}
        gets.update({"/start_profile": self._start_profile, "/stop_profile": self._stop_profile})
        try:
            if method in ("GET", "HEAD") and path in gets:
                gets[path]()
            elif method == "POST" and path in posts:
                posts[path]()
            elif path in gets or path in posts:
                self._json(405, {"detail": "Method Not Allowed"})
            else:
                self._json(404, {"detail": "Not Found"})
        except ClientGone:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
