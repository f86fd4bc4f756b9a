"""One precedence per knob, and Settings the only reader of perfgate's options (perfgate.profiles.settings).

    a test's explicit argument  >  command-line option (or its environment variable)  >  profile

Each knob's precedence from :func:`perfgate.profiles.settings.resolve` on a real profile, without a pytest
subprocess; the source has no other reader of a ``--perfgate-*`` option; and trials on the load paths
(``measure.rate``, ``measure.goodput``, ``measure.levels``) as users run them (pytester, the simulated seed box,
a tiny ``[slo]`` whose levels are never topped up, so the trials counted are the precedence's).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from perfgate.profiles import Profile
from perfgate.profiles.load import load_profile
from perfgate.profiles.settings import DEFAULT_MAX_STARTS, Settings, log_dir_given, profile_named, resolve
from tests.simproject import sim_profile
from tests.test_starts import PROFILE as STARTS_PROFILE
from tests.test_starts import _project, _records

PACKAGE = Path(__file__).resolve().parents[1] / "perfgate"

#: a profile that sets every knob the profile has: [workload] trials, starts, max_starts, max_time_s and
#: [engine] startup_timeout_s (WORKLOAD: those keys); the simulated test profile (tests.simproject), read, not run
PROFILE = sim_profile(startup_timeout=45, eagle3=False, max_new_tokens=8, trials=5, workload="WORKLOAD")
SETS = "starts = 2\nmax_starts = 4\nmax_time_s = 100"

#: pytest's defaults of perfgate's options (perfgate.plugin.pytest_addoption)
DEFAULTS: dict[str, Any] = {"perfgate_progress_interval": 15.0, "perfgate_crosscheck": "auto",
                            "perfgate_calibrate": "auto", "perfgate_update_baselines": False,
                            "perfgate_allow_hardware_mismatch": False}


def _profile(tmp_path: Path, workload: str = SETS) -> Profile:
    path = tmp_path / "m.toml"
    path.write_text(PROFILE.replace("WORKLOAD", workload))
    return load_profile(path)


def _settings(profile: Profile, environ: dict[str, str] | None = None, **given: Any) -> Settings:
    opts = {**DEFAULTS, **{f"perfgate_{k}": v for k, v in given.items()}}
    return resolve(lambda name: opts.get(name), profile, environ or {})


def test_trials_a_tests_own_beat_the_option_which_beats_the_profile(tmp_path):
    w = _profile(tmp_path).workload
    assert _settings(_profile(tmp_path)).workload(w).trials == 5  # the profile's
    assert _settings(_profile(tmp_path), trials=7).workload(w).trials == 7  # the option's
    assert _settings(_profile(tmp_path), trials=7).workload(w, trials=2).trials == 2  # the test's
    assert _settings(_profile(tmp_path)).workload(w, trials=2).trials == 2


def test_starts_the_option_beats_the_profile_which_beats_one(tmp_path):
    assert (_settings(_profile(tmp_path), starts=3).starts, _settings(_profile(tmp_path), starts=3).starts_from) == \
        (3, "option")
    s = _settings(_profile(tmp_path))
    assert (s.starts, s.starts_from) == (2, "profile")
    s = _settings(_profile(tmp_path, ""))
    assert (s.starts, s.starts_from) == (1, "default")
    s = _settings(_profile(tmp_path), starts=3, url="http://box:30000")  # an attached server is not restarted
    assert (s.starts, s.starts_from, s.max_starts) == (1, "attached", 1)


def test_max_starts_the_option_beats_the_profile_which_beats_the_default_never_below_starts(tmp_path):
    assert _settings(_profile(tmp_path), max_starts=9).max_starts == 9
    assert _settings(_profile(tmp_path)).max_starts == 4
    assert _settings(_profile(tmp_path, "")).max_starts == DEFAULT_MAX_STARTS
    assert _settings(_profile(tmp_path), starts=8).max_starts == 8


def test_max_time_the_option_beats_the_profile_which_beats_none(tmp_path):
    assert _settings(_profile(tmp_path), max_time=30.0).max_time_s == 30.0
    assert _settings(_profile(tmp_path)).max_time_s == 100.0
    assert _settings(_profile(tmp_path, "")).max_time_s is None


def test_startup_timeout_the_option_beats_the_profile(tmp_path):
    p = _profile(tmp_path)
    assert _settings(p, startup_timeout=90.0).startup_timeout(p.engine.startup_timeout_s) == 90.0
    assert _settings(p).startup_timeout(p.engine.startup_timeout_s) == 45.0


def test_sim_stack_the_option_beats_the_environment(tmp_path):
    env = {"PERFGATE_SIM_STACK": "flashinfer=0.7.0"}
    assert _settings(_profile(tmp_path), env, sim_stack="cuda=13.1").sim_stack == "cuda=13.1"
    assert _settings(_profile(tmp_path), env).sim_stack == "flashinfer=0.7.0"
    assert _settings(_profile(tmp_path)).sim_stack == ""


@pytest.mark.parametrize(("option", "value", "field", "resolved", "default"), [
    ("url", "http://box:30000", "url", "http://box:30000", ""),
    ("crosscheck", "on", "crosscheck", "on", "auto"),
    ("calibrate", "off", "calibrate", "off", "auto"),
    ("sim_fault", "die-at-start", "sim_fault", "die-at-start", ""),
    ("progress_interval", 2.5, "progress_interval_s", 2.5, 15.0),
    ("update_baselines", True, "update_baselines", True, False),
    ("allow_hardware_mismatch", True, "allow_hardware_mismatch", True, False),
    ("variants", "a,b", "variants", ("a", "b"), ()),
    ("variants_file", "v.toml", "variants_file", "v.toml", ""),
    ("shard", "2/3", "shard", "2/3", ""),
    ("configs", "k1,k2", "configs", "k1,k2", ""),
    ("startup_timeout", 90.0, "startup_timeout_s", 90.0, None),
    ("trials", 7, "trials", 7, None),
])
def test_an_option_without_a_profile_key_beats_its_default(tmp_path, option, value, field, resolved, default):
    p = _profile(tmp_path)
    assert getattr(_settings(p, **{option: value}), field) == resolved
    assert getattr(_settings(p), field) == default == getattr(Settings(), field)  # Settings' own default too


def test_a_bad_candidate_is_kept_for_the_usage_error_not_raised(tmp_path):
    p = _profile(tmp_path)
    good = _settings(p, candidate="env.PERFGATE_SIM_SCALE=0.99")
    assert good.candidate is not None and good.candidate.env == (("PERFGATE_SIM_SCALE", "0.99"),)
    assert not good.candidate_error
    bad = _settings(p, candidate="colour=blue")  # perfgate.plugin.activation makes it the usage error
    assert bad.candidate is None and "unknown key 'colour'" in bad.candidate_error


def test_the_profile_named_the_option_beats_the_environment_which_beats_the_ini():
    opt = {"perfgate_profile": "a.toml"}.get
    none: dict[str, str] = {}
    ini = {"perfgate_profile": "c.toml"}.get
    env = {"PERFGATE_PROFILE": "b.toml"}
    assert profile_named(opt, env, ini) == "a.toml"
    assert profile_named(none.get, env, ini) == "b.toml"
    assert profile_named(none.get, {}, ini) == "c.toml"
    assert profile_named(none.get, {}, lambda name: "") == ""
    assert log_dir_given({"perfgate_log_dir": "/tmp/logs"}.get) == "/tmp/logs" and log_dir_given(none.get) == ""


def _registered_options() -> set[str]:
    """The dest of every ``--perfgate-*`` option the plugin registers."""
    text = (PACKAGE / "plugin" / "__init__.py").read_text()
    return {m.replace("-", "_") for m in re.findall(r'addoption\(\s*"--(perfgate-[a-z-]+)"', text)}


def test_settings_reads_every_option_the_plugin_registers(tmp_path):
    asked: set[str] = set()

    def opt(name: str) -> Any:
        asked.add(name)
        return DEFAULTS.get(name)

    resolve(opt, _profile(tmp_path), {})
    profile_named(opt, {}, lambda name: "")
    log_dir_given(opt)
    registered = _registered_options()
    assert len(registered) > 15 and asked == registered


def test_no_module_but_settings_reads_an_option():
    """``config.getoption("perfgate_...")``, ``state.opt(...)`` and ``config.option.perfgate_...`` appear in
    perfgate.profiles.settings only (pytest's own options, ``verbose`` or ``collectonly``, may be read anywhere)."""
    found = []
    for f in sorted(PACKAGE.rglob("*.py")):
        if f == PACKAGE / "plugin" / "settings.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                arg = node.args[0]
                named = isinstance(arg, ast.Constant) and str(arg.value).startswith("perfgate")
                if node.func.attr == "opt" or node.func.attr == "getoption" and named:
                    found.append(f"{f.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr.startswith("perfgate_") and \
                    isinstance(node.value, ast.Attribute) and node.value.attr == "option":
                found.append(f"{f.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, "options read outside perfgate.profiles.settings: " + ", ".join(found)


# ----------------------------------------------------------------------------- trials on the load paths

#: a tiny [slo]: 5 requests a trial at 8 req/s, a level's budget of 5 (never topped up: every trial counted is one
#: the precedence asked for), one goodput level (rate_start = rate_max)
SLO = """
[slo]
ttft_ms_p50 = 60000
attainment = 0.5
requests = 5
warmup_requests = 0
max_requests = 5
rate_start = 8
rate_max = 8
max_levels = 2
max_new_tokens = 8
SLO_TRIALS
"""

LOAD_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="trials-under-load", modes=["baseline"])


def test_rate(perf_server, measure, perfgate_record):
    perfgate_record("trials", len(measure.rate(perf_server, 8.0).trials))


def test_rate_explicit(perf_server, measure, perfgate_record):
    perfgate_record("trials", len(measure.rate(perf_server, 8.0, trials=4).trials))


def test_goodput(perf_server, measure, perfgate_record):
    g = measure.goodput(perf_server)
    perfgate_record("trials", g.trials)
    perfgate_record("level_trials", len(g.search.levels[0].trials))


def test_goodput_explicit(perf_server, measure, perfgate_record):
    g = measure.goodput(perf_server, trials=4)
    perfgate_record("trials", g.trials)
    perfgate_record("level_trials", len(g.search.levels[0].trials))


def test_levels(perf_server, measure, perfgate_record):
    perfgate_record("trials", measure.levels(perf_server, (1,)).measurements[0].tok_s.n)
'''


@pytest.mark.parametrize(("slo_trials", "option", "default"), [
    (2, None, 2),  # [slo] trials beats [workload] trials (1)
    (2, "3", 3),  # --perfgate-trials beats [slo] trials
    (None, None, 1),  # no [slo] trials: [workload] trials
])
def test_trials_under_load_a_tests_own_beat_the_option_which_beats_the_profile(pytester, slo_trials, option,
                                                                                 default):
    assert "trials = TRIALS" in STARTS_PROFILE
    prof = _project(pytester, trials=1,
                    extra=SLO.replace("SLO_TRIALS", f"trials = {slo_trials}" if slo_trials else ""))
    (pytester.path / "test_load_trials.py").write_text(LOAD_TEST)
    r = pytester.runpytest_subprocess("test_load_trials.py", f"--perfgate-profile={prof}", "--junitxml=r.xml",
                                      "-p", "no:cacheprovider", *(["--perfgate-trials", option] if option else []))
    r.assert_outcomes(passed=5)
    recs = {name.split("[")[0]: p for name, p in _records(pytester).items()}
    # rate and goodput: the test's trials= > the option > [slo] trials > [workload] trials
    assert recs["test_rate"]["trials"] == str(default)
    assert recs["test_rate_explicit"]["trials"] == "4"
    assert recs["test_goodput"]["trials"] == recs["test_goodput"]["level_trials"] == str(default)
    assert recs["test_goodput_explicit"]["trials"] == recs["test_goodput_explicit"]["level_trials"] == "4"
    # the crossover's closed-loop levels take no trials= of their own: the option > [slo] trials > [workload] trials
    assert recs["test_levels"]["trials"] == str(default)
