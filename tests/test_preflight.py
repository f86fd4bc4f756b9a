"""Every shipped variant's flags against the real parsers of SGLang 0.5.17 and 0.5.23, and the
plugin's preflight turning a rejected flag into a bad-flag record before any launch.

The real-parser tests run where `ci/install-sglang-parsers.sh DIR` was run and
PERFGATE_SGLANG_PARSERS=DIR is set (.ci/run does both); elsewhere they skip with that reason.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfgate.profiles.load import find_profiles, load_profile
from perfgate.profiles.variants import load_variants
from perfgate.serving.preflight import argv_for, check_configs, profile_configs
from tests.simproject import PROMPTS, make_project

ROOT = Path(__file__).resolve().parent.parent
PARSERS = os.environ.get("PERFGATE_SGLANG_PARSERS", "")  # "": unset, the tests that need it skip
needs_parsers = pytest.mark.skipif(
    not PARSERS, reason="set PERFGATE_SGLANG_PARSERS=DIR after `ci/install-sglang-parsers.sh DIR` (.ci/run does)")
VARIANTS = load_variants(ROOT / "baselines" / "variants.toml")


def real_profiles():
    return [p for p in (load_profile(x) for x in find_profiles(ROOT)) if not p.simulated]


def test_argv_is_spelled_for_the_version():
    prof = load_profile(ROOT / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml")
    cfg = prof.config("baseline", variant=VARIANTS.get("cuda-graph-bs-512"))
    assert "--cuda-graph-max-bs-decode" in argv_for(cfg, VARIANTS, "0.5.23")
    assert "--cuda-graph-max-bs-decode" in argv_for(cfg, VARIANTS, "0.5.16")  # 0.5.14 added it
    assert "--cuda-graph-max-bs" in argv_for(cfg, VARIANTS, "0.5.13.post1")
    assert argv_for(cfg, VARIANTS, "0.5.23")[:2] == ["--model-path", "moonshotai/Kimi-K2.5"]


def test_profile_configs_cover_modes_and_variants():
    prof = load_profile(ROOT / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml")
    names = profile_configs(prof, VARIANTS)
    assert f"{prof.name}:eagle3+nccl-tree" in names and f"{prof.name}:ngram" in names
    assert prof.variant_include is not None
    assert len(names) == len(prof.modes) + len(prof.variant_include) * len(prof.variant_modes)


@needs_parsers
@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_every_shipped_config_parses_with_the_real_sglang(version):
    configs = {}
    for prof in real_profiles():
        configs.update(profile_configs(prof, VARIANTS))
    t0 = time.monotonic()
    results = check_configs(configs, VARIANTS, version=version, sglang_path=str(Path(PARSERS) / f"sglang-{version}"))
    took = time.monotonic() - t0
    first = next(iter(results.values()))
    assert first.available, first.reason
    assert first.sglang_version == version
    bad = {n: r.message() for n, r in results.items() if not r.ok}
    assert not bad, bad
    print(f"{len(results)} argvs checked against SGLang {version} in {took:.1f} s")


@needs_parsers
def test_the_legacy_spelling_is_drift_caught_before_any_gpu_time():
    prof = load_profile(ROOT / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml")
    cfg = prof.config("baseline", variant=VARIANTS.get("cuda-graph-bs-128"))
    old = {"legacy": cfg}
    # spelled for a release before 0.5.14 (the legacy flag), parsed by 0.5.17 (a deprecated alias) and 0.5.23
    r17 = check_configs(old, VARIANTS, version="0.5.13.post1", sglang_path=str(Path(PARSERS) / "sglang-0.5.17"))["legacy"]
    r23 = check_configs(old, VARIANTS, version="0.5.13.post1", sglang_path=str(Path(PARSERS) / "sglang-0.5.23"))["legacy"]
    assert r17.ok and r17.deprecations
    assert r23.category == "bad-flag" and "--cuda-graph-max-bs-decode" in r23.message()


@needs_parsers
def test_plugin_records_a_rejected_flag_without_launching(pytester):
    """A variant with a flag SGLang 0.5.23 does not know: bad-flag record, in seconds, no server started."""
    prompts = PROMPTS
    make_project(pytester.path, variants_text=(
        'schema_version = 1\n[variants.typo]\ndescription = "a typo"\nflags = { enable-torch-symm-memory = true }\n'),
        profile_text=f"""
schema_version = 1
[hardware]
gpu = "H200"
count = 1
sm = "9.0"
interconnect = "pcie"
[engine]
name = "sglang"
sglang_version = "0.5.23"
[model]
path = "org/none"                # a Hugging Face repo id: not checked for a local path
[modes.baseline]
[workload]
prompts = "{prompts}"
max_new_tokens = 8
[variants]
modes = ["baseline"]
include = ["typo"]
""")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(PARSERS) / "sglang-0.5.23"), str(ROOT)])}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "perftests", "-m", "backends", "-p", "no:cacheprovider",
                        "--perfgate-profile", "t/m", "--perfgate-allow-hardware-mismatch", "-rA",
                        "-k", "typo", "--junitxml=r.xml"], cwd=pytester.path, env=env, capture_output=True,
                       text=True, timeout=600)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "[bad-flag]" in out and "--enable-torch-symm-mem" in out, out
    assert "0 server start(s)" in out, out
    assert "Traceback" not in out
    print(f"bad flag found in {took:.1f} s")


def test_a_variant_whose_package_is_missing_is_skipped_before_launch(pytester):
    """SGLang 0.5.17 ignores --enable-mscclpp without a word when mscclpp is missing: the record must not
    measure the default all-reduce and call it MSCCL++. A missing `requires` module: skip, no launch."""
    make_project(pytester.path, variants_text=(
        'schema_version = 1\n[variants.ghost]\ndescription = "a backend whose package is absent"\n'
        'flags = { enable-mscclpp = true }\nbackend = "mscclpp"\nrequires = ["perfgate_no_such_backend_pkg"]\n'),
        profile_text=f"""
schema_version = 1
[hardware]
gpu = "H200"
count = 1
sm = "9.0"
interconnect = "pcie"
[engine]
name = "sglang"
sglang_version = "0.5.17"
[model]
path = "org/none"                # a Hugging Face repo id: not checked for a local path
[modes.baseline]
[workload]
prompts = "{PROMPTS}"
max_new_tokens = 8
[variants]
modes = ["baseline"]
include = ["ghost"]
""")
    r = pytester.runpytest_subprocess("perftests", "-m", "backends", "-p", "no:cacheprovider", "--perfgate-profile",
                                      "t/m", "--perfgate-allow-hardware-mismatch", "-rA", "--junitxml=r.xml")
    out = r.stdout.str() + r.stderr.str()
    r.assert_outcomes(skipped=1)
    assert "[missing-dependency]" in out and "perfgate_no_such_backend_pkg" in out, out
    assert "[variants.ghost] requires" in out, out
    assert "0 server start(s)" in out, out
    xml = (pytester.path / "r.xml").read_text()
    assert 'name="category" value="missing-dependency"' in xml and 'name="outcome" value="skip"' in xml


def test_requires_must_name_modules(tmp_path):
    from perfgate.errors import ProfileSchemaError

    p = tmp_path / "variants.toml"
    p.write_text('schema_version = 1\n[variants.x]\ndescription = "x"\nenv = { A = "1" }\nrequires = ["not a module"]\n')
    with pytest.raises(ProfileSchemaError) as e:
        load_variants(p)
    assert "variants.x.requires[0]" in str(e.value) and "Python module name" in str(e.value)
