"""Were two reports measured on the same machine? ``compare_machines(old, new) -> MachineMatch`` (pure).

Two H200s of one model with one stack decode up to 3.4 % apart, while restarts on one machine agree to
~0.05 % (docs/measurement.md, "Machines"), so a comparison across machines is judged against other noise
than one on a single machine. The machine is the ``machine.id`` of each report (a hash of its host id and
GPU UUIDs, perfgate.record); ``same`` is None when either report has none (reports from before perfgate
recorded it). ``differences`` lists what differs: the fingerprint's keys (``gpu_uuid``, ``power_limit_w``,
``pcie`` by its maximum link: an idle GPU drops its current generation), and a calibration figure that
moved by more than :data:`CALIB_TOLERANCE`. Rendering is :mod:`perfgate.report.render`'s; deciding is the
gate's.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.record import (
    CALIB_GEMM_TFLOPS,
    CALIB_HBM_GBPS,
    CALIB_SOURCE,
    MACHINE_CPU_GOVERNOR,
    MACHINE_CPU_IDLE,
    MACHINE_CPU_MODEL,
    MACHINE_ECC,
    MACHINE_GPU_SERIAL,
    MACHINE_GPU_UUID,
    MACHINE_HOST_ID,
    MACHINE_ID,
    MACHINE_MEM_CLOCK_MAX_MHZ,
    MACHINE_PCIE,
    MACHINE_POWER_LIMIT_W,
    MACHINE_SM_CLOCK_MAX_MHZ,
)
from perfgate.report.records import UNKNOWN, Report, parse_number

__all__ = ["CALIB_TOLERANCE", "MachineMatch", "compare_machines"]

#: a calibration figure counts as different when new/old is off 1 by more than this
CALIB_TOLERANCE = 0.02
#: the fingerprint keys compared as text, in display order
COMPARED = (MACHINE_HOST_ID, MACHINE_GPU_UUID, MACHINE_GPU_SERIAL, MACHINE_POWER_LIMIT_W, MACHINE_SM_CLOCK_MAX_MHZ,
            MACHINE_MEM_CLOCK_MAX_MHZ, MACHINE_ECC, MACHINE_PCIE, MACHINE_CPU_MODEL, MACHINE_CPU_GOVERNOR,
            MACHINE_CPU_IDLE, CALIB_SOURCE)


@dataclass(frozen=True, kw_only=True)
class MachineMatch:
    """Whether two reports come from one machine, and what differs between their machines."""

    same: bool | None  # None: a report has no machine.id (older than the fingerprint)
    old_id: str = ""
    new_id: str = ""
    differences: tuple[tuple[str, str, str], ...] = ()  # (key, old, new), keys as in perfgate.record
    hbm_ratio: float | None = None  # calib.hbm_gbps new / old, when both were measured
    gemm_ratio: float | None = None  # calib.gemm_tflops new / old

    def describe(self) -> str:
        """One line: ``same machine <id>``, ``different machines: gpu_uuid A vs B, ...``, or why unknown."""
        if self.same is None:
            which = ("neither report records" if not self.old_id and not self.new_id
                     else f"the {'old' if not self.old_id else 'new'} report records no")
            return f"machine unknown ({which} machine.id: older than the fingerprint)"
        diffs = ", ".join(f"{k.split('.', 1)[1]} {a} vs {b}" for k, a, b in self.differences)
        if self.same:
            return f"same machine {self.new_id}" + (f" (changed: {diffs})" if diffs else "")
        return f"different machines {self.old_id} vs {self.new_id}" + (f": {diffs}" if diffs else "")


def _id(report: Report) -> str:
    v = report.machine.get(MACHINE_ID, "")
    return "" if v in ("", UNKNOWN) else v


def _text(key: str, value: str) -> str:
    if key == MACHINE_PCIE:
        from perfgate.stack.machine import pcie_max

        return pcie_max(value)
    return value


def _ratio(old: str | None, new: str | None) -> float | None:
    a, b = parse_number(old), parse_number(new)
    return b / a if a and b and a > 0 and b > 0 else None


def compare_machines(old: Report, new: Report) -> MachineMatch:
    """Compare the machines two reports were measured on (see the module docstring)."""
    oid, nid = _id(old), _id(new)
    om, nm = old.machine, new.machine
    same = None if not oid or not nid else oid == nid
    diffs: list[tuple[str, str, str]] = []
    if same is not None:
        for k in COMPARED:
            a, b = om.get(k, UNKNOWN), nm.get(k, UNKNOWN)
            if UNKNOWN in (a, b):
                continue
            if _text(k, a) != _text(k, b):
                diffs.append((k, a, b))
    hbm = _ratio(om.get(CALIB_HBM_GBPS), nm.get(CALIB_HBM_GBPS))
    gemm = _ratio(om.get(CALIB_GEMM_TFLOPS), nm.get(CALIB_GEMM_TFLOPS))
    if same is not None:
        for k, r in ((CALIB_HBM_GBPS, hbm), (CALIB_GEMM_TFLOPS, gemm)):
            if r is not None and abs(r - 1.0) > CALIB_TOLERANCE:
                diffs.append((k, om[k], nm[k]))
    return MachineMatch(same=same, old_id=oid, new_id=nid, differences=tuple(diffs), hbm_ratio=hbm, gemm_ratio=gemm)
