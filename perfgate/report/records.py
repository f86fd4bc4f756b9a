"""The values a JUnit report is read into: :class:`Record` (one testcase), :class:`SuiteInfo`,
:class:`Report`, and the contract's outcome and stack keys (read by :mod:`perfgate.report.junit_read`).

Record id = ``classname::name`` with any ``@group`` suffix (pytest-xdist ``loadgroup``)
stripped. Within one report a record is addressed by its *key*: the id, or, when the same id
occurs several times (a report merged from several boxes), the id plus ``@<qualifier>``
where the qualifier is the record's ``stack.gpu``, else its hostname, else a counter.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from perfgate.categories import Outcome
from perfgate.record import MACHINE_PREFIXES, MACHINE_PROPERTIES, TEXT_PROPERTIES

#: the two-sided 95 % normal quantile: a recorded interval's half-width over it is the figure's sd
_Z95 = 1.959964

OUTCOMES: tuple[str, ...] = tuple(o.value for o in Outcome)
"""Every outcome a record can have (the contract's ``outcome`` property values)."""


STACK_KEYS: tuple[str, ...] = (
    "stack.gpu",
    "stack.gpu_count",
    "stack.sm",
    "stack.interconnect",
    "stack.driver",
    "stack.cuda",
    "stack.torch",
    "stack.nccl",
    "stack.sglang",
    "stack.sgl_kernel",
    "stack.flashinfer",
    "stack.simulated",
)
"""The stack fingerprint keys, in display order."""


def is_machine_key(key: str) -> bool:
    """A ``machine.*`` / ``calib.*`` property (text, like ``stack.*``; perfgate.record)."""
    return key.startswith(MACHINE_PREFIXES)


TEXT_KEYS = TEXT_PROPERTIES  # the record contract's (perfgate.record)
UNKNOWN = "unknown"


def parse_number(value: str | None) -> float | None:
    """A finite number, or None."""
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def parse_time(value: str | None) -> datetime | None:
    """Parse an ISO-8601 time; naive times are taken as UTC. ``None`` when absent or invalid."""
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


def strip_group(name: str) -> str:
    """Drop a pytest-xdist ``@group`` suffix: after the last ``]``, or the first ``@`` if no ``[``."""
    close = name.rfind("]")
    if close >= 0:
        at = name.find("@", close)
        return name[:at] if at >= 0 else name
    at = name.find("@")
    return name[:at] if at >= 0 else name


def record_id(classname: str, name: str) -> str:
    """The contract's record id: ``classname::name`` without an ``@group`` suffix."""
    name = strip_group(name)
    return f"{classname}::{name}" if classname else name


@dataclass(frozen=True, kw_only=True)
class Record:
    """One testcase of a report: identity, outcome, numbers and stack."""

    key: str
    id: str
    classname: str
    name: str
    outcome: str
    # "property" when the outcome came from the `outcome` property, "xml" when derived
    outcome_source: str
    message: str = ""
    hostname: str = ""
    suite_index: int = 0
    properties: tuple[tuple[str, str], ...] = ()
    numbers: tuple[tuple[str, float], ...] = ()
    stack: tuple[tuple[str, str], ...] = ()
    machine: tuple[tuple[str, str], ...] = ()  # machine.* and calib.* (the suite's, completed by the testcase's)
    duration_s: float | None = None  # the testcase's time (the first record of a config includes its start)

    def prop(self, name: str, default: str = "") -> str:
        """A testcase property as text (``default`` when absent)."""
        for k, v in self.properties:
            if k == name:
                return v
        return default

    def num(self, name: str) -> float | None:
        """A numeric property, ``None`` when absent (never ``-1``)."""
        for k, v in self.numbers:
            if k == name:
                return v
        return None

    @property
    def noise_unknown(self) -> bool:
        """Measured with fewer trials than an interval needs: a CI or CV it carries (older reports wrote
        them) means nothing."""
        from perfgate.measuring.metrics import MIN_TRIALS

        n = self.num("n")
        return n is not None and n < MIN_TRIALS

    @property
    def metric(self) -> str:
        """The number this record is judged on: ``tok_s`` unless it names another (``metric`` property)."""
        return self.prop("metric") or "tok_s"

    def metric_ci(self, metric: str) -> tuple[float, float] | None:
        """The recorded confidence interval of a metric's median, ordered; None when absent or meaningless."""
        lo, hi = self.num(f"{metric}_ci_low"), self.num(f"{metric}_ci_high")
        if lo is None or hi is None or self.noise_unknown:
            return None
        return (min(lo, hi), max(lo, hi))

    def cv(self, metric: str) -> float | None:
        """A metric's CV over trials (``<metric>_cv``; tok_s's is ``cv`` in reports before 2026-12-01)."""
        from perfgate.record import LEGACY_TOK_S_CV, cv_name

        v = self.num(cv_name(metric))
        return self.num(LEGACY_TOK_S_CV) if v is None and metric == "tok_s" else v

    def figure_cv(self, metric: str) -> float | None:
        """The relative sd of this record's figure of ``metric`` (the median of its trials) from its trials: its
        interval's half-width over z(0.975), else its trials' CV over sqrt(n) times sqrt(pi / 2) (a median's sd is
        ~1.25 x a mean's); None when unknown. The one reading of a record's own noise (``perfgate diff``'s within-
        start noise, ``perfgate history``'s point noise)."""
        x = self.num(metric)
        if not x or self.noise_unknown:
            return None
        ci = self.metric_ci(metric)
        if ci is not None:
            return (ci[1] - ci[0]) / (2 * _Z95 * abs(x))
        cv, n = self.cv(metric), self.num("n")
        return cv * math.sqrt(math.pi / 2) / math.sqrt(n) if cv is not None and n else None

    def tok_s_ci(self) -> tuple[float, float] | None:
        return self.metric_ci("tok_s")

    @property
    def number_dict(self) -> dict[str, float]:
        return dict(self.numbers)

    @property
    def stack_dict(self) -> dict[str, str]:
        return dict(self.stack)

    @property
    def machine_dict(self) -> dict[str, str]:
        return dict(self.machine)

    @property
    def category(self) -> str:
        return self.prop("category")

    @property
    def expected(self) -> str:
        return self.prop("expected")

    @property
    def reason(self) -> str:
        return self.prop("reason") or self.message

    @property
    def kind(self) -> str:
        return self.prop("kind")

    @property
    def engine(self) -> str:
        return self.prop("engine")

    @property
    def profile(self) -> str:
        return self.prop("profile")

    @property
    def mode(self) -> str:
        return self.prop("mode")

    @property
    def variant(self) -> str:
        return self.prop("variant")

    @property
    def config(self) -> str:
        return self.prop("config")

    @property
    def gpu(self) -> str:
        return self.stack_dict.get("stack.gpu", "")

    @property
    def outcome_label(self) -> str:
        """Outcome with its category, e.g. ``xfail(unsupported-arch)``."""
        cat = self.category
        return f"{self.outcome}({cat})" if cat and self.outcome != "pass" else self.outcome


@dataclass(frozen=True, kw_only=True)
class SuiteInfo:
    """One ``<testsuite>`` of a report (a merged report has one per box and run)."""

    name: str
    hostname: str
    timestamp: datetime | None
    started_at: datetime | None
    properties: tuple[tuple[str, str], ...] = ()

    def prop(self, name: str, default: str = "") -> str:
        for k, v in self.properties:
            if k == name:
                return v
        return default

    @property
    def time(self) -> datetime | None:
        """``perfgate.started_at``, else the testsuite timestamp."""
        return self.started_at or self.timestamp


@dataclass(frozen=True, kw_only=True)
class Report:
    """A whole JUnit report: its suites and its records (keys unique within the report)."""

    path: str
    suites: tuple[SuiteInfo, ...]
    records: tuple[Record, ...]
    notes: tuple[str, ...] = ()
    _index: Mapping[str, Record] = field(default_factory=dict, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {r.key: r for r in self.records})

    @property
    def by_key(self) -> Mapping[str, Record]:
        """Records by key."""
        return self._index

    @property
    def started_at(self) -> datetime | None:
        """Earliest suite time (``perfgate.started_at``, else the testsuite timestamp)."""
        times = [s.time for s in self.suites if s.time is not None]
        return min(times) if times else None

    @property
    def label(self) -> str:
        """Short human label: file stem and start time."""
        stem = Path(self.path).stem if self.path else "report"
        t = self.started_at
        return f"{stem} ({t.strftime('%Y-%m-%d %H:%M')})" if t else stem

    def suite_prop(self, name: str) -> str:
        """A suite property; distinct values of several suites are joined with `` | `` (suite order)."""
        values = dict.fromkeys(s.prop(name) for s in self.suites if s.prop(name))
        return " | ".join(values)

    @property
    def engine(self) -> str:
        """``perfgate.engine`` (suite), else the records' ``engine`` values; '' when unknown."""
        eng = self.suite_prop("perfgate.engine")
        if eng:
            return eng
        return " | ".join(sorted({r.engine for r in self.records if r.engine}))

    @property
    def profile(self) -> str:
        """``perfgate.profile`` (suite), else the records' ``profile`` values; '' when unknown."""
        return self.suite_prop("perfgate.profile") or " | ".join(sorted({r.profile for r in self.records
                                                                          if r.profile}))

    @property
    def simulated(self) -> bool | None:
        v = self.suite_prop("perfgate.simulated") or self.stack.get("stack.simulated", "")
        if v == "true":
            return True
        if v == "false":
            return False
        return None

    @property
    def stack(self) -> dict[str, str]:
        """Stack fingerprint: suite ``stack.*`` properties, completed from the testcases.

        Several distinct values (a merged report of several boxes) are joined with `` | ``,
        in suite order.
        Keys nobody reported are absent.
        """
        values: dict[str, dict[str, None]] = defaultdict(dict)  # insertion-ordered sets
        for s in self.suites:
            for k, v in s.properties:
                if k.startswith("stack."):
                    values[k][v] = None
        for r in self.records:
            for k, v in r.stack:
                values[k][v] = None
        out = {k: " | ".join(vs) for k, vs in values.items()}
        order = {k: i for i, k in enumerate(STACK_KEYS)}
        return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))

    @property
    def machine(self) -> dict[str, str]:
        """The machine fingerprint and calibration (``machine.*``, ``calib.*``): suite properties, completed
        from the testcases; several distinct values (a merged report) joined with `` | ``; absent keys (an
        older report) absent."""
        values: dict[str, dict[str, None]] = defaultdict(dict)
        for s in self.suites:
            for k, v in s.properties:
                if is_machine_key(k):
                    values[k][v] = None
        for r in self.records:
            for k, v in r.machine:
                values[k][v] = None
        out = {k: " | ".join(vs) for k, vs in values.items()}
        order = {k: i for i, k in enumerate(MACHINE_PROPERTIES)}
        return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


#: outcomes a CI system counts as failed (a JUnit <failure> or <error>)
FAILING = frozenset({"fail", "xpass", "error"})
