"""The session's ledger: what it measured (measurements by key, step profiles by config key, the server starts
measured) and what ``--perfgate-update-baselines`` writes at session finish (the floor updates with their
``measured`` facts, and the refusals), in one :class:`Ledger` held as ``PerfgateState.ledger``.

Under pytest-xdist each worker ships its floor updates to the controller once, when it ends
(:meth:`Ledger.to_workeroutput` in the worker's ``workeroutput``, :meth:`Ledger.merge` on the controller), and
the controller writes them into the profile once, at session finish, whatever plugins are active
(:meth:`Ledger.write`). Writing keeps the profile's layout: only the keys that change are touched (tomlkit keeps
every comment, blank line and the order of the file; a new key or table goes in through
:func:`perfgate.profiles.tomledit.put`, never between a comment and the table or key it describes); each updated
mode gets a ``[floors.<mode>.measured]`` table
with the date, trials, CV and the stack fingerprint. The result is loaded again before it replaces the file; a
file that would no longer load is left as it was (:func:`perfgate.profiles.writer.write_profile` raises
:class:`~perfgate.errors.ConfigError`, and :meth:`Ledger.write` says so in red). The writing itself, pytest-free,
is :mod:`perfgate.profiles.writer`.

It needs no pytest: the pytest session's state (:mod:`perfgate.plugin.state`) holds one and hands itself to the
notes below as a :class:`Session` (a protocol), and the terminal summary's lines of the writing are stashed
by the plugin. What only writing needs (tomlkit, the profile writer) is imported where it is used.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perfgate.errors import PerfgateError
from perfgate.kinds import FLOOR, update_key
from perfgate.record import Case

if TYPE_CHECKING:
    from perfgate.measuring.floorcheck import FloorWrite
    from perfgate.measuring.metrics import Measurement
    from perfgate.measuring.trace import StepProfile
    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig
    from perfgate.profiles.settings import Settings
    from perfgate.stack import Stack
    from perfgate.stack.fingerprint import Fingerprint

__all__ = ["Ledger", "Update", "Refusal", "Session", "WORKEROUTPUT_KEY", "note_floor", "note_value",
           "refuse_update"]

#: a floor to write: (floors table, key, old value or None, new value)
Update = tuple[str, str, object, float]
#: a floor not written: (floors table, key, why)
Refusal = tuple[str, str, str]
#: the key of a worker's ``workeroutput`` that carries its ledger to the xdist controller
WORKEROUTPUT_KEY = "perfgate_ledger"


class Ledger:
    """The one home of a session's measurements, step profiles and floor updates (``PerfgateState.ledger``).

    Measurements and step profiles stay in the process that made them; the floor updates, their ``measured``
    facts and the refusals travel: :meth:`to_workeroutput` is what an xdist worker ships (plain JSON), and
    :meth:`merge` adds what a worker shipped, so that the controller's ledger is the session's.
    """

    def __init__(self) -> None:
        self._measurements: dict[str, Measurement] = {}
        self._step_profiles: dict[str, StepProfile] = {}
        self._measured_starts: set[int] = set()
        self._updates: list[Update] = []
        self._meta: dict[str, dict[str, object]] = {}
        self._refused: list[Refusal] = []

    # ------------------------------------------------------------------ what was measured

    def measurement(self, key: str) -> Measurement | None:
        """The measurement cached under ``key`` (a config key, ``<key>@<workload>`` for another workload)."""
        return self._measurements.get(key)

    def note_measurement(self, key: str, m: Measurement) -> None:
        self._measurements[key] = m

    def step_profile(self, config_key: str) -> StepProfile | None:
        """The config's step profile, when this session took one (the profile records)."""
        return self._step_profiles.get(config_key)

    def note_step_profile(self, config_key: str, prof: StepProfile) -> None:
        self._step_profiles[config_key] = prof

    def start_measured(self, start: int) -> bool:
        """Whether the server manager's start number ``start`` has been measured (perfgate.serving.starts)."""
        return start in self._measured_starts

    def note_measured_start(self, start: int) -> None:
        self._measured_starts.add(start)

    # ------------------------------------------------------------------ what --perfgate-update-baselines writes

    def note_update(self, table: str, key: str, old: object, new: float, meta: Mapping[str, object]) -> None:
        """``[floors.<table>] <key> = new`` (was ``old``), its ``measured`` facts merged into the table's."""
        self._updates.append((table, key, old, new))
        self._meta.setdefault(table, {}).update(meta)

    def refuse(self, table: str, key: str, why: str) -> None:
        """``[floors.<table>] <key>`` is not written, and the summary says ``why``."""
        self._refused.append((table, key, why))

    @property
    def updates(self) -> tuple[Update, ...]:
        return tuple(self._updates)

    @property
    def meta(self) -> dict[str, dict[str, object]]:
        """The ``measured`` facts per floors table (a copy)."""
        return {t: dict(m) for t, m in self._meta.items()}

    @property
    def refused(self) -> tuple[Refusal, ...]:
        return tuple(self._refused)

    # ------------------------------------------------------------------ across xdist workers

    def to_workeroutput(self) -> dict[str, Any]:
        """What a worker ships to the controller: its floor updates, their facts and its refusals, as plain
        JSON (lists, dicts, strings, numbers; execnet carries nothing else)."""
        return {"updates": [list(u) for u in self._updates], "meta": self.meta,
                "refused": [list(r) for r in self._refused]}

    def merge(self, shipped: Mapping[str, Any]) -> None:
        """Add what a worker shipped (:meth:`to_workeroutput`): its updates and refusals after this ledger's,
        its facts merged into each table's, as if the worker's notes had been made here."""
        try:
            updates = [(str(t), str(k), old, float(new)) for t, k, old, new in shipped["updates"]]
            refused = [(str(t), str(k), str(why)) for t, k, why in shipped["refused"]]
            meta = {str(t): dict(m) for t, m in shipped["meta"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"perfgate: a worker's workeroutput[{WORKEROUTPUT_KEY!r}] is not a ledger "
                             f"({type(e).__name__}: {e}); fix: run the controller and the workers with one "
                             f"perfgate version") from None
        self._updates.extend(updates)
        for table, m in meta.items():
            self._meta.setdefault(table, {}).update(m)
        self._refused.extend(refused)

    # ------------------------------------------------------------------ at session finish

    def write(self, path: Path) -> list[tuple[str, str]]:
        """Write every update into the profile at ``path``, once; return what was written and refused, one line
        each with its colour (``""``, ``yellow``, ``red``) for the terminal summary (or stderr without one)."""
        lines = [(f"perfgate: NOT updated {path} [floors.{mode}] {key}: {why}", "yellow")
                 for mode, key, why in self._refused]
        if not self._updates:
            return [*lines, ("perfgate: --perfgate-update-baselines: nothing measured to write", "")]
        from perfgate.profiles.writer import write_updates

        try:
            write_updates(path, self._updates, self._meta)
        except (PerfgateError, OSError) as e:
            return [*lines, (f"perfgate: --perfgate-update-baselines: {path} NOT written: {e}", "red")]
        return [*lines, *((f"perfgate: updated {path} [floors.{mode}] {key}: {'(none)' if old is None else old} "
                           f"-> {new}", "") for mode, key, old, new in self._updates)]


class Session(Protocol):
    """What the notes below read of a session (:class:`perfgate.plugin.state.PerfgateState` is one)."""

    @property
    def ledger(self) -> Ledger: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def stack(self) -> Stack: ...

    @property
    def fingerprint(self) -> Fingerprint: ...

    @property
    def settings(self) -> Settings: ...

    def config_for(self, case: Case) -> ServerConfig: ...


# ----------------------------------------------------------------------------- during the run


def refuse_update(state: Session, case: Case, why: str) -> None:
    """--perfgate-update-baselines: this record's floor is not written, and the summary says why."""
    key = update_key(case.kind)  # the floor a record of this kind writes (perfgate.kinds)
    if key is not None and state.settings.update_baselines:
        state.ledger.refuse(case.mode, key, why)


def note_floor(state: Session, mode: str, table: str, old: object, f: FloorWrite) -> None:
    """Remember the limit a record's one call returned (perfgate.measuring.floorcheck.FloorWrite: the floor record's,
    a goodput search's, a crossover's) to write at session finish, with its tolerance (from per-start values, or
    from the measurement it came from), or why it is not written. ``table`` is the floors table it goes to (the
    mode's, or ``<mode>.c<N>`` for a limit at concurrency N)."""
    if not state.settings.update_baselines:
        return
    note_value(state, table, f.metric, old, None if f.why else f.new, n=f.n, cv=f.cv, why=f.why, mode=mode,
               extra={"concurrency": f.concurrency} if table != mode and f.concurrency is not None else None)
    if f.why:
        return
    if f.starts is not None:
        note_tolerance(state, table, f.metric, starts=f.starts)
    elif f.tolerance_from is not None:
        note_tolerance(state, table, f.metric, f.tolerance_from)


def note_tolerance(state: Session, table: str, key: str, m: Measurement | None = None, *,
                   starts: Sequence[float] | None = None) -> None:
    """Write ``<key>_tolerance`` beside the limit ``key`` just noted, from the metric's own noise
    (:func:`perfgate.profiles.noise.limit_tolerance`: the next identical run on this machine passes it with 99 %),
    unless the profile gives that limit its own; the stamp records the noise it came from (``<key>_noise``).
    The noise between starts is the measurement's (``m``) or the per-start values given (``starts``: a goodput
    record's), the prior of the metric's class where none or fewer than two."""
    from perfgate.measuring.metrics import METRICS
    from perfgate.profiles.noise import limit_tolerance, noise_for

    st = state
    fl = st.profile.floors.get(table.split(".c")[0] if table not in st.profile.modes else table)
    if fl is not None and key in fl.tolerances:
        return
    stat = m.stat(key) if m is not None and key in METRICS else None
    if starts is None:
        starts = m.start_values(key) if m is not None and key in METRICS else ()
    start_cv = None
    if len(starts) >= 2:
        import statistics

        start_cv = statistics.stdev(starts) / statistics.fmean(starts)
    within = (stat.cv or 0.0) * 1.25 / max(1, stat.n) ** 0.5 if stat is not None else 0.0
    simulated = st.profile.simulated
    gpu = str(st.stack.gpu)
    tol = limit_tolerance(key, simulated=simulated, gpu=gpu, start_cv=start_cv, n_starts=max(1, len(starts)),
                          within_cv=within)
    noise = noise_for(key, "starts", measured=start_cv, simulated=simulated, gpu=gpu).cv
    st.ledger.note_update(table, f"{key}_tolerance", None, tol, {f"{key}_noise": round(noise, 4)})


def note_value(state: Session, table: str, key: str, old: object, new: float | None, *, n: int,
               cv: float | None, why: str = "", mode: str | None = None,
               extra: Mapping[str, object] | None = None) -> None:
    """Remember ``[floors.<table>] <key> = new`` to write at session finish, or why it is not written (``why``);
    the one place a measured limit enters the ledger (decode floors, a user's ``perf_check``, the load records)."""
    st = state
    if not st.settings.update_baselines:
        return
    if why or new is None:
        st.ledger.refuse(table, key, why or "nothing was measured")
        return
    mode = mode or table
    st.ledger.note_update(table, key, old, round(float(new), 2), {
        "date": _dt.date.today().isoformat(),
        "n": n,
        "cv": round(cv, 4) if cv is not None else 0.0,
        "engine": st.profile.engine.name,
        "attention_backend": str(st.config_for(Case(st.profile.name, FLOOR, mode, None)).flag_dict.get(
            "attention-backend", "auto")),
        **(dict(extra) if extra else {}),
        **({"attached": st.settings.url} if st.settings.url else {}),
        **{k.removeprefix("stack."): v for k, v in st.stack.as_properties().items()},
        # the machine it was measured on: a floor of one machine is not a fleet's (perfgate floors)
        "machine": st.fingerprint.machine.id,
        **({"hbm_gbps": st.fingerprint.calibration.hbm_gbps} if st.fingerprint.calibration.hbm_gbps else {}),
    })
