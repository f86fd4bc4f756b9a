"""The gate's policy: what blocks a stack upgrade (:class:`GatePolicy`), read from the project's
``pyproject.toml`` (the first one found from the current directory upwards) under ``[tool.perfgate.gate]`` (or
dotted ``gate.*`` keys in ``[tool.perfgate]``); command-line options override it
(:meth:`GatePolicy.with_overrides`). :mod:`perfgate.report.gate` applies it; ``docs/gate.md`` has every key.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict, TypeVar

from perfgate.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


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

T = TypeVar("T")


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

    def with_overrides(self, *, block_on: frozenset[str] | None = None, min_ratio: float | None = None,
                       allow_inconclusive: bool | None = None, allow_mixed_engines: bool | None = None,
                       allow_hardware_mismatch: bool | None = None, ignore: tuple[str, ...] | None = None,
                       min_effect: tuple[tuple[str, float], ...] | None = None,
                       history: tuple[str, ...] | None = None) -> GatePolicy:
        """A copy with the given fields replaced (``None`` values are ignored)."""
        given = {"block_on": block_on, "min_ratio": min_ratio, "allow_inconclusive": allow_inconclusive,
                 "allow_mixed_engines": allow_mixed_engines, "allow_hardware_mismatch": allow_hardware_mismatch,
                 "ignore": ignore, "min_effect": min_effect, "history": history}
        flags = ", ".join("--" + k.replace("_", "-") for k, v in given.items() if v is not None)
        if not flags:
            return self
        # an error in an overridden value names the option, not the pyproject.toml it overrode
        return replace(self, block_on=_or(block_on, self.block_on), min_ratio=_or(min_ratio, self.min_ratio),
                       allow_inconclusive=_or(allow_inconclusive, self.allow_inconclusive),
                       allow_mixed_engines=_or(allow_mixed_engines, self.allow_mixed_engines),
                       allow_hardware_mismatch=_or(allow_hardware_mismatch, self.allow_hardware_mismatch),
                       ignore=_or(ignore, self.ignore), min_effect=_or(min_effect, self.min_effect),
                       history=_or(history, self.history), source=f"command line {flags}")


def _or(given: T | None, kept: T) -> T:
    return kept if given is None else given


class PolicyFields(TypedDict, total=False):
    """:class:`GatePolicy`'s keywords, as :func:`policy_from_mapping` collects them (``GatePolicy(**kw)`` typed)."""

    block_on: frozenset[str]
    allow_inconclusive: bool
    min_ratio: float
    ignore: tuple[str, ...]
    allow_mixed_engines: bool
    allow_hardware_mismatch: bool
    min_effect: tuple[tuple[str, float], ...]
    history: tuple[str, ...]
    source: str


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
    kw: PolicyFields = {"source": source}
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
    return GatePolicy(**kw)


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
