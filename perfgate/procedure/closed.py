"""The closed loop: one config's trials and its concurrency sweep on a running server.

Every trial measures the model, not SGLang's prefix cache: the cache is flushed before it and its prompts are
unseen in it (:func:`perfgate.measuring.workload.requests_for`, from index ``offset`` of the endless prompt
sequence). The warm-up's prompts come after the trials' and before the sweep's, so none is measured warm.

Between the trials go the TTFT probes (perfgate.measuring.probes): ``w.ttft_probes`` prefill-only requests (1 token
out) sent one at a time, in a block before each trial and one after the last, so that the start's TTFT samples the
whole start, not five moments of it; their prompts come after the sweep's, unseen like the others.

After the last block, ``w.prefill_traces`` more prefill-only requests run under SGLang's profiler
(perfgate.procedure.prefill): the GPU time of each, which splits the probes' prefill leg into its GPU and host parts.

Co-resident arms (two servers up at once on one machine) run side by side (:func:`run_side_by_side`): the same
steps, the arms taking turns probe by probe and trial by trial, so both meet the host's state at the same moments.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.measuring.metrics import Measurement, SweepPoint, Trial, compute_trial, summarize, sweep_point
from perfgate.measuring.probes import Probes, block_sizes, itl_sample
from perfgate.measuring.ttft_parts import parts_ms
from perfgate.measuring.workload import load_prompts, requests_for
from perfgate.procedure.prefill import PrefillTrace, trace_prefills

if TYPE_CHECKING:
    from perfgate.profiles import Workload

__all__ = ["Arm", "TrialsRun", "run_trials", "run_side_by_side", "run_sweep"]


@dataclass(frozen=True, kw_only=True)
class TrialsRun:
    """One config's closed-loop trials: the measurement, and whether its failures were the warm-up's (then the
    measurement is the warm-up alone: no trials were sent)."""

    measurement: Measurement
    warmup_failed: bool = False


@dataclass(frozen=True, kw_only=True)
class Arm:
    """One running server a procedure measures: its URL, and what the Measurement carries of it (the config's key
    and name, its start-up time and log)."""

    url: str
    config_key: str
    config_name: str
    startup_s: float | None = None
    log_path: str = ""


def run_trials(url: str, w: Workload, *, config_key: str, config_name: str, startup_s: float | None = None,
               log_path: str = "", offset: int = 0) -> TrialsRun:
    """The closed-loop trials of one config on the server at ``url``, on workload ``w`` as resolved (its trials,
    concurrency, requests per trial, warm-up, tokens, timeout): the prefix cache flushed, ``w.warmup`` requests
    (prompts after the trials'), then ``w.trials`` trials of ``w.per_trial`` requests at ``w.concurrency``, each
    after a flush; the first trial with a failed request is the last (the record fails anyway: no more timeouts
    to wait out), and a failing warm-up is the measurement (no trials to wait for). ``config_key``,
    ``config_name``, ``startup_s`` and ``log_path`` are the server's, carried on the Measurement; ``offset``: where
    the config's prompts start in the endless prompt sequence. Never raises for a failed request: the
    Measurement counts them (``failures``, ``errors``), and the caller says what they mean.

    With ``w.ttft_probes`` > 0 the TTFT probes go in blocks before each trial and after the last
    (:func:`perfgate.measuring.probes.block_sizes`), one request at a time; a failed probe ends the probing (the
    trials say why), and none is sent after a failed warm-up or trial. The Measurement carries them
    (``probes``) and the trials' inter-token latencies (``itl_sample``)."""
    arm = Arm(url=url, config_key=config_key, config_name=config_name, startup_s=startup_s, log_path=log_path)
    return run_side_by_side([arm], w, offset=offset)[0]


def run_side_by_side(arms: Sequence[Arm], w: Workload, *, offset: int = 0) -> list[TrialsRun]:
    """The closed-loop trials of co-resident servers (both arms of a comparison running at once on one machine:
    ``--perfgate-co-resident``), interleaved so that every arm meets the host's state at the same moments: each
    arm's warm-up, then before each trial (and after the last) a probe block sent one request at a time, the arms
    taking turns request by request (the first arm alternating), then the trial on each arm (the order alternating
    trial by trial). Each arm's measurement is what :func:`run_trials` measures of it (the same prompts, trials,
    probes and failure rules); an arm whose warm-up or trial failed stops, the others go on. One arm is
    :func:`run_trials`."""
    runs = [_Trials(a, w, offset=offset) for a in arms]
    sizes = block_sizes(w.ttft_probes, w.trials)

    def probes(k: int) -> None:
        if len(runs) == 1:  # one server: its block in one batch, one request at a time
            runs[0].probe(k)
            return
        for i in range(k):
            for r in (runs if i % 2 == 0 else runs[::-1]):
                r.probe(1, new_block=i == 0)

    for t in range(w.trials):
        if all(r.failed for r in runs):
            break
        probes(sizes[t])
        for r in (runs if t % 2 == 0 else runs[::-1]):
            if not r.failed:
                r.trial(t)
    probes(sizes[-1])
    for r in runs:  # after the last block, where it disturbs nothing measured (perfgate.procedure.prefill)
        r.trace_prefills()
    return [r.finish() for r in runs]


class _Trials:
    """One start's closed-loop trials, step by step: the flush and warm-up when made, then :meth:`probe` blocks and
    :meth:`trial` s in the caller's order, then :meth:`finish`."""

    def __init__(self, arm: Arm, w: Workload, *, offset: int) -> None:
        from perfgate.client import flush_cache, run_batch  # looked up at call time (a test may replace them)

        self.arm, self.w, self.offset = arm, w, offset
        self.prompts = load_prompts(w.prompts)
        self.trials: list[Trial] = []
        self.outputs: dict[int, tuple[int, ...]] = {}
        self.itls: list[float] = []
        self.warmup_failed = self.failed = False
        flush_cache(arm.url)
        if w.warmup:
            warm = requests_for(w, self.prompts, w.warmup, offset=offset + w.trials * w.per_trial)
            outs, wall = run_batch(arm.url, warm, concurrency=min(w.concurrency, w.warmup),
                                   timeout_s=w.request_timeout_s)
            if any(not o.success for o in outs):
                self.trials.append(compute_trial(outs, wall))
                self.warmup_failed = self.failed = True
        self._prober = _Prober(arm.url, w, self.prompts,
                               at=offset + w.trials * w.per_trial + w.warmup + 2 * sum(w.concurrency_sweep))

    def probe(self, k: int, *, new_block: bool = True) -> None:
        if not self.failed:
            self._prober(k, new_block=new_block)

    def trace_prefills(self) -> None:
        """``w.prefill_traces`` prefill-only requests traced with SGLang's profiler (perfgate.procedure.prefill), on a
        server perfgate launched (its traces land beside its log) whose probes ran; else nothing."""
        n, log = self.w.prefill_traces, self.arm.log_path
        if n > 0 and log and self.w.ttft_probes > 0 and not self.failed and not self._prober.failures:
            self._prober.trace(n, Path(log).with_name(Path(log).stem + "-prefill-trace"))

    def trial(self, t: int) -> None:
        from perfgate.client import flush_cache, run_batch

        w, url, per = self.w, self.arm.url, self.w.per_trial
        flush_cache(url)
        reqs = requests_for(w, self.prompts, per, offset=self.offset + t * per)
        outs, wall = run_batch(url, reqs, concurrency=w.concurrency, timeout_s=w.request_timeout_s)
        self.trials.append(compute_trial(outs, wall))
        for i, o in enumerate(outs):
            idx = (self.offset + t * per + i) % len(self.prompts)
            if o.success and idx not in self.outputs:
                self.outputs[idx] = o.output_ids
            if o.success:
                self.itls.extend(x * 1000 for x in o.itl_s)
        if any(not o.success for o in outs):
            self.failed = True

    def finish(self) -> TrialsRun:
        a, w = self.arm, self.w
        m = summarize(config_key=a.config_key, config_name=a.config_name, trials=self.trials,
                      confidence=w.confidence, outputs=tuple(self.outputs.get(i, ()) for i in range(len(self.prompts))),
                      startup_s=a.startup_s, log_path=a.log_path, concurrency=w.concurrency)
        m = replace(m, probes=self._prober.probes() if w.ttft_probes > 0 and not self.warmup_failed else None,
                    itl_sample=itl_sample(self.itls))
        return TrialsRun(measurement=m, warmup_failed=self.warmup_failed)


class _Prober:
    """Sends the TTFT probes of one start, block by block, from index ``at`` of the endless prompt sequence."""

    def __init__(self, url: str, w: Workload, prompts: list[tuple[int, ...]], *, at: int) -> None:
        self.url, self.w, self.prompts, self.at = url, w, prompts, at
        self.ttft_ms: list[float] = []
        self.parts: list[dict[str, float]] = []
        self.failures = 0
        self.blocks = 0
        self.traced = PrefillTrace()

    def __call__(self, k: int, *, new_block: bool = True) -> None:
        from perfgate.client import run_batch

        if k <= 0 or self.failures:
            return
        reqs = [replace(r, max_new_tokens=1) for r in requests_for(self.w, self.prompts, k, offset=self.at)]
        self.at += k
        outs, _ = run_batch(self.url, reqs, concurrency=1, timeout_s=self.w.request_timeout_s)
        self.blocks += new_block
        for o in outs:
            if o.success and o.ttft_s is not None:
                self.ttft_ms.append(o.ttft_s * 1000)
                if (legs := parts_ms(o.ttft_s, o.meta_info)) is not None:
                    self.parts.append(legs)
            else:
                self.failures += 1

    def trace(self, n: int, out_dir: Path) -> None:
        """Trace ``n`` more prefill-only requests' GPU time (unseen prompts after the probes')."""
        reqs = requests_for(self.w, self.prompts, n, offset=self.at)
        self.at += n
        self.traced = trace_prefills(self.url, reqs, out_dir, profile_id=f"perfgate-prefill-{time.time_ns()}",
                                     timeout_s=min(self.w.request_timeout_s, 120.0))

    def probes(self) -> Probes:
        return Probes(ttft_ms=tuple(self.ttft_ms), blocks=self.blocks, failures=self.failures, parts=tuple(self.parts),
                      prefill_gpu_ms=self.traced.gpu_ms, prefill_trace_note=self.traced.note)


def run_sweep(url: str, w: Workload, *, offset: int = 0) -> tuple[SweepPoint, ...]:
    """The concurrency sweep on the server at ``url`` (still running after :func:`run_trials` of ``w``): one level
    per ``w.concurrency_sweep`` entry ``c``, 2 x c requests at concurrency ``c``, the prefix cache flushed before
    each, on prompts past the trials' and the warm-up's."""
    from perfgate.client import flush_cache, run_batch

    prompts = load_prompts(w.prompts)
    points = []
    at = offset + w.trials * w.per_trial + w.warmup  # past the floor's prompts
    for c in w.concurrency_sweep:
        flush_cache(url)
        outs, wall = run_batch(url, requests_for(w, prompts, 2 * c, offset=at), concurrency=c,
                               timeout_s=w.request_timeout_s)
        at += 2 * c
        points.append(sweep_point(c, outs, wall))
    return tuple(points)
