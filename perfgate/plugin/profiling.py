"""The ``profile`` record: where each decode step's GPU time goes, and which all-reduce backend really ran.

``step_profile(server)`` (a fixture) captures SGLang's own trace of a few decode steps on the config's
running server (:mod:`perfgate.serving.capture`), reads it (:mod:`perfgate.measuring.trace`), records the figures as the
test's JUnit properties and concludes the record:

- pass: the trace was read; the message says all-reduces per step, their time and share, the backend;
- ``fallback`` (a failure, unless the profile expects it): a variant meant to exercise an all-reduce
  backend (its ``backend`` key) whose trace shows another family carrying the all-reduces. The trace is
  the proof, whatever the log says;
- ``not-exercised`` (inconclusive): such a variant at tensor parallel 1, or with no all-reduce in its step.

A profiled request runs slower than an unprofiled one: nothing here is a throughput measurement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfgate.categories import FROM_LOG, TRACE_FAMILIES, Category, Outcome
from perfgate.measuring.checks import profile_verdict as profile_verdict  # tests/test_trace.py
from perfgate.measuring.trace import StepProfile, TraceError, analyze
from perfgate.measuring.verdict import Verdict

if TYPE_CHECKING:
    from perfgate.plugin.api import PerfServer
    from perfgate.plugin.runner import PerfRun
    from perfgate.profiles.config import ServerConfig

__all__ = ["ALLREDUCE_FAMILIES", "StepProfiler", "profile_verdict"]

#: the variants' ``backend`` values that name an all-reduce family a trace can show
ALLREDUCE_FAMILIES = TRACE_FAMILIES
#: what a profile record can decide: a start-up failure, a fallback, nothing exercised (a variant's
#: expectation of, say, slower-than-baseline is about its speed and does not apply here)
DECIDES = frozenset({*FROM_LOG, Category.FALLBACK, Category.NOT_EXERCISED})


def _int_flag(config: ServerConfig, name: str, default: int) -> int:
    """A whole-number flag of the config (``tp-size``), or ``default`` where it is absent, 0 or not a number."""
    v = config.flag_dict.get(name)
    return int(v) if isinstance(v, (int, float, str)) and v and str(v).lstrip("-").isdigit() else default


class StepProfiler:
    """``step_profile(server, *, num_steps=16) -> perfgate.measuring.trace.StepProfile``.

    Captures ``num_steps`` decode steps (speculative cycles) of one request on ``server`` with SGLang's
    profiler, records the figures (docs/records.md, kind ``profile``) and the trace files' paths, and
    concludes the record (pass, ``fallback``, ``not-exercised``, or a failure naming why no trace came):
    call it last. Returns the profile when the record passes.
    """

    def __init__(self, perf: PerfRun) -> None:
        self._perf = perf

    def __call__(self, server: PerfServer, *, num_steps: int = 16) -> StepProfile:
        from perfgate.client import GenRequest, flush_cache
        from perfgate.measuring.workload import load_prompts, unseen_prompt
        from perfgate.serving.capture import CaptureError, capture
        from perfgate.serving.launch_log import fallback_verdict

        if not isinstance(num_steps, int) or isinstance(num_steps, bool) or num_steps < 2:
            raise ValueError(f"step_profile(): num_steps must be a whole number >= 2 (a cycle spans two steps), "
                             f"got {num_steps!r}")
        perf = self._perf
        st = perf.state
        case = server.case
        config = server.config
        tp = _int_flag(config, "tp-size", 1)
        out_dir = st.log_dir / "traces" / config.slug
        w = st.profile.workload_for(case.mode)
        prompt = unseen_prompt(load_prompts(w.prompts), 7919)  # one no measured request starts like
        # the profile stops by itself after num_steps decode batches: the request must outlast them, even if
        # every speculative cycle accepts its whole draft
        per_cycle = _int_flag(config, "speculative-num-draft-tokens", 8) if config.speculative else 1
        request = GenRequest(input_ids=prompt, max_new_tokens=(num_steps + 8) * per_cycle)
        flush_cache(server.url)
        perf.record("profiled_request_tokens", request.max_new_tokens)
        try:
            cap = capture(server.url, out_dir, request, profile_id=f"perfgate-{case.kind}", num_steps=num_steps,
                          tp=tp, timeout_s=float(w.request_timeout_s))
            prof = analyze(cap.decode)
        except (CaptureError, TraceError) as e:
            hint = (" (an attached server on another host writes its traces on that host: profile there)"
                    if not server.log_path else "")
            perf.conclude(case, Verdict(outcome=Outcome.FAIL, category=Category.CRASH,
                                        message=f"no step profile: {e}{hint}"), decides=DECIDES)
            raise AssertionError("unreachable: conclude() ends the test") from e
        st.ledger.note_step_profile(config.key, prof)
        perf.record("trace", str(cap.decode[0]))
        for k, v in prof.properties().items():
            perf.record(k, v)
        m = st.ledger.measurement(config.key)  # the config's own measurement, when this session made one
        if m is not None and m.tok_s is not None and m.tok_s.median:
            # the cost-model arithmetic on measured numbers: the same cycle with less all-reduce time
            for name, f in (("ar_halved", 0.5), ("no_ar", 0.0)):
                s = prof.projected_speedup(f)
                if s is not None:
                    perf.record(f"projected_tok_s_{name}", m.tok_s.median * s)
        for note in prof.notes:
            perf.record("trace_note", note)
        backend = (st.variants.get(case.variant).backend or "") if case.variant else ""
        fallback = fallback_verdict(st, config, server.log_path)
        v = fallback or profile_verdict(prof, tp=tp, backend=backend, variant=case.variant)
        perf.conclude(case, v, decides=DECIDES)
        return prof
