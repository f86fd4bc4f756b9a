"""Profile and variant loading: every shipped file loads; bad input names the file, the key and the fix."""

from pathlib import Path

import pytest

from perfgate.config import confounders
from perfgate.errors import ProfileNotFound, ProfileSchemaError
from perfgate.profiles import find_profiles, load_profile, resolve_profile
from perfgate.variants import load_variants, spell_flags

ROOT = Path(__file__).resolve().parent.parent

GOOD = """
schema_version = 1
[hardware]
gpu = "NVIDIA H200"
count = 1
sm = "9.0"
interconnect = "nvlink"
[engine]
name = "sglang"
[model]
path = "/models/llama"
[server]
tp-size = 1
[modes.baseline]
[modes.eagle3]
flags = { speculative-algorithm = "EAGLE3" }
env = { SGLANG_SIMULATE_ACC_LEN = 2.0 }
[workload]
prompts = "fixtures/prompts/p.jsonl"
max_new_tokens = 32
[floors.baseline]
tok_s = 100.0
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "baselines" / "hw").mkdir(parents=True)
    (tmp_path / "fixtures" / "prompts").mkdir(parents=True)
    (tmp_path / "fixtures" / "prompts" / "p.jsonl").write_text('{"input_ids": [1, 2, 3]}\n')
    return tmp_path


def write(project, text, name="m.toml"):
    p = project / "baselines" / "hw" / name
    p.write_text(text)
    return p


def test_every_shipped_profile_and_the_variants_load():
    paths = find_profiles(ROOT)
    assert len(paths) >= 2
    for p in paths:
        prof = load_profile(p)
        assert prof.modes and prof.workload.prompts.is_file()
    vs = load_variants(ROOT / "baselines" / "variants.toml")
    for name in ("nccl-tree", "nccl-fewer-channels", "nccl-small-buffer", "flashinfer-ar-fusion", "custom-ar-off",
                 "torch-symm-mem", "mscclpp", "deepep", "flashinfer-a2a", "cuda-graph-bs-128", "cuda-graph-bs-512"):
        assert name in vs.variants


def test_good_profile(project):
    prof = load_profile(write(project, GOOD))
    assert prof.hardware.sm == "9.0" and prof.engine.name == "sglang"
    assert prof.modes["eagle3"].speculative and not prof.modes["baseline"].speculative
    assert prof.modes["eagle3"].env == {"SGLANG_SIMULATE_ACC_LEN": "2.0"}
    cfg = prof.config("eagle3")
    assert cfg.flag_dict == {"tp-size": 1, "speculative-algorithm": "EAGLE3"}
    assert cfg.key != prof.config("baseline").key


@pytest.mark.parametrize("mutate, key, expected", [
    (lambda t: t.replace("count = 1", 'count = "one"'), "hardware.count", "a GPU count"),
    (lambda t: t.replace('name = "sglang"', 'name = "sglangg"'), "engine.name", "one of"),
    (lambda t: t.replace('interconnect = "nvlink"', 'interconnect = "pci"'), "hardware.interconnect", "pcie"),
    (lambda t: t.replace("max_new_tokens = 32", ""), "workload.max_new_tokens", "an integer"),
    (lambda t: t.replace("tok_s = 100.0", "tok_s = -1.0"), "floors.baseline.tok_s", "tok/s > 0"),
    (lambda t: t.replace("[floors.baseline]", "[floors.baselin]"), "floors.baselin", "a mode of this profile"),
    (lambda t: t + "\n[hardware.extra]\n", "hardware.extra", "a known key"),
    (lambda t: t.replace("p.jsonl", "missing.jsonl"), "workload.prompts", "an existing prompt file"),
    (lambda t: t.replace("tp-size = 1", "--tp-size = 1"), "server.--tp-size", "without leading dashes"),
    (lambda t: t.replace("tp-size = 1", "port = 1"), "server.port", "perfgate sets them"),
    (lambda t: t + '\n[expectations.x]\nbaseline = { expect = "xfail" }\n', "expectations.x.baseline.category",
     "the category"),
    (lambda t: t + '\n[expectations.x]\nbaseline = { expect = "xfail", category = "oomm" }\n',
     "expectations.x.baseline.category", "one of"),
    (lambda t: t + '\n[expectations.x]\nbaseline = { expect = "pass", when = "flashinfer <" }\n',
     "expectations.x.baseline.when", "stack condition"),
    (lambda t: t.replace("schema_version = 1", "schema_version = 2"), "schema_version", "1"),
])
def test_bad_profiles_name_file_key_and_expectation(project, mutate, key, expected):
    path = write(project, mutate(GOOD))
    with pytest.raises(ProfileSchemaError) as ei:
        load_profile(path)
    e = ei.value
    assert e.key == key
    assert expected in e.expected
    assert str(path) in str(e)


def test_unknown_key_suggests_the_close_one(project):
    with pytest.raises(ProfileSchemaError, match="did you mean 'max_new_tokens'"):
        load_profile(write(project, GOOD.replace("max_new_tokens", "max_new_token")))


def test_malformed_toml(project):
    with pytest.raises(ProfileSchemaError, match=r"m\.toml: key '\(file\)': expected valid TOML"):
        load_profile(write(project, GOOD + "\n[broken\n"))


def test_extends_merges_and_overrides(project):
    write(project, GOOD, "base.toml")
    child = write(project, 'schema_version = 1\nextends = "base.toml"\n[workload]\nmax_new_tokens = 8\n', "child.toml")
    prof = load_profile(child)
    assert prof.workload.max_new_tokens == 8 and prof.floors["baseline"].tok_s == 100.0


def test_resolve_profile_by_name_and_unknown():
    assert resolve_profile("sim-rtxpro6000-x8/kimi-k2.5", ROOT).is_file()
    with pytest.raises(ProfileNotFound, match="did you mean 'sim-rtxpro6000-x8/kimi-k2.5'"):
        resolve_profile("sim-rtxpro6000-x8/kimi-k25", ROOT)


def test_variant_spellings_follow_the_sglang_version():
    vs = load_variants(ROOT / "baselines" / "variants.toml")
    flags = {"cuda-graph-max-bs-decode": 128, "tp-size": 8}
    assert spell_flags(flags, vs.spellings, "0.5.23") == flags
    assert spell_flags(flags, vs.spellings, "0.5.17") == flags
    assert spell_flags(flags, vs.spellings, "0.5.10") == {"cuda-graph-max-bs": 128, "tp-size": 8}
    assert spell_flags(flags, vs.spellings, None) == flags


def test_controlled_comparison_detects_the_seed_confounder():
    prof = load_profile(ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml")
    vs = load_variants(ROOT / "baselines" / "variants.toml")
    base = prof.config("baseline")
    tree = prof.config("baseline", variant=vs.get("nccl-tree"))
    assert confounders(tree, base) == set()
    fewer = prof.config("baseline", variant=vs.get("nccl-fewer-channels"))
    assert confounders(fewer, base) == {"mem-fraction-static"}


def test_bad_variants_file(tmp_path):
    p = tmp_path / "variants.toml"
    p.write_text('schema_version = 1\n[variants.x]\ndescription = "d"\n')
    with pytest.raises(ProfileSchemaError, match="at least one flag or env entry"):
        load_variants(p)
    p.write_text('schema_version = 1\n[variants.x]\ndescription = "d"\nflag = { a = 1 }\n')
    with pytest.raises(ProfileSchemaError, match="did you mean 'flags'"):
        load_variants(p)
