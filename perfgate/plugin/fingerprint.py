"""The session's machine fingerprint: which machine its records come from, and that machine's calibration.

Found once per session (:attr:`perfgate.plugin.state.PerfgateState.fingerprint`), at session start when perfgate
is on, and in any case before the first server starts (the GPU is free then): the :class:`Machine` from
NVML (:mod:`perfgate.stack.machine`) and a short torch :class:`Calibration`
(:mod:`perfgate.stack.calibration`) in the server's Python. ``--perfgate-calibrate``: ``auto`` (default)
calibrates with the real engine, takes the simulator's modelled figures for a simulated profile, and does
not calibrate when attached (``--perfgate-url``: the server holds the GPU, and may be on another box);
``on`` always, ``off`` never. A real GPU run says the calibration in one terminal line. Every record
carries :meth:`Fingerprint.as_properties` next to its ``stack.*`` (``machine.*``, ``calib.*``:
perfgate.record).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from perfgate.stack.calibration import Calibration
from perfgate.stack.fingerprint import Fingerprint

if TYPE_CHECKING:
    import pytest

    from perfgate.profiles import Profile
    from perfgate.profiles.settings import Settings
    from perfgate.stack import Stack

__all__ = ["CALIBRATE_CHOICES", "Session", "session_fingerprint"]

CALIBRATE_CHOICES = ("auto", "on", "off")


class Session(Protocol):
    """What the fingerprint reads of a session (:class:`perfgate.plugin.state.PerfgateState` is one)."""

    @property
    def config(self) -> pytest.Config: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def stack(self) -> Stack: ...

    @property
    def settings(self) -> Settings: ...


def _sim_machine_name() -> str:
    from perfgate.sim.variation import MACHINE_ENV, REFERENCE, check_machine_name

    name = os.environ.get(MACHINE_ENV, "").strip() or REFERENCE
    return name if check_machine_name(name) is None else REFERENCE


def _calibrates(st: Session) -> tuple[bool, str]:
    """Whether this session calibrates, and why not."""
    when = st.settings.calibrate
    if when == "off":
        return False, "--perfgate-calibrate off"
    if st.config.getoption("collectonly", False):
        return False, "collection only"
    if when == "auto" and st.settings.url:
        return False, "attached with --perfgate-url (the server holds the GPU); --perfgate-calibrate on to measure"
    return True, ""


def session_fingerprint(st: Session) -> Fingerprint:
    """Probe (or, simulated, model) the machine and calibrate it as ``--perfgate-calibrate`` says. Never
    raises; a real GPU run writes the calibration's terminal line."""
    from perfgate.stack import calibration, machine

    p = st.profile
    run, why = _calibrates(st)
    if p.simulated:
        name = _sim_machine_name()
        count = st.stack.gpu_count if isinstance(st.stack.gpu_count, int) else 0
        fp = Fingerprint(machine=machine.simulated_machine(name, count),
                         calibration=calibration.simulated_calibration(name, str(st.stack.gpu)) if run
                         else Calibration(reason=why))
        return fp
    box = machine.probe_machine()
    cal = calibration.run_calibration(p.engine.python) if run else Calibration(reason=why)
    fp = Fingerprint(machine=box, calibration=cal)
    if run:
        cpu = box.cpu
        _say(st, f"{cal.line(box.id)}; host CPU {cpu.model} (governor {cpu.governor}, idle {cpu.idle})")
    return fp


def _say(st: Session, msg: str) -> None:
    """One line on the terminal, past output capture (the controller only under xdist)."""
    from perfgate.plugin.say import say

    say(st.config, msg)
