"""Session and runner logic without a pytest subprocess: config groups for xdist, the launch/attach interface,
fallback and bad-flag verdicts from a server log, GPU visibility under CUDA's rules."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.host.gpu import visible_entries
from perfgate.plugin.pool import Attacher, Endpoint, Launcher, servers_for
from perfgate.profiles.load import load_profile
from perfgate.profiles.settings import Settings
from perfgate.profiles.variants import load_variants
from perfgate.record import Case, config_scope
from perfgate.serving.launch_log import bad_flag_hint, fallback_verdict

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"

_name = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-._"), min_size=1, max_size=16)


@given(profile=st.lists(_name, min_size=1, max_size=3).map("/".join), mode=_name, variant=st.none() | _name,
       kind=_name, param=st.none() | _name)
def test_a_records_node_id_names_its_config_group(profile, mode, variant, kind, param):
    """pytest-xdist's controller sees node ids only: the mode and variant read back from one are the Case's."""
    if "+" in mode:
        return
    case = Case(profile, kind, mode, variant)
    assert config_scope(f"perftests/test_x.py::test_y[{case.id}]") == (mode, variant)
    if param is not None and ":" not in param:
        assert config_scope(f"tests/test_z.py::test_w[{param}]") is None
    assert config_scope("tests/test_z.py::test_w") is None


class _State:
    """What Launcher/Attacher and the verdict helpers read of a session: profile, variants, options."""

    def __init__(self, url: str = "") -> None:
        self.profile = load_profile(SIM)
        self.variants = load_variants(ROOT / "baselines" / "variants.toml")
        self._url = url
        self.attach_info = None  # --perfgate-url's /server_info, read at activation (none here)

    @property
    def settings(self) -> Settings:
        return Settings(url=self._url)


def test_the_session_reaches_servers_by_launching_or_attaching():
    assert isinstance(servers_for(_State()), Launcher) and not servers_for(_State()).attached  # type: ignore[arg-type]  # _State: a stand-in for PerfgateState
    a = servers_for(_State("http://box:30000/"))  # type: ignore[arg-type]  # _State: a stand-in for PerfgateState
    assert isinstance(a, Attacher) and a.attached
    cfg = _State().profile.config("baseline")
    assert a.endpoint(cfg) == Endpoint(url="http://box:30000")
    assert a.log_of(cfg) == "" and a.alive(cfg)
    assert Launcher(_State()).log_of(cfg) == ""  # type: ignore[arg-type]  # _State: a stand-in; nothing launched yet


def test_a_logged_fallback_is_the_variants_record(tmp_path):
    s = _State()
    v = s.variants.get("torch-symm-mem")
    cfg = s.profile.config("baseline", variant=v)
    log = tmp_path / "s.log"
    log.write_text("[2026-12-01 01:35:19] TorchSymmMemCommunicator: Device capability 12 not supported, "
                   "communicator is not available.\n")
    got = fallback_verdict(s, cfg, log)
    assert got is not None and got.outcome == "fail" and got.category == "unsupported-arch"
    assert "torch_symm_mem did not run, SGLang fell back" in got.message
    assert fallback_verdict(s, s.profile.config("baseline"), log) is None  # not a variant: nothing to fall back
    log.write_text("all good\n")
    assert fallback_verdict(s, cfg, log) is None


def test_an_unknown_flag_names_the_file_the_key_and_the_closest_flag(tmp_path):
    s = _State()
    cfg = s.profile.config("baseline")
    log = tmp_path / "s.log"
    log.write_text("usage: launch_server [--tp-size TP_SIZE] [--cuda-graph-max-bs-decode N]\n"
                   "launch_server: error: unrecognized arguments: --cuda-graph-max-bs-decod\n")
    hint = bad_flag_hint(s, cfg, log)
    assert hint.startswith(f"{SIM} [server]: key 'cuda-graph-max-bs-decod'")
    assert "did you mean --cuda-graph-max-bs-decode?" in hint
    log.write_text("crashed\n")
    assert bad_flag_hint(s, cfg, log) == ""


def _fake_nvml(monkeypatch, uuids):
    m = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: len(uuids),
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetUUID=lambda h: uuids[h])
    monkeypatch.setitem(sys.modules, "pynvml", m)


@pytest.mark.parametrize("spec, want", [
    (None, ["0", "1", "2", "3"]),
    ("2,3", ["2", "3"]),
    ("GPU-bb,0", ["GPU-bb", "0"]),     # a UUID prefix keeps its spelling
    ("1,7,2", ["1"]),                  # CUDA stops at the first entry that names no device
    ("1,1", []),                       # a duplicate hides every device
    ("", []),
])
def test_visible_entries_follow_cudas_rules(monkeypatch, spec, want):
    _fake_nvml(monkeypatch, ["GPU-aa11", "GPU-bb22", "GPU-cc33", "GPU-dd44"])
    if spec is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", spec)
    assert visible_entries() == want


def test_collection_orders_records_by_config_and_tags_their_group(pytester):
    """Each config's records are contiguous (one server start each) and carry xdist_group = the config's key;
    the controller's scheduler finds the same group from the node id alone."""
    import json
    import shutil

    from perfgate.plugin.workers import group_of

    shutil.copytree(ROOT / "perftests", pytester.path / "perftests")
    pytester.makeconftest('''
import json
pytest_plugins = ["perfgate.plugin"]

def pytest_collection_finish(session):
    with open("collected.json", "w") as f:
        json.dump([[it.nodeid, it.get_closest_marker("xdist_group").kwargs["name"]] for it in session.items], f)
''')
    r = pytester.runpytest_subprocess("perftests", "--collect-only", "-q", "-m",
                                      "baseline or speculative or backends or profile", f"--perfgate-profile={SIM}",
                                      "-p", "no:cacheprovider")
    assert r.ret == 0
    got = json.loads((pytester.path / "collected.json").read_text())
    s = _State()
    s.config_for = lambda c: s.profile.config(  # type: ignore[attr-defined]  # what PerfgateState has
        c.mode, variant=s.variants.get(c.variant) if c.variant else None)
    assert got and all((scope := config_scope(nodeid)) is not None
                       and g == group_of(s, *scope) for nodeid, g in got)  # type: ignore[arg-type]  # _State: a stand-in
    seen: list[str] = []
    for _, g in got:  # contiguous: a group never comes back after another started
        if not seen or seen[-1] != g:
            assert g not in seen, f"{g} split"
            seen.append(g)
    assert seen[0] == f"perfgate:{s.profile.config('baseline').key}"  # the baseline's config first
    # eagle3+cuda-graph-bs-128 sets what eagle3 already sets: one config, one group, one server start
    assert len(seen) < len({config_scope(n) for n, _ in got})


class _Config:
    def __init__(self) -> None:
        self.stash = pytest.Stash()


def test_an_unreadable_attached_server_is_the_pools_failure_of_the_config(monkeypatch):
    """The pool (not the record) knows an attached config failed: the verdict comes back to the runner, which
    concludes the record, and every later record of the config gets the same failure without asking again."""
    from perfgate.plugin.pool import ServerFailed
    from perfgate.serving import attach

    calls = []
    monkeypatch.setattr(attach, "server_info", lambda url: calls.append(url))
    a = servers_for(_State("http://box:30000"))  # type: ignore[arg-type]  # _State: a stand-in for PerfgateState
    cfg = _State().profile.config("baseline")
    got = a.admit(cfg)
    assert got.verdict is not None and got.verdict.outcome == "fail" and "cannot read http://box:30000/server_info" \
        in got.verdict.message
    assert a.admit(cfg).verdict == got.verdict and calls == ["http://box:30000"]
    failed = a.failure(cfg)
    assert failed is not None and failed.verdict == got.verdict
    with pytest.raises(ServerFailed):
        a.endpoint(cfg)


def test_the_session_has_one_pool_in_its_stash():
    from perfgate.plugin.pool import POOL, stop_servers
    from perfgate.plugin.state import PerfgateState

    s = _State()
    s.config = _Config()  # type: ignore[attr-defined]
    pool = PerfgateState.pool.fget  # type: ignore[attr-defined]  # the state's property, on the stand-in state
    assert pool is not None
    p = pool(s)
    assert pool(s) is p and s.config.stash[POOL] is p and p.launched is None  # type: ignore[attr-defined]
    stop_servers(s.config)  # type: ignore[attr-defined]  # nothing launched: nothing to stop
