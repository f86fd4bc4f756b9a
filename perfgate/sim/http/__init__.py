"""SGLang 0.5.23's HTTP API over the simulated engine (stdlib ``ThreadingHTTPServer``, HTTP/1.1).

Endpoints: ``/health``, ``/health_generate`` (503 until ready, then a 1-token generation
through the engine), ``/ready``, ``/model_info``, ``/server_info`` (and their deprecated
``/get_*`` names), ``/flush_cache``, ``/generate`` (native; SSE streaming with
``Transfer-Encoding: chunked``), ``/v1/completions``, ``/v1/models``, ``/metrics`` (with
``--enable-metrics``) and ``/start_profile``/``/stop_profile``. Errors are JSON
``{"error": {"message", "type", "code"}}``.

Batched requests (a list of prompts in one call) are simulated only for a batch of one ``input_ids``
list (what SGLang's bench_one_batch_server sends at --batch-size 1): /generate's answer carries
``"index": 0`` (and is a list of one when not streaming); other batches answer 400.

Layered bottom-up; each module imports only the ones above it in this list (no cycle):

- :mod:`perfgate.sim.http.state`      :class:`ServerState`, shared by all handler threads
- :mod:`perfgate.sim.http.base`       :class:`StateServer` and the handler's plumbing: answers, request bodies, errors
- :mod:`perfgate.sim.http.info`       health, readiness, model/server info, models, flush, metrics
- :mod:`perfgate.sim.http.profile`    ``/start_profile`` and ``/stop_profile`` (a trace recorder)
- :mod:`perfgate.sim.http.generation` what both generation endpoints share, SSE writing included
- :mod:`perfgate.sim.http.native`     ``/generate``
- :mod:`perfgate.sim.http.openai`     ``/v1/completions``
- :mod:`perfgate.sim.http.server`     :class:`SimHandler` (routing, composes the endpoints) and :class:`SimHTTPServer`
"""

from perfgate.sim.http.server import SimHandler, SimHTTPServer
from perfgate.sim.http.state import ServerState

__all__ = ["ServerState", "SimHTTPServer", "SimHandler"]
