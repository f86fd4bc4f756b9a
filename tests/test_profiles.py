"""Profile and variant loading: every shipped file loads; bad input names the file, the key and the fix."""

from pathlib import Path

import pytest

from perfgate.errors import ProfileNotFound, ProfileSchemaError
from perfgate.profiles.config import confounders
from perfgate.profiles.load import find_profiles, load_profile, resolve_profile
from perfgate.profiles.variants import load_variants, spell_flags

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
    # whole numbers stay whole: never truncated
    (lambda t: t.replace("max_new_tokens = 32", "max_new_tokens = 32\nconcurrency = 4.5"), "workload.concurrency",
     "an integer"),
    (lambda t: t.replace("max_new_tokens = 32", "max_new_tokens = 32\ntrials = 5.0"), "workload.trials", "an integer"),
    (lambda t: t.replace("max_new_tokens = 32", "max_new_tokens = 32\nwarmup = 1.5"), "workload.warmup", "an integer"),
    (lambda t: t.replace("max_new_tokens = 32", "max_new_tokens = 32\nrequests_per_trial = true"),
     "workload.requests_per_trial", "an integer"),
    (lambda t: t.replace("max_new_tokens = 32", "max_new_tokens = 32\nttft_probes = -1"),
     "workload.ttft_probes", "an integer >= 0 (TTFT probes per server start"),
    (lambda t: t.replace("max_new_tokens = 32", "max_new_tokens = 32\nttft_probes = 36.5"),
     "workload.ttft_probes", "an integer >= 0"),
    # a mode's workload overrides follow the same rules, when the profile loads
    (lambda t: t.replace("[modes.baseline]", "[modes.baseline]\nworkload = { trials = 0 }"),
     "modes.baseline.workload.trials", "an integer >= 1"),
    (lambda t: t.replace("[modes.baseline]", "[modes.baseline]\nworkload = { warmup = 2.5 }"),
     "modes.baseline.workload.warmup", "an integer >= 0"),
    (lambda t: t.replace("[modes.baseline]", "[modes.baseline]\nworkload = { concurrency = 2 }"),
     "modes.baseline.workload.concurrency", "a known key"),
])
def test_bad_profiles_name_file_key_and_expectation(project, mutate, key, expected):
    path = write(project, mutate(GOOD))
    with pytest.raises(ProfileSchemaError) as ei:
        load_profile(path)
    e = ei.value
    assert e.key == key
    assert expected in e.expected
    assert str(path) in str(e)
    assert str(e).count("; fix: ") == 1 and str(e).split("; fix: ")[1].strip()  # one fix, never none or two


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace("max_new_tokens = 32", 'max_new_tokens = "32"'),
     r"key 'workload.max_new_tokens': expected an integer.*found '32'; fix: write max_new_tokens = <an integer"),
    (lambda t: t.replace('interconnect = "nvlink"', "interconnect = 3"),
     r"key 'hardware.interconnect': .*found 3; fix: "),
    (lambda t: t + '\n[expectations.x]\nbaseline = { expect = "pass", reason = 3 }\n',
     r"key 'expectations.x.baseline.reason': expected a string, found 3; fix: write it as a string "
     r'\(reason = "\.\.\."\)'),
    (lambda t: t.replace("[modes.baseline]", "[modes.baseline]\nworkload = 3"),
     r"key 'modes.baseline.workload'.*; fix: "),
    (lambda t: t + '\n[expectations.x]\nbaseline = { expect = "pass", when = "flashinfer <" }\n',
     r"key 'expectations.x.baseline.when': expected a stack condition .*, found 'flashinfer <'; fix: cannot parse "
     r"at 'flashinfer <': write clauses 'KEY OP VALUE'"),
])
def test_a_type_error_says_the_fix_once(project, mutate, message):
    with pytest.raises(ProfileSchemaError, match=message) as ei:
        load_profile(write(project, mutate(GOOD)))
    assert str(ei.value).count("fix:") == 1, str(ei.value)


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


PARENT_ENTRIES = """
[expectations.floor]
"*" = { expect = "xfail", category = "slower-than-baseline", reason = "old stack", when = "sglang < 0.5" }
[floors.baseline.measured]
date = "2026-01-01"
n = 5
[variants.overrides.nccl-tree]
mem-fraction-static = 0.8
env = { NCCL_DEBUG = "INFO" }
"""


def test_extends_replaces_an_entry_whole(project):
    """A child's expectation is the whole expectation: the parent's `when` does not stay behind (it would turn
    an xfail the stack no longer meets into a silent pass, never UNBLOCKED)."""
    write(project, GOOD + PARENT_ENTRIES, "base.toml")
    child = write(project, 'schema_version = 1\nextends = "base.toml"\n'
                           '[expectations.floor]\n"*" = { expect = "pass" }\n'
                           '[floors.baseline]\ntok_s = 120.0\n[floors.baseline.measured]\ndate = "2026-12-01"\n'
                           '[variants.overrides.nccl-tree]\nmem-fraction-static = 0.85\n', "child.toml")
    prof = load_profile(child)
    (e,) = prof.expectations["floor"]["*"]
    assert (e.expect, e.category, e.reason, e.when) == ("pass", None, "", "")
    assert prof.floors["baseline"].tok_s == 120.0 and prof.floors["baseline"].measured == {"date": "2026-12-01"}
    assert prof.variant_overrides["nccl-tree"] == {"mem-fraction-static": 0.85}
    # the tables around the entries still merge key by key
    assert prof.floors["baseline"].tolerance == 0.03 and set(prof.modes) == {"baseline", "eagle3"}


def test_a_decode_floors_tolerance_stays_the_decode_floors(project):
    """``tolerance`` beside ``tok_s`` is the decode floor's: a load limit the child merges into that table (the
    H200 load profile's goodput floor) takes its own noise's tolerance, not tok/s's 3 %; in a table of other limits
    only (``.c4``) the table's ``tolerance`` is theirs."""
    from perfgate.profiles.noise import limit_tolerance

    write(project, GOOD, "base.toml")
    child = write(project, 'schema_version = 1\nextends = "base.toml"\n[floors.baseline]\ngoodput_rps = 30.0\n'
                           '[floors.baseline.c4]\ntolerance = 0.1\nttft_ms = 200.0\n', "child.toml")
    fl = load_profile(child).floors["baseline"]
    assert fl.tok_s == 100.0 and fl.tolerance_for("tok_s") == fl.tolerance == 0.03
    assert fl.tolerance_for("goodput_rps") == limit_tolerance("goodput_rps", simulated=fl.simulated, gpu=fl.gpu) > 0.03
    c4 = fl.at(4)
    assert c4 is not None and c4.tolerance_for("ttft_ms") == 0.1


def test_extends_keeps_the_parents_other_entries(project):
    write(project, GOOD + PARENT_ENTRIES, "base.toml")
    child = write(project, 'schema_version = 1\nextends = "base.toml"\n'
                           '[expectations.floor]\neagle3 = { expect = "pass" }\n', "child.toml")
    prof = load_profile(child)
    assert set(prof.expectations["floor"]) == {"*", "eagle3"}
    assert prof.expectations["floor"]["*"][0].when == "sglang < 0.5"


def test_resolve_profile_by_name_and_unknown():
    assert resolve_profile("sim-rtxpro6000-x8/kimi-k2.5", ROOT).is_file()
    with pytest.raises(ProfileNotFound, match="did you mean 'sim-rtxpro6000-x8/kimi-k2.5'"):
        resolve_profile("sim-rtxpro6000-x8/kimi-k25", ROOT)


def test_variant_spellings_follow_the_sglang_version():
    vs = load_variants(ROOT / "baselines" / "variants.toml")
    flags = {"cuda-graph-max-bs-decode": 128, "tp-size": 8}
    assert spell_flags(flags, vs.spellings, "0.5.23") == flags
    assert spell_flags(flags, vs.spellings, "0.5.17") == flags
    assert spell_flags(flags, vs.spellings, "0.5.14") == spell_flags(flags, vs.spellings, "0.5.16") == flags
    assert spell_flags(flags, vs.spellings, "0.5.13.post1") == {"cuda-graph-max-bs": 128, "tp-size": 8}
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


SIM_H100 = ROOT / "fixtures" / "sim" / "h100-x8-nvlink.toml"
LLAMA_70B_ON_4 = f"""
schema_version = 1
[hardware]
gpu = "H100"
count = 4
sm = "9.0"
interconnect = "nvlink"
[engine]
name = "sim"
sim_hardware = "{SIM_H100}"
[model]
path = "meta-llama/Llama-3.1-70B-Instruct"
layers = 80
hidden = 8192
[server]
tp-size = 4
[modes.baseline]
[workload]
prompts = "fixtures/prompts/p.jsonl"
max_new_tokens = 32
"""


@pytest.mark.parametrize("mutate, key, found", [
    (lambda t: t, "hardware.count", "4"),  # the simulated H100 box has 8 GPUs
    (lambda t: t.replace("count = 4", "count = 8"), "model.name", "Llama-3.1-70B-Instruct"),  # it serves Qwen3
    (lambda t: t.replace("count = 4", "count = 8").replace("meta-llama/Llama-3.1-70B-Instruct",
                                                          "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"),
     "model.layers", "80"),
    (lambda t: t.replace('gpu = "H100"', 'gpu = "H200"'), "hardware.count", "4"),
    (lambda t: t.replace("count = 4", "count = 8").replace('gpu = "H100"', 'gpu = "H200"'), "hardware.gpu", "H200"),
])
def test_a_simulated_box_serves_only_the_profile_it_models(project, mutate, key, found):
    """A Llama-3.1-70B profile at tp 4 pointed at the simulated 8x H100 (Qwen3) box was served as Qwen3 on
    8 GPUs and its floors were written with gpu_count 8. Refused at load, naming both sides."""
    path = write(project, mutate(LLAMA_70B_ON_4))
    with pytest.raises(ProfileSchemaError) as ei:
        load_profile(path)
    assert ei.value.key == key and found in str(ei.value.found)
    assert "h100-x8-nvlink.toml" in ei.value.expected and "fixtures/sim" in str(ei.value)


def test_the_shipped_qwen_profile_matches_its_box():
    prof = load_profile(ROOT / "baselines" / "sim-h100-x8" / "qwen3-235b.toml")
    assert prof.hardware.count == 8 and prof.model.layers == 94


def test_a_misspelt_nccl_or_sglang_variable_is_an_error_naming_the_real_one(tmp_path):
    """NCCL_ALOG=Tree is read by nothing: the run measured the default and the record said x1.00."""
    p = tmp_path / "variants.toml"
    p.write_text('schema_version = 1\n[variants.tree]\ndescription = "Tree"\nenv = { NCCL_ALOG = "Tree" }\n')
    with pytest.raises(ProfileSchemaError) as e:
        load_variants(p)
    assert e.value.key == "variants.tree.env.NCCL_ALOG" and "did you mean NCCL_ALGO?" in str(e.value)
    p.write_text('schema_version = 1\n[variants.acc]\ndescription = "x"\nenv = { SGLANG_SIMULATE_ACC_LENGTH = "2" }\n')
    with pytest.raises(ProfileSchemaError) as e:
        load_variants(p)
    assert "did you mean SGLANG_SIMULATE_ACC_LEN?" in str(e.value)


def test_a_simulator_variable_it_does_not_read_is_an_error_even_without_a_close_match(tmp_path):
    """perfgate's own PERFGATE_SIM_* list is exact (perfgate.envnames.SIM_NAMES): no newer release can read a name
    that is not on it, so a name off it is an error, never a warning."""
    p = tmp_path / "variants.toml"
    for name, words in (("PERFGATE_SIM_SCALLE", "did you mean PERFGATE_SIM_SCALE?"),
                        ("PERFGATE_SIM_SLOWDOWN", "fix: one of PERFGATE_SIM_FAULT")):
        p.write_text(f'schema_version = 1\n[variants.slow]\ndescription = "x"\nenv = {{ {name} = "0.97" }}\n')
        with pytest.raises(ProfileSchemaError) as e:
            load_variants(p)
        assert e.value.key == f"variants.slow.env.{name}" and words in str(e.value), str(e.value)
        assert "variants.toml" in str(e.value)
    p.write_text('schema_version = 1\n[variants.slow]\ndescription = "x"\nenv = { PERFGATE_SIM_SCALE = "0.97" }\n')
    assert not load_variants(p).warnings


def test_unknown_names_without_a_close_match_warn_and_other_prefixes_pass(tmp_path):
    p = tmp_path / "variants.toml"
    p.write_text('schema_version = 1\n[variants.x]\ndescription = "x"\n'
                 'env = { NCCL_SOMETHING_FROM_2030 = "1", TORCH_NCCL_HIGH_PRIORITY = "1", MY_OWN = "1", '
                 'NCCL_ALGO = "allreduce:tree", SGLANG_SIMULATE_ACC_LEN = "2.0" }\n')
    vs = load_variants(p)
    assert len(vs.warnings) == 1 and "NCCL_SOMETHING_FROM_2030" in vs.warnings[0]
    assert "scripts/env_names.py" in vs.warnings[0]


def test_every_shipped_env_name_is_one_nccl_or_sglang_reads():
    vs = load_variants(ROOT / "baselines" / "variants.toml")
    assert vs.warnings == ()
    for path in find_profiles(ROOT):
        assert load_profile(path).warnings == (), path


def test_an_unknown_backend_in_a_variants_file_names_the_known_ones(tmp_path):
    """`backend = "custom-ar"` loaded and silently switched fallback detection off (no rule names it)."""
    from perfgate.categories import Backend

    path = tmp_path / "variants.toml"
    path.write_text('schema_version = 1\n[variants.ar]\ndescription = "x"\nflags = { enable-custom-all-reduce = true }\n'
                    'backend = "custom-ar"\n')
    with pytest.raises(ProfileSchemaError, match=r"variants\.toml: key 'variants\.ar\.backend': expected a backend "
                                                 r"perfgate can check \(nccl, custom_ar, .*\), found 'custom-ar'; "
                                                 r"fix: did you mean 'custom_ar'\?"):
        load_variants(path)
    path.write_text(path.read_text().replace('"custom-ar"', '"custom_ar"'))
    assert load_variants(path).get("ar").backend is Backend.CUSTOM_AR


def test_every_backend_the_log_rules_and_the_trace_name_is_a_variants_backend():
    from perfgate.categories import TRACE_FAMILIES, Backend
    from perfgate.classify.rules import FALLBACK_RULES
    from perfgate.measuring.trace import kernel_group

    assert all(isinstance(r.backend, Backend) for r in FALLBACK_RULES)
    for kernel in ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "cross_device_reduce_1stage",
                   "allreduce_fusion_kernel_oneshot_lamport", "two_shot_all_reduce_kernel"):
        group, family = kernel_group(kernel)
        assert group == "allreduce" and family in TRACE_FAMILIES
    vs = load_variants(ROOT / "baselines" / "variants.toml")
    assert all(v.backend is None or isinstance(v.backend, Backend) for v in vs.variants.values())


def test_ttft_probes_default_to_36_and_the_workload_sets_them(project):
    from perfgate.profiles import DEFAULT_TTFT_PROBES

    assert load_profile(write(project, GOOD)).workload.ttft_probes == DEFAULT_TTFT_PROBES == 36
    text = GOOD.replace("max_new_tokens = 32", "max_new_tokens = 32\nttft_probes = 0")
    assert load_profile(write(project, text)).workload.ttft_probes == 0
