"""How a judged ratio is written (pure): its interval with ends that bound nothing said as such, as a change in per
cent, and a confidence with the digits that tell it from 100 %. The one notation of the verdicts, the record lines, the
report and the bisect table (:mod:`perfgate.measuring.judge` writes its details with it)."""

from __future__ import annotations

import math

__all__ = ["LOG_CAP", "bounds", "interval_text", "change_interval_text", "ratio_text", "confidence_text"]


#: an interval's ends are capped at e^-CAP .. e^CAP (an early look's quantile can be in the millions); an end at the cap
#: bounds nothing and is written so: ``(0`` and ``∞)``
LOG_CAP = 20.0


def interval_text(ci: tuple[float, float], *, infinity: str = "∞") -> str:
    """A ratio's interval as every verdict, record line and step table writes it: ``[0.9292, 0.9979]``, an end at
    the cap as ``(0`` or ``∞)`` (``(0, ∞)``: one pair bounds nothing at this look; the terminal's ASCII ``inf``)."""
    low, high = bounds(ci)
    lo = f"[{ci[0]:.4f}" if low else "(0"
    hi = f"{ci[1]:.4f}]" if high else f"{infinity})"
    return f"{lo}, {hi}"


def bounds(ci: tuple[float, float]) -> tuple[bool, bool]:
    """Whether each end of a ratio's interval bounds anything: an end at the cap (:data:`LOG_CAP`, an early look
    of a long plan or one pair of a noisy metric) does not."""
    return ci[0] > math.exp(-LOG_CAP) * 1.0001, ci[1] < math.exp(LOG_CAP) / 1.0001


def change_interval_text(ci: tuple[float, float]) -> str:
    """A ratio's interval as a change in per cent, as the report's verdict rows write it: ``[+1.2, +4.9] %``, an end
    at the cap as ``(-100`` or ``+∞)`` (the same caps as :func:`interval_text`)."""
    low, high = bounds(ci)
    lo = f"[{(ci[0] - 1) * 100:+.1f}" if low else "(-100"
    hi = f"{(ci[1] - 1) * 100:+.1f}]" if high else "+∞)"
    return f"{lo}, {hi} %"


def ratio_text(ratio: float | None, ci: tuple[float, float] | None) -> str:
    """A ratio and its interval (:func:`interval_text`): ``×0.9629 [0.9292, 0.9979]``, ``×0.9386 (0, ∞)``."""
    if ratio is None or ci is None:
        return ""
    return f"×{ratio:.4f} {interval_text(ci)}"


def confidence_text(confidence: float) -> str:
    """A confidence in per cent with the digits that tell it from 100 % (an early sequential look's
    ``99.99999%``, not ``100%``)."""
    alpha = 1.0 - confidence
    if alpha < 1e-10:  # below what a double holds next to 1: an early look of a long plan
        return "> 99.99999999%"
    digits = max(0, math.ceil(round(-math.log10(alpha * 100), 6)) + 1) if alpha < 0.01 else 0
    return f"{confidence * 100:.{digits}f}%" if digits else f"{confidence * 100:.3g}%"
