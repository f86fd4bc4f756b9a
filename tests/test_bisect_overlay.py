"""The overlay folder of a bisection step on real environments (perfgate.stack.overlay): the packages that differ
between two package folders, and a folder that holds exactly the step's packages of the candidate, dist-info
included, shared namespace folders split, so that Python imports them first."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.errors import ConfigError
from perfgate.stack.overlay import build_overlay, changed_packages, normalize, read_dists


def install(site: Path, name: str, version: str, files: dict[str, str], *, record: bool = True) -> None:
    """A distribution as pip leaves it: its files and <name>-<version>.dist-info with METADATA and RECORD."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    (site / info).mkdir(parents=True)
    (site / info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    if record:
        rows = [*files, f"{info}/METADATA", f"{info}/RECORD", "../../../bin/tool"]
        (site / info / "RECORD").write_text("".join(f"{r},,\n" for r in rows))


@pytest.fixture
def sites(tmp_path):
    cur, cand = tmp_path / "current", tmp_path / "candidate"
    for site, fi, tv in ((cur, "0.7.2", "2.9.1"), (cand, "0.7.3", "2.10.0")):
        install(site, "flashinfer-python", fi, {"flashinfer/__init__.py": f"__version__ = '{fi}'\n",
                                                 "flashinfer/jit/core.py": ""})
        install(site, "torch", tv, {"torch/__init__.py": f"__version__ = '{tv}'\n", "functorch/__init__.py": ""})
        install(site, "nvidia-nccl-cu12", "2.27.7" if site is cur else "2.28.3",
                {"nvidia/nccl/__init__.py": "", "nvidia/nccl/lib/libnccl.so.2": ""})
        install(site, "nvidia-cublas-cu12", "12.9.1", {"nvidia/cublas/__init__.py": ""})
        install(site, "six", "1.16.0", {"six.py": "# six\n"})
    install(cand, "xgrammar", "0.1.25", {"xgrammar/__init__.py": ""}, record=False)
    (cand / "xgrammar-0.1.25.dist-info" / "top_level.txt").write_text("xgrammar\n")
    install(cur, "outlines", "0.1.0", {"outlines/__init__.py": ""})
    return cur, cand


def test_the_changed_packages_are_those_whose_versions_differ_or_one_side_lacks(sites):
    cur, cand = sites
    changes = changed_packages(read_dists([cur]), read_dists([cand]))
    assert [c.text() for c in changes] == ["flashinfer-python 0.7.2 -> 0.7.3", "nvidia-nccl-cu12 2.27.7 -> 2.28.3",
                                           "outlines 0.1.0 -> (absent)", "torch 2.9.1 -> 2.10.0",
                                           "xgrammar (absent) -> 0.1.25"]
    assert normalize("Flashinfer_Python") == "flashinfer-python"


def test_the_first_folder_holding_a_package_wins_as_on_pythonpath(sites, tmp_path):
    cur, cand = sites
    overlay = tmp_path / "old-overlay"
    install(overlay, "torch", "2.8.0", {"torch/__init__.py": ""})
    assert read_dists([overlay, cand])["torch"].version == "2.8.0"
    assert read_dists([cand, overlay])["torch"].version == "2.10.0"


def test_a_steps_overlay_holds_exactly_its_packages_dist_info_included(sites, tmp_path):
    cur, cand = sites
    dists = read_dists([cand])
    out = tmp_path / "step-3"
    build_overlay(out, [dists["flashinfer-python"], dists["nvidia-nccl-cu12"], dists["xgrammar"]], dists)
    listing = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_symlink() or not p.is_dir())
    assert listing == ["flashinfer", "flashinfer_python-0.7.3.dist-info", "nvidia/nccl",
                       "nvidia_nccl_cu12-2.28.3.dist-info", "xgrammar", "xgrammar-0.1.25.dist-info"]
    # nvidia/ is shared with nvidia-cublas-cu12 (not chosen): a real folder holding nccl alone
    assert (out / "nvidia").is_dir() and not (out / "nvidia").is_symlink() and not (out / "nvidia" / "cublas").exists()
    assert (out / "flashinfer" / "__init__.py").read_text() == "__version__ = '0.7.3'\n"
    # what importlib.metadata reads on PYTHONPATH=overlay:current: the candidate's versions of the step's packages
    layered = read_dists([out, cur])
    assert layered["flashinfer-python"].version == "0.7.3" and layered["nvidia-nccl-cu12"].version == "2.28.3"
    assert layered["torch"].version == "2.9.1"  # not in the step: the current's


def test_a_top_level_module_and_a_used_overlay_folder(sites, tmp_path):
    cur, cand = sites
    dists = read_dists([cand])
    out = tmp_path / "o"
    build_overlay(out, [dists["six"]], dists)
    assert sorted(p.name for p in out.iterdir()) == ["six-1.16.0.dist-info", "six.py"]
    with pytest.raises(ConfigError, match="must be new or empty; fix:"):
        build_overlay(out, [dists["six"]], dists)
    with pytest.raises(ConfigError, match="not a package folder; fix:"):
        read_dists([tmp_path / "nowhere"])


def test_a_steps_candidate_arm_on_real_environments_is_the_overlay_first_on_the_current_pythonpath(sites, tmp_path):
    from perfgate.cli.bisect import site_arms

    cur, cand = sites
    arms = site_arms([str(cur)], [str(cand)], "/opt/sgl-old:/opt/sgl", python="/venv/bin/python")
    assert arms.kind == "env" and arms.packages == ("flashinfer-python", "nvidia-nccl-cu12", "torch", "xgrammar")
    assert arms.change("xgrammar") == "xgrammar (absent) -> 0.1.25"
    assert any("outlines 0.1.0 -> (absent): an overlay cannot remove a package" in n for n in arms.notes)
    spec = arms.spec(("torch",), tmp_path / "step-2")
    overlay = (tmp_path / "step-2" / "overlay").resolve()
    assert spec == f"python=/venv/bin/python,env.PYTHONPATH={overlay}:/opt/sgl-old:/opt/sgl"
    assert sorted(p.name for p in overlay.iterdir()) == ["functorch", "torch", "torch-2.10.0.dist-info"]
    from perfgate.profiles.settings import parse_candidate

    assert dict(parse_candidate(spec).env)["PYTHONPATH"].startswith(str(overlay))  # the plugin reads it back
