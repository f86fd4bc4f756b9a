"""Every path the real engine would be handed is checked before any server starts (perfgate/profiles/paths.py):
a draft model that does not exist is a usage error naming the file, the key and the fix, not a 40-s start and
a `crash` record; a Hugging Face repo id is left for SGLang to download."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.profiles.load import load_profile
from perfgate.profiles.paths import is_repo_id, missing_paths, path_problem
from tests.simproject import PROMPTS

PROFILE = f"""schema_version = 1
[hardware]
gpu = "NVIDIA H200"
count = 1
sm = "9.0"
interconnect = "nvlink"
[engine]
name = "sglang"
startup_timeout_s = 5
[model]
path = "meta-llama/Llama-3.1-8B-Instruct"
[modes.baseline]
[modes.eagle3]
flags = {{ speculative-algorithm = "EAGLE3", speculative-draft-model-path = "DRAFT" }}
[workload]
prompts = "{PROMPTS}"
max_new_tokens = 8
"""


@pytest.mark.parametrize("value", ["org/name", "gpt2", "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"])
def test_a_repo_id_is_left_for_sglang(value: str, tmp_path: Path) -> None:
    assert is_repo_id(value) and path_problem(value, tmp_path) is None


@pytest.mark.parametrize("value", ["/models/nope", "./nope", "fixtures/models/nope", "~/nope", "a/b/c", "../x"])
def test_a_local_path_must_exist(value: str, tmp_path: Path) -> None:
    why = path_problem(value, tmp_path)
    assert why is not None and repr(value) in why and "no such path" in why


def test_an_existing_relative_path_is_fine(tmp_path: Path) -> None:
    (tmp_path / "models" / "draft").mkdir(parents=True)
    assert path_problem("models/draft/", tmp_path) is None and path_problem("./models/draft", tmp_path) is None


def _project(root: Path, draft: str) -> Path:
    prof = root / "baselines" / "h200" / "m.toml"
    prof.parent.mkdir(parents=True)
    prof.write_text(PROFILE.replace("DRAFT", draft))
    return prof


def test_the_missing_draft_model_is_named_with_file_key_and_fix(tmp_path: Path) -> None:
    prof = load_profile(_project(tmp_path, "fixtures/models/no-such-drafter"))
    (line,) = missing_paths(prof)
    assert str(prof.path) in line and "key 'modes.eagle3.flags.speculative-draft-model-path'" in line
    assert "'fixtures/models/no-such-drafter'" in line and "fix:" in line and "repo id" in line


def test_a_simulated_profile_is_not_checked(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    prof = load_profile(root / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml")  # drafter: /models/...
    assert missing_paths(prof) == []


def test_a_missing_draft_model_ends_the_run_before_any_launch(pytester: pytest.Pytester) -> None:
    _project(pytester.path, "/nonexistent/kimi-eagle3")
    pytester.makepyfile(test_mine="""
        def test_decode(perf_server, measure, perf_check):
            perf_check(measure(perf_server), "tok_s")
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--perfgate-profile", "h200/m",
                                      "--perfgate-allow-hardware-mismatch")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "key 'modes.eagle3.flags.speculative-draft-model-path'" in err and "/nonexistent/kimi-eagle3" in err
    assert "launching" not in r.stdout.str() + err and not (pytester.path / "perfgate-logs").exists()
