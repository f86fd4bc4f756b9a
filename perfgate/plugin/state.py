"""The session's perfgate state: the data of one session. The profile, variants, stack and settings it runs
with, the machine's fingerprint, the configs it selected, and its ledger (perfgate.measuring.ledger: the
measurements and step profiles so far, and what --perfgate-update-baselines writes).

One :class:`PerfgateState` per pytest session, kept in ``config.stash`` by :mod:`perfgate.plugin` (which
holds the hooks, options and fixtures); the runner and the public API read it. It imports only the layers
below the pytest layer (profiles, measuring, serving, record, stack) and the settings, fingerprint and ledger
it holds; what acts on it sits above: the record kinds' cases (perfgate.profiles.cases), the server pool with its
failures (perfgate.plugin.pool), the runner.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from perfgate.measuring.ledger import Ledger
from perfgate.profiles.shipped import DEFAULT_SIM_PROFILE

if TYPE_CHECKING:
    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig
    from perfgate.profiles.settings import Settings
    from perfgate.profiles.variants import VariantSet
    from perfgate.record import Case
    from perfgate.serving.pool import Pool
    from perfgate.stack import Stack
    from perfgate.stack.fingerprint import Fingerprint

#: the fixtures a perf test is recognised by (the plugin activates when a collected test uses one)
PERF_FIXTURES = frozenset({"perf_case", "perf_server", "_perfgate_run", "measure", "perf_check", "step_profile",
                           "micro_case", "perf_crosscheck", "micro_check"})
#: where a pytest session keeps its server pool (``config.stash[POOL]``; PerfgateState.pool)
POOL = pytest.StashKey["Pool"]()
#: where a pytest session keeps its PerfgateState (``config.stash[STATE]``)
STATE = pytest.StashKey["PerfgateState"]()
#: what writing the floor updates came to, (line, colour) each, for the terminal summary to print
LEDGER_REPORT = pytest.StashKey["list[tuple[str, str]]"]()
#: the sessions this process has run (each gets its own log folder)
_SESSIONS = itertools.count(1)


def state_of(config: pytest.Config) -> PerfgateState:
    return config.stash[STATE]


class PerfgateState:
    """Everything perfgate keeps for one pytest session (in ``config.stash``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._profile: Profile | None = None
        self._variants: VariantSet | None = None
        self._min_effect: dict[str, float] | None = None
        self._stack: Stack | None = None
        self._settings: Settings | None = None
        self._fingerprint: Fingerprint | None = None
        self._hw_checked = False
        self.selected_configs: dict[str, ServerConfig] = {}
        self.co_resident_said = False  # the note that a group is measured one start at a time (serving.starts)
        self.added_start_s = 0.0  # seconds spent on starts added to undecided comparisons (--perfgate-max-time)
        self.compared: dict[str, set[str]] = {}  # config key -> the keys it is compared with (perfgate.serving.starts)
        self.compared_known = False  # compared filled from the session's final items (perfgate.plugin.collection)
        # measurements, step profiles, starts measured, floor updates (shipped across xdist workers, written at finish)
        self.ledger = Ledger()
        self.auto_reason = ""
        self.active = False  # perfgate switched on for this session (see perfgate.plugin.activation)
        self.dropped_modes: list[str] = []  # marker modes=[...] this profile lacks, kinds it has no record of (summary)
        self.attach_info: dict[str, Any] | None = None  # --perfgate-url's /server_info, read at activation
        self.kinds_collected: set[str] = set()  # the record kinds of the collected tests (their perfgate markers)
        self.unused_expectations: list[str] = []  # [expectations.<name>] no record of this run can use (summary)
        # (config, pairing level) -> the noise --perfgate-noise-from's reports measured for it, by judged values name:
        # (cv, df) (perfgate.plugin.stackpair.measured_noise)
        self.noise_measured: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
        self.started_at = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
        self.log_dir = self._log_dir()

    @property
    def pool(self) -> Pool:
        """The session's server pool (perfgate.serving.pool: launched, or attached with ``--perfgate-url``), one per
        session, kept in pytest's stash (``POOL``) and made when first asked for."""
        stash = self.config.stash
        if POOL not in stash:
            from perfgate.serving.pool import servers_for

            stash[POOL] = servers_for(self)
        return stash[POOL]

    def say(self, msg: str, *, live: bool = False) -> None:
        """One line on pytest's terminal (perfgate.plugin.say), for what reads the session below the pytest layer
        (the server pool)."""
        from perfgate.plugin.say import say

        say(self.config, msg, live=live)

    # --------------------------------------------------------------- options

    @property
    def settings(self) -> Settings:
        """perfgate's options, resolved once against the profile (perfgate.profiles.settings, their only reader:
        test > option > profile)."""
        if self._settings is None:
            from perfgate.profiles.settings import resolve

            self._settings = resolve(self.config.getoption, self.profile, os.environ)
        return self._settings

    def _log_dir(self) -> Path:
        from perfgate.profiles.settings import log_dir_given

        # one folder per session under --perfgate-log-dir (else perfgate-logs/): a second session keeps the first's logs
        given = log_dir_given(self.config.getoption)
        base = self.log_root = Path(given).resolve() if given else self.config.rootpath / "perfgate-logs"
        wid = os.environ.get("PYTEST_XDIST_WORKER")
        if wid and hasattr(self.config, "workerinput"):  # the controller's session folder, one folder per worker
            run = str(self.config.workerinput.get("perfgate_run", "run"))
            return base / run / wid
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        n = next(_SESSIONS)  # sessions of one process (pytester's in-process runs) in one second differ too
        return base / f"run-{stamp}-{os.getpid()}{'' if n == 1 else f'-{n}'}"

    # --------------------------------------------------------------- profile

    @property
    def profile(self) -> Profile:
        if self._profile is None:
            self._profile = self._load_profile()
        return self._profile

    def _load_profile(self) -> Profile:
        from perfgate.errors import PerfgateError
        from perfgate.profiles.load import load_profile, resolve_profile
        from perfgate.profiles.settings import profile_named

        root = self.config.rootpath
        spec = profile_named(self.config.getoption, os.environ, self.config.getini)
        try:
            if spec:
                path = resolve_profile(spec, root)
            else:
                path = self._auto_profile(root)
            return load_profile(path)
        except PerfgateError as e:
            raise pytest.UsageError(f"perfgate: {e}") from None

    def _auto_profile(self, root: Path) -> Path:
        from perfgate.host.gpu import gpu_visible

        if not gpu_visible():
            self.auto_reason = "no NVIDIA GPU visible and no --perfgate-profile / PERFGATE_PROFILE given"
            if (root / DEFAULT_SIM_PROFILE).is_file():
                return root / DEFAULT_SIM_PROFILE
            from perfgate.profiles.shipped import shipped_file

            shipped = shipped_file(DEFAULT_SIM_PROFILE)  # the copy perfgate ships: runs from any directory
            if shipped is None:
                raise pytest.UsageError(
                    f"perfgate: no profile named and no NVIDIA GPU visible, and neither {root} (the pytest rootdir) "
                    f"nor this perfgate installation has {DEFAULT_SIM_PROFILE} to fall back to; name a profile with "
                    f"--perfgate-profile PATH, PERFGATE_PROFILE or the perfgate_profile ini option (schema: "
                    f"docs/profiles.md of perfgate)")
            return shipped
        from perfgate.profiles.boxfit import profile_for
        from perfgate.profiles.load import find_profiles
        from perfgate.stack import detect_stack

        st = detect_stack()
        chosen = profile_for(st, find_profiles(root))
        if chosen is not None:
            self.auto_reason = f"chosen for the detected {st.gpu_count}x {st.gpu}"
            return chosen
        raise pytest.UsageError(
            f"perfgate: an NVIDIA GPU is visible ({st.gpu_count}x {st.gpu}, SM {st.sm}) but no profile under "
            f"{root / 'baselines'} is for it; pass --perfgate-profile PATH (see README, 'Running on a GPU box'), "
            f"or --perfgate-profile {DEFAULT_SIM_PROFILE} to run the simulated profile"
        )

    @property
    def variants(self) -> VariantSet:
        if self._variants is None:
            from perfgate.errors import PerfgateError
            from perfgate.profiles.reader import resolve_path
            from perfgate.profiles.variants import load_variants

            path = self.settings.variants_file or resolve_path(self.profile.root, "baselines/variants.toml")
            try:
                self._variants = load_variants(path)
            except PerfgateError as e:
                raise pytest.UsageError(f"perfgate: {e}") from None
        return self._variants

    @property
    def min_effect(self) -> dict[str, float]:
        """The practical floor per metric that comparisons across stacks judge with: the project's
        ``[tool.perfgate.gate] min_effect`` (perfgate.report.policy; the ``pyproject.toml`` found from the rootdir up),
        the one ``perfgate gate`` reads; empty: the documented floors."""
        if self._min_effect is None:
            from perfgate.errors import PerfgateError
            from perfgate.report.policy import load_policy

            try:
                self._min_effect = dict(load_policy(start=self.config.rootpath).min_effect)
            except PerfgateError as e:
                raise pytest.UsageError(f"perfgate: {e}") from None
        return self._min_effect

    @property
    def stack(self) -> Stack:
        if self._stack is None:
            from perfgate import stack as st

            if self.profile.simulated:
                assert self.profile.engine.sim_hardware is not None
                try:
                    over = st.parse_overrides(self.sim_stack)
                    self._stack = st.simulated_stack(self.profile.engine.sim_hardware, over)
                except Exception as e:
                    raise pytest.UsageError(f"perfgate: --perfgate-sim-stack: {e}") from None
            elif self.profile.engine.python:  # the current arm's servers run another interpreter: its software
                self._stack = st.detect_stack_in(self.profile.engine.python)
            else:
                self._stack = st.detect_stack()
        return self._stack

    @property
    def fingerprint(self) -> Fingerprint:
        """The machine and its calibration (perfgate.plugin.fingerprint), found once, before the first server starts."""
        if self._fingerprint is None:
            from perfgate.plugin.fingerprint import session_fingerprint

            self._fingerprint = session_fingerprint(self)
        return self._fingerprint

    @property
    def sim_stack(self) -> str:
        return self.settings.sim_stack

    # --------------------------------------------------------------- configs

    def config_for(self, case: Case) -> ServerConfig:
        v = self.variants.get(case.variant) if case.variant else None
        config = self.profile.config(case.mode, variant=v)
        if case.arm is None:
            return config
        cand = self.settings.candidate
        if case.arm != "candidate" or cand is None:
            raise ValueError(f"{case.id}: arm {case.arm!r} needs --perfgate-candidate")
        return cand.apply(config)

    def session_configs(self) -> list[ServerConfig]:
        """Every config this profile can produce: each mode, and each variant in the variant modes."""
        p = self.profile
        out: dict[str, ServerConfig] = {}
        for mode in p.modes:
            c = p.config(mode)
            out[c.key] = c
        for name in self.variants.variants:
            for mode in p.variant_modes:
                c = p.config(mode, variant=self.variants.get(name))
                out.setdefault(c.key, c)
        return list(out.values())

    def check_hardware(self) -> None:
        if self._hw_checked:
            return
        self._hw_checked = True
        p = self.profile
        if p.simulated or self.settings.allow_hardware_mismatch or self.settings.url:
            return
        from perfgate.profiles.boxfit import hardware_matches

        ok, why = hardware_matches(p, self.stack)
        if not ok:
            from perfgate.errors import HardwareMismatch

            s = self.stack
            box = (f"{s.gpu_count}x {s.gpu} (SM {s.sm}, {s.interconnect})" if str(s.gpu) != "unknown"
                   else "no NVIDIA GPU that perfgate can see (detected GPU: unknown)")
            raise HardwareMismatch(
                f"{p.path}: key 'hardware.gpu': the profile is for {p.hardware.count}x {p.hardware.gpu} "
                f"(SM {p.hardware.sm}, {p.hardware.interconnect}) but this box has {box}: {why}; fix: use the "
                f"profile for this hardware (--perfgate-profile), or pass --perfgate-allow-hardware-mismatch "
                f"to measure anyway",
                profile_path=str(p.path), expected=p.hardware.gpu, detected=str(s.gpu),
            )
