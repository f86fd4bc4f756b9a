"""A machine fingerprint: which machine records come from (:class:`~perfgate.stack.machine.Machine`, from NVML)
and that machine's calibration (:class:`~perfgate.stack.calibration.Calibration`). A pytest session finds its
own once (:func:`perfgate.plugin.fingerprint.session_fingerprint`); every record carries
:meth:`Fingerprint.as_properties` next to its ``stack.*`` (``machine.*``, ``calib.*``: perfgate.record).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.stack.calibration import Calibration
from perfgate.stack.machine import Machine

__all__ = ["Fingerprint"]


@dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """A session's machine and its calibration."""

    machine: Machine
    calibration: Calibration

    def as_properties(self) -> dict[str, str]:
        """The ``machine.*`` and ``calib.*`` JUnit properties (perfgate.record)."""
        return {**self.machine.as_properties(), **self.calibration.as_properties()}
