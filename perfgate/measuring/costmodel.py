"""The speculative-decoding cost model: what a decode step or a speculation cycle costs, and why.

Pure arithmetic on measurements, no torch and no I/O. At batch size 1:

- a plain decode step emits one token: ``step_ms = 1000 / tok_s``;
- a speculation cycle (draft, then one verify pass of the target model) emits ``accept_len``
  tokens on average: ``tok_s = accept_len / (draft_ms + verify_ms) * 1000``;
- speculation breaks even with the baseline when ``accept_len / cycle = baseline_tok_s``, so the
  break-even cycle is ``accept_len / baseline_tok_s`` and the break-even acceptance length at the
  measured cycle is ``baseline_tok_s * cycle``;
- every forward pass of a tensor-parallel model does ``layers × allreduces_per_layer``
  all-reduces of ``tokens × hidden`` elements; with the latency the all-reduce micro-benchmark
  measured at that size, their total is the communication share of the step.

The seed's numbers, which :func:`spec_breakdown` reproduces (see ``tests/test_costmodel.py``):
Kimi-K2.5 has 61 layers × 2 = 122 all-reduces per verify; the baseline decodes 89.5 tok/s;
EAGLE-3 accepts ≈ 2.0 tokens per cycle, so a 12 ms verify (draft not counted) would give
2.0 / 12 ms = 166.7 tok/s, and the break-even cycle is 2.0 / 89.5 = 22.3 ms.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "KIMI_K25",
    "ModelShape",
    "SpecBreakdown",
    "StepBreakdown",
    "allreduce_bytes",
    "allreduce_count",
    "breakeven_accept_len",
    "breakeven_cycle_ms",
    "breakeven_verify_ms",
    "cycle_ms_from_tok_s",
    "latency_interpolator",
    "projected_tok_s",
    "spec_breakdown",
    "step_breakdown",
]

LatencyFn = Callable[[int], float]
"""Measured all-reduce latency in microseconds for a message of the given size in bytes."""


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """What the cost model needs of a model: its depth, all-reduces per layer and hidden size."""

    layers: int
    allreduces_per_layer: int = 2
    hidden: int
    dtype_bytes: int = 2  # bf16 activations

    @classmethod
    def from_profile(cls, profile: object, *, default: ModelShape | None = None) -> ModelShape:
        """Read ``profile.model.{layers, allreduces_per_layer, hidden}``; missing values from ``default``.

        Tolerates any object with those attributes (a :class:`perfgate.profiles.Profile`, a
        test double); raises ``ValueError`` when a value is missing and there is no default.
        """
        model = getattr(profile, "model", None)
        d = default

        def pick(name: str) -> int:
            v = getattr(model, name, None) if model is not None else None
            if v is None and d is not None:
                v = getattr(d, name)
            if v is None:
                raise ValueError(f"profile.model.{name} is not set and no default shape was given")
            return int(v)

        return cls(
            layers=pick("layers"),
            allreduces_per_layer=pick("allreduces_per_layer"),
            hidden=pick("hidden"),
            dtype_bytes=d.dtype_bytes if d is not None else 2,
        )

    @property
    def allreduces(self) -> int:
        """All-reduces per forward pass."""
        return allreduce_count(self.layers, self.allreduces_per_layer)


KIMI_K25 = ModelShape(layers=61, allreduces_per_layer=2, hidden=7168)
"""Kimi-K2.5 as the seed describes it: 61 layers, an all-reduce after attention and after MoE."""


# ----------------------------------------------------------------------------- the arithmetic


def allreduce_count(layers: int, per_layer: int) -> int:
    """All-reduces in one forward pass: ``layers × per_layer`` (61 × 2 = 122 for Kimi-K2.5)."""
    if layers < 0 or per_layer < 0:
        raise ValueError(f"layers and per_layer must be ≥ 0, got {layers} and {per_layer}")
    return layers * per_layer


def allreduce_bytes(tokens: int, hidden: int, dtype_bytes: int = 2) -> int:
    """Bytes of one all-reduce message: ``tokens × hidden × dtype_bytes``."""
    return tokens * hidden * dtype_bytes


def projected_tok_s(accept_len: float, verify_ms: float, draft_ms: float = 0.0) -> float:
    """Tokens per second of speculation at batch 1: ``accept_len / (draft_ms + verify_ms)``.

    ``projected_tok_s(2.0, 12.0)`` is 166.7, the seed's projection.
    """
    cycle = draft_ms + verify_ms
    if cycle <= 0:
        raise ValueError(f"draft_ms + verify_ms must be > 0, got {draft_ms} + {verify_ms}")
    return accept_len / cycle * 1000.0


def cycle_ms_from_tok_s(tok_s: float, accept_len: float = 1.0) -> float:
    """The cycle (or, with ``accept_len`` 1, the decode step) a measured tok/s implies, in ms."""
    if tok_s <= 0:
        raise ValueError(f"tok_s must be > 0, got {tok_s}")
    return accept_len / tok_s * 1000.0


def breakeven_cycle_ms(baseline_tok_s: float, accept_len: float) -> float:
    """The longest cycle at which speculation still matches the baseline: ``accept_len / baseline``."""
    if baseline_tok_s <= 0:
        raise ValueError(f"baseline_tok_s must be > 0, got {baseline_tok_s}")
    return accept_len / baseline_tok_s * 1000.0


def breakeven_accept_len(baseline_tok_s: float, cycle_ms: float) -> float:
    """The acceptance length at which a ``cycle_ms`` cycle matches the baseline: ``baseline × cycle``."""
    return baseline_tok_s * cycle_ms / 1000.0


def breakeven_verify_ms(baseline_tok_s: float, accept_len: float, draft_ms: float = 0.0) -> float:
    """The longest verify pass at which speculation matches the baseline.

    ``breakeven_cycle_ms(baseline, accept_len) - draft_ms``; zero or negative means no verify time
    can make it: the draft alone already takes the whole break-even cycle.
    """
    return breakeven_cycle_ms(baseline_tok_s, accept_len) - draft_ms


def latency_interpolator(points: Iterable[tuple[int, float]] | Mapping[int, float]) -> LatencyFn:
    """A latency function (bytes → µs) through measured ``(bytes, latency_us)`` points.

    Interpolates linearly in log(bytes) between points and clamps to the nearest point outside
    them, so a measured sweep can answer for the exact message size of a model. Duplicate sizes
    keep the smallest latency.
    """
    items = points.items() if isinstance(points, Mapping) else points
    best: dict[int, float] = {}
    for b, lat in items:
        if b <= 0 or not math.isfinite(lat) or lat < 0:
            raise ValueError(f"bad latency point ({b} bytes, {lat} µs)")
        best[b] = min(lat, best.get(b, math.inf))
    if not best:
        raise ValueError("latency_interpolator needs at least one measured point")
    xs = sorted(best)
    ys = [best[x] for x in xs]

    def latency_us(nbytes: int) -> float:
        if nbytes <= xs[0]:
            return ys[0]
        if nbytes >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_left(xs, nbytes)
        if xs[i] == nbytes:
            return ys[i]
        x0, x1 = math.log(xs[i - 1]), math.log(xs[i])
        t = (math.log(nbytes) - x0) / (x1 - x0)
        return ys[i - 1] + t * (ys[i] - ys[i - 1])

    return latency_us


# ----------------------------------------------------------------------------- breakdowns


def _fmt(x: float, nd: int = 1) -> str:
    return f"{x:.{nd}f}"


@dataclass(frozen=True, kw_only=True)
class StepBreakdown:
    """One forward pass (a decode step, or a verify pass) and its all-reduce share."""

    step_ms: float
    tokens: int
    allreduce_count: int
    allreduce_bytes: int
    allreduce_ms: float | None = None  # count × latency at allreduce_bytes; None without a latency
    allreduce_share: float | None = None  # allreduce_ms / step_ms (may exceed 1: then the latency
    # came from another box, or the collectives overlap; the number is kept, not clipped)

    def as_properties(self) -> dict[str, str]:
        """JUnit properties (``cycle_ms``, ``allreduce_share``); a missing number is absent."""
        out = {"cycle_ms": _num(self.step_ms)}
        if self.allreduce_share is not None:
            out["allreduce_share"] = _num(self.allreduce_share)
        return out


def step_breakdown(
    *,
    tok_s: float,
    shape: ModelShape,
    tokens: int = 1,
    allreduce_latency_us: LatencyFn | None = None,
) -> StepBreakdown:
    """Break a plain decode step (one token per step at batch 1) into all-reduce and the rest."""
    step = cycle_ms_from_tok_s(tok_s)
    count = shape.allreduces
    nbytes = allreduce_bytes(tokens, shape.hidden, shape.dtype_bytes)
    ar_ms = share = None
    if allreduce_latency_us is not None:
        ar_ms = count * allreduce_latency_us(nbytes) / 1000.0
        share = ar_ms / step
    return StepBreakdown(
        step_ms=step, tokens=tokens, allreduce_count=count, allreduce_bytes=nbytes, allreduce_ms=ar_ms,
        allreduce_share=share,
    )


@dataclass(frozen=True, kw_only=True)
class SpecBreakdown:
    """A speculative mode against its baseline: where the cycle goes and what break-even needs.

    ``cycle_ms`` comes from the measured speculative tok/s and acceptance length; ``verify_ms``
    is the cycle less the draft (the whole cycle when the draft time is unknown).
    """

    baseline_tok_s: float
    spec_tok_s: float
    accept_len: float
    cycle_ms: float
    draft_ms: float | None
    verify_ms: float
    verify_tokens: int | None
    allreduce_count: int | None  # None when the profile does not give the model's depth
    allreduce_bytes: int | None  # None without verify_tokens or hidden
    allreduce_ms: float | None
    allreduce_share: float | None  # allreduce_ms / cycle_ms
    breakeven_cycle_ms: float
    breakeven_accept_len: float
    breakeven_verify_ms: float
    target_verify_ms: float | None = None
    projected_tok_s: float | None = None  # at target_verify_ms (and the same draft, accept_len)
    allreduce_source: str = "model"  # "trace": count and time measured in SGLang's own trace (perfgate.measuring.trace)

    @property
    def beats_baseline(self) -> bool:
        """Whether the measured cycle is within the break-even cycle."""
        return self.cycle_ms <= self.breakeven_cycle_ms

    def project(self, verify_ms: float) -> float:
        """tok/s if the verify pass took ``verify_ms`` (same draft time and acceptance length)."""
        return projected_tok_s(self.accept_len, verify_ms, self.draft_ms or 0.0)

    def what_it_would_take(self) -> str:
        """One sentence for a failure message: the break-even cycle, verify time and acceptance."""
        a = _fmt(self.accept_len, 1)
        need = _fmt(self.breakeven_cycle_ms)
        now = _fmt(self.cycle_ms)
        if self.beats_baseline:
            msg = (
                f"speculation at accept {a} beats the baseline: cycle {now} ms ≤ break-even {need} ms "
                f"({_fmt(self.spec_tok_s)} vs {_fmt(self.baseline_tok_s)} tok/s)"
            )
        else:
            msg = f"speculation at accept {a} needs a cycle ≤ {need} ms (now {now} ms): "
            if self.draft_ms is None:
                msg += f"draft + verify must fall to ≤ {need} ms"
            elif self.breakeven_verify_ms > 0:
                msg += (
                    f"verify must fall to ≤ {_fmt(self.breakeven_verify_ms)} ms "
                    f"(now {_fmt(self.verify_ms)} ms, draft {_fmt(self.draft_ms)} ms)"
                )
            else:
                msg += f"no verify time can do it, the draft alone takes {_fmt(self.draft_ms)} ms"
            msg += f", or acceptance rise to ≥ {_fmt(self.breakeven_accept_len, 1)}"
        if self.allreduce_ms is not None and self.allreduce_share is not None and self.allreduce_count:
            per = self.allreduce_ms / self.allreduce_count * 1000.0
            where = " (measured in the trace)" if self.allreduce_source == "trace" else ""
            msg += (
                f"; all-reduce{where}: {self.allreduce_count} × {_fmt(per)} µs = {_fmt(self.allreduce_ms)} ms "
                f"at {self.allreduce_bytes} B, {self.allreduce_share:.0%} of the cycle"
            )
        if self.target_verify_ms is not None and self.projected_tok_s is not None:
            msg += f"; a {_fmt(self.target_verify_ms)} ms verify would give {_fmt(self.projected_tok_s)} tok/s"
        return msg

    def as_properties(self) -> dict[str, str]:
        """JUnit properties: ``cycle_ms``, ``breakeven_accept_len``, ``breakeven_verify_ms``, ``allreduce_share``.

        A number the model could not compute (no all-reduce latency measured) is absent.
        """
        out = {
            "cycle_ms": _num(self.cycle_ms),
            "breakeven_accept_len": _num(self.breakeven_accept_len),
            "breakeven_verify_ms": _num(self.breakeven_verify_ms),
        }
        if self.allreduce_share is not None:
            out["allreduce_share"] = _num(self.allreduce_share)
            out["allreduce_source"] = self.allreduce_source
        return out


def spec_breakdown(
    *,
    baseline_tok_s: float,
    spec_tok_s: float,
    accept_len: float,
    layers: int | None,
    allreduces_per_layer: int,
    hidden: int | None,
    verify_tokens: int | None,
    allreduce_latency_us: LatencyFn | None = None,
    draft_ms: float | None = None,
    target_verify_ms: float | None = None,
    dtype_bytes: int = 2,
    measured_allreduce: tuple[float, float] | None = None,
) -> SpecBreakdown:
    """Break a measured speculative mode down against its measured baseline.

    ``verify_tokens`` is the number of tokens the target model verifies per cycle (the draft
    tokens, e.g. ``--speculative-num-draft-tokens``); each verify all-reduce moves
    ``verify_tokens × hidden × dtype_bytes`` bytes. ``allreduce_latency_us`` (bytes → µs,
    e.g. :func:`latency_interpolator` over micro-benchmark results) gives the all-reduce share;
    without it those fields are None, as they are when ``layers``, ``hidden`` or
    ``verify_tokens`` is unknown (None). ``target_verify_ms`` adds a projection at that verify time.
    ``measured_allreduce`` = (all-reduces, ms) per verify pass measured in SGLang's own trace (a ``profile``
    record) takes the place of the modelled count and latency.
    """
    if accept_len <= 0:
        raise ValueError(f"accept_len must be > 0, got {accept_len}")
    if draft_ms is not None and draft_ms < 0:
        raise ValueError(f"draft_ms must be ≥ 0, got {draft_ms}")
    cycle = cycle_ms_from_tok_s(spec_tok_s, accept_len)
    verify = cycle - (draft_ms or 0.0)
    count = allreduce_count(layers, allreduces_per_layer) if layers is not None else None
    nbytes = allreduce_bytes(verify_tokens, hidden, dtype_bytes) if verify_tokens and hidden else None
    ar_ms = share = None
    source = "model"
    if measured_allreduce is not None and measured_allreduce[0] > 0:
        count, ar_ms, source = int(round(measured_allreduce[0])), float(measured_allreduce[1]), "trace"
        share = ar_ms / cycle
    elif allreduce_latency_us is not None and count is not None and nbytes is not None:
        ar_ms = count * allreduce_latency_us(nbytes) / 1000.0
        share = ar_ms / cycle
    projected = None
    if target_verify_ms is not None:
        projected = projected_tok_s(accept_len, target_verify_ms, draft_ms or 0.0)
    return SpecBreakdown(
        baseline_tok_s=baseline_tok_s,
        spec_tok_s=spec_tok_s,
        accept_len=accept_len,
        cycle_ms=cycle,
        draft_ms=draft_ms,
        verify_ms=verify,
        verify_tokens=verify_tokens,
        allreduce_count=count,
        allreduce_bytes=nbytes,
        allreduce_ms=ar_ms,
        allreduce_share=share,
        breakeven_cycle_ms=breakeven_cycle_ms(baseline_tok_s, accept_len),
        breakeven_accept_len=breakeven_accept_len(baseline_tok_s, cycle),
        breakeven_verify_ms=breakeven_verify_ms(baseline_tok_s, accept_len, draft_ms or 0.0),
        target_verify_ms=target_verify_ms,
        projected_tok_s=projected,
        allreduce_source=source,
    )


def _num(x: float) -> str:
    """A property value: a plain decimal float (no exponent, no trailing noise)."""
    s = f"{x:.6f}".rstrip("0").rstrip(".")
    return s if s not in ("", "-0") else "0"
