"""The closed loop: one config's trials and its concurrency sweep on a running server.

Every trial measures the model, not SGLang's prefix cache: the cache is flushed before it and its prompts are
unseen in it (:func:`perfgate.measuring.workload.requests_for`, from index ``offset`` of the endless prompt
sequence). The warm-up's prompts come after the trials' and before the sweep's, so none is measured warm.

Between the trials go the TTFT probes (perfgate.measuring.probes): ``w.ttft_probes`` prefill-only requests (1 token
out) sent one at a time, in a block before each trial and one after the last, so that the start's TTFT samples the
whole start, not five moments of it; their prompts come after the sweep's, unseen like the others.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from perfgate.measuring.metrics import Measurement, SweepPoint, Trial, compute_trial, summarize, sweep_point
from perfgate.measuring.probes import Probes, block_sizes, itl_sample
from perfgate.measuring.workload import load_prompts, requests_for

if TYPE_CHECKING:
    from perfgate.profiles import Workload

__all__ = ["TrialsRun", "run_trials", "run_sweep"]


@dataclass(frozen=True, kw_only=True)
class TrialsRun:
    """One config's closed-loop trials: the measurement, and whether its failures were the warm-up's (then the
    measurement is the warm-up alone: no trials were sent)."""

    measurement: Measurement
    warmup_failed: bool = False


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
    from perfgate.client import flush_cache, run_batch  # looked up at call time (a test may replace them)

    prompts = load_prompts(w.prompts)
    flush_cache(url)
    per = w.per_trial
    trials: list[Trial] = []
    outputs: dict[int, tuple[int, ...]] = {}
    itls: list[float] = []
    warmup_failed = False
    if w.warmup:
        outs, wall = run_batch(url, requests_for(w, prompts, w.warmup, offset=offset + w.trials * per),
                               concurrency=min(w.concurrency, w.warmup), timeout_s=w.request_timeout_s)
        if any(not o.success for o in outs):
            trials.append(compute_trial(outs, wall))
            warmup_failed = True
    sizes = block_sizes(w.ttft_probes, w.trials)
    probe = _Prober(url, w, prompts, at=offset + w.trials * per + w.warmup + 2 * sum(w.concurrency_sweep))
    failed = warmup_failed
    for t in range(0 if warmup_failed else w.trials):
        probe(sizes[t])
        flush_cache(url)
        reqs = requests_for(w, prompts, per, offset=offset + t * per)
        outs, wall = run_batch(url, reqs, concurrency=w.concurrency, timeout_s=w.request_timeout_s)
        trials.append(compute_trial(outs, wall))
        for i, o in enumerate(outs):
            idx = (offset + t * per + i) % len(prompts)
            if o.success and idx not in outputs:
                outputs[idx] = o.output_ids
            if o.success:
                itls.extend(x * 1000 for x in o.itl_s)
        if any(not o.success for o in outs):
            failed = True
            break
    if not failed:
        probe(sizes[-1])
    m = summarize(config_key=config_key, config_name=config_name, trials=trials, confidence=w.confidence,
                  outputs=tuple(outputs.get(i, ()) for i in range(len(prompts))), startup_s=startup_s,
                  log_path=log_path, concurrency=w.concurrency)
    m = replace(m, probes=probe.probes() if w.ttft_probes > 0 and not warmup_failed else None,
                itl_sample=itl_sample(itls))
    return TrialsRun(measurement=m, warmup_failed=warmup_failed)


class _Prober:
    """Sends the TTFT probes of one start, block by block, from index ``at`` of the endless prompt sequence."""

    def __init__(self, url: str, w: Workload, prompts: list[tuple[int, ...]], *, at: int) -> None:
        self.url, self.w, self.prompts, self.at = url, w, prompts, at
        self.ttft_ms: list[float] = []
        self.failures = 0
        self.blocks = 0

    def __call__(self, k: int) -> None:
        from perfgate.client import run_batch

        if k <= 0 or self.failures:
            return
        reqs = [replace(r, max_new_tokens=1) for r in requests_for(self.w, self.prompts, k, offset=self.at)]
        self.at += k
        outs, _ = run_batch(self.url, reqs, concurrency=1, timeout_s=self.w.request_timeout_s)
        self.blocks += 1
        for o in outs:
            if o.success and o.ttft_s is not None:
                self.ttft_ms.append(o.ttft_s * 1000)
            else:
                self.failures += 1

    def probes(self) -> Probes:
        return Probes(ttft_ms=tuple(self.ttft_ms), blocks=self.blocks, failures=self.failures)


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
