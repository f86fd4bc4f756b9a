"""The client: streaming requests to SGLang's native ``/generate``, timed as their bytes arrive; it never raises.

SGLang streams Server-Sent Events (``data: <json>`` + blank line, ending with ``data: [DONE]``). Chunks are
cumulative: each carries every output id so far and ``meta_info.completion_tokens``; with speculation one chunk
carries several tokens. So tokens are counted from ``completion_tokens``, never from chunks.

- :mod:`perfgate.client.stream`: the request and output types, one stream's state (SSE events, tokens, ids);
- :mod:`perfgate.client.batch`: :func:`run_batch`, many requests on one event loop;
- :mod:`perfgate.client.schedule`: :func:`run_open_loop`, requests sent on a schedule (constant or Poisson);
- :mod:`perfgate.client.connection`: the HTTP/1.1 connection it reads them on;
- :mod:`perfgate.client.blocking`: one request at a time, JSON GETs and ``/flush_cache`` (``requests``).
"""

from perfgate.client.batch import run_batch
from perfgate.client.blocking import flush_cache, get_json, stream_generate
from perfgate.client.schedule import ARRIVALS, Schedule, arrival_offsets, run_open_loop
from perfgate.client.stream import (
    AHEAD_HEADER,
    AHEAD_KEY,
    SPEEDUP_HEADER,
    GenRequest,
    RequestOutput,
    SSEParser,
    StreamState,
)

__all__ = ["GenRequest", "RequestOutput", "SSEParser", "StreamState", "SPEEDUP_HEADER", "AHEAD_HEADER", "AHEAD_KEY",
           "run_batch", "run_open_loop", "Schedule", "arrival_offsets", "ARRIVALS", "stream_generate", "get_json",
           "flush_cache"]
