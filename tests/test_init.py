"""perfgate init: a user's project set up from a shipped profile, run as a user runs it (real processes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli.project import SAMPLE_TEST
from perfgate.errors import ProfileSchemaError
from perfgate.profiles.load import load_profile

ROOT = Path(__file__).resolve().parent.parent


def _perfgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfgate.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_init_sets_up_a_project_that_runs_with_plain_pytest(tmp_path: Path) -> None:
    r = _perfgate("init", "proj", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    proj = tmp_path / "proj"
    prof = proj / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
    parent = proj / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml"
    assert prof.is_file() and parent.is_file() and (proj / "baselines" / "variants.toml").is_file()
    assert load_profile(prof).root == proj.resolve()  # its parent found where it was copied
    assert (proj / "perftests" / "test_mine.py").read_text() == SAMPLE_TEST
    assert (proj / "pytest.ini").read_text() == ("[pytest]\ntestpaths = perftests\n"
                                                 "perfgate_profile = sim-rtxpro6000-x8/kimi-k2.5\n")
    out = r.stdout
    assert "baselines/rtxpro6000-x8/kimi-k2.5.toml  (extended by baselines/sim-rtxpro6000-x8/kimi-k2.5.toml)" in out
    assert "pytest perftests/ --perfgate-update-baselines" in out and "perfgate gate old.xml new.xml" in out
    # the project runs: plain pytest finds the tests (testpaths: not another directory's) and the profile through
    # pytest.ini and checks the sample's limits
    (proj / "elsewhere").mkdir()
    (proj / "elsewhere" / "test_not_mine.py").write_text("def test_not_collected():\n    assert False\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-k", "baseline and ttft_ms or not_collected", "-q",
                          "-p", "no:cacheprovider"], cwd=proj, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"perfgate: profile {prof}" in run.stdout and "1 passed" in run.stdout
    assert "not_collected" not in run.stdout
    # a second init refuses to overwrite, saying how
    again = _perfgate("init", "proj", cwd=tmp_path)
    assert again.returncode == 2 and "exists already; nothing was written; fix: " in again.stderr


def test_init_from_a_checkout_profile_copies_the_local_files_it_names(tmp_path: Path) -> None:
    r = _perfgate("init", str(tmp_path / "p"), "--from", "h200-x1/llama-3.1-8b-dummy", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p" / "fixtures" / "models" / "llama-3.1-8b" / "config.json").is_file()
    assert (tmp_path / "p" / "fixtures" / "models" / "llama-3.1-8b-eagle3" / "config.json").is_file()
    p = load_profile(tmp_path / "p" / "baselines" / "h200-x1" / "llama-3.1-8b-dummy.toml")
    assert p.model.path == str(tmp_path / "p" / "fixtures" / "models" / "llama-3.1-8b")
    assert not (tmp_path / "p" / "fixtures" / "prompts").exists()  # shipped: found in the installation


def test_init_from_an_unknown_profile_names_the_known_ones(tmp_path: Path) -> None:
    r = _perfgate("init", "--from", "h200/nope", cwd=tmp_path)
    assert r.returncode == 2 and "profile 'h200/nope' not found" in r.stderr
    assert not (tmp_path / "perftests").exists()


def test_the_extends_error_says_how_to_get_the_parent(tmp_path: Path) -> None:
    child = tmp_path / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
    child.parent.mkdir(parents=True)
    child.write_text((ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml").read_text())
    with pytest.raises(ProfileSchemaError, match=r"key 'extends'.*fix: no file at .*rtxpro6000-x8/kimi-k2.5.toml: "
                                                 r"copy the profile it extends there.*`perfgate init DIR --from"):
        load_profile(child)


def test_the_readme_example_is_the_sample_test() -> None:
    from tests.docblocks import blocks

    (block,) = [b for b in blocks("README.md") if b.language == "python" and "def test_under_load" in b.source]
    assert block.source.strip() in SAMPLE_TEST


def test_init_scaffolds_the_stack_pair_test_the_suite_ships(tmp_path: Path) -> None:
    """Issue 55: a project from ``perfgate init`` has a stack-pair record (so ``-m stack_pair`` and ``perfgate
    bisect`` select one), the same test as perfgate's own perftests/test_stack_pair.py."""
    from perfgate.cli.project import STACK_PAIR_TEST

    r = _perfgate("init", "proj", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    mine = (tmp_path / "proj" / "perftests" / "test_stack_pair.py").read_text()
    shipped = (ROOT / "perftests" / "test_stack_pair.py").read_text()
    assert mine == STACK_PAIR_TEST
    assert mine[mine.index("import pytest"):] == shipped[shipped.index("import pytest"):]
    assert "perftests/test_stack_pair.py  (the paired stack comparison" in r.stdout
    listed = subprocess.run([sys.executable, "-m", "pytest", "perftests", "-m", "stack_pair", "--collect-only", "-q",
                             "-p", "no:cacheprovider"], cwd=tmp_path / "proj", capture_output=True, text=True,
                            timeout=120)
    assert "perftests/test_stack_pair.py::test_stack_pair[" in listed.stdout and ":baseline]" in listed.stdout, \
        listed.stdout


def test_a_path_option_pytest_took_for_its_rootdir_is_a_usage_error(tmp_path: Path, monkeypatch) -> None:
    """Issue 55: where pytest chose as its rootdir the folder a path option of perfgate's names (its value read as a
    path to test: '--perfgate-log-dir DIR' before the plugin's options are known), the run stops and names the fix
    ('--perfgate-log-dir=DIR'), instead of ignoring the project's pytest.ini and profile."""
    from types import SimpleNamespace

    from perfgate.plugin.options import rootdir_taken_from_an_option

    logs = tmp_path / "logs"
    logs.mkdir()
    monkeypatch.chdir(tmp_path)

    def config(rootdir: Path, log_dir: str | None) -> object:
        opts: dict[str, object] = {"perfgate_log_dir": log_dir, "perfgate_noise_from": [], "perfgate_profile": None}
        return SimpleNamespace(rootpath=rootdir, getoption=lambda name, default=None: opts.get(name, default))

    with pytest.raises(pytest.UsageError, match=r"took .*logs as its rootdir.*fix: '--perfgate-log-dir="):
        rootdir_taken_from_an_option(config(logs, str(logs)))  # type: ignore[arg-type]
    rootdir_taken_from_an_option(config(tmp_path, str(logs)))  # type: ignore[arg-type]  # the project's: fine
