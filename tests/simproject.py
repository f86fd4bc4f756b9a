"""A throwaway perfgate project for pytester runs: perftests/, the plugin, variants, one profile.

The one simulated test profile (:data:`SIM_PROFILE`, its variations from :func:`sim_profile`) lives here, with the
copying every such project shares (:func:`make_project`); tests append their own floors, [variants], [slo] tables.
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

#: The eagle3 mode of the test profile (a speculative config the simulator models; the drafter path is never read).
EAGLE3_MODE = """[modes.eagle3]
flags = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "/d", speculative-num-steps = 3, speculative-eagle-topk = 1, speculative-num-draft-tokens = 4 }
"""


def sim_profile(*, startup: object = 0.2, startup_timeout: object = 30, eagle3: bool = True,
                max_new_tokens: object = 16, warmup: object = 1, trials: object = 3, max_cv: object = 0.5,
                workload: str = "") -> str:
    """The simulated test profile: the seed box served simulated, Kimi-K2.5 at TP 8, modes baseline and eagle3, a
    short workload, no floors (a test appends its own tables after ``[workload]``).

    Each keyword sets its key (``sim_startup_s``, ``startup_timeout_s``, ``max_new_tokens``, ``warmup``, ``trials``,
    ``max_cv``); a value may be a placeholder word the test replaces later (``trials="TRIALS"``). ``eagle3=False``
    leaves the baseline mode alone; ``workload`` is more ``[workload]`` lines (or a placeholder for them).
    """
    modes = "[modes.baseline]\n" + (EAGLE3_MODE if eagle3 else "")
    more = f"{workload}\n" if workload else ""
    return f"""{SEED_BOX_HEAD}sim_startup_s = {startup}
startup_timeout_s = {startup_timeout}
[model]
path = "moonshotai/Kimi-K2.5"
layers = 61
hidden = 7168
[server]
tp-size = 8
mem-fraction-static = 0.88
cuda-graph-max-bs-decode = 128
random-seed = 1
{modes}[workload]
prompts = "{PROMPTS}"
max_new_tokens = {max_new_tokens}
warmup = {warmup}
trials = {trials}
max_cv = {max_cv}
request_timeout_s = 30
{more}"""


#: The test profile as it stands (every keyword of :func:`sim_profile` at its default).
SIM_PROFILE = sim_profile()


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
