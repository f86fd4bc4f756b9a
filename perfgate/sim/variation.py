"""The simulator varies like hardware: a speed per simulated machine, a jitter per server start, a scale.

Real H200s of one model are not equally fast. One stack and config (SGLang 0.5.17, batch-1 decode, dummy
Llama-3.1-8B) decoded at these means on four machines (issue 22): A 210.45 tok/s (5 starts, 210.42-210.48),
B 212.6 (3 starts, 212.5-212.7), C 205.46 (1 start), D 212.7 (1 start). Their sample standard deviation
is 3.39 tok/s around a mean of 210.30: **1.61 %** (the sd of their logarithms is 1.62 %), so a simulated
machine's speed factor is drawn from a lognormal with sd :data:`MACHINE_SD` = 1.6 %. Restart to restart on
one machine, A spans 0.03 % over 5 starts and B 0.09 % over 3 (range / d2: sd 0.012 % and 0.056 %), so
every server start draws a jitter with sd :data:`START_SD` = 0.05 %, the wider of the two.

- :func:`machine_factor`: the speed factor of a machine name, seeded by the name (sha256 -> a uniform ->
  the normal quantile), so it is the same in every process and over many names follows the lognormal
  exactly. :data:`REFERENCE` (the default, ``PERFGATE_SIM_MACHINE`` unset) is exactly 1.0: the shipped
  simulated floors and the seed table are the reference machine's.
- :func:`start_jitter`: one start's factor, seeded by ``--sim-start-seed`` (``PERFGATE_SIM_START_SEED``, else
  perfgate's sim engine passes ``<seed key>:<n>``
  (the config's key without its absolute paths) for a config's n-th start: each start its own draw, the
  same sequence every session), else random: like a GPU's, a start's state is not the model's
  ``--random-seed``, which the shipped profiles fix.
- ``PERFGATE_SIM_SCALE`` (:func:`parse_scale`, default 1.0): a multiplier on the simulated speed, to
  inject a known regression (0.99 = every step 1 % slower, decode tok/s 1 % lower).
- ``PERFGATE_SIM_STEP_SD`` (:func:`parse_step_sd`, default 0): sd of log(duration) of every engine step, drawn
  from a stream seeded like the start's jitter: trial-to-trial noise inside one start. Left at 0 the
  engine's deadline schedule makes trials agree to a few hundredths of a percent, so a test of the noise
  gate sets it rather than hoping the runner's scheduler is noisy enough.
- ``PERFGATE_SIM_TTFT_MODES`` (:func:`parse_ttft_modes`, default off): host-side levels of the prefill step that
  switch inside one start, ``F1,F2[,...][/DWELL]`` (e.g. ``1.0,1.6/12``): every prefill step takes its modelled
  time times the current level's factor; after each prefill step the level moves to another one with probability
  1 / DWELL (a mean stay of DWELL prefill steps, default :data:`DEFAULT_TTFT_DWELL`); the first level and every
  move are drawn from a stream seeded like the start's jitter. Counted in prefill steps, not seconds, so what a
  seeded start serves does not depend on the runner's load. A real H200's batch-1 TTFT switches between ~28 and
  ~45 ms inside one start (issue 40): ``1.0,1.6`` models it. ``F1,F2[,...]/DWELLs`` (DWELL seconds) makes the
  levels the host's, not the start's: the clock (in simulated seconds: wall time times the speed-up) is cut into
  windows of DWELL seconds and each window's level is drawn from a hash of the window's number, so every
  simulated server on the host sees the same level at the same moment (what co-resident arms share, issue 40
  item 6), and a level outlasts a start when DWELL is longer than one.
- ``PERFGATE_SIM_PREFILL_DELAY_MS`` (:func:`parse_prefill_delay_ms`, default 0): milliseconds the engine waits
  before every prefill step, host-side (the machine's speed does not scale it): a TTFT-only slowdown to plant (2.8 ms
  is about 10 % of a 28 ms TTFT), decode untouched. It lands before the step's ``forward_entry_time``, in the
  requests' ``to_forward`` leg (perfgate.measuring.ttft_parts), as the H200 runs' scheduler sleep
  (``ci/device/inject``) does; the levels above land in the ``prefill`` leg.
- ``PERFGATE_SIM_PREFILL_GPU_MS`` and ``PERFGATE_SIM_PREFILL_HOST_MS`` (:func:`parse_prefill_gpu_ms`,
  :func:`parse_prefill_host_ms`, default 0): milliseconds added inside every prefill step (its ``prefill`` leg), the
  first as GPU time (a kernel in the step's trace, as ``ci/device/inject``'s spin before each prefill forward), the
  second as host time (a gap between its kernels, as the inject's sleep): the two halves of the prefill leg that
  perfgate.measuring.prefill_gpu tells apart. The prefill's own host share is the trace's
  (perfgate.sim.trace.PREFILL_HOST_SHARE); the levels above add to it.

:class:`SimSpeed` is a start's product of the three; the engine divides every step's modelled duration by
it (:mod:`perfgate.sim.engine_loop`), and so does the trace. The simulated box's calibration (the machine
fingerprint's HBM copy and bf16 GEMM figures) is :func:`modelled_calibration`: nominal figures for the GPU
times the machine factor. Nothing here imports beyond the standard library.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

from perfgate.envnames import SIM_PREFIX
from perfgate.envnames import problem as name_problem

__all__ = ["DEFAULT_TTFT_DWELL", "MACHINE_SD", "REFERENCE", "START_SD", "SimSpeed", "TtftModes",
           "check_machine_name", "env_problem", "machine_factor", "modelled_calibration", "parse_prefill_delay_ms",
           "parse_prefill_gpu_ms", "parse_prefill_host_ms",
           "parse_scale", "parse_step_sd", "parse_ttft_modes", "prefill_levels", "sim_gpu_uuid", "start_jitter",
           "step_noise"]

#: the simulated machine when PERFGATE_SIM_MACHINE is unset; its factor is exactly 1.0
REFERENCE = "reference"
#: sd of log(speed) between machines of one model (four H200s, see the module docstring)
MACHINE_SD = 0.016
#: sd of log(speed) between server starts on one machine
START_SD = 0.0005
MACHINE_ENV = "PERFGATE_SIM_MACHINE"
SCALE_ENV = "PERFGATE_SIM_SCALE"
STEP_SD_ENV = "PERFGATE_SIM_STEP_SD"
START_SEED_ENV = "PERFGATE_SIM_START_SEED"
TTFT_MODES_ENV = "PERFGATE_SIM_TTFT_MODES"
PREFILL_DELAY_ENV = "PERFGATE_SIM_PREFILL_DELAY_MS"
PREFILL_GPU_ENV = "PERFGATE_SIM_PREFILL_GPU_MS"
PREFILL_HOST_ENV = "PERFGATE_SIM_PREFILL_HOST_MS"
#: the mean stay at one TTFT level, in prefill steps, when PERFGATE_SIM_TTFT_MODES names none
DEFAULT_TTFT_DWELL = 20.0

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

#: (HBM copy GB/s, bf16 GEMM TFLOP/s) the reference machine's calibration measures, by GPU name (a
#: substring, lower case). H200: what one real H200 measured (2026-12-01, two calibrations: 4137 and 4130
#: GB/s, 753 and 765 TFLOP/s); the others: nominal bandwidth x ~0.85, nominal dense bf16 x ~0.75
NOMINAL: tuple[tuple[str, float, float], ...] = (
    ("h200", 4130.0, 760.0),
    ("h100", 2850.0, 700.0),
    ("rtx pro 6000", 1530.0, 380.0),
)
DEFAULT_NOMINAL = (1000.0, 200.0)


def check_machine_name(name: str) -> str | None:
    """Why ``name`` cannot name a simulated machine (letters, digits, ``._-``, up to 64), or None."""
    if _NAME.fullmatch(name):
        return None
    return (f"{MACHINE_ENV}={name!r}: a simulated machine name is 1-64 letters, digits, '.', '_' or '-' "
            f"(starting with a letter or digit); fix: e.g. {MACHINE_ENV}=h200-b")


def _unit(text: str) -> float:
    """A uniform in (0, 1) from sha256 of ``text`` (53 bits)."""
    x = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 11
    return (x + 0.5) / float(1 << 53)


def machine_factor(name: str) -> float:
    """The speed factor of simulated machine ``name``: exp(MACHINE_SD * z), z the normal quantile of a
    uniform hashed from the name; exactly 1.0 for :data:`REFERENCE`."""
    if name == REFERENCE:
        return 1.0
    return math.exp(MACHINE_SD * NormalDist().inv_cdf(_unit(f"perfgate-sim-machine:{name}")))


def start_jitter(seed: int | str | None, machine: str = REFERENCE) -> float:
    """One server start's factor exp(START_SD * z): seeded by ``seed`` (with the machine) when given, else
    from the system's randomness."""
    if seed is None:
        z = random.SystemRandom().gauss(0.0, 1.0)
    else:
        z = random.Random(f"perfgate-sim-start:{machine}:{seed}").gauss(0.0, 1.0)
    return math.exp(START_SD * z)


def _number(env: str, text: str | None, default: float, ok: Callable[[float], bool], expected: str, fix: str) -> float:
    """``text`` (env ``env``'s value or its option's) as a number ``ok`` accepts (empty: ``default``); raises
    ValueError naming the variable, what it expects and the fix."""
    if text is None or not str(text).strip():
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not ok(value):
        raise ValueError(f"{env}={text!r}: expected {expected}; fix: e.g. {env}={fix}, or unset it")
    return value


def parse_scale(text: str | None) -> float:
    """``PERFGATE_SIM_SCALE`` as a number > 0 (empty: 1.0); raises ValueError naming the variable and the fix."""
    return _number(SCALE_ENV, text, 1.0, lambda x: x > 0 and math.isfinite(x), "a speed multiplier > 0",
                   "0.99 for a 1 % slower simulated server")


def parse_step_sd(text: str | None) -> float:
    """``PERFGATE_SIM_STEP_SD`` as a number in [0, 1) (empty: 0); raises ValueError naming the variable and the fix."""
    return _number(STEP_SD_ENV, text, 0.0, lambda x: 0.0 <= x < 1.0, "the sd of a step's log duration in [0, 1)",
                   "0.05 for 5 % step-to-step noise")


def step_noise(sd: float, seed: int | str | None, machine: str = REFERENCE) -> Callable[[], float]:
    """A source of step duration factors exp(sd * z), one per call: seeded by ``seed`` (with the machine)
    when given, else from the system's randomness; always 1.0 when ``sd`` is 0."""
    if sd <= 0.0:
        return lambda: 1.0
    rng = random.Random(f"perfgate-sim-steps:{machine}:{seed}" if seed is not None
                        else random.SystemRandom().getrandbits(64))
    return lambda: math.exp(sd * rng.gauss(0.0, 1.0))


@dataclass(frozen=True, kw_only=True)
class TtftModes:
    """Host-side levels of the prefill step (``PERFGATE_SIM_TTFT_MODES``): factors, and the mean stay at one level
    in prefill steps."""

    levels: tuple[float, ...]
    dwell: float = DEFAULT_TTFT_DWELL
    #: ``/DWELLs``: the levels are the host's, windows of ``dwell`` simulated seconds (not prefill steps of a start)
    clock: bool = False


def parse_ttft_modes(text: str | None) -> TtftModes | None:
    """``PERFGATE_SIM_TTFT_MODES`` (``F1,F2[,...][/DWELL]``, factors > 0, DWELL >= 1 prefill steps) or None when
    empty; raises ValueError naming the variable and the fix."""
    if text is None or not str(text).strip():
        return None
    levels_text, _, dwell_text = str(text).strip().partition("/")
    clock = dwell_text.strip().endswith("s")
    try:
        levels = tuple(float(x) for x in levels_text.split(","))
        dwell = float(dwell_text.strip().removesuffix("s")) if dwell_text.strip() else DEFAULT_TTFT_DWELL
    except ValueError:
        levels, dwell = (), 0.0
    if len(levels) < 2 or not all(x > 0 and math.isfinite(x) for x in levels) or not (1.0 <= dwell < math.inf):
        raise ValueError(f"{TTFT_MODES_ENV}={text!r}: expected two or more prefill factors > 0 and an optional mean "
                         f"stay in prefill steps >= 1 (or seconds >= 1, with an s), F1,F2[,...][/DWELL[s]]; fix: e.g. "
                         f"{TTFT_MODES_ENV}=1.0,1.6/12 for a start that flips between a TTFT and 1.6 times it, "
                         f"1.0,1.6/60s for a host whose level changes every minute or so, or unset it")
    return TtftModes(levels=levels, dwell=dwell, clock=clock)


def parse_prefill_delay_ms(text: str | None) -> float:
    """``PERFGATE_SIM_PREFILL_DELAY_MS`` as milliseconds >= 0 (empty: 0); raises ValueError naming the variable and
    the fix."""
    return _number(PREFILL_DELAY_ENV, text, 0.0, lambda x: 0.0 <= x < math.inf,
                   "milliseconds >= 0 added to every prefill step", "2.8 for a TTFT about 10 % longer at 28 ms")


def parse_prefill_gpu_ms(text: str | None) -> float:
    """``PERFGATE_SIM_PREFILL_GPU_MS`` as milliseconds >= 0 (empty: 0): a GPU-side delay in every prefill step (a
    kernel in its trace: the prefill's GPU time); raises ValueError naming the variable and the fix."""
    return _number(PREFILL_GPU_ENV, text, 0.0, lambda x: 0.0 <= x < math.inf,
                   "milliseconds >= 0 of GPU time added to every prefill step", "3 for a GPU-side prefill slowdown")


def parse_prefill_host_ms(text: str | None) -> float:
    """``PERFGATE_SIM_PREFILL_HOST_MS`` as milliseconds >= 0 (empty: 0): a host-side delay inside every prefill step
    (no kernel: the prefill's host time); raises ValueError naming the variable and the fix."""
    return _number(PREFILL_HOST_ENV, text, 0.0, lambda x: 0.0 <= x < math.inf,
                   "milliseconds >= 0 of host time added inside every prefill step", "3 for a host-side slowdown")


def prefill_levels(modes: TtftModes | None, seed: int | str | None, machine: str = REFERENCE, *,
                   speedup: float = 1.0, now: Callable[[], float] = time.time) -> Callable[[], float]:
    """A source of prefill step factors, one per prefill step: the current level's factor, then a move to another
    level with probability 1 / ``modes.dwell``; seeded by ``seed`` (with the machine) when given, else from the
    system's randomness; always 1.0 for no modes. The host's levels (``modes.clock``): the level of the window of
    ``modes.dwell`` simulated seconds (``now()`` times ``speedup``) that holds the moment, the same for every server
    of the machine, whatever its seed."""
    if modes is None:
        return lambda: 1.0
    if modes.clock:
        def at_moment() -> float:
            window = math.floor(now() * speedup / modes.dwell)
            h = hashlib.sha256(f"perfgate-sim-host-ttft:{machine}:{modes.levels}:{window}".encode()).digest()
            return modes.levels[int.from_bytes(h[:8], "big") % len(modes.levels)]

        return at_moment
    rng = random.Random(f"perfgate-sim-ttft:{machine}:{seed}" if seed is not None
                        else random.SystemRandom().getrandbits(64))
    levels = modes.levels
    at = [rng.randrange(len(levels))]

    def factor() -> float:
        f = levels[at[0]]
        if rng.random() < 1.0 / modes.dwell:
            at[0] = (at[0] + 1 + rng.randrange(len(levels) - 1)) % len(levels)
        return f

    return factor


@dataclass(frozen=True, kw_only=True)
class SimSpeed:
    """The speed of one simulated server start: machine factor x start jitter x scale."""

    machine: str = REFERENCE
    factor: float = 1.0
    jitter: float = 1.0
    scale: float = 1.0

    @property
    def speed(self) -> float:
        """How much faster than the cost model every step runs (below 1: slower)."""
        return self.factor * self.jitter * self.scale

    @classmethod
    def for_start(cls, machine: str = REFERENCE, *, seed: int | str | None = None, scale: float = 1.0) -> SimSpeed:
        return cls(machine=machine, factor=machine_factor(machine), jitter=start_jitter(seed, machine), scale=scale)


def env_problem(environ: Mapping[str, str]) -> str | None:
    """What is wrong with ``PERFGATE_SIM_MACHINE``, ``PERFGATE_SIM_SCALE``, ``PERFGATE_SIM_STEP_SD``,
    ``PERFGATE_SIM_TTFT_MODES`` or ``PERFGATE_SIM_PREFILL_DELAY_MS`` in ``environ`` (the message names the variable
    and the fix), or None; a ``PERFGATE_SIM_*`` name the simulator does not read (:data:`perfgate.envnames.SIM_NAMES`)
    is one."""
    for key in sorted(k for k in environ if k.startswith(SIM_PREFIX)):
        wrong = name_problem(key)
        if wrong is not None:
            return wrong[1]
    name = environ.get(MACHINE_ENV, "").strip()
    bad = check_machine_name(name) if name else None
    if bad:
        return bad
    try:
        parse_scale(environ.get(SCALE_ENV))
        parse_step_sd(environ.get(STEP_SD_ENV))
        parse_ttft_modes(environ.get(TTFT_MODES_ENV))
        parse_prefill_delay_ms(environ.get(PREFILL_DELAY_ENV))
        parse_prefill_gpu_ms(environ.get(PREFILL_GPU_ENV))
        parse_prefill_host_ms(environ.get(PREFILL_HOST_ENV))
    except ValueError as e:
        return str(e)
    return None


def modelled_calibration(machine: str, gpu: str) -> tuple[float, float]:
    """(HBM copy GB/s, bf16 GEMM TFLOP/s) a calibration of simulated ``machine`` with GPU ``gpu`` reports:
    the GPU's nominal figures (:data:`NOMINAL`) times the machine factor."""
    g = gpu.lower()
    hbm, gemm = next(((h, t) for key, h, t in NOMINAL if key in g), DEFAULT_NOMINAL)
    f = machine_factor(machine)
    return hbm * f, gemm * f


def sim_gpu_uuid(machine: str, index: int) -> str:
    """The UUID of GPU ``index`` of a simulated machine: ``GPU-sim-<machine>-<index>``."""
    return f"GPU-sim-{machine}-{index}"
