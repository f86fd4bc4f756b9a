"""Repeated server starts (``--perfgate-starts N``): the server start is the unit a verdict must repeat.

A restart on the same machine moves decode tok/s by more than the trials inside one start say (issue 22),
so with N > 1 every config a session measures is started N times, each start measured with the workload's
trials, and the configs compared with each other are started interleaved (A B B A ..., never A A B B): when a
config's measurement is first needed, :func:`measure_interleaved` measures it and every config it is
compared with (directly or through another: the connected group of the session's ``compared``), start by
start, each start a new server process, the order within each round alternated (A B, then B A: a place in the
pair favours neither config; perfgate.measuring.order), and caches one pooled
:class:`~perfgate.measuring.metrics.Measurement` per config whose ``starts`` keep the per-start measurements
(:func:`perfgate.measuring.starts.combine`). Comparisons then judge the
per-start pairs (:func:`perfgate.measuring.metrics.paired_ratios`, ``perfgate.measuring.judge.paired``); a record
carries the between-start
spread (:func:`perfgate.measuring.starts.start_properties`). pytest's item order is untouched: the session is read
through :class:`StartsSession` (the pytest layer's ``StartsSession`` is one), an item through what pytest's items
have (``session.items``, ``config``, ``fixturenames``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from perfgate.kinds import Compares, compares_of
from perfgate.measuring.metrics import Measurement
from perfgate.measuring.starts import combine
from perfgate.record import Case, case_of
from perfgate.serving.pool import Pool, ServerFailed

if TYPE_CHECKING:
    from perfgate.measuring.ledger import Ledger
    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig
    from perfgate.profiles.settings import Settings

T = TypeVar("T")
Item = TypeVar("Item")
#: co-resident arms: the configs' measurements taken side by side (PerfRun._measure_servers)
Together = Callable[[Sequence["ServerConfig"]], list[T | ServerFailed | None]]

__all__ = ["ServerStarts", "StartsSession", "note_comparison", "note_comparisons",
           "compared_configs", "group_of", "group_for", "measure_interleaved"]


class StartsSession(Protocol):
    """What the starts read and note of the session (perfgate.plugin.state.StartsSession is one)."""

    compared: dict[str, set[str]]  # config key -> the keys it is compared with: their starts interleave
    compared_known: bool  # compared filled from the session's final items
    selected_configs: dict[str, ServerConfig]
    added_start_s: float  # seconds spent on starts added to undecided comparisons (--perfgate-max-time)
    co_resident_said: bool  # the note that a group is measured one start at a time, said
    ledger: Ledger

    @property
    def profile(self) -> Profile: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def pool(self) -> Pool: ...

    def config_for(self, case: Case) -> ServerConfig: ...


def note_comparison(st: StartsSession, a: ServerConfig, b: ServerConfig) -> None:
    """``a`` is compared with ``b`` in this session: their starts interleave."""
    if a.key != b.key:
        st.compared.setdefault(a.key, set()).add(b.key)
        st.compared.setdefault(b.key, set()).add(a.key)
        st.selected_configs.setdefault(a.key, a)
        st.selected_configs.setdefault(b.key, b)


def note_comparisons(st: StartsSession, items: Sequence[Any]) -> None:
    """Which configs the session's final items compare (a variant and a speculative mode with their baseline, a
    stack-pair's two arms): with --perfgate-starts N > 1 their starts interleave. Called at the first
    measurement, after every plugin (``-m``, ``-k``, shards) has deselected what it does not run."""
    for it in items:
        case = case_of(it)
        if case is not None:
            own, *others = compared_configs(st, case, getattr(it, "fixturenames", ()))
            for other in others:
                note_comparison(st, own, other)


def compared_configs(st: StartsSession, case: Case, fixtures: Collection[str] = ()) -> list[ServerConfig]:
    """The record's config and those it is compared with (``perfgate.kinds.compares_of``: its kind's, or
    for a user's kind its test's ``fixtures``: perf_baseline, perf_candidate)."""
    out = [st.config_for(case)]
    for compares in compares_of(case.kind, variant=case.variant is not None, fixtures=fixtures):
        if compares is Compares.CANDIDATE:
            if st.settings.candidate is not None:
                out.append(st.config_for(case.on_candidate()))
            continue
        base = case.mode if compares is Compares.OWN_MODE else st.profile.baseline_mode()
        out.append(st.config_for(case.baseline(base)))
    return out


def group_for(st: StartsSession, config: ServerConfig, item: Any) -> list[ServerConfig]:
    """The configs to start interleaved with ``config`` when ``item`` first needs it: the whole group of
    configs compared with each other (:func:`group_of`); under pytest-xdist, where a worker runs only some of
    the records, ``config`` and the one the item's own record compares it with."""
    if not st.compared_known:
        st.compared_known = True
        note_comparisons(st, list(getattr(item.session, "items", ())))
    if not hasattr(item.config, "workerinput"):
        return group_of(st, config)
    case = case_of(item)
    mine = compared_configs(st, case, getattr(item, "fixturenames", ())) if case is not None else []
    return [config, *(c for c in mine if c.key != config.key)] if any(c.key == config.key for c in mine) else [config]


def group_of(st: StartsSession, config: ServerConfig) -> list[ServerConfig]:
    """``config`` and every config compared with it, directly or through another, in a stable order (the
    config first, then in the order the session selected them)."""
    seen = {config.key}
    todo = [config.key]
    while todo:
        for k in st.compared.get(todo.pop(), ()):
            if k not in seen:
                seen.add(k)
                todo.append(k)
    order = [k for k in st.selected_configs if k in seen and k != config.key]
    return [config, *(st.selected_configs[k] for k in order)]


class ServerStarts:
    """The session's server starts, one step at a time: the pool that starts them, the ledger that counts those
    measured (so that a start is measured once), and the time budget of starts added while a comparison is
    undecided (``--perfgate-max-starts``, ``--perfgate-max-time``). Every loop over starts is its :meth:`round`
    (one start of each item in the pair's order) and :meth:`measure` (one start): :func:`measure_interleaved`
    (``--perfgate-starts N``: N rounds), ``PerfRun.more_starts`` (one round added while undecided) and
    ``measure_goodput`` (a search per start)."""

    def __init__(self, st: StartsSession) -> None:
        self._st = st

    @property
    def pool(self) -> Pool:
        return self._st.pool

    def fresh(self, cfg: ServerConfig) -> None:
        """Stop the running server unless it is ``cfg``'s and no start has been measured on it yet (the one the
        ``perf_server`` fixture started): the next measurement then starts a new server process."""
        m = self.pool.launched
        if m is None:  # attached, or nothing launched yet
            return
        cur = m.current  # always the latest start (number m.starts)
        if cur is not None and cur.config.key == cfg.key and not self._st.ledger.start_measured(m.starts):
            return
        m.stop()

    def measured(self) -> None:
        """The running start has been measured: the next :meth:`fresh` stops it."""
        launched = self.pool.launched
        if launched is not None:
            self._st.ledger.note_measured_start(launched.starts)

    def measure(self, cfg: ServerConfig, measure_one: Callable[[ServerConfig], T], *, added: bool = False,
                note: bool = True, restart: bool = True) -> T | ServerFailed:
        """A new start of ``cfg`` (:meth:`fresh`; without ``restart`` whatever server of ``cfg`` runs) measured by
        ``measure_one`` (a measurement, or a goodput search) and, with ``note``, noted measured; the pool's failure
        where the start or its measurement failed. ``added``: a start added while undecided, whose time counts
        against ``--perfgate-max-time``."""
        t0 = time.monotonic()
        if restart:
            self.fresh(cfg)
        try:
            m: T | ServerFailed = measure_one(cfg)
        except ServerFailed as e:
            m = e
        if added:
            self._st.added_start_s += time.monotonic() - t0
        if note and not isinstance(m, ServerFailed):
            self.measured()
        return m

    def round(self, items: Sequence[Item], pair: int, config_of: Callable[[Item], ServerConfig],
              measure_one: Callable[[Item, ServerConfig], T], *, added: bool = False,
              together: Together[T] | None = None) -> Iterator[tuple[Item, T | ServerFailed | None]]:
        """One round of starts, the loop every paired comparison takes over its starts: each of ``items`` (a
        config, or what a record measured on one) started once in the order of pair number ``pair``
        (perfgate.measuring.order.in_pair_order: as given when even, reversed when odd), measured by
        ``measure_one`` (:meth:`measure`); yields each item with its measurement or failure, as it goes. With
        co-resident arms (``--perfgate-co-resident``, two configs of one mode) both are started, in that order, and
        measured side by side by ``together`` (None for one whose partner failed to start)."""
        from perfgate.measuring.order import in_pair_order

        order = in_pair_order(items, pair)
        configs = [config_of(i) for i in order]
        if together is not None and self.side_by_side(configs):
            t0 = time.monotonic()
            self.fresh(configs[0])  # a new start of each (but the first's, where it runs unmeasured: perf_server's)
            results = together(configs)
            if added:
                self._st.added_start_s += time.monotonic() - t0
            launched = self.pool.launched
            for c, r in zip(configs, results):
                if launched is not None and r is not None and not isinstance(r, ServerFailed):
                    self._st.ledger.note_measured_start(launched.number(c.key))
            yield from zip(order, results)
            return
        for item, cfg in zip(order, configs):
            yield item, self.measure(cfg, partial(measure_one, item), added=added)

    def side_by_side(self, configs: Sequence[ServerConfig]) -> bool:
        """Whether these configs' starts run side by side: co-resident arms asked for, launched servers, two configs
        of one mode (one workload); else they run one at a time (said once, perfgate.serving.coresident)."""
        st = self._st
        if st.settings.co_resident is None or self.pool.attached:
            return False
        if len(configs) == 2 and configs[0].mode == configs[1].mode:
            return True
        if not st.co_resident_said:
            st.co_resident_said = True
            self.pool.note(f"perfgate: --perfgate-co-resident: {', '.join(c.name for c in configs)} are measured one "
                           f"start at a time (side by side takes two configs of one mode)")
        return False

    def budget_spent(self, pairs: int) -> str:
        """Why no start pair may be added to a comparison of ``pairs`` pairs (empty: one may)."""
        s = self._st.settings
        if pairs >= s.max_starts:
            return f"the budget of {s.max_starts} start pairs (--perfgate-max-starts) is spent"
        if s.max_time_s is not None and self._st.added_start_s >= s.max_time_s:
            return f"the {s.max_time_s:g} s of --perfgate-max-time for added start pairs are spent"
        return ""


def measure_interleaved(st: StartsSession, configs: Sequence[ServerConfig], n: int,
                        measure_one: Callable[[ServerConfig], Measurement], *,
                        confidence: float, on_failure: Callable[[ServerConfig, ServerFailed], None],
                        key_of: Callable[[ServerConfig], str] = lambda c: c.key,
                        together: Together[Measurement] | None = None) -> None:
    """Start each of ``configs`` ``n`` times, round by round, each round's order alternated (A B, B A, A B ...:
    :func:`perfgate.measuring.order.in_pair_order`, so that a place in the pair favours neither arm), measure each
    start with ``measure_one`` and cache the pooled measurement in ``st.ledger``. A config whose start or
    measurement fails is handed to ``on_failure`` and not started again; the others go on."""
    starts = ServerStarts(st)
    pool = starts.pool
    per: dict[str, list[Measurement]] = {c.key: [] for c in configs}
    for pair in range(n):
        todo = [c for c in configs if pool.failure(c) is None and st.ledger.measurement(key_of(c)) is None]
        for cfg, m in starts.round(todo, pair, lambda c: c, lambda _, c: measure_one(c), together=together):
            if isinstance(m, ServerFailed):
                on_failure(cfg, m)
            elif m is not None:
                per[cfg.key].append(m)
    for cfg in configs:
        if pool.failure(cfg) is None and st.ledger.measurement(key_of(cfg)) is None and per[cfg.key]:
            st.ledger.note_measurement(key_of(cfg), combine(per[cfg.key], confidence=confidence))
