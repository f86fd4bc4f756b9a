"""The profiler endpoints, ``/start_profile`` and ``/stop_profile``: SGLang's answers, with the
recording delegated to :class:`perfgate.sim.trace.TraceRecorder` (made on the first call)."""

from __future__ import annotations

from perfgate.sim.http.base import HandlerBase
from perfgate.sim.trace import TraceRecorder


class ProfileEndpoints(HandlerBase):
    """``/start_profile`` and ``/stop_profile`` (routed for GET and POST alike)."""

    def _start_profile(self) -> None:
        """SGLang's ``/start_profile``: a ``ProfileReq`` JSON body (all fields optional)."""
        if self._not_up():
            return
        body = self._json_body()
        if body is None:
            return
        err = self._tracer().start(body)
        if err:  # SGLang raises RuntimeError(message) in the tokenizer manager: a 500 with the text
            self._text(500, f"Internal Server Error: {err}\n")
            return
        self._text(200, "Start profiling.\n")

    def _stop_profile(self) -> None:
        if self._not_up():
            return
        err = self._tracer().stop()
        if err:
            self._text(500, f"Internal Server Error: {err}\n")
            return
        self._text(200, "Stop profiling. This will take some time.\n")

    def _tracer(self) -> TraceRecorder:
        st = self.state
        with st.lock:
            if st.tracer is None:
                eng = self._engine()
                st.tracer = TraceRecorder(st.plan, st.log.line, lambda: eng._clock() * 1e6, speed=eng.speed)
                eng.on_step = st.tracer.on_step
            return st.tracer
