"""The simulated server composed: :class:`SimHandler` routes each request to its endpoint mixin (info,
profiler, native generation, OpenAI completions) and :class:`SimHTTPServer` serves it. The top of
:mod:`perfgate.sim.http`: it imports the endpoint modules, none of them imports it."""

from __future__ import annotations

from perfgate.sim.http.base import ClientGone, StateServer
from perfgate.sim.http.info import InfoEndpoints
from perfgate.sim.http.native import NativeGenerate
from perfgate.sim.http.openai import OpenAICompletions
from perfgate.sim.http.profile import ProfileEndpoints
from perfgate.sim.http.state import ServerState


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
            "/perfgate/sim_speedup": self._sim_speedup,
        }
        posts = {"/generate": self._generate, "/v1/completions": self._completions, "/flush_cache": self._flush_cache,
                 "/start_profile": self._start_profile, "/stop_profile": self._stop_profile,
                 "/perfgate/sim_speedup": self._sim_speedup}
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


class SimHTTPServer(StateServer):
    """The simulated SGLang server: :class:`SimHandler` over a :class:`StateServer`; binds at construction
    (``OSError`` errno 98 when the port is taken)."""

    def __init__(self, host: str, port: int, state: ServerState) -> None:
        super().__init__(host, port, state, SimHandler)
