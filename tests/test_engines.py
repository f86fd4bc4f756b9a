"""Command lines and environments built by the engines."""

import sys
from pathlib import Path

from perfgate.engines.argv import render_flags
from perfgate.engines.sglang import SGLangEngine
from perfgate.engines.sim import SimEngine
from perfgate.profiles.load import load_profile
from perfgate.profiles.variants import load_variants

ROOT = Path(__file__).resolve().parent.parent


def test_render_flags():
    assert render_flags({"tp-size": 8, "trust-remote-code": True, "disable-radix-cache": False,
                         "cuda-graph-bs-decode": [1, 2, 4], "mem-fraction-static": 0.88}) == [
        "--tp-size", "8", "--trust-remote-code", "--cuda-graph-bs-decode", "1", "2", "4",
        "--mem-fraction-static", "0.88"]


def test_sglang_command_for_the_seed_box_and_version_spelling():
    prof = load_profile(ROOT / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml")
    vs = load_variants(ROOT / "baselines" / "variants.toml")
    cfg = prof.config("eagle3", variant=vs.get("nccl-tree"))
    eng = SGLangEngine(sglang_version="0.5.23", spellings=vs.spellings)
    argv = eng.command(cfg, host="127.0.0.1", port=31000)
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert argv[3:5] == ["--model-path", "moonshotai/Kimi-K2.5"]
    assert "--cuda-graph-max-bs-decode" in argv and "--speculative-algorithm" in argv
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "31000"]
    env = eng.environment(cfg, {"PATH": "/bin"})
    assert env["NCCL_ALGO"] == "Tree" and env["PATH"] == "/bin"
    old = SGLangEngine(sglang_version="0.5.10", spellings=vs.spellings).command(cfg, host="h", port=1)
    assert "--cuda-graph-max-bs" in old and "--cuda-graph-max-bs-decode" not in old
    serve = SGLangEngine(launcher="serve", sglang_version="0.5.23").command(cfg, host="h", port=1)
    assert serve[0].endswith("sglang") and serve[1] == "serve"


def test_sim_command_passes_the_same_sglang_flags():
    prof = load_profile(ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml")
    cfg = prof.config("baseline")
    real = SGLangEngine(sglang_version="0.5.23").argv_flags(cfg)
    eng = SimEngine(sim_stack="flashinfer=0.8.0")
    argv = eng.command(cfg, host="127.0.0.1", port=5)
    assert argv[:3] == [sys.executable, "-m", "perfgate.sim"]
    joined = " ".join(argv)
    assert " ".join(real) in joined
    assert "--sim-hardware" in argv and argv[argv.index("--sim-stack") + 1] == "flashinfer=0.8.0"
    env = eng.environment(cfg, {})
    assert str(ROOT) in env["PYTHONPATH"].split(":")


def test_sim_speedup_defaults_to_4_where_perfgate_alone_measures_and_real_time_otherwise(monkeypatch):
    """Up to 8 streams perfgate's client keeps a sped-up simulator exact; SGLang's own client (the cross-check)
    cannot read its clock lead, so with it the default is real time. PERFGATE_SIM_SPEEDUP overrides both."""
    cfg = load_profile(ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml").config("baseline")
    monkeypatch.delenv("PERFGATE_SIM_SPEEDUP", raising=False)

    def speedup(**kw):
        argv = SimEngine(**kw).command(cfg, host="127.0.0.1", port=5)
        return float(argv[argv.index("--sim-speedup") + 1]) if "--sim-speedup" in argv else 1.0

    assert speedup() == 4.0 and speedup(max_streams=8) == 4.0
    assert speedup(max_streams=64) == 1.0 and speedup(real_time=True) == 1.0
    monkeypatch.setenv("PERFGATE_SIM_SPEEDUP", "2")
    assert speedup(real_time=True) == 2.0 and speedup(max_streams=64) == 2.0
