"""What perfgate ships (perfgate/profiles/shipped.py) is found from any project root; a file of the user's
with the same relative path wins."""

from __future__ import annotations

from pathlib import Path

from perfgate.profiles.load import load_profile, resolve_profile
from perfgate.profiles.reader import resolve_path
from perfgate.profiles.shipped import DEFAULT_SIM_PROFILE, SHIPPED, shipped_file, shipped_root


def test_every_shipped_pattern_names_files() -> None:
    root = shipped_root()
    assert root is not None
    for pattern in SHIPPED:
        assert list(root.glob(pattern)), pattern


def test_baselines_holds_only_profiles_and_the_wheel_ships_no_evidence() -> None:
    """baselines/ is what users edit (a profile per box and model, and variants.toml); the run evidence the
    docs cite (reports, logs, tarballs) lives under evidence/, and no shipped pattern reaches it."""
    from perfgate.profiles.load import find_profiles

    root = Path(__file__).resolve().parents[1]
    files = sorted(p.relative_to(root / "baselines") for p in (root / "baselines").rglob("*") if p.is_file()
                   and "__pycache__" not in p.parts and not p.name.startswith("."))
    profiles = sorted(p.relative_to(root / "baselines") for p in find_profiles(root))
    assert files == sorted([Path("variants.toml"), *profiles]), "run evidence belongs under evidence/<hardware>/"
    assert all(load_profile(root / "baselines" / p).name for p in profiles)
    assert (root / "evidence" / "README.md").is_file()
    assert all(pattern.startswith(("fixtures/", "baselines/")) and pattern.endswith((".toml", ".jsonl"))
               for pattern in SHIPPED)


#: paths the docs show in examples of perfgate's messages, not files of this repository
EXAMPLE_PATHS = {"baselines/t/m.toml", "baselines/h200/m.toml"}


def test_every_profile_and_evidence_path_the_docs_cite_exists() -> None:
    """README, docs, CI and the profiles' comments name files under baselines/ and evidence/; each exists, and
    evidence/README.md lists every folder and file of evidence/<hardware>/ (and names only ones that exist)."""
    import re

    root = Path(__file__).resolve().parents[1]
    texts = [root / "README.md", *(root / "docs").glob("*.md"), *(root / "ci").rglob("*.sh"),
             *(root / "ci").rglob("*.yml"), *(root / "ci").rglob("*.md"), *(root / "baselines").rglob("*.toml")]
    cited = {(t.relative_to(root), m.group(1).rstrip("."))
             for t in texts for m in re.finditer(r"(?<![\w/.])((?:baselines|evidence)/[\w.+-]+(?:/[\w.+-]+)*)(.?)",
                                                 t.read_text()) if m.group(2) not in ("*", "<")}
    missing = sorted((str(t), p) for t, p in cited if p not in EXAMPLE_PATHS and not (root / p).exists())
    assert not missing, f"cited but not in the repository (moved? fix the reference): {missing}"
    readme = (root / "evidence" / "README.md").read_text()
    listed = set(re.findall(r"`([\w.-]+/[\w./-]*[\w-])/?`", readme))
    on_disk = {f"{hw.name}/{e.name}" for hw in (root / "evidence").iterdir() if hw.is_dir() for e in hw.iterdir()}
    assert on_disk <= listed, f"evidence/README.md does not say what these are: {sorted(on_disk - listed)}"
    named = {p for p in listed if p.split("/")[0] in {hw.name for hw in (root / "evidence").iterdir()}}
    assert all((root / "evidence" / p).exists() for p in named), sorted(p for p in named
                                                                     if not (root / "evidence" / p).exists())


def test_a_relative_path_to_a_shipped_box_resolves_outside_the_checkout(tmp_path: Path) -> None:
    got = resolve_path(tmp_path, "fixtures/sim/h100-x8-nvlink.toml")
    assert got == shipped_file("fixtures/sim/h100-x8-nvlink.toml") and got.is_file()
    assert resolve_path(tmp_path, "fixtures/prompts/random-ids-128.jsonl").is_file()


def test_a_file_of_ones_own_wins_over_the_shipped_copy(tmp_path: Path) -> None:
    own = tmp_path / "fixtures" / "prompts" / "random-ids-128.jsonl"
    own.parent.mkdir(parents=True)
    own.write_text('{"input_ids": [1, 2]}\n')
    assert resolve_path(tmp_path, "fixtures/prompts/random-ids-128.jsonl") == own


def test_only_listed_files_are_shipped(tmp_path: Path) -> None:
    assert shipped_file("fixtures/models/llama-3.1-8b/config.json") is None  # in the checkout, not in the wheel
    assert shipped_file("baselines/h200-x1/llama-3.1-8b-dummy.toml") is None
    assert shipped_file("../fixtures/sim/h100-x8-nvlink.toml") is None
    assert resolve_path(tmp_path, "fixtures/models/x") == tmp_path / "fixtures/models/x"  # named in the error


def test_the_default_simulated_profile_is_found_by_name_and_loads(tmp_path: Path) -> None:
    path = resolve_profile("sim-rtxpro6000-x8/kimi-k2.5", tmp_path)
    assert path == shipped_file(DEFAULT_SIM_PROFILE)
    prof = load_profile(path)
    assert prof.simulated and prof.engine.sim_hardware is not None and prof.engine.sim_hardware.is_file()
    assert prof.workload.prompts.is_file()


def test_the_writer_refuses_the_installed_shipped_copy(tmp_path: Path, monkeypatch) -> None:
    """--perfgate-update-baselines on the shipped default profile would write inside site-packages."""
    import pytest

    from perfgate.errors import ConfigError
    from perfgate.profiles import shipped
    from perfgate.profiles import writer as baseline_update

    packaged = tmp_path / "site-packages" / "perfgate" / "data" / "project"
    prof = packaged / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"
    prof.parent.mkdir(parents=True)
    prof.write_text("schema_version = 1\n")
    monkeypatch.setattr(shipped, "_PACKAGED", packaged)
    with pytest.raises(ConfigError, match="copy of the profile that perfgate ships.*into your project's baselines/"):
        baseline_update.write_profile(prof, "schema_version = 1\n# changed\n")
    assert prof.read_text() == "schema_version = 1\n"
