"""The record kinds: the one home of what a kind decides. Every other module asks :data:`KINDS`.

A record's kind (``Case.kind``, the ``kind`` property) says which cases a profile produces for it, where it runs
among a config's records, whether the terminal's record matrix shows it, the figure its line in the terminal's
record list shows, which floor ``--perfgate-update-baselines`` writes from it and which config it is compared with.
A kind not in the registry is a user's (``@pytest.mark.perfgate(kind="mine")``): one case per mode (or per
``modes=[...]``, plus each variant with ``variants=True``), run after the built-in kinds, one row per kind and
metric in the matrix.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from perfgate.categories import RecordKind

__all__ = ["Cases", "Compares", "Kind", "KINDS", "USER_ORDER", "kind_of", "compares_of", "run_order", "in_matrix",
           "figure_of", "update_key",
           "FLOOR", "SWEEP", "ACCEPTANCE", "CROSSCHECK", "SPECULATION", "VARIANT", "STACK_PAIR", "PROFILE",
           "GOODPUT", "CROSSOVER", "ALLREDUCE"]


class Cases(enum.Enum):
    """Which cases (records) a profile produces for a kind."""

    PLAIN_MODES = "one per non-speculative mode"
    SPECULATIVE_MODES = "one per speculative mode"
    EVERY_MODE = "one per mode"
    ON_BASELINE = "one on the baseline mode"
    PER_VARIANT = "one per variant in each of the profile's variant modes"
    AS_MARKED = "one per mode the marker names (modes=[...], variants=True), as a user's kind"
    MICRO = "the micro tier's plan: backend x world size x timing x size, no server config"


class Compares(enum.Enum):
    """The config a record is compared with (started interleaved with it under --perfgate-starts N)."""

    BASELINE_MODE = "the profile's baseline mode"
    OWN_MODE = "the baseline of its own mode (a variant's mode without the variant)"
    CANDIDATE = "the same config on --perfgate-candidate's stack"


@dataclass(frozen=True, kw_only=True)
class Kind:
    """One record kind: its name, run order, matrix row, cases and floor update key."""

    name: str
    #: where its records run among a config's records (lower first); a user's kind runs at USER_ORDER
    order: float
    cases: Cases
    #: the terminal's record matrix shows it (one row per variant, or "(baseline)" / "(speculation)")
    matrix: bool = False
    #: the [floors.<mode>] key --perfgate-update-baselines writes from its measurement, if any
    update_key: str | None = None
    compares: Compares | None = None
    #: an [expectations.<name>] entry of a profile may name it (else only variants and "allreduce:<backend>")
    expectation: bool = True
    #: the option (auto/on/off, perfgate.profiles.settings) that switches it on; auto: only where SGLang serves
    option: str | None = None
    #: its parameters carry the marker of the mode they check (baseline / speculative), so -m selects them
    marked_as_mode: bool = False
    #: its measurement adds the profile's concurrency sweep
    sweeps: bool = False
    #: the figure its line in the terminal's record list shows when the record names no ``metric``
    figure: str = "tok_s"

    @property
    def builtin(self) -> bool:
        """perfgate's own tests decide its cases (not the marker)."""
        return self.cases is not Cases.AS_MARKED


#: the order a user's kind (not in the registry) runs in: after the built-in kinds, with the load records
USER_ORDER = 9.0

# the names (perfgate.categories.RecordKind: the record contract names them too)
FLOOR = RecordKind.FLOOR
SWEEP = RecordKind.SWEEP
ACCEPTANCE = RecordKind.ACCEPTANCE
CROSSCHECK = RecordKind.CROSSCHECK
SPECULATION = RecordKind.SPECULATION
VARIANT = RecordKind.VARIANT
STACK_PAIR = RecordKind.STACK_PAIR
PROFILE = RecordKind.PROFILE
GOODPUT = RecordKind.GOODPUT
CROSSOVER = RecordKind.CROSSOVER
ALLREDUCE = RecordKind.ALLREDUCE

_ALL = (
    Kind(name=FLOOR, order=0, cases=Cases.PLAIN_MODES, matrix=True, update_key="tok_s"),
    Kind(name=SWEEP, order=1, cases=Cases.ON_BASELINE, sweeps=True),  # none without [workload] concurrency_sweep
    Kind(name=ACCEPTANCE, order=2, cases=Cases.SPECULATIVE_MODES, update_key="accept_len", figure="accept_len"),
    # SGLang's own benchmark: by default only where SGLang serves (--perfgate-crosscheck)
    Kind(name=CROSSCHECK, order=3, cases=Cases.EVERY_MODE, expectation=False, option="crosscheck",
         marked_as_mode=True),
    # step profiles (a marked kind) run before the speculation record, which reads the measured all-reduces from
    # them (perfgate.measuring.checks.speculation_explained)
    Kind(name=PROFILE, order=3.5, cases=Cases.AS_MARKED, figure="step_us"),
    Kind(name=SPECULATION, order=4, cases=Cases.SPECULATIVE_MODES, matrix=True, compares=Compares.BASELINE_MODE),
    Kind(name=VARIANT, order=5, cases=Cases.PER_VARIANT, matrix=True, compares=Compares.OWN_MODE),
    # one per mode; without --perfgate-candidate each skips, saying so
    Kind(name=STACK_PAIR, order=6, cases=Cases.EVERY_MODE, expectation=False, compares=Compares.CANDIDATE),
    # the load records (goodput, crossover: perftests/test_goodput.py, test_crossover.py) run among a user's kinds,
    # in collection order; what they serve does not reach a later record on the server: every trial flushes first,
    # and the simulator's acceptance draws start over at a flush (tests/test_sim_history.py; they ran last while
    # they did not, which read a later EAGLE-3 4-stream TTFT 177 ms instead of 149: docs/load.md)
    Kind(name=GOODPUT, order=USER_ORDER, cases=Cases.AS_MARKED, figure="goodput_rps"),
    Kind(name=CROSSOVER, order=USER_ORDER, cases=Cases.AS_MARKED, figure="crossover"),
    # the micro tier (perfgate.plugin.microcheck): no server config; its expectations are "allreduce:<backend>"
    Kind(name=ALLREDUCE, order=USER_ORDER, cases=Cases.MICRO, expectation=False, figure="latency_us"),
)

#: every kind perfgate knows, in run order
KINDS: Mapping[str, Kind] = MappingProxyType({k.name: k for k in sorted(_ALL, key=lambda k: k.order)})


def kind_of(name: str) -> Kind | None:
    """The registered kind of that name; None for a user's kind."""
    return KINDS.get(name)


def compares_of(name: str, *, variant: bool, fixtures: Collection[str]) -> tuple[Compares, ...]:
    """What a record of this kind is compared with (and started interleaved with): the registry's ``compares``;
    where it has none (a user's kind), what the test's fixtures ask: ``perf_baseline`` a variant's own mode for a
    variant's record, the profile's baseline mode for a mode's; ``perf_candidate`` the same config on the
    candidate stack."""
    k = KINDS.get(name)
    if k is not None and k.compares is not None:
        return (k.compares,)
    out = [Compares.OWN_MODE if variant else Compares.BASELINE_MODE] if "perf_baseline" in fixtures else []
    return (*out, Compares.CANDIDATE) if "perf_candidate" in fixtures else tuple(out)


def run_order(name: str) -> float:
    k = KINDS.get(name)
    return USER_ORDER if k is None else k.order


def in_matrix(name: str) -> bool:
    """The terminal's record matrix shows records of this kind: the matrix kinds, and a user's (or a marked) kind
    one row per kind and metric; the other built-in kinds are not shown."""
    k = KINDS.get(name)
    return k is None or k.matrix or not k.builtin


def figure_of(name: str, metric: str = "") -> str:
    """The figure a record's line in the terminal's record list shows: the metric it names, else its kind's
    (``tok_s`` for a user's kind that names none)."""
    k = KINDS.get(name)
    return metric or (k.figure if k is not None else "tok_s")


def update_key(name: str) -> str | None:
    k = KINDS.get(name)
    return None if k is None else k.update_key
