"""Floors a fleet can hold: the floor records of reports from several machines -> one floor per mode.

A floor measured on one machine fails on a slower one of the same model (the shipped H200 floor, 210.44 tok/s
at 3 %, passes a 205.46 tok/s machine by 0.7 %). :func:`fleet_floors` takes the reports of a fleet (one or more
per machine, grouped by ``machine.id``; a report with no machine id counts as a machine of its own) and gives
per mode the figure every machine it saw can hold — the slowest machine's median — with the spread it saw.
:func:`narrow_tolerances` flags a floor whose tolerance is narrower than the spread between machines seen in
its history: such a floor fails a machine of the fleet on a good day.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from perfgate.categories import RecordKind
from perfgate.report.records import Report

__all__ = ["FleetFloor", "fleet_floors", "narrow_tolerances"]


@dataclass(frozen=True, kw_only=True)
class FleetFloor:
    """One mode's decode floor across machines."""

    mode: str
    tok_s: float  # the slowest machine's median: the figure every machine seen can hold
    machines: tuple[tuple[str, float], ...]  # (machine id, its median over runs), slowest first
    runs: int

    @property
    def spread(self) -> float:
        """(fastest - slowest) / fastest over the machines' medians."""
        hi = self.machines[-1][1]
        return (hi - self.machines[0][1]) / hi if hi else 0.0

    @property
    def slowest(self) -> str:
        return self.machines[0][0]

    def measured(self) -> dict[str, object]:
        """The ``[floors.<mode>.measured]`` facts of this floor."""
        return {"machines": len(self.machines), "runs": self.runs, "slowest_machine": self.slowest,
                "spread": round(self.spread, 6),
                "per_machine": ", ".join(f"{mid}={v:.2f}" for mid, v in self.machines)}


def fleet_floors(reports: Iterable[Report], *, modes: Iterable[str] | None = None) -> dict[str, FleetFloor]:
    """Per mode, the floor every machine of ``reports`` can hold (floor records that measured ``tok_s``)."""
    wanted = set(modes) if modes is not None else None
    seen: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i, rep in enumerate(reports):
        for r in rep.records:
            if r.kind != RecordKind.FLOOR or r.variant or r.outcome not in ("pass", "fail", "skip"):  # skip: none yet
                continue
            x = r.num("tok_s")
            if x is None or (wanted is not None and r.mode not in wanted):
                continue
            mid = r.prop("machine.id")
            seen[r.mode][mid if mid and mid != "unknown" else f"unidentified-{i}"].append(x)
    out = {}
    for mode, by_machine in seen.items():
        per = sorted(((m, statistics.median(v)) for m, v in by_machine.items()), key=lambda mv: mv[1])
        out[mode] = FleetFloor(mode=mode, tok_s=per[0][1], machines=tuple(per),
                               runs=sum(len(v) for v in by_machine.values()))
    return out


def narrow_tolerances(floors: Mapping[str, object], history: Iterable[Report]) -> list[str]:
    """Lines naming each floor (``{mode: perfgate.profiles.Floor}``) whose tolerance is narrower than the spread
    between machines in ``history``, with the figures."""
    seen = fleet_floors(history, modes=list(floors))
    out = []
    for mode, fl in floors.items():
        tol = getattr(fl, "tolerance", None)
        got = seen.get(mode)
        if got is None or tol is None or len(got.machines) < 2:
            continue
        if got.spread > tol:
            out.append(f"[floors.{mode}] tolerance {tol:.1%} is narrower than the {got.spread:.1%} spread between the "
                       f"{len(got.machines)} machines of its history ({got.machines[0][1]:.2f}-"
                       f"{got.machines[-1][1]:.2f} tok/s): the slowest fails on a good day; write a fleet floor "
                       f"(perfgate floors PROFILE REPORTS... --write) or widen the tolerance")
    return out
