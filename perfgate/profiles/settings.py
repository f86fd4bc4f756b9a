"""Settings: every perfgate option, resolved once per session, with one precedence per knob.

    a test's explicit argument  >  command-line option (or its environment variable)  >  profile

A test's explicit argument is a keyword of ``measure(...)``, ``measure.rate(...)`` or ``measure.goodput(...)``
(``trials=10``); the command line is every ``--perfgate-*`` option (``--perfgate-sim-stack`` also
``PERFGATE_SIM_STACK``); the profile is its ``[workload]`` (``trials``, ``starts``, ``max_starts``, ``max_time_s``),
``[slo]`` (``trials`` under load) and ``[engine]`` (``startup_timeout_s``). The knobs and where each comes from:

    trials              measure(..., trials=) > --perfgate-trials > [slo] trials (under load) > [workload] trials
    starts              --perfgate-starts > [workload] starts > 1 (an attached server: 1)
    max_starts          --perfgate-max-starts > [workload] max_starts > DEFAULT_MAX_STARTS (never below starts)
    max_time_s          --perfgate-max-time > [workload] max_time_s > none
    startup_timeout     --perfgate-startup-timeout > [engine] startup_timeout_s
    sim_stack           --perfgate-sim-stack > PERFGATE_SIM_STACK > none
    the rest            their option > its default (url, candidate, co_resident, server_cpus, noise_from, crosscheck,
                        calibrate, sim_fault, update_baselines, allow_hardware_mismatch, variants, variants_file,
                        shard, configs, progress_interval_s)

:func:`resolve` builds the frozen :class:`Settings` the first time the session needs it (the profile is
loaded lazily); :meth:`Settings.workload` applies it to a workload the profile gives (the mode's, or the mode's
under load with its ``[slo]``), and every measuring path (the runner, the load records, the cross-check, the
fleet planner) reads trials and starts from there, nowhere else. This module is the only reader of perfgate's
options: the two read before any profile exists, the profile's name and the log directory, through
:func:`profile_named` and :func:`log_dir_given`. It needs no pytest (``opt`` is any ``name -> value``: pytest's
getoption in a session, a namespace's attributes in the CLI); the options' value parsers, which raise pytest's
usage error, are :mod:`perfgate.plugin.options`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.versions import key_versions

if TYPE_CHECKING:
    from perfgate.profiles import Profile, Workload
    from perfgate.profiles.config import ServerConfig

__all__ = ["Settings", "Candidate", "parse_candidate", "resolve", "profile_named", "log_dir_given", "CANDIDATE_ARM",
           "DEFAULT_MAX_STARTS", "MEASURE_KEYS", "checked_overrides"]

#: the most starts per config a paired comparison takes while it is undecided, unless the option or the profile
#: says otherwise: enough to decide a 1 % change of decode tok/s on the simulator within 6 pairs on average
#: (docs/gate.md "Deciding")
DEFAULT_MAX_STARTS = 6

#: the arm name a candidate config carries in its engine options (part of its config key)
CANDIDATE_ARM = "candidate"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """The candidate arm of a stack-pair comparison (``--perfgate-candidate SPEC``).

    ``python``: the server's interpreter (another virtualenv with its own SGLang); ``env``: variables
    set on the candidate's server; ``sim_stack``: simulated stack overrides (``KEY=VER,...``); ``cpus``: the CPUs
    the candidate's server and every process it starts may run on (``2-5``, ``3``, ``auto``: as
    ``--perfgate-server-cpus``, for this arm only), so pinning is itself a candidate judged against the unpinned arm.
    """

    spec: str
    python: str = ""
    env: tuple[tuple[str, str], ...] = ()
    sim_stack: str = ""
    cpus: str = ""

    def apply(self, config: ServerConfig) -> ServerConfig:
        """``config`` on the candidate arm: its environment added, the arm in its engine options (and key)."""
        env = {**config.env_dict, **dict(self.env)}
        opts: dict[str, object] = {**dict(config.engine_options), "arm": CANDIDATE_ARM}
        if self.python:
            opts["python"] = self.python
        if self.sim_stack:
            opts["sim_stack"] = self.sim_stack
        if self.cpus:
            opts["cpus"] = self.cpus
        return replace(config, env=tuple(sorted(env.items())), engine_options=tuple(sorted(opts.items())))


_CANDIDATE_FIX = ("expected comma-separated python=/path/to/venv/bin/python, env.NAME=VALUE, "
                  "sim-stack=KEY=VER;KEY=VER or cpus=CPUS (2-5, 3, 0;2 for a list, auto), e.g. --perfgate-candidate "
                  "'env.PERFGATE_SIM_SCALE=0.99'")


def parse_candidate(text: str) -> Candidate:
    """``python=PATH,env.NAME=VALUE,sim-stack=KEY=VER;KEY=VER,cpus=CPUS`` -> :class:`Candidate`; ValueError says the
    fix (a CPU list this process may not run on included)."""
    python, sim_stack, cpus = "", "", ""
    env: dict[str, str] = {}
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"--perfgate-candidate {text!r}: empty; {_CANDIDATE_FIX}")
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not value.strip():
            raise ValueError(f"--perfgate-candidate {text!r}: {item!r} is not KEY=VALUE; {_CANDIDATE_FIX}")
        value = value.strip()
        if key == "python":
            python = value
        elif key == "sim-stack":
            try:
                sim_stack = ",".join(pair for pair, _, _ in key_versions(value, ";"))
            except ValueError:
                raise ValueError(f"--perfgate-candidate {text!r}: sim-stack={value!r} is not KEY=VER;KEY=VER; "
                                 f"{_CANDIDATE_FIX}") from None
        elif key == "cpus":
            from perfgate.host.affinity import parse_cpus

            try:
                parse_cpus(value.replace(";", ","))
            except ValueError as e:
                raise ValueError(f"--perfgate-candidate {text!r}: cpus={value!r}: {e}") from None
            cpus = value.replace(";", ",")
        elif key.startswith("env.") and key[4:].replace("_", "").isalnum():
            env[key[4:]] = value
        else:
            raise ValueError(f"--perfgate-candidate {text!r}: unknown key {key!r}; {_CANDIDATE_FIX}")
    return Candidate(spec=text, python=python, env=tuple(sorted(env.items())), sim_stack=sim_stack, cpus=cpus)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The session's resolved options (see the module docstring for the precedence)."""

    #: --perfgate-trials: replaces every workload's trials unless a test names its own (None: the profile's)
    trials: int | None = None
    #: server starts per config: --perfgate-starts > [workload] starts > 1
    starts: int = 1
    #: where ``starts`` came from: "option", "profile" or "default"
    starts_from: str = "default"
    #: the most starts per config a paired comparison may take while undecided:
    #: --perfgate-max-starts > [workload] max_starts > DEFAULT_MAX_STARTS (never below ``starts``)
    max_starts: int = DEFAULT_MAX_STARTS
    #: seconds the added starts may take in the session: --perfgate-max-time > [workload] max_time_s > None
    max_time_s: float | None = None
    #: --perfgate-co-resident: a paired comparison's two servers side by side, each with this --mem-fraction-static
    #: (None: one server at a time; perfgate.serving.coresident)
    co_resident: float | None = None
    #: --perfgate-server-cpus: the CPUs every launched server may run on (None: any; perfgate.host.affinity)
    server_cpus: frozenset[int] | None = None
    #: --perfgate-noise-from: the report files of earlier paired runs whose measured noise the stack pairs are judged
    #: against (perfgate.report.pairnoise; empty: the documented priors)
    noise_from: tuple[str, ...] = ()
    #: --perfgate-candidate: the other arm of the stack-pair records (None: they skip)
    candidate: Candidate | None = None
    #: what is wrong with --perfgate-candidate's spec ("": nothing); a usage error when perfgate switches on
    candidate_error: str = ""
    #: --perfgate-startup-timeout (None: the profile's [engine] startup_timeout_s)
    startup_timeout_s: float | None = None
    #: --perfgate-crosscheck: auto, on or off
    crosscheck: str = "auto"
    #: simulated stack overrides: --perfgate-sim-stack > PERFGATE_SIM_STACK
    sim_stack: str = ""
    #: --perfgate-sim-fault (a fault the simulated server injects; perfgate's own tests)
    sim_fault: str = ""
    #: --perfgate-url: the attached server ("": perfgate launches its servers)
    url: str = ""
    #: --perfgate-progress-interval: seconds between a start-up's progress lines
    progress_interval_s: float = 15.0
    #: --perfgate-update-baselines: the session writes the limits it measured into the profile
    update_baselines: bool = False
    #: --perfgate-allow-hardware-mismatch: measure on hardware the profile is not for
    allow_hardware_mismatch: bool = False
    #: --perfgate-calibrate: auto, on or off (perfgate.plugin.fingerprint)
    calibrate: str = "auto"
    #: --perfgate-variants A,B: only these variants (empty: every variant the profile includes)
    variants: tuple[str, ...] = ()
    #: --perfgate-variants-file ("": the profile's baselines/variants.toml)
    variants_file: str = ""
    #: --perfgate-shard I/N and --perfgate-configs KEY,KEY as given: the CI cell's configs ("": every config)
    shard: str = ""
    configs: str = ""

    def workload(self, w: Workload, **explicit: Any) -> Workload:
        """``w`` (a profile's workload) with the command line's overrides, then a test's ``explicit`` keys."""
        given = {k: v for k, v in explicit.items() if v is not None}
        if self.trials is not None and "trials" not in given:
            given["trials"] = self.trials
        return replace(w, **given) if given else w

    def startup_timeout(self, profile_timeout_s: float) -> float:
        return float(self.startup_timeout_s or profile_timeout_s)


def resolve(opt: Any, profile: Profile, environ: Any) -> Settings:
    """The session's :class:`Settings` from ``opt(name)`` (pytest's getoption), the profile and the environment.
    Never raises: a bad ``--perfgate-candidate`` is :attr:`Settings.candidate_error` (perfgate.plugin.activation
    makes it a usage error), so a terminal summary after a usage error reads the settings again safely."""
    starts, starts_from = profile.workload.starts, "profile" if profile.workload.starts != 1 else "default"
    if opt("perfgate_starts"):
        starts, starts_from = int(opt("perfgate_starts")), "option"
    max_starts = opt("perfgate_max_starts") or profile.workload.max_starts or DEFAULT_MAX_STARTS
    max_time_s = opt("perfgate_max_time") or profile.workload.max_time_s or None
    if opt("perfgate_url"):  # an attached server is not perfgate's to restart
        starts, starts_from, max_starts = 1, "attached", 1
    cand_text = opt("perfgate_candidate") or ""
    candidate, candidate_error = None, ""
    if cand_text:
        try:
            candidate = parse_candidate(cand_text)
        except ValueError as e:
            candidate_error = str(e)
    variants = opt("perfgate_variants")
    return Settings(
        trials=opt("perfgate_trials"),
        starts=starts,
        starts_from=starts_from,
        max_starts=max(int(max_starts), starts),
        max_time_s=float(max_time_s) if max_time_s else None,
        co_resident=opt("perfgate_co_resident"),
        server_cpus=opt("perfgate_server_cpus"),
        noise_from=tuple(dict.fromkeys(p for paths in opt("perfgate_noise_from") or () for p in paths)),
        candidate=candidate,
        candidate_error=candidate_error,
        startup_timeout_s=opt("perfgate_startup_timeout"),
        crosscheck=opt("perfgate_crosscheck") or "auto",
        sim_stack=opt("perfgate_sim_stack") or environ.get("PERFGATE_SIM_STACK", ""),
        sim_fault=opt("perfgate_sim_fault") or "",
        url=opt("perfgate_url") or "",
        progress_interval_s=float(opt("perfgate_progress_interval")),
        update_baselines=bool(opt("perfgate_update_baselines")),
        allow_hardware_mismatch=bool(opt("perfgate_allow_hardware_mismatch")),
        calibrate=opt("perfgate_calibrate") or "auto",
        variants=tuple(variants.split(",")) if variants else (),
        variants_file=opt("perfgate_variants_file") or "",
        shard=opt("perfgate_shard") or "",
        configs=opt("perfgate_configs") or "",
    )


def profile_named(opt: Any, environ: Any, ini: Callable[[str], Any]) -> str:
    """The profile the session names ("" when none): ``--perfgate-profile`` > ``PERFGATE_PROFILE`` > the ini's
    ``perfgate_profile`` (``ini``: pytest's getini). Read before any profile exists, so no field of Settings."""
    return str(opt("perfgate_profile") or environ.get("PERFGATE_PROFILE", "") or ini("perfgate_profile") or "")


def log_dir_given(opt: Any) -> str:
    """``--perfgate-log-dir`` ("" when not given): read when the session starts, before any profile."""
    return str(opt("perfgate_log_dir") or "")


#: the workload keys ``measure(...)`` may override (those of [workload] that shape a measurement)
MEASURE_KEYS = ("concurrency", "max_new_tokens", "prompts", "trials", "warmup", "requests_per_trial",
                "request_timeout_s")


def checked_overrides(who: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The keys a test gave ``measure`` (None: the profile's), refused with the fix before anything is measured."""
    unknown = set(overrides) - set(MEASURE_KEYS)
    if unknown:
        raise TypeError(f"{who}: unknown keyword(s) {sorted(unknown)}; known: {', '.join(MEASURE_KEYS)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    for k, least in (("concurrency", 1), ("max_new_tokens", 1), ("trials", 1), ("requests_per_trial", 1),
                     ("warmup", 0)):
        v = given.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < least):
            raise ValueError(f"{who}: {k} must be a whole number >= {least}, got {v!r}; fix: {k}={least} or more, "
                             f"or leave it out for the profile's [workload] {k}")
    t = given.get("request_timeout_s")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0):
        raise ValueError(f"{who}: request_timeout_s must be seconds > 0, got {t!r}; fix: a positive number, or leave "
                         f"it out for the profile's [workload] request_timeout_s")
    if "prompts" in given:
        given["prompts"] = Path(given["prompts"])
    return given
