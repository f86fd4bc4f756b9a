"""The CI gate: a :class:`GatePolicy` applied to a :class:`~perfgate.report.diff.Diff`.

Exit codes (``perfgate gate OLD.xml NEW.xml``; documented in ``docs/gate.md``):

====  =====================================================================================
0     nothing that the policy blocks on
1     a blocking change: newly broken, regressed beyond noise (and below ``min_ratio``),
      and, if the policy says so, gone records, other outcome changes, new failing records,
      records that passed and lost their verdict (``lost-verdict``, on by default: too noisy, too few
      trials, a warm cache), and any record that became inconclusive (``allow_inconclusive = false``)
2     usage error or unreadable input (bad option, missing/invalid report, bad policy,
      an empty NEW report, reports from different engines unless allowed)
3     only unblocked records whose expectations must be updated (``xfail`` → ``xpass``, or
      → ``pass`` while the new report still expects a failure)
====  =====================================================================================

1 wins over 3: a regression is reported even when something also unblocked.

The policy lives in the project's ``pyproject.toml`` (the first one found from the current
directory upwards) under ``[tool.perfgate.gate]`` (or dotted ``gate.*`` keys in
``[tool.perfgate]``); command-line options override it.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from pathlib import Path

from perfgate.errors import ConfigError, ReportError
from perfgate.report.diff import REGRESSED, UNDECIDED, Diff, Judging, RecordDiff, diff
from perfgate.report.noise import bands_from_reports
from perfgate.report.records import Report

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


#: the hardware fingerprint: reports that differ in any of these measured different machines
HARDWARE_KEYS: tuple[str, ...] = ("stack.gpu", "stack.gpu_count", "stack.sm", "stack.interconnect")


class ExitCode(IntEnum):
    """Exit codes of ``perfgate gate`` (and of the other report subcommands: 0 and 2)."""

    OK = 0
    BLOCKED = 1
    USAGE = 2
    UNBLOCKED = 3


BLOCK_ON_CHOICES: tuple[str, ...] = (
    "newly-broken",  # pass/xpass -> fail/error
    "regressed",  # tok_s dropped beyond noise (and new/old < min_ratio)
    "unblocked",  # xfail -> pass/xpass needing an expectation update: exit 3
    "gone",  # a record of OLD is missing from NEW
    "changed",  # any other outcome change (pass -> xfail, xfail -> fail, ...)
    "new-failing",  # a record only in NEW that fails or errors
    "lost-verdict",  # pass/xpass -> inconclusive: it had a verdict and has none now (noisy, too few trials, ...)
    "unjudged",  # a record only in NEW: no baseline record to judge it against (never a silent pass)
    "undecided",  # moved, but within the noise it crosses (another machine, too few starts): off by default
)
"""Values allowed in ``gate.block_on``."""

DEFAULT_BLOCK_ON: tuple[str, ...] = ("newly-broken", "regressed", "unblocked", "gone", "lost-verdict", "unjudged")


@dataclass(frozen=True, kw_only=True)
class GatePolicy:
    """What blocks a stack upgrade. See ``docs/gate.md`` for every key."""

    block_on: frozenset[str] = frozenset(DEFAULT_BLOCK_ON)
    # any record that becomes inconclusive blocks (exit 1) unless this is true; one that passed before
    # and lost its verdict blocks anyway while "lost-verdict" is in block_on (the default)
    allow_inconclusive: bool = True
    # a regression beyond noise blocks only when new/old tok/s < min_ratio (1.0 = any)
    min_ratio: float = 1.0
    # fnmatch patterns of record keys/ids that never block (still shown)
    ignore: tuple[str, ...] = ()
    # comparing a simulated report with a real one is a usage error unless this is true
    allow_mixed_engines: bool = False
    # comparing reports of different hardware (GPU, count, SM, interconnect) is a usage error unless this is true
    allow_hardware_mismatch: bool = False
    # the practical floor of a change, per metric name ("default" for the rest); a metric it does not name
    # takes perfgate.measuring.judge.default_min_effect (0.5 % throughput, 2 % latency)
    min_effect: tuple[tuple[str, float], ...] = ()
    # reports (files, directories, globs) whose spread gives each record's noise band (perfgate.report.noise)
    history: tuple[str, ...] = ()
    source: str = field(default="defaults", compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.block_on) - set(BLOCK_ON_CHOICES)
        if unknown:
            raise ConfigError(
                f"gate.block_on: unknown value(s) {sorted(unknown)} [{self.source}]; "
                f"choose from {list(BLOCK_ON_CHOICES)}"
            )
        for metric, x in self.min_effect:
            if not (0.0 <= x < 1.0):
                raise ConfigError(f"gate.min_effect.{metric} must be a fraction in [0, 1), found {x} [{self.source}]; "
                                  "e.g. 0.005 for 0.5 %")
        if not (0.0 < self.min_ratio <= 1.0):
            raise ConfigError(
                f"gate.min_ratio must be in (0, 1], found {self.min_ratio} [{self.source}]; "
                "e.g. 0.98 lets significant drops smaller than 2% pass"
            )

    def ignored(self, key: str, rid: str) -> bool:
        return any(fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(rid, p) for p in self.ignore)

    def with_overrides(self, **changes: object) -> GatePolicy:
        """A copy with the given fields replaced (``None`` values are ignored)."""
        kw = {k: v for k, v in changes.items() if v is not None}
        if not kw:
            return self
        # an error in an overridden value names the option, not the pyproject.toml it overrode
        flags = ", ".join("--" + k.replace("_", "-") for k in kw)
        return replace(self, **kw, source=f"command line {flags}")  # type: ignore[arg-type]


_POLICY_KEYS = {"block_on", "allow_inconclusive", "min_ratio", "ignore", "allow_mixed_engines",
                "allow_hardware_mismatch", "min_effect", "history"}


def parse_min_effect(v: object, *, source: str) -> tuple[tuple[str, float], ...]:
    """``gate.min_effect``: one fraction for every metric, or a table by metric
    (``{tok_s = 0.005, ttft_ms = 0.02, default = 0.01}``)."""
    if isinstance(v, bool):
        raise ConfigError(f"{source}: gate.min_effect must be a number or a table of numbers, "
                          f"found {v!r}")
    if isinstance(v, (int, float)):
        return (("default", float(v)),)
    if isinstance(v, dict) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v.values()):
        return tuple((str(k), float(x)) for k, x in v.items())
    raise ConfigError(f"{source}: gate.min_effect must be a number (0.005) or a table of numbers by metric "
                      f"({{tok_s = 0.005, ttft_ms = 0.02}}), found {v!r}")


def find_pyproject(start: Path | None = None) -> Path | None:
    """The first ``pyproject.toml`` in ``start`` (default: the current directory) or above."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def policy_from_mapping(table: dict[str, object], *, source: str) -> GatePolicy:
    """Build a policy from a ``[tool.perfgate.gate]`` table, checking keys and types."""
    unknown = set(table) - _POLICY_KEYS
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {sorted(unknown)} in [tool.perfgate.gate]; "
            f"known keys: {sorted(_POLICY_KEYS)}"
        )
    kw: dict[str, object] = {"source": source}
    if "block_on" in table:
        v = table["block_on"]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{source}: gate.block_on must be a list of strings, found {v!r}")
        kw["block_on"] = frozenset(v)
    for name in ("allow_inconclusive", "allow_mixed_engines", "allow_hardware_mismatch"):
        if name in table:
            v = table[name]
            if not isinstance(v, bool):
                raise ConfigError(f"{source}: gate.{name} must be true or false, found {v!r}")
            kw[name] = v
    if "min_ratio" in table:
        v = table["min_ratio"]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"{source}: gate.min_ratio must be a number, found {v!r}")
        kw["min_ratio"] = float(v)
    if "min_effect" in table:
        kw["min_effect"] = parse_min_effect(table["min_effect"], source=source)
    if "history" in table:
        v = table["history"]
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{source}: gate.history must be a path, a glob or a list of them, found {v!r}")
        kw["history"] = tuple(v)
    if "ignore" in table:
        v = table["ignore"]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{source}: gate.ignore must be a list of strings, found {v!r}")
        kw["ignore"] = tuple(v)
    return GatePolicy(**kw)  # type: ignore[arg-type]


def load_policy(pyproject: Path | None = None, *, start: Path | None = None) -> GatePolicy:
    """Read the policy from ``pyproject`` (default: found from ``start``/cwd upwards).

    No file, or no ``[tool.perfgate.gate]`` table, gives the defaults.
    """
    path = pyproject if pyproject is not None else find_pyproject(start)
    if path is None:
        return GatePolicy()
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such file") from e
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the TOML: {e}") from e
    tool = data.get("tool", {})
    perfgate = tool.get("perfgate", {}) if isinstance(tool, dict) else {}
    gate = perfgate.get("gate", {}) if isinstance(perfgate, dict) else {}
    if not isinstance(gate, dict):
        raise ConfigError(f"{path}: [tool.perfgate] gate must be a table, found {gate!r}")
    if not gate:
        return GatePolicy(source=f"{path} (no [tool.perfgate.gate]: defaults)")
    return policy_from_mapping(gate, source=str(path))


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One record that the gate reports, and why."""

    key: str
    rule: str
    detail: str


@dataclass(frozen=True, kw_only=True)
class GateResult:
    """The gate's decision."""

    exit_code: ExitCode
    blocking: tuple[Finding, ...]
    expectation_updates: tuple[Finding, ...]
    ignored: tuple[Finding, ...]
    policy: GatePolicy
    message: str


def _detail(r: RecordDiff, rule: str) -> str:
    tp = r.throughput
    if rule in ("regressed", "undecided") and tp is not None:
        what = "tok/s" if tp.metric == "tok_s" else tp.metric
        return f"{what} {tp.old:g} → {tp.new:g}: {tp.why}" + (f"; {tp.needs}" if tp.needs else "")
    o = r.old.outcome_label if r.old else "absent"
    n = r.new.outcome_label if r.new else "absent"
    return f"{o} → {n}"


def evaluate(d: Diff, policy: GatePolicy) -> GateResult:
    """Apply the policy to a diff and decide the exit code."""
    blocking: list[Finding] = []
    updates: list[Finding] = []
    ignored: list[Finding] = []

    def add(target: list[Finding], r: RecordDiff, rule: str, detail: str | None = None) -> None:
        rid = (r.new or r.old).id  # type: ignore[union-attr]
        f = Finding(key=r.key, rule=rule, detail=detail or _detail(r, rule))
        if policy.ignored(r.key, rid):
            ignored.append(f)
        else:
            target.append(f)

    on = policy.block_on
    for r in d.records:
        t = r.transition
        if t == "newly-broken" and "newly-broken" in on:
            add(blocking, r, "newly-broken")
        elif t == "gone" and "gone" in on:
            add(blocking, r, "gone")
        elif t == "new" and "new-failing" in on and r.new_outcome in ("fail", "error"):
            add(blocking, r, "new-failing")
        elif t == "new" and "unjudged" in on:
            add(blocking, r, "unjudged", f"absent → {r.new.outcome_label if r.new else '?'}: no baseline record to "
                                         f"judge it against; run the baseline for it (or gate without unjudged)")
        elif t == "changed" and "changed" in on:
            add(blocking, r, "changed")
        elif t == "unblocked" and "unblocked" in on and r.needs_expectation_update:
            add(updates, r, "unblocked")
        if r.new_outcome == "inconclusive" and r.old_outcome != "inconclusive":
            before = r.old.outcome_label if r.old else "absent"
            why = f"{before} → {r.new.outcome_label if r.new else 'inconclusive'}: {r.new.reason if r.new else ''}"
            if r.old_outcome in ("pass", "xpass") and "lost-verdict" in on:
                add(blocking, r, "lost-verdict", why)
            elif not policy.allow_inconclusive:
                add(blocking, r, "inconclusive", why)
        tp = r.throughput
        if tp is not None and tp.verdict == REGRESSED and "regressed" in on:
            ratio = tp.goodness  # new/old for throughput, old/new for a latency
            if ratio is None or ratio < policy.min_ratio:
                add(blocking, r, "regressed")
        if tp is not None and tp.verdict == UNDECIDED and "undecided" in on:
            add(blocking, r, "undecided")

    if blocking:
        code = ExitCode.BLOCKED
        msg = f"BLOCKED: {len(blocking)} blocking change(s): " + ", ".join(
            sorted({f.rule for f in blocking})
        )
        if updates:
            msg += f"; also {len(updates)} unblocked record(s) whose expectations must be updated"
    elif updates:
        code = ExitCode.UNBLOCKED
        msg = (
            f"UNBLOCKED: {len(updates)} record(s) now pass while the profile expects a failure; "
            "update their expectations (baselines/*.toml) and re-run"
        )
    else:
        code = ExitCode.OK
        msg = "OK: no blocking change"
    return GateResult(
        exit_code=code,
        blocking=tuple(blocking),
        expectation_updates=tuple(updates),
        ignored=tuple(ignored),
        policy=policy,
        message=msg,
    )


def check_comparable(old: Report, new: Report, policy: GatePolicy) -> None:
    """Refuse inputs a gate cannot judge (exit 2): an empty NEW report, mixed engines."""
    if not new.records:
        raise ReportError(
            f"{new.path}: the NEW report has no test cases; a gate that ran nothing must not pass "
            "(check the pytest selection, -m, and the pytest exit code)"
        )
    if not policy.allow_hardware_mismatch:
        differ = [k for k in HARDWARE_KEYS if old.stack.get(k, "unknown") != new.stack.get(k, "unknown")]
        if differ:
            raise ReportError(
                "the reports come from different hardware (" + ", ".join(
                    f"{k.removeprefix('stack.')} {old.stack.get(k, 'unknown')} in {old.path} vs "
                    f"{new.stack.get(k, 'unknown')} in {new.path}" for k in differ)
                + "): their numbers are not comparable; gate against a baseline of the same hardware, or set "
                  "gate.allow_hardware_mismatch = true (--allow-hardware-mismatch)")
    if old.engine and new.engine and old.engine != new.engine and not policy.allow_mixed_engines:
        raise ReportError(
            f"the reports come from different engines ({old.engine} in {old.path}, {new.engine} in "
            f"{new.path}); compare like with like, or set gate.allow_mixed_engines = true"
        )


def judging_for(policy: GatePolicy, history: Sequence[Report] = ()) -> Judging:
    """What the diff judges numbers with under this policy: its min_effect table and the history's bands."""
    return Judging(min_effect=dict(policy.min_effect), bands=bands_from_reports(history) if history else {})


def history_paths(specs: Sequence[str], *, base: Path | None = None) -> list[Path]:
    """The report files named by ``gate.history`` / ``--history``: files, directories (every ``*.xml`` below)
    and globs, relative to ``base`` (the pyproject's folder) when not absolute."""
    out: list[Path] = []
    for spec in specs:
        p = Path(spec)
        if not p.is_absolute() and base is not None:
            p = base / p
        if p.is_dir():
            out += sorted(p.rglob("*.xml"))
        elif any(c in spec for c in "*?["):
            root = Path(p.anchor) if p.is_absolute() else (base or Path.cwd())
            pattern = str(p.relative_to(p.anchor)) if p.is_absolute() else spec
            out += sorted(root.glob(pattern))
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError(f"gate.history: {spec!r} is no report file, directory or glob that matches anything "
                              f"(looked at {p}); fix the path, or leave history out to use the documented priors")
    return out


def run_gate(old: Report, new: Report, policy: GatePolicy, history: Sequence[Report] = ()) -> tuple[Diff, GateResult]:
    """Check the inputs, diff them (numbers judged with the policy's min_effect and the history's noise
    bands) and apply the policy."""
    check_comparable(old, new, policy)
    d = diff(old, new, judging_for(policy, history))
    return d, evaluate(d, policy)
