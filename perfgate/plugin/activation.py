"""Switching perfgate on for a session: when (a profile named, or a collected test using a perfgate fixture),
and what it does then: inputs validated with the file, key and fix; GPUs partitioned under xdist; SIGTERM made
a clean end; the JUnit file kept current; the stack, the machine (perfgate.plugin.fingerprint) and ``perfgate.*`` on
the JUnit suite."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from typing import TYPE_CHECKING

import pytest

from perfgate.kinds import KINDS
from perfgate.plugin.state import PerfgateState, state_of

if TYPE_CHECKING:
    from collections.abc import Iterable

    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig

__all__ = ["activate", "activate_late", "wants_perf", "add_suite_properties", "check_gpus", "refuse_shipped_update"]


def activate(config: pytest.Config, *, early: bool) -> None:
    """Switch perfgate on for this session: inputs validated (file, key and fix), GPUs partitioned under
    xdist, SIGTERM made a clean end, the JUnit file kept current. Early: at configure, when the profile is
    named; late: at collection, when a collected test uses a perfgate fixture."""
    st = state_of(config)
    if st.active:
        return
    workerinput = getattr(config, "workerinput", None)
    if not early and workerinput is not None and not workerinput.get("perfgate_active") \
            and not st.profile.simulated:
        raise pytest.UsageError(
            "perfgate: under pytest-xdist perfgate must know the profile before the workers start, to give each "
            "its own GPUs: pass --perfgate-profile, set PERFGATE_PROFILE, or set perfgate_profile (or "
            "perfgate = true) in the pytest ini file")
    st.active = True
    install_sigterm()
    validate_inputs(config)
    if early:
        from perfgate.plugin.workers import assign_gpus

        assign_gpus(config)
    from perfgate.plugin.junitguard import install

    install(config)  # the JUnit file stays current: a killed pytest loses no finished record
    if not early:
        add_suite_properties(config)


def activate_late(config: pytest.Config) -> None:
    activate(config, early=False)


def validate_inputs(config: pytest.Config) -> None:
    """Bad profiles, variants or options fail here, before collection, with the file, key and fix."""
    st = state_of(config)
    p = st.profile
    refuse_shipped_update(st)
    vs = st.variants
    names = list(p.variant_include or ()) + list(p.variant_overrides)
    checks = {k.name for k in KINDS.values() if k.expectation}  # the built-in kinds an [expectations] entry may name
    for n in names:
        if n not in vs.variants and n not in checks:
            from perfgate.profiles.reader import _close

            raise pytest.UsageError(f"perfgate: {p.path}: [variants] include / overrides names '{n}', which is "
                                    f"not a variant of {vs.path}; fix: {_close(n, list(vs.variants))}")
    for n in p.expectations:  # a name that is no built-in kind may be a user's kind: checked at collection
        k = KINDS.get(n)
        if k is not None and not k.expectation and n not in vs.variants:
            raise pytest.UsageError(
                f"perfgate: {p.path}: [expectations.{n}] (line {expectation_line(p, n)}): the built-in kind '{n}' "
                f"takes no expectations (its verdict comes from its own judge); fix: remove the table")
    for n in st.settings.variants:
        if n not in vs.variants:
            from perfgate.profiles.reader import _close

            raise pytest.UsageError(f"perfgate: --perfgate-variants: unknown variant '{n}' in {vs.path}; "
                                    f"{_close(n, vs.variants)}")
        if p.variant_include is not None and n not in p.variant_include:
            raise pytest.UsageError(
                f"perfgate: --perfgate-variants: '{n}' is a variant of {vs.path} but not in {p.path} [variants] "
                f"include ({', '.join(p.variant_include) or 'empty'}), so no record would run; add it to include "
                f"or pick one of those")
    from perfgate.serving.coresident import problem

    for wrong in (st.settings.candidate_error, problem(st.settings.co_resident, attached=bool(st.settings.url))):
        if wrong:
            raise pytest.UsageError(f"perfgate: {wrong}")
    if st.settings.candidate is not None:
        _ = st.min_effect  # the stack pairs' floors ([tool.perfgate.gate] min_effect): read before any start
        py = st.settings.candidate.python
        if py and not os.access(shutil.which(py) or py, os.X_OK):  # before the current arm's servers, not after
            raise pytest.UsageError(f"perfgate: --perfgate-candidate {st.settings.candidate.spec!r}: python={py!r} "
                                    f"is no executable interpreter, so the candidate arm cannot start (nothing was "
                                    f"started); fix: the candidate environment's python, e.g. "
                                    f"python=/venvs/candidate/bin/python")
    if p.simulated:
        _ = st.stack  # validates --perfgate-sim-stack
        from perfgate.sim.variation import env_problem

        bad = env_problem(os.environ)  # PERFGATE_SIM_MACHINE, PERFGATE_SIM_SCALE, PERFGATE_SIM_STEP_SD
        if bad:
            raise pytest.UsageError(f"perfgate: {bad}")
        cand = st.settings.candidate
        if cand is not None and (bad := env_problem(dict(cand.env))):  # the candidate's server's own, values too
            raise pytest.UsageError(f"perfgate: --perfgate-candidate {cand.spec!r}: {bad}")
    else:  # a profile for other hardware is refused here, not once per test
        from perfgate.errors import HardwareMismatch

        try:
            st.check_hardware()
        except HardwareMismatch as e:
            raise pytest.UsageError(f"perfgate: {e}") from None
    url = st.settings.url
    if url:  # one usage error before any test, not a failure per record
        from perfgate.serving.attach import probe

        info, why, fix = probe(url)
        if info is None:
            raise pytest.UsageError(
                f"perfgate: --perfgate-url {url}: cannot read {url.rstrip('/')}/server_info: {why}; fix: {fix}")
        st.attach_info = info
    if not p.simulated and not url:  # every path SGLang would be handed, before any launch
        from perfgate.profiles.paths import missing_paths

        missing = missing_paths(p, vs)
        if missing:
            raise pytest.UsageError("perfgate: " + "\nperfgate: ".join(missing))


def refuse_shipped_update(st: PerfgateState) -> None:
    """--perfgate-update-baselines on the profile perfgate ships (the installed copy, in site-packages) would measure
    everything and then refuse to write it: a usage error before any test instead, naming the fix."""
    from perfgate.profiles.shipped import is_shipped_copy

    p = st.profile
    if st.settings.update_baselines and is_shipped_copy(p.path):
        raise pytest.UsageError(
            f"perfgate: --perfgate-update-baselines: {p.path} is the copy of the profile that perfgate ships, inside "
            f"the installation, which it never writes (nothing was measured); fix: `perfgate init --from {p.name}` "
            f"sets up a project of yours with a copy of it (and the profiles it extends, and a pytest.ini naming it); "
            f"run pytest with --perfgate-update-baselines in that project")


def check_gpus(st: PerfgateState, configs: Iterable[ServerConfig]) -> None:
    """A selected config the box cannot hold (tp x pp x dp above the GPUs CUDA sees here, through NVML) is a usage
    error at collection, before any launch, not a config-error after a minute of start-up. Without NVML the count
    is unknown, and a simulated or attached server is not launched here: nothing is said."""
    if st.profile.simulated or st.settings.url:
        return
    from perfgate.host.gpu import visible_entries
    from perfgate.profiles.config import gpus_needed

    ids = visible_entries()
    if ids is None:
        return
    for cfg in configs:
        need = gpus_needed(cfg.flag_dict)
        if need > len(ids):
            raise pytest.UsageError(
                f"perfgate: {st.profile.path}: {cfg.name} needs {need} GPUs (tp-size x pp-size x dp-size of its "
                f"flags: {', '.join(f'{k} = {v}' for k, v in cfg.flag_dict.items() if k in _PARALLEL) or 'none'}) "
                f"but {len(ids)} are visible here ({','.join(ids) or 'none'}, CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}); fix: lower tp-size in [server] (or the mode's "
                f"or variant's flags), or run on a box with {need} GPUs")


_PARALLEL = frozenset({"tp-size", "tp", "tensor-parallel-size", "dp-size", "data-parallel-size", "pp-size",
                       "pipeline-parallel-size", "enable-dp-attention"})


def expectation_line(p: Profile, name: str) -> int | str:
    """The line of ``[expectations.<name>]`` in the profile (for messages); "?" where unknown."""
    for per_mode in p.expectations.get(name, {}).values():
        for e in per_mode:
            if e.line:
                return e.line
    return "?"


def install_sigterm() -> None:
    """SIGTERM ends the session like Ctrl-C: JUnit is written, servers are torn down."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def _term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, _term)


def wants_perf(config: pytest.Config) -> bool:
    """Activated from the start: a profile named (option, environment, ini) or ``perfgate = true`` in the ini."""
    from perfgate.profiles.settings import profile_named

    return bool(profile_named(config.getoption, os.environ, config.getini)) or bool(config.getini("perfgate"))


def add_suite_properties(config: pytest.Config) -> None:
    """The stack and perfgate.* on the JUnit suite (written by the controller, so they survive -n N)."""
    st = state_of(config)
    if hasattr(config, "workerinput") or not st.active:
        return
    _ = st.fingerprint  # the machine and its calibration, at session start (before any server)
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for k, v in suite_properties(st).items():
        xml.add_global_property(k, v)


def suite_properties(st: PerfgateState) -> dict[str, str]:
    from perfgate._version import __version__

    p = st.profile
    props = {
        "perfgate.version": __version__,
        "perfgate.engine": p.engine.name,
        "perfgate.profile": p.name,
        "perfgate.profile_path": str(p.path),
        "perfgate.simulated": "true" if p.simulated else "false",
        "perfgate.started_at": st.started_at,
    }
    props.update(st.stack.as_properties())
    props.update(st.fingerprint.as_properties())
    return props
