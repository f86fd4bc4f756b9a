"""A throwaway perfgate project for pytester runs: perftests/, the plugin, variants, one profile.

Tests write the profile text (simulated boxes from fixtures/sim, prompts from fixtures/prompts);
this module holds the copying they all share.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIM_SEED_BOX = ROOT / "fixtures" / "sim" / "rtxpro6000-x8-pcie.toml"
PROMPTS = ROOT / "fixtures" / "prompts" / "random-ids-128.jsonl"

#: The head of a test profile for the seed box (8x RTX PRO 6000 Blackwell, PCIe), served simulated:
#: tests append their own ``[engine]`` extras, ``[model]``, ``[server]``, modes and workload.
SEED_BOX_HARDWARE = """schema_version = 1
[hardware]
gpu = "RTX PRO 6000 Blackwell"
count = 8
sm = "12.0"
interconnect = "pcie"
"""
SEED_BOX_HEAD = SEED_BOX_HARDWARE + f"""[engine]
name = "sim"
sim_hardware = "{SIM_SEED_BOX}"
"""


def make_project(path: Path, profile_text: str, *, profile: str = "t/m", variants_text: str | None = None) -> Path:
    """Lay out perftests/, conftest.py, baselines/variants.toml and baselines/<profile>.toml under ``path``."""
    shutil.copytree(ROOT / "perftests", path / "perftests", ignore=shutil.ignore_patterns("__pycache__"))
    (path / "conftest.py").write_text('pytest_plugins = ["perfgate.plugin"]\n')
    prof = path / "baselines" / f"{profile}.toml"
    prof.parent.mkdir(parents=True, exist_ok=True)
    if variants_text is None:
        shutil.copy(ROOT / "baselines" / "variants.toml", path / "baselines" / "variants.toml")
    else:
        (path / "baselines" / "variants.toml").write_text(variants_text)
    prof.write_text(profile_text)
    return prof
