"""Spreading a matrix over a fleet of runners: which configs each CI job runs, and for how long.

A **config** (one server launch: a mode, optionally with a variant) is never split: its records share
one server start. A **cell** is the set of configs one job runs on one runner. A variant's record is
compared with its mode's baseline measured in the same session, so a cell that owns a variant config
also measures that baseline (its dependency) without reporting the baseline's own records, which
belong to the one cell that owns it; the union of the cells' records is the records of a single run.

Costs come from earlier JUnit reports (the testcase times of each config's records, start-up
included) or, for a config no report has, an estimate from the profile (start-up plus the workload's
tokens at the floor's rate). Cells are filled longest first into the least-loaded one (LPT), so the
plan is deterministic for the same inputs: ``perfgate plan`` prints it for a CI matrix, and
``pytest --perfgate-shard I/N`` computes the same split from the profile alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from perfgate.profiles import Profile, Workload
from perfgate.profiles.config import ServerConfig
from perfgate.profiles.variants import VariantSet

__all__ = ["Cell", "ConfigCost", "Settings", "config_costs", "matrix", "plan", "shard_keys", "totals"]


class Settings(Protocol):
    """What a plan reads of a pytest session's settings (perfgate.profiles.settings.Settings): the workload it
    measures with (``--perfgate-trials`` applied) and its server starts."""

    @property
    def starts(self) -> int: ...

    def workload(self, w: Workload) -> Workload: ...

#: a real server start when no report says otherwise (the seed box: about 10 minutes)
DEFAULT_STARTUP_S = 600.0
#: decode tok/s assumed for a mode with no floor
DEFAULT_TOK_S = 50.0


@dataclass(frozen=True)
class ConfigCost:
    """One config of a profile, what it costs, and the config it needs measured beside it."""

    key: str
    name: str  # mode or mode+variant
    seconds: float
    source: str  # "report" or "estimate"
    needs: str | None = None  # the key of the baseline it is compared with (measured in the same cell)


@dataclass
class Cell:
    """The configs one job runs; ``extra`` are dependencies measured for comparison, not reported."""

    index: int
    owned: list[ConfigCost] = field(default_factory=list)
    extra: dict[str, ConfigCost] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.owned) + sum(c.seconds for c in self.extra.values())

    @property
    def keys(self) -> list[str]:
        return sorted(c.key for c in self.owned)


def _configs(profile: Profile, variants: VariantSet) -> dict[str, tuple[ServerConfig, str | None]]:
    """Every config the profile launches, with the key of the config it is compared against."""
    base_mode = profile.baseline_mode()
    out: dict[str, tuple[ServerConfig, str | None]] = {}
    for mode in profile.modes:
        cfg = profile.config(mode)
        needs = profile.config(base_mode).key if profile.modes[mode].speculative else None
        out[cfg.key] = (cfg, needs)
    names = profile.variant_include if profile.variant_include is not None else tuple(variants.variants)
    for name in names:
        for mode in profile.variant_modes:
            cfg = profile.config(mode, variant=variants.get(name))
            out.setdefault(cfg.key, (cfg, profile.config(mode).key))
    return out


def _workload(profile: Profile, config: ServerConfig, settings: Settings | None) -> tuple[Workload, int]:
    """The workload a session measures the config with (--perfgate-trials applied) and its server starts."""
    w = profile.workload_for(config.mode)
    if settings is None:
        return w, w.starts
    return settings.workload(w), settings.starts


def _estimate(profile: Profile, config: ServerConfig, settings: Settings | None = None) -> float:
    startup = profile.engine.sim_startup_s + 1.0 if profile.simulated else DEFAULT_STARTUP_S
    w, starts = _workload(profile, config, settings)
    floor = profile.floors.get(config.mode)
    rate = floor.tok_s if floor is not None and floor.tok_s else DEFAULT_TOK_S
    requests = w.warmup + w.trials * w.per_trial
    return starts * (startup + requests * w.max_new_tokens / rate)


def _recorded(profile: Profile, configs: Mapping[str, tuple[ServerConfig, str | None]], report: object,
              settings: Settings | None = None) -> dict[str, float]:
    """What each config cost in one report.

    A record's test time is not its config's cost: the first variant of a mode also starts and measures
    that mode's baseline (its dependency), whose own records then take no time. So a config that was
    measured is costed from what its records say about it — its start-up (``startup_s``) plus its
    workload's tokens at its measured rate — and only a config that never measured (a failed start) by
    its records' test times.
    """
    by_key: dict[str, list[Any]] = {}  # perfgate.report.junit_read.Record
    for r in getattr(report, "records", ()):
        key = r.prop("config")
        if key and key in configs and r.prop("profile") in ("", profile.name):
            by_key.setdefault(key, []).append(r)
    out: dict[str, float] = {}
    for key, records in by_key.items():
        cfg = configs[key][0]
        startup = next((r.num("startup_s") for r in records if r.num("startup_s") is not None), None)
        rate = next((r.num("tok_s") for r in records if r.num("tok_s")), None)
        if startup is not None and rate:  # the planned session's trials and starts, not the report's
            w, starts = _workload(profile, cfg, settings)
            tokens = (w.warmup + w.trials * w.per_trial) * w.max_new_tokens
            out[key] = starts * (startup + tokens / rate)
        else:
            durations = [r.duration_s for r in records if r.duration_s is not None]
            if durations:
                out[key] = sum(durations)
    return out


def config_costs(profile: Profile, variants: VariantSet, reports: Iterable[object] = (), *,
                 settings: Settings | None = None) -> list[ConfigCost]:
    """Each config's cost: the median over ``reports`` of what it cost there (see _recorded), else an estimate;
    with ``settings`` (a pytest session's), at its trials and server starts (perfgate.profiles.settings)."""
    configs = _configs(profile, variants)
    seen: dict[str, list[float]] = {}
    for report in reports:
        for key, s in _recorded(profile, configs, report, settings).items():
            seen.setdefault(key, []).append(s)
    out = []
    for key, (cfg, needs) in configs.items():
        if key in seen:
            xs = sorted(seen[key])
            out.append(ConfigCost(key, cfg.name, xs[len(xs) // 2], "report", needs))
        else:
            out.append(ConfigCost(key, cfg.name, _estimate(profile, cfg, settings), "estimate", needs))
    return out


def plan(costs: Sequence[ConfigCost], cells: int) -> list[Cell]:
    """Longest first into the cell that ends soonest (counting a baseline it would have to measure too)."""
    if cells < 1:
        raise ValueError(f"cells must be >= 1, got {cells}")
    by_key = {c.key: c for c in costs}
    out = [Cell(i + 1) for i in range(cells)]
    for c in sorted(costs, key=lambda c: (-c.seconds, c.key)):
        def cost_in(cell: Cell, c: ConfigCost = c) -> float:
            dep = by_key.get(c.needs) if c.needs else None
            extra = dep.seconds if dep is not None and dep.key not in {o.key for o in cell.owned} \
                and dep.key not in cell.extra else 0.0
            return cell.seconds + c.seconds + extra

        best = min(out, key=lambda cell: (cost_in(cell), cell.index))
        best.owned.append(c)
        best.extra.pop(c.key, None)  # now owned here: its records are this cell's
        dep = by_key.get(c.needs) if c.needs else None
        if dep is not None and dep.key not in {o.key for o in best.owned}:
            best.extra[dep.key] = dep
    return [cell for cell in out if cell.owned]


def shard_keys(costs: Sequence[ConfigCost], spec: str) -> set[str]:
    """The config keys of cell ``I`` of ``I/N`` (``pytest --perfgate-shard``); an empty set when cell I has none."""
    try:
        i_text, n_text = spec.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise ValueError(f"--perfgate-shard {spec!r}: expected I/N with 1 <= I <= N, e.g. 2/4") from None
    if not 1 <= i <= n:
        raise ValueError(f"--perfgate-shard {spec!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
    cells = {c.index: c for c in plan(costs, n)}
    return set(cells[i].keys) if i in cells else set()


def matrix(cells_by_label: Mapping[str, tuple[Profile, list[Cell]]]) -> dict[str, list[dict[str, Any]]]:
    """The CI matrix, ``{"include": [...]}`` (GitHub Actions ``strategy.matrix``; Buildkite and GitLab take
    the same list): one row per cell with its label, profile, config keys and expected seconds."""
    include = []
    for label, (profile, cells) in cells_by_label.items():
        for cell in cells:
            include.append({
                "label": label,
                "profile": profile.name,
                "cell": f"{cell.index}/{len(cells)}",
                "id": f"{label}-{cell.index}-of-{len(cells)}",  # for artifact names (no slash)
                "configs": ",".join(cell.keys),
                "names": ", ".join(sorted(c.name for c in cell.owned)),
                "expected_s": math.ceil(cell.seconds),
            })
    return {"include": include}


def totals(m: Mapping[str, object]) -> tuple[int, int]:
    """(expected wall seconds: the longest cell, runner seconds: all cells) of a matrix."""
    walls = [int(row["expected_s"]) for row in cast("list[dict[str, int]]", m["include"])]  # matrix()'s rows
    return max(walls, default=0), sum(walls)
