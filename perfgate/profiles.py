"""Profiles: ``baselines/<hardware>/<model>.toml`` loaded, validated and turned into configs.

A profile holds the hardware it is valid for, the engine, the controlled server settings
shared by every run, the modes and their flags, the workload, the floors with tolerances and
the expectations per variant × mode. Loading validates everything and fails with
:class:`~perfgate.errors.ProfileSchemaError` naming the file, the key, what was expected and
what was found. See ``docs/profiles.md`` for the schema.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate import envnames
from perfgate.categories import EXPECTABLE
from perfgate.config import ServerConfig
from perfgate.errors import ProfileNotFound, ProfileSchemaError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCHEMA_VERSION = 1
ENGINES = ("sglang", "sim")
CATEGORIES = tuple(c.value for c in EXPECTABLE)
EXPECTS = ("pass", "xfail")
SPEC_FLAG = "speculative-algorithm"
MICRO_TIMINGS = ("eager", "graph")


# ----------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """The hardware a profile is valid for."""

    gpu: str
    count: int
    sm: str
    interconnect: str  # "pcie" | "nvlink"


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    """Which engine serves the model and how it is started."""

    name: str  # "sglang" | "sim"
    launcher: str = "launch_server"  # sglang: "launch_server" (python -m) | "serve"
    python: str = ""  # interpreter for the engine; "" = the one running pytest
    startup_timeout_s: float = 1200.0
    teardown_timeout_s: float = 30.0
    sglang_version: str = ""  # "" = detect; used to choose flag spellings
    sim_hardware: Path | None = None
    sim_startup_s: float = 2.0


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """The served model as perfgate's cost model and micro-benchmarks see it."""

    path: str
    name: str
    layers: int | None = None
    hidden: int | None = None
    allreduces_per_layer: int = 2
    #: measured all-reduce latency on this box, (bytes, µs) points (from ``pytest -m micro``)
    allreduce_latency_us: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Mode:
    """A serving mode (baseline, eagle3, ngram, ...): flags and environment on top of the server."""

    name: str
    description: str = ""
    flags: Mapping[str, object] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    #: workload keys this mode overrides (e.g. longer outputs so a drafter's acceptance averages out)
    workload: Mapping[str, object] = field(default_factory=dict)

    @property
    def speculative(self) -> bool:
        return bool(self.flags.get(SPEC_FLAG))


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What is sent to the server and how often."""

    prompts: Path
    max_new_tokens: int
    concurrency: int = 1
    requests_per_trial: int = 0  # 0 = concurrency
    warmup: int = 1
    trials: int = 5
    request_timeout_s: float = 300.0
    max_cv: float = 0.05
    token_match_min: float = 1.0
    concurrency_sweep: tuple[int, ...] = ()
    confidence: float = 0.95
    #: smallest ratio difference from 1 that counts as faster or slower (beyond statistical noise)
    min_effect: float = 0.02

    @property
    def per_trial(self) -> int:
        return self.requests_per_trial or self.concurrency


@dataclass(frozen=True, kw_only=True)
class Floor:
    """Floors of one mode, with the tolerance stored next to the value they guard."""

    mode: str
    tok_s: float | None = None
    tolerance: float = 0.03
    accept_len: float | None = None
    accept_len_tolerance: float = 0.05
    measured: Mapping[str, object] = field(default_factory=dict)
    # limits on the other metrics (perfgate.metrics.METRICS): a floor for higher-is-better ones, a
    # ceiling for latencies; the same tolerance applies (floor x (1 - t), ceiling x (1 + t))
    limits: Mapping[str, float] = field(default_factory=dict)
    # [floors.<mode>.c<N>]: the limits at concurrency N (a user test measuring at another concurrency)
    by_concurrency: Mapping[int, Floor] = field(default_factory=dict)
    # the CV above which these limits get no verdict (None: the workload's max_cv); latencies under load
    # are noisier than decode throughput
    max_cv: float | None = None

    def limit(self, metric: str) -> float | None:
        return self.tok_s if metric == "tok_s" else self.limits.get(metric)

    def at(self, concurrency: int | None) -> Floor | None:
        """The floors that apply at ``concurrency`` (``None``: the mode's own, for its workload)."""
        return self if concurrency is None else self.by_concurrency.get(concurrency)


@dataclass(frozen=True, kw_only=True)
class Expectation:
    """What a check or variant is expected to do in one mode."""

    expect: str  # "pass" | "xfail"
    category: str | None = None
    reason: str = ""
    when: str = ""  # stack condition; "" = always
    key: str = ""  # "expectations.<name>.<mode>" for messages
    line: int | None = None


@dataclass(frozen=True, kw_only=True)
class MicroFloor:
    """A ceiling on one all-reduce record: its median latency must be <= ``latency_us × (1 + tolerance)``."""

    backend: str
    timing: str  # "eager" | "graph"
    bytes: int
    world_size: int
    latency_us: float
    tolerance: float
    key: str = ""  # 'micro.floors."<backend>.<timing>.<bytes>"' for messages

    @property
    def ceiling_us(self) -> float:
        return self.latency_us * (1 + self.tolerance)


@dataclass(frozen=True, kw_only=True)
class MicroSpec:
    """All-reduce micro-benchmark shapes, and the floors (latency ceilings) measured on this box."""

    tokens: tuple[int, ...] = (1, 2, 4, 8)
    sweep_bytes: tuple[int, ...] = ()
    world_sizes: tuple[int, ...] = ()
    iters: int = 200
    warmup: int = 20
    #: by "<backend>.<eager|graph>.<bytes>"
    floors: Mapping[str, MicroFloor] = field(default_factory=dict)

    def floor(self, backend: str, timing: str, nbytes: int, world_size: int) -> MicroFloor | None:
        """The floor for one record, or None (then the record is a measurement only)."""
        f = self.floors.get(f"{backend}.{timing}.{nbytes}")
        return f if f is not None and f.world_size == world_size else None


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One validated profile file."""

    path: Path
    name: str
    root: Path
    description: str
    hardware: Hardware
    engine: EngineSpec
    model: ModelSpec
    server_flags: Mapping[str, object]
    server_env: Mapping[str, str]
    modes: Mapping[str, Mode]
    workload: Workload
    floors: Mapping[str, Floor]
    expectations: Mapping[str, Mapping[str, tuple[Expectation, ...]]]
    variant_modes: tuple[str, ...]
    variant_include: tuple[str, ...] | None
    variant_overrides: Mapping[str, Mapping[str, object]]
    micro: MicroSpec
    warnings: tuple[str, ...] = ()  # loud but not fatal: e.g. an NCCL_* name newer than perfgate's list

    @property
    def simulated(self) -> bool:
        return self.engine.name == "sim"

    def mode(self, name: str) -> Mode:
        try:
            return self.modes[name]
        except KeyError:
            raise ProfileSchemaError(
                self.path, f"modes.{name}", f"one of {sorted(self.modes)}", name, fix=_close(name, self.modes)
            ) from None

    def workload_for(self, mode: str) -> Workload:
        """The workload with the mode's overrides applied."""
        from dataclasses import replace

        over = self.mode(mode).workload
        return replace(self.workload, **over) if over else self.workload  # type: ignore[arg-type]

    def baseline_mode(self) -> str:
        """The mode speculative modes and variants are compared against."""
        if "baseline" in self.modes:
            return "baseline"
        for m in self.modes.values():
            if not m.speculative:
                return m.name
        raise ProfileSchemaError(self.path, "modes", "at least one non-speculative mode")

    def config(
        self,
        mode: str,
        *,
        variant: object | None = None,
    ) -> ServerConfig:
        """The ServerConfig for a mode, optionally with a variant (a perfgate.variants.Variant)."""
        m = self.mode(mode)
        flags: dict[str, object] = dict(self.server_flags)
        flags.update(m.flags)
        env: dict[str, str] = dict(self.server_env)
        env.update(m.env)
        declared: set[str] = set()
        vname = None
        if variant is not None:
            vname = variant.name  # type: ignore[attr-defined]
            flags.update(variant.flags)  # type: ignore[attr-defined]
            env.update(variant.env)  # type: ignore[attr-defined]
            declared = set(variant.declared_keys())  # type: ignore[attr-defined]
            # what the profile overrides for this variant (e.g. the seed's mem-fraction mistake)
            for k, v in self.variant_overrides.get(vname, {}).items():
                if k.startswith("env:"):
                    env[k[4:]] = str(v)
                else:
                    flags[k] = v
        opts: dict[str, object] = {}
        if self.engine.sim_hardware is not None:
            opts["sim_hardware"] = str(self.engine.sim_hardware)
            opts["sim_startup_s"] = self.engine.sim_startup_s
        return ServerConfig.build(
            profile=self.name,
            mode=mode,
            variant=vname,
            engine=self.engine.name,
            model_path=self.model.path,
            flags=flags,
            env=env,
            declared_keys=frozenset(declared),
            speculative=m.speculative,
            engine_options=opts,
        )

    def expectation(self, name: str, mode: str, stack: object | None = None) -> Expectation | None:
        """The expectation for ``name`` (a variant or a check) in ``mode``, given the stack."""
        table = self.expectations.get(name, {})
        cands = tuple(table.get(mode, ())) + tuple(table.get("*", ()))
        for e in cands:
            if not e.when:
                return e
            if stack is None:
                continue
            from perfgate.stack.conditions import condition_holds

            if condition_holds(e.when, stack):  # type: ignore[arg-type]
                return e
        return None


# ----------------------------------------------------------------------------- validation


def _close(word: str, options: object) -> str | None:
    opts = [str(o) for o in options]  # type: ignore[attr-defined]
    m = difflib.get_close_matches(word, opts, n=1)
    return f"did you mean '{m[0]}'?" if m else f"use one of {sorted(opts)}"


class _Reader:
    """Typed access into a TOML table that records the dotted key for error messages."""

    def __init__(self, path: Path, data: Mapping[str, Any], prefix: str = "",
                 warnings: list[str] | None = None) -> None:
        self.path = path
        self.data = data
        self.prefix = prefix
        # problems worth a loud line that are not errors, shared by every sub-table of one file
        self.warnings: list[str] = warnings if warnings is not None else []

    def warn(self, key: str, message: str) -> None:
        self.warnings.append(f"{self.path}: key '{self.k(key)}': {message}")

    def k(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def err(self, key: str, expected: str, found: object = None, fix: str | None = None) -> ProfileSchemaError:
        return ProfileSchemaError(self.path, self.k(key), expected, found, fix=fix)

    def only(self, allowed: set[str] | frozenset[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.err(key, f"a known key ({', '.join(sorted(allowed))})", key, fix=_close(key, allowed))

    def req(self, key: str, typ: type | tuple[type, ...], what: str) -> Any:
        if key not in self.data:
            raise self.err(key, what, fix=f"add `{key} = ...` under [{self.prefix.rstrip('.') or 'top level'}]")
        return self.get(key, typ, what, None)

    def get(self, key: str, typ: type | tuple[type, ...], what: str, default: Any) -> Any:
        if key not in self.data:
            return default
        v = self.data[key]
        if isinstance(v, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
            raise self.err(key, what, v)
        if not isinstance(v, typ):
            raise self.err(key, what, v)
        return v

    def num(self, key: str, what: str, default: Any = None, *, lo: float | None = None, hi: float | None = None,
            required: bool = False) -> Any:
        v = self.req(key, (int, float), what) if required else self.get(key, (int, float), what, default)
        if v is None:
            return v
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.err(key, what, v)
        return v

    def int_(self, key: str, what: str, default: Any = None, *, lo: int | None = None, hi: int | None = None,
             required: bool = False) -> Any:
        """A whole number: ``4.5`` (or ``4.0``, or ``true``) is an error, never truncated."""
        v = self.data.get(key, None)
        if v is None:
            if required:
                raise self.err(key, what, fix=f"add {key} = <{what}>")
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            fix = f"write {key} = {int(v)}" if isinstance(v, float) and v.is_integer() else None
            raise self.err(key, what, v, fix=fix)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.err(key, what, v)
        return v

    def sub(self, key: str, required: bool = False) -> _Reader:
        v = self.data.get(key)
        if v is None:
            if required:
                raise self.err(key, "a table", fix=f"add a [{self.k(key)}] table")
            v = {}
        if not isinstance(v, dict):
            raise self.err(key, "a table", v)
        return _Reader(self.path, v, f"{self.k(key)}.", self.warnings)


def _flags(r: _Reader, key: str) -> dict[str, object]:
    sub = r.sub(key)
    out: dict[str, object] = {}
    for name, v in sub.data.items():
        if name.startswith("-"):
            raise sub.err(name, "a flag name without leading dashes", name, fix=f"write `{name.lstrip('-')} = ...`")
        if isinstance(v, dict):
            raise sub.err(name, "a flag value (string, number, bool or list)", v)
        if isinstance(v, list) and not all(isinstance(x, (str, int, float)) for x in v):
            raise sub.err(name, "a list of strings or numbers", v)
        out[name] = v
    return out


def _env(r: _Reader, key: str) -> dict[str, str]:
    sub = r.sub(key)
    out: dict[str, str] = {}
    for name, v in sub.data.items():
        if isinstance(v, (dict, list)):
            raise sub.err(name, "an environment value (string or number)", v)
        out[name] = str(v).lower() if isinstance(v, bool) else str(v)
        bad = envnames.problem(name)
        if bad is not None and bad[0] == "error":
            raise sub.err(name, "an environment variable NCCL or SGLang reads", name, fix=bad[1])
        if bad is not None:
            sub.warn(name, bad[1])
    return out


def _local_paths(root: Path, flags: dict[str, object]) -> dict[str, object]:
    """Path flags (``*-path``) given relative to the project, e.g. fixtures/models/..., made absolute."""
    out = dict(flags)
    for k, v in flags.items():
        if k.endswith("-path") and isinstance(v, str) and not Path(v).is_absolute() and (root / v).exists():
            out[k] = str((root / v).resolve())
    return out


def _line_of(text: str, *needles: str) -> int | None:
    lines = text.splitlines()
    start = 0
    for needle in needles:
        for i in range(start, len(lines)):
            if needle in lines[i]:
                start = i
                break
        else:
            return None
    return start + 1


def project_root_of(path: Path) -> Path:
    """The directory holding ``baselines/`` (relative paths in a profile resolve against it)."""
    for parent in path.resolve().parents:
        if parent.name == "baselines":
            return parent.parent
    return path.resolve().parent


def _resolve(root: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (root / p)


def _check_sim_box(path: Path, sim_path: Path, hardware: Hardware, model: ModelSpec, server: Mapping[str, Any]) -> None:
    """The simulated box must be the box and model the profile describes, or the records would lie.

    The simulator serves the model and GPUs of its hardware file (``fixtures/sim/*.toml``); a profile for
    another model or GPU count would be measured as that box's model, and its records would carry the
    box's stack. Refused here, naming both sides.
    """
    try:
        box = tomllib.loads(sim_path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ProfileSchemaError(path, "engine.sim_hardware", "a readable simulated hardware file", str(sim_path),
                                 fix=str(e)) from None
    bh, bm = box.get("hardware", {}), box.get("model", {})
    fix = (f"point [engine] sim_hardware at a box file for this hardware and model, or write one: copy "
           f"{sim_path.name} under fixtures/sim/ and change its [hardware] and [model]")

    def refuse(key: str, ours: object, theirs: object) -> ProfileSchemaError:
        return ProfileSchemaError(path, key, f"what the simulated box serves ({sim_path.name}: {theirs})", ours,
                                  fix=fix)

    if bh.get("count") != hardware.count:
        raise refuse("hardware.count", hardware.count, f"{bh.get('count')} GPUs")
    if hardware.gpu.lower() not in str(bh.get("gpu", "")).lower():
        raise refuse("hardware.gpu", hardware.gpu, bh.get("gpu"))
    if str(bh.get("sm")) != hardware.sm:
        raise refuse("hardware.sm", hardware.sm, f"SM {bh.get('sm')}")
    if bh.get("interconnect") != hardware.interconnect:
        raise refuse("hardware.interconnect", hardware.interconnect, bh.get("interconnect"))
    name = str(bm.get("name", ""))
    ours = (model.name or "").lower()
    if ours and name and ours not in name.lower() and name.lower() not in ours and Path(model.path).name.lower() not in name.lower():
        raise refuse("model.name", model.name, name)
    for key in ("layers", "hidden"):
        want = getattr(model, key)
        if want is not None and bm.get(key) is not None and want != bm.get(key):
            raise refuse(f"model.{key}", want, f"{key} = {bm.get(key)} ({name})")
    tp = server.get("tp-size", server.get("tp", 1))
    if isinstance(tp, int) and not isinstance(tp, bool) and tp > hardware.count:
        raise ProfileSchemaError(path, "server.tp-size", f"at most the profile's {hardware.count} GPUs", tp,
                                 fix="lower tp-size or raise [hardware] count")


def _floor(f: _Reader, mode: str, *, concurrency: int | None = None) -> Floor:
    """``[floors.<mode>]`` (or its ``[floors.<mode>.c<N>]`` sub-table): limits with their tolerance."""
    from perfgate.metrics import METRICS

    per_level = {k for k in f.data if k[:1] == "c" and k[1:].isdigit()} if concurrency is None else set()
    f.only({"tok_s", "tolerance", "accept_len", "accept_len_tolerance", "measured", "max_cv", *METRICS, *per_level})
    limits = {}
    for name, metric in METRICS.items():
        if name != "tok_s" and name in f.data:
            limits[name] = float(f.num(name, f"{metric.unit} > 0 ({'a floor' if metric.higher_is_better else 'a ceiling'})",
                                       lo=1e-9))
    return Floor(
        mode=mode,
        tok_s=f.num("tok_s", "tok/s > 0", None, lo=1e-9),
        tolerance=float(f.num("tolerance", "a fraction in [0, 1)", 0.03, lo=0, hi=0.999)),
        accept_len=f.num("accept_len", "an acceptance length >= 1", None, lo=1),
        accept_len_tolerance=float(f.num("accept_len_tolerance", "a fraction in [0, 1)", 0.05, lo=0, hi=0.999)),
        measured=dict(f.sub("measured").data),
        limits=limits,
        by_concurrency={int(k[1:]): _floor(f.sub(k), mode, concurrency=int(k[1:])) for k in sorted(per_level)},
        max_cv=f.num("max_cv", "a fraction in (0, 1]", None, lo=0.0001, hi=1),
    )


#: [modes.<name>] workload keys a mode may override, with what they must be
_MODE_WORKLOAD: dict[str, tuple[str, float]] = {
    "max_new_tokens": ("an integer >= 2", 2),
    "requests_per_trial": ("an integer >= 0", 0),
    "warmup": ("an integer >= 0", 0),
    "trials": ("an integer >= 1", 1),
    "request_timeout_s": ("seconds > 0", 0.001),
}


def load_profile(path: str | Path) -> Profile:
    """Load and validate one profile file."""
    path = Path(path)
    if not path.is_file():
        raise ProfileNotFound(f"profile not found: {path}")
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise ProfileSchemaError(path, "(file)", "UTF-8 text", str(e), fix="save the file as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ProfileSchemaError(path, "(file)", "valid TOML", str(e), fix="fix the TOML syntax at the position shown") from None
    root = project_root_of(path)
    data = _merge_parents(path, data, seen=(path.resolve(),))
    r = _Reader(path, data)
    r.only({"schema_version", "name", "description", "hardware", "engine", "model", "server", "modes",
            "workload", "floors", "expectations", "variants", "micro"})
    sv = r.req("schema_version", int, f"the integer {SCHEMA_VERSION}")
    if sv != SCHEMA_VERSION:
        raise r.err("schema_version", f"{SCHEMA_VERSION}", sv, fix="this perfgate reads schema_version 1")
    name = r.get("name", str, "a string", None) or (f"{path.parent.name}/{path.stem}" if path.parent.name != "baselines" else path.stem)

    h = r.sub("hardware", required=True)
    h.only({"gpu", "count", "sm", "interconnect"})
    sm = h.req("sm", (str,), 'a compute capability string such as "12.0"')
    try:
        float(sm)
    except ValueError:
        raise h.err("sm", 'a compute capability string such as "9.0"', sm) from None
    ic = h.req("interconnect", str, '"pcie" or "nvlink"')
    if ic not in ("pcie", "nvlink"):
        raise h.err("interconnect", '"pcie" or "nvlink"', ic)
    hardware = Hardware(gpu=h.req("gpu", str, "a GPU name string"),
                        count=h.int_("count", "a GPU count >= 1", required=True, lo=1),
                        sm=sm, interconnect=ic)

    e = r.sub("engine", required=True)
    e.only({"name", "launcher", "python", "startup_timeout_s", "teardown_timeout_s", "sglang_version",
            "sim_hardware", "sim_startup_s"})
    ename = e.req("name", str, f"one of {list(ENGINES)}")
    if ename not in ENGINES:
        raise e.err("name", f"one of {list(ENGINES)}", ename, fix=_close(ename, ENGINES))
    launcher = e.get("launcher", str, '"launch_server" or "serve"', "launch_server")
    if launcher not in ("launch_server", "serve"):
        raise e.err("launcher", '"launch_server" or "serve"', launcher)
    sim_hw = e.get("sim_hardware", str, "a path to a simulated hardware file", None)
    if ename == "sim":
        if not sim_hw:
            raise e.err("sim_hardware", "a path to a simulated hardware file (fixtures/sim/*.toml)",
                        fix='add sim_hardware = "fixtures/sim/<box>.toml" under [engine]')
        sim_path = _resolve(root, sim_hw)
        if not sim_path.is_file():
            raise e.err("sim_hardware", "an existing file", sim_hw, fix=f"no file at {sim_path}")
    else:
        sim_path = None
    engine = EngineSpec(
        name=ename,
        launcher=launcher,
        python=e.get("python", str, "an interpreter path", ""),
        startup_timeout_s=float(e.num("startup_timeout_s", "seconds > 0", 1200.0, lo=0.001)),
        teardown_timeout_s=float(e.num("teardown_timeout_s", "seconds > 0", 30.0, lo=0.001)),
        sglang_version=e.get("sglang_version", str, "a version string", ""),
        sim_hardware=sim_path,
        sim_startup_s=float(e.num("sim_startup_s", "seconds >= 0", 2.0, lo=0)),
    )

    mo = r.sub("model", required=True)
    mo.only({"path", "name", "layers", "hidden", "allreduces_per_layer", "allreduce_latency_us"})
    lat = mo.sub("allreduce_latency_us")
    lat_points = []
    for b, us in lat.data.items():
        if not b.isdigit() or isinstance(us, bool) or not isinstance(us, (int, float)) or us <= 0:
            raise lat.err(b, 'entries "<bytes>" = <microseconds > 0>', {b: us})
        lat_points.append((int(b), float(us)))
    mpath = mo.req("path", str, "a model path or Hugging Face id")
    local = _resolve(root, mpath)
    if not Path(mpath).is_absolute() and local.exists():
        mpath = str(local)
    model = ModelSpec(
        path=mpath,
        name=mo.get("name", str, "a string", Path(mpath).name),
        layers=mo.int_("layers", "an integer >= 1", None, lo=1),
        hidden=mo.int_("hidden", "an integer >= 1", None, lo=1),
        allreduces_per_layer=mo.int_("allreduces_per_layer", "an integer >= 0", 2, lo=0),
        allreduce_latency_us=tuple(sorted(lat_points)),
    )

    if sim_path is not None:
        _check_sim_box(path, sim_path, hardware, model, r.data.get("server") or {})

    s = r.sub("server")
    server_flags = _local_paths(root, _flags(_Reader(path, {"server": {k: v for k, v in s.data.items() if k != "env"}}),
                                             "server"))
    for k in ("model-path", "model", "host", "port"):
        if k in server_flags:
            raise s.err(k, "no host/port/model flags here (perfgate sets them)", k,
                        fix="model goes in [model] path; host and port are chosen per launch")
    server_env = _env(s, "env")

    ms = r.sub("modes", required=True)
    if not ms.data:
        raise ms.err("", "at least one mode table, e.g. [modes.baseline]")
    modes: dict[str, Mode] = {}
    for mname in ms.data:
        if not mname.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ms.err(mname, "a mode name of letters, digits, '-', '_', '.'", mname)
        mr = ms.sub(mname)
        mr.only({"description", "flags", "env", "workload"})
        wo = mr.sub("workload")
        wo.only(set(_MODE_WORKLOAD))
        for k in wo.data:  # the same rules as [workload], checked now, not when the mode runs
            what, lo = _MODE_WORKLOAD[k]
            if k == "request_timeout_s":
                wo.num(k, what, lo=lo)
            else:
                wo.int_(k, what, lo=int(lo))
        modes[mname] = Mode(name=mname, description=mr.get("description", str, "a string", ""),
                            flags=_local_paths(root, _flags(mr, "flags")), env=_env(mr, "env"),
                            workload=dict(wo.data))

    w = r.sub("workload", required=True)
    w.only({"prompts", "max_new_tokens", "concurrency", "requests_per_trial", "warmup", "trials",
            "request_timeout_s", "max_cv", "token_match_min", "concurrency_sweep", "confidence", "min_effect"})
    prompts = _resolve(root, w.req("prompts", str, "a prompt-set path (fixtures/prompts/*.jsonl)"))
    if not prompts.is_file():
        raise w.err("prompts", "an existing prompt file", str(prompts), fix="point it at a file under fixtures/prompts/")
    sweep = w.get("concurrency_sweep", list, "a list of concurrency levels", [])
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in sweep):
        raise w.err("concurrency_sweep", "a list of integers >= 1", sweep)
    workload = Workload(
        prompts=prompts,
        max_new_tokens=w.int_("max_new_tokens", "an integer >= 2", required=True, lo=2),
        concurrency=w.int_("concurrency", "an integer >= 1", 1, lo=1),
        requests_per_trial=w.int_("requests_per_trial", "an integer >= 0", 0, lo=0),
        warmup=w.int_("warmup", "an integer >= 0", 1, lo=0),
        trials=w.int_("trials", "an integer >= 1", 5, lo=1),
        request_timeout_s=float(w.num("request_timeout_s", "seconds > 0", 300.0, lo=0.001)),
        max_cv=float(w.num("max_cv", "a fraction in (0, 1]", 0.05, lo=0.0001, hi=1)),
        token_match_min=float(w.num("token_match_min", "a fraction in [0, 1]", 1.0, lo=0, hi=1)),
        concurrency_sweep=tuple(sweep),
        confidence=float(w.num("confidence", "a level in (0.5, 1)", 0.95, lo=0.5, hi=0.9999)),
        min_effect=float(w.num("min_effect", "a fraction in [0, 0.5]", 0.02, lo=0, hi=0.5)),
    )

    fl = r.sub("floors")
    floors: dict[str, Floor] = {}
    for mname in fl.data:
        if mname not in modes:
            raise fl.err(mname, f"a mode of this profile ({', '.join(modes)})", mname, fix=_close(mname, modes))
        floors[mname] = _floor(fl.sub(mname), mname)

    ex = r.sub("expectations")
    expectations: dict[str, dict[str, tuple[Expectation, ...]]] = {}
    for ename_, _ in ex.data.items():
        er = ex.sub(ename_)
        per_mode: dict[str, tuple[Expectation, ...]] = {}
        for mname, spec in er.data.items():
            if mname != "*" and mname not in modes:
                raise er.err(mname, f"a mode of this profile or \"*\" ({', '.join(modes)})", mname,
                             fix=_close(mname, list(modes) + ["*"]))
            specs = spec if isinstance(spec, list) else [spec]
            out = []
            for i, one in enumerate(specs):
                if not isinstance(one, dict):
                    raise er.err(mname, '{ expect = "pass" } or { expect = "xfail", category = "...", reason = "..." }', one)
                sr = _Reader(path, one, f"{er.k(mname)}{f'[{i}]' if isinstance(spec, list) else ''}.")
                sr.only({"expect", "category", "reason", "when"})
                exp = sr.req("expect", str, '"pass" or "xfail"')
                if exp not in EXPECTS:
                    raise sr.err("expect", '"pass" or "xfail"', exp, fix=_close(exp, EXPECTS))
                cat = sr.get("category", str, "a failure category", None)
                if exp == "xfail" and not cat:
                    raise sr.err("category", f"the category it must fail with (one of {', '.join(CATEGORIES)})",
                                 fix="an xfail must say why it fails")
                if cat is not None and cat not in CATEGORIES:
                    raise sr.err("category", f"one of {', '.join(CATEGORIES)}", cat, fix=_close(cat, CATEGORIES))
                when = sr.get("when", str, 'a stack condition such as "flashinfer < 0.8"', "")
                if when:
                    from perfgate.stack.conditions import parse_condition

                    try:
                        parse_condition(when)
                    except Exception as err:  # ConfigError with the details
                        raise sr.err("when", 'a stack condition such as "flashinfer < 0.8 and sm == 12.0"', when,
                                     fix=str(err)) from None
                out.append(Expectation(expect=exp, category=cat, reason=sr.get("reason", str, "a string", ""),
                                       when=when, key=f"expectations.{ename_}.{mname}",
                                       line=_line_of(text, f"[expectations.{ename_}", mname) or _line_of(text, ename_)))
            per_mode[mname] = tuple(out)
        expectations[ename_] = per_mode

    vr = r.sub("variants")
    vr.only({"modes", "include", "overrides"})
    vmodes = vr.get("modes", list, "a list of mode names", [next(iter(modes))] if "baseline" not in modes else ["baseline"])
    for m in vmodes:
        if m not in modes:
            raise vr.err("modes", f"mode names of this profile ({', '.join(modes)})", m, fix=_close(str(m), modes))
    include = vr.get("include", list, "a list of variant names", None)
    ov = vr.sub("overrides")
    overrides = {vname: dict(ov.sub(vname).data) for vname in ov.data}

    mi = r.sub("micro")
    mi.only({"tokens", "sweep_bytes", "world_sizes", "iters", "warmup", "floors"})
    micro_ws = tuple(mi.get("world_sizes", list, "a list of world sizes", []))
    micro = MicroSpec(
        tokens=tuple(mi.get("tokens", list, "a list of token counts", [1, 2, 4, 8])),
        sweep_bytes=tuple(mi.get("sweep_bytes", list, "a list of byte sizes", [])),
        world_sizes=micro_ws,
        iters=mi.int_("iters", "an integer >= 1", 200, lo=1),
        warmup=mi.int_("warmup", "an integer >= 0", 20, lo=0),
        floors=_micro_floors(mi, micro_ws),
    )

    return Profile(
        path=path.resolve(),
        name=name,
        root=root,
        description=r.get("description", str, "a string", ""),
        hardware=hardware,
        engine=engine,
        model=model,
        server_flags=server_flags,
        server_env=server_env,
        modes=modes,
        workload=workload,
        floors=floors,
        expectations=expectations,
        variant_modes=tuple(vmodes),
        variant_include=tuple(include) if include is not None else None,
        variant_overrides=overrides,
        micro=micro,
        warnings=tuple(r.warnings),
    )


def _micro_floors(mi: _Reader, world_sizes: tuple[object, ...]) -> dict[str, MicroFloor]:
    """``[micro.floors]``: "<backend>.<eager|graph>.<bytes>" = { latency_us = X, tolerance = T[, world_size = N] }."""
    from perfgate.allreduce import BACKENDS

    fr = mi.sub("floors")
    example = '"nccl.graph.14336" = { latency_us = 11.07, tolerance = 0.25 }'
    out: dict[str, MicroFloor] = {}
    for key, spec in fr.data.items():
        qkey = f'"{key}"'
        parts = key.rsplit(".", 2)
        if len(parts) != 3:
            raise fr.err(qkey, 'a key "<backend>.<eager|graph>.<bytes>"', key, fix=f"write {example}")
        backend, timing, nbytes = parts
        if backend not in BACKENDS:
            raise fr.err(qkey, f"an all-reduce backend ({', '.join(BACKENDS)})", backend, fix=_close(backend, BACKENDS))
        if timing not in MICRO_TIMINGS:
            raise fr.err(qkey, '"eager" or "graph" after the backend', timing, fix=_close(timing, MICRO_TIMINGS))
        if timing == "graph" and BACKENDS[backend].device != "cuda":
            raise fr.err(qkey, f'"eager" ({backend} runs on the CPU: it has no CUDA-graph timing)', timing,
                         fix=f'write "{backend}.eager.{nbytes}"')
        if not nbytes.isdigit() or int(nbytes) < 1:
            raise fr.err(qkey, "a message size in bytes (an integer >= 1) at the end", nbytes, fix=f"write {example}")
        if not isinstance(spec, dict):
            raise fr.err(qkey, "{ latency_us = X, tolerance = T }", spec, fix=f"write {example}")
        sr = _Reader(fr.path, spec, f"{fr.k(qkey)}.")
        sr.only({"latency_us", "tolerance", "world_size"})
        lat = sr.num("latency_us", "the measured median latency in µs (> 0)", required=True, lo=1e-9)
        tol = sr.num("tolerance", "a fraction >= 0 (the ceiling is latency_us × (1 + tolerance))", required=True,
                     lo=0, hi=10)
        ws = sr.get("world_size", int, "the world size it was measured at (an integer >= 2)", None)
        if ws is None:
            if len(world_sizes) != 1 or not isinstance(world_sizes[0], int) or isinstance(world_sizes[0], bool):
                raise sr.err("world_size", "the world size it was measured at",
                             fix=f"add world_size = N to the entry ([micro] world_sizes is {list(world_sizes)}, "
                                 "not a single world size)")
            ws = world_sizes[0]
        if ws < 2:
            raise sr.err("world_size", "an integer >= 2 (at world size 1 there is no communication to guard)", ws)
        canon = f"{backend}.{timing}.{int(nbytes)}"
        out[canon] = MicroFloor(backend=backend, timing=timing, bytes=int(nbytes), world_size=ws,
                                latency_us=float(lat), tolerance=float(tol), key=fr.k(qkey))
    return out


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _merge_parents(path: Path, data: dict[str, Any], seen: tuple[Path, ...]) -> dict[str, Any]:
    """``extends = "other.toml"``: the other profile's tables, overridden key by key by this one."""
    parent = data.get("extends")
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ProfileSchemaError(path, "extends", "a path to another profile", parent)
    ppath = (path.parent / parent).resolve()
    if ppath in seen:
        raise ProfileSchemaError(path, "extends", "no cycle of extends", parent)
    if not ppath.is_file():
        raise ProfileSchemaError(path, "extends", "an existing profile file", parent, fix=f"no file at {ppath}")
    try:
        pdata = tomllib.loads(ppath.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ProfileSchemaError(ppath, "(file)", "valid TOML", str(e)) from None
    pdata = _merge_parents(ppath, pdata, seen + (ppath,))
    child = {k: v for k, v in data.items() if k != "extends"}
    merged = _deep_merge(pdata, child)
    merged.pop("name", None) if "name" not in child else None
    return merged


def find_profiles(root: Path) -> list[Path]:
    """Every profile file under ``root/baselines`` (variants.toml excluded)."""
    base = root / "baselines"
    return sorted(p for p in base.glob("*/*.toml"))


def resolve_profile(spec: str, root: Path) -> Path:
    """A profile given as a path, or as ``<hardware>/<model>`` under ``root/baselines``."""
    p = Path(spec).expanduser()
    cands = [p, root / p, root / "baselines" / p, root / "baselines" / f"{spec}.toml"]
    for c in cands:
        if c.is_file():
            return c
    known = [str(x.relative_to(root / "baselines").with_suffix("")) for x in find_profiles(root)]
    hint = difflib.get_close_matches(spec, known, n=1)
    raise ProfileNotFound(
        f"profile '{spec}' not found (looked for a file, and under {root / 'baselines'}); "
        + (f"did you mean '{hint[0]}'? " if hint else "")
        + f"known profiles: {', '.join(known) or 'none'}"
    )
