"""The simulated scheduler: one thread running continuous-batching steps on a deadline schedule.

Each iteration is either a prefill of newly admitted requests (first token) or one decode
iteration advancing every running request: one token without speculation, or the accepted
tokens of one speculative cycle (draft + verify). Durations come from the
:class:`~perfgate.sim.behavior.LaunchPlan`, divided by the start's speed (the simulated machine,
its start jitter and ``PERFGATE_SIM_SCALE``: :mod:`perfgate.sim.variation`); the thread sleeps until
each step's deadline on a monotonic schedule (``deadline += duration``), so sleep overshoot does not accumulate.

Admission follows the schedule, not the thread: a step takes the requests that *arrived* (stamped
under the engine's lock) by its scheduled start; a start from idle is scheduled at the first arrival.
What shares a prefill is a function of the arrival times alone, never of when the engine thread got
the GIL back (four requests sent at once used to be prefilled as 1+3, 2+2, 3+1 or 4 by chance).

``--sim-speedup s`` sleeps 1/s of every step; the simulated clock's lead on the wall clock
(:meth:`EngineLoop.ahead`) grows by the rest at each step's deadline, so wall time outside the steps
(a client's reaction, the HTTP layer) counts once. The HTTP layer reports the lead and perfgate's
client adds what it gained to the durations it measures.

Output tokens are a deterministic function of (prompt ids, position) — identical in every
mode and backend, since speculation is lossless — unless the ``wrong-output`` fault is on
(speculative configs then diverge after token 10). The simulated model never emits EOS:
every request runs to ``max_new_tokens`` (finish reason ``length``). A speculative request draws its accepted
tokens from a stream seeded by the start's seed, its prompt and that prompt's submissions since the last
``flush_cache``: what a start served before a flushed measurement does not change its draws.
"""

from __future__ import annotations

import hashlib
import math
import queue
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from perfgate.sim.behavior import LaunchPlan
from perfgate.sim.prefix_cache import PrefixCache

MAX_CATCH_UP_S = 0.05  # at most this much schedule debt is caught up after a stall
WRONG_OUTPUT_AFTER = 10


def prompt_digest(input_ids: list[int]) -> bytes:
    return hashlib.blake2b(",".join(map(str, input_ids)).encode(), digest_size=16).digest()


def output_token(digest: bytes, position: int, vocab: int) -> int:
    """The simulated model's token at ``position`` (0-based) of the output for a prompt."""
    h = hashlib.blake2b(digest + position.to_bytes(8, "little"), digest_size=8).digest()
    return int.from_bytes(h, "little") % vocab


def expected_output(input_ids: list[int], n: int, vocab: int) -> list[int]:
    """The first ``n`` output ids of a prompt (for tests and the lead's correctness checks)."""
    d = prompt_digest(input_ids)
    return [output_token(d, i, vocab) for i in range(n)]


@dataclass(eq=False)
class SimRequest:
    """One generation request moving through the engine."""

    input_ids: list[int]
    max_new_tokens: int
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    internal: bool = False  # health checks and warm-up: exempt from faults
    digest: bytes = b""
    output_ids: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    verify_ct: int = 0
    correct_drafts: int = 0
    proposed_drafts: int = 0
    finished: bool = False
    aborted: bool = False
    hung: bool = False
    created: float = field(default_factory=time.monotonic)
    forward_entry_at: float = 0.0  # the start of its prefill step (SGLang's forward_entry_time), set by that step
    first_token_at: float | None = None
    finished_at: float | None = None
    # the engine's clock lead (EngineLoop.ahead) at arrival and at each emission (by tokens produced so far)
    created_ahead: float = 0.0
    forward_entry_ahead: float = 0.0
    first_token_ahead: float = 0.0
    finished_ahead: float = 0.0
    aheads: dict[int, float] = field(default_factory=dict)
    rng: random.Random | None = None
    events: queue.Queue[int] = field(default_factory=queue.Queue)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> tuple[list[int], bool]:
        with self.lock:
            return list(self.output_ids), self.finished

    def ahead_at(self, produced: int) -> float:
        """The engine's clock lead when the ``produced``-th token was emitted (at arrival before any)."""
        with self.lock:
            return self.aheads.get(produced, self.created_ahead)


class EngineLoop:
    """The scheduler thread; submit requests, read their ``events`` queue for progress."""

    def __init__(self, plan: LaunchPlan, log: Callable[[str], None], *, seed: int | None = None,
                 speedup: float = 1.0, speed: float = 1.0, fault: str | None = None, fault_after: int = 3,
                 noise: Callable[[], float] | None = None,
                 prefill_factor: Callable[[], float] | None = None, prefill_delay_s: float = 0.0,
                 prefill_gpu_s: float = 0.0, prefill_host_s: float = 0.0,
                 on_crash: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.plan = plan
        self._clock = clock
        self._sleep = sleep
        self._log = log
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 30)
        self.speedup = max(1e-6, speedup)
        # the simulated machine's speed on this start (perfgate.sim.variation.SimSpeed.speed): every modelled
        # step takes 1/speed as long; unlike the speedup, the client does not scale it back
        self.speed = max(1e-6, speed)
        # step-to-step noise inside the start (perfgate.sim.variation.step_noise): a factor on every step
        self._noise = noise or (lambda: 1.0)
        # host-side TTFT levels switching inside the start and a delay before every prefill (PERFGATE_SIM_TTFT_MODES,
        # PERFGATE_SIM_PREFILL_DELAY_MS: perfgate.sim.variation): the delay is the host's, the machine's speed does
        # not scale it, and it comes before the prefill step starts (the requests' to_forward leg, where the H200
        # runs' injected scheduler sleep lands), the levels inside it (their prefill leg)
        self._prefill_factor = prefill_factor or (lambda: 1.0)
        self.prefill_delay_s = max(0.0, prefill_delay_s)
        # inside the prefill step (its prefill leg): a GPU-side delay (a kernel in its trace,
        # PERFGATE_SIM_PREFILL_GPU_MS)
        # and a host-side one (a gap, PERFGATE_SIM_PREFILL_HOST_MS), neither scaled by the machine's speed
        self.prefill_gpu_s = max(0.0, prefill_gpu_s)
        self.prefill_host_s = max(0.0, prefill_host_s)
        self.fault = fault
        self.fault_after = max(0, fault_after)
        self.on_crash = on_crash
        self.vocab = plan.hardware.model.vocab
        self.max_running = plan.max_running_requests
        self.radix = not bool(plan.args.get("disable_radix_cache"))
        self.log_interval = max(1, int(plan.args.get("decode_log_interval") or 40))
        self.kv_capacity = max(1, plan.memory.kv_tokens if plan.memory else 1)
        self._cond = threading.Condition()
        self._waiting: deque[SimRequest] = deque()
        self._running: list[SimRequest] = []
        self._cache = PrefixCache()
        self._prompt_seen: dict[bytes, int] = {}  # submissions of each prompt since the last flush_cache
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="sim-engine", daemon=True)
        self._deadline = clock()
        # the simulated clock's lead on the wall clock (--sim-speedup): (lead before the current step, the step's
        # deadline, what the step adds at its deadline); replaced whole, so other threads read it without a lock
        self._lead: tuple[float, float, float] = (0.0, math.inf, 0.0)
        # statistics (server_info / metrics)
        self.decode_steps = 0
        self.last_gen_throughput = 0.0
        self.avg_spec_accept_length: float | None = None
        self._acc_tokens = self._acc_verify = 0  # committed at each decode log line
        self._pending_tokens = self._pending_verify = 0
        self._window_tokens = 0
        self._window_start = clock()
        self._window_ahead = 0.0
        self.prompt_tokens_total = self.generation_tokens_total = self.requests_total = 0
        # /start_profile: told of every step this loop runs (perfgate.sim.trace.TraceRecorder)
        self.on_step: Callable[..., None] | None = None

    # ------------------------------------------------------------------ public
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    def set_speedup(self, speedup: float) -> bool:
        """Run the following steps at ``speedup`` (``POST /perfgate/sim_speedup``); only while no request is
        queued or running (False otherwise). The lead gained so far stays: the simulated clock never goes back."""
        with self._cond:
            if self._waiting or self._running:
                return False
            self.speedup = max(1e-6, float(speedup))
            return True

    def ahead(self, t: float | None = None) -> float:
        """Seconds the simulated clock is ahead of the wall clock at ``t`` (default: now); 0 at speed-up 1.

        Each step's sleep is 1/s of its simulated duration; at the step's deadline the lead grows by the
        rest. Wall time plus the lead gained is simulated time, so a duration measured on the wall clock
        becomes simulated by adding the lead gained over it.
        """
        before, deadline, gain = self._lead
        if t is None:
            t = self._clock()
        return before + gain if t >= deadline else before

    def submit(self, req: SimRequest) -> SimRequest:
        req.digest = prompt_digest(req.input_ids)
        with self._cond:
            # stamped under the lock: once the engine holds it, every request that arrived before is queued
            req.created = self._clock()
            req.created_ahead = self.ahead(req.created)
            n = self._prompt_seen.get(req.digest, 0)
            self._prompt_seen[req.digest] = n + 1
            req.rng = random.Random(f"{self.seed}:{req.digest.hex()}:{n}")
            self._waiting.append(req)
            self._cond.notify_all()
        return req

    def abort(self, req: SimRequest) -> None:
        with self._cond:
            req.aborted = True
            if req in self._waiting:
                self._waiting.remove(req)

    def flush_cache(self) -> bool:
        with self._cond:
            if self._waiting or self._running:
                return False
            self._cache.clear()
            # the acceptance draws start over (module docstring): counted over the whole start, a record after the
            # crossover's levels (the same prompts) read its EAGLE-3 4-stream TTFT 177 ms, not 149 (docs/load.md)
            self._prompt_seen.clear()
            # as SGLang's flush_cache -> metrics_reporter.reset_metrics(): the decode-step count (so the next
            # log line, where acceptance is committed, is 40 steps on) and the acceptance counters start over
            self.decode_steps = 0
            self._acc_tokens = self._acc_verify = 0
            self._pending_tokens = self._pending_verify = 0
            self.avg_spec_accept_length = None
            return True

    def counts(self) -> tuple[int, int]:
        with self._cond:
            return len(self._running), len(self._waiting)

    # ------------------------------------------------------------------ loop
    def _sleep_until(self, deadline: float) -> None:
        while True:
            left = deadline - self._clock()
            if left <= 0:
                return
            self._sleep(min(left, 0.05))
            if self._stop:
                return

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and not self._waiting and not self._running:
                    self._cond.wait(0.5)
                if self._stop:
                    return
                self._running = [r for r in self._running if not r.aborted]
                self._deadline = max(self._deadline, self._clock() - MAX_CATCH_UP_S)
                if not self._running and self._waiting:  # idle until the first arrival: the schedule starts there
                    self._deadline = max(self._deadline, self._waiting[0].created)
                # the step starting at the deadline takes what had arrived by then, whenever this thread woke
                new: list[SimRequest] = []
                while (self._waiting and self._waiting[0].created <= self._deadline
                       and len(self._running) + len(new) < self.max_running):
                    new.append(self._waiting.popleft())
                batch = list(self._running)
                queued = len(self._waiting)
            if new:
                self._prefill(new, len(batch), queued)
            elif batch:
                self._decode(batch, queued)

    def _step(self, dur: float) -> None:
        """One step of ``dur`` wall seconds (times the step noise) on the deadline schedule; the simulated clock
        gains the rest."""
        dur *= self._noise()
        self._deadline += dur
        before = self._lead[0]
        gain = dur * (self.speedup - 1.0)
        self._lead = (before, self._deadline, gain)
        self._sleep_until(self._deadline)
        self._lead = (before + gain, math.inf, 0.0)

    def _prefill(self, new: list[SimRequest], running: int, queued: int) -> None:
        compute = 0
        cached_total = 0
        with self._cond:
            in_use = sum(len(r.input_ids) + len(r.output_ids) for r in self._running)
            for r in new:
                r.cached_tokens = self._cache.match_and_insert(r.input_ids) if self.radix else 0
                compute += len(r.input_ids) - r.cached_tokens
                cached_total += r.cached_tokens
        level = self._prefill_factor()
        if self.prefill_delay_s:  # the host's wait before the batch runs: SGLang's to_forward leg, not its prefill
            self._step(self.prefill_delay_s / self.speedup)
        step_s = self.plan.prefill_ms(compute) * level / 1000.0 / self.speed + self.prefill_gpu_s + self.prefill_host_s
        dur = step_s / self.speedup
        entry, entry_ahead = self._clock(), self._lead[0]
        for r in new:
            r.forward_entry_at, r.forward_entry_ahead = entry, entry_ahead
        self._step(dur)
        self._log(f"Prefill batch, #new-seq: {len(new)}, #new-token: {compute}, #cached-token: {cached_total}, "
                  f"token usage: {self._usage(in_use):.2f}, #running-req: {running}, #queue-req: {queued}, "
                  f"#pending-token: 0, cuda graph: False, input throughput (token/s): "
                  f"{compute / max(dur * self.speedup, 1e-9):.2f}")
        if self.on_step is not None:
            self.on_step("prefill", len(new), compute, step_us=step_s * 1e6, spin_us=self.prefill_gpu_s * 1e6)
        now = self._clock()
        keep: list[SimRequest] = []
        for r in new:
            if r.aborted:
                continue
            self.requests_total += 1
            self.prompt_tokens_total += len(r.input_ids)
            r.first_token_at = now
            r.first_token_ahead = self._lead[0]
            self._emit(r, 1)
            if not r.finished and not r.hung:
                keep.append(r)
        with self._cond:
            self._running.extend(keep)

    def _decode(self, batch: list[SimRequest], queued: int) -> None:
        plan = self.plan
        dur = plan.step_s(len(batch)) / self.speed / self.speedup
        self._step(dur)
        spec = plan.spec
        emitted = 0
        for r in batch:
            if r.aborted or r.finished or r.hung:
                continue
            if spec is None:
                n = 1
            else:
                n = min(self._draw_accept(r), max(1, r.max_new_tokens - len(r.output_ids)))
                r.verify_ct += 1
                r.correct_drafts += n - 1
                r.proposed_drafts += spec.num_draft_tokens - 1
                self._pending_verify += 1
                self._pending_tokens += n
            emitted += self._emit(r, n)
        self.generation_tokens_total += emitted
        self._window_tokens += emitted
        self.decode_steps += 1
        if self.on_step is not None:
            self.on_step("decode", len(batch), 0)
        with self._cond:
            self._running = [r for r in self._running if not (r.finished or r.aborted or r.hung)]
            running = len(self._running)
            tokens = sum(len(r.input_ids) + len(r.output_ids) for r in self._running)
        if self.decode_steps % self.log_interval == 0:
            self._decode_log(running, queued, tokens)

    def _draw_accept(self, r: SimRequest) -> int:
        spec = self.plan.spec
        assert spec is not None and r.rng is not None
        n = spec.max_accept - 1
        if n <= 0:
            return 1
        p = min(1.0, max(0.0, (spec.accept_length - 1.0) / n))
        return 1 + sum(1 for _ in range(n) if r.rng.random() < p)

    def _emit(self, r: SimRequest, n: int) -> int:
        """Append up to ``n`` tokens to ``r``, apply faults, notify its reader; returns tokens added."""
        with r.lock:
            start = len(r.output_ids)
            n = min(n, r.max_new_tokens - start)
            wrong = self.fault == "wrong-output" and self.plan.spec is not None and not r.internal
            for pos in range(start, start + n):
                tok = output_token(r.digest, pos, self.vocab)
                if wrong and pos >= WRONG_OUTPUT_AFTER:
                    tok = (tok + 1) % self.vocab
                r.output_ids.append(tok)
            produced = len(r.output_ids)
            r.aheads[produced] = lead = self._lead[0]
            if produced >= r.max_new_tokens:
                r.finished = True
                r.finished_at = self._clock()
                r.finished_ahead = lead
        if not r.internal and self.fault in ("crash-mid-stream", "hang-mid-stream") and produced >= self.fault_after:
            if self.fault == "crash-mid-stream" and self.on_crash is not None:
                self.on_crash()
            elif self.fault == "hang-mid-stream" and not r.finished:
                r.hung = True
                r.events.put(produced)
                return n
        r.events.put(produced)
        return n

    def _usage(self, tokens: int) -> float:
        return min(1.0, tokens / self.kv_capacity)

    def _decode_log(self, running: int, queued: int, tokens: int) -> None:
        now = self._clock()
        lead = self.ahead(now)
        span = max(1e-9, now - self._window_start + lead - self._window_ahead)  # simulated time, as at speed-up 1
        self.last_gen_throughput = self._window_tokens / span
        self._window_tokens, self._window_start, self._window_ahead = 0, now, lead
        spec_part = ""
        if self.plan.spec is not None and self._pending_verify:
            self._acc_tokens += self._pending_tokens
            self._acc_verify += self._pending_verify
            acc = self._pending_tokens / self._pending_verify
            rate = (acc - 1) / max(1, self.plan.spec.num_draft_tokens - 1)
            self._pending_tokens = self._pending_verify = 0
            self.avg_spec_accept_length = self._acc_tokens / self._acc_verify
            spec_part = f"accept len: {acc:.2f}, accept rate: {rate:.2f}, "
        graph = self.plan.args.get("cuda_graph_backend_decode") != "disabled" and running <= max(
            self.plan.decode_graph_bs or (0,))
        self._log(f"Decode batch, #running-req: {running}, #token: {tokens}, "
                  f"token usage: {self._usage(tokens):.2f}, {spec_part}cuda graph: {graph}, "
                  f"gen throughput (token/s): {self.last_gen_throughput:.2f}, #queue-req: {queued}")

