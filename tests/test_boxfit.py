"""The profile a session runs on a GPU box when none is named (perfgate.profiles.boxfit.profile_for), over the
profiles this repository ships: the one for the box's GPU kind and the most of its GPUs, a parent before the profile
that extends it for the same hardware; none for a box no profile is for."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.profiles.boxfit import hardware_matches, profile_for
from perfgate.profiles.load import find_profiles, load_profile
from perfgate.stack import Stack

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize(("gpu", "count", "sm", "chosen"), [
    ("NVIDIA H100 80GB HBM3", 1, "9.0", "h100-x1/llama-3.1-8b-dummy"),
    # the general profile, not its load profile (which extends it): "-load" sorts first by name, and was chosen
    ("NVIDIA H200", 1, "9.0", "h200-x1/llama-3.1-8b-dummy"),
    # a two-GPU box runs its tp-2 profile, not a one-GPU one
    ("NVIDIA H200", 2, "9.0", "h200-x2/llama-3.1-8b-dummy-tp2"),
    ("NVIDIA H100 80GB HBM3", 8, "9.0", "h100-x1/llama-3.1-8b-dummy"),  # sim-h100-x8 is the simulator's
    ("NVIDIA A100-SXM4-80GB", 1, "8.0", None),
    ("NVIDIA H200", 1, "10.0", None),  # the SM is not the profile's
])
def test_the_profile_a_gpu_box_runs_when_none_is_named(gpu: str, count: int, sm: str, chosen: str | None) -> None:
    got = profile_for(Stack(gpu=gpu, gpu_count=count, sm=sm), find_profiles(ROOT))
    assert (None if got is None else str(got.relative_to(ROOT / "baselines").with_suffix(""))) == chosen


def test_a_mismatch_says_why() -> None:
    h100 = load_profile(ROOT / "baselines/h100-x1/llama-3.1-8b-dummy.toml")
    assert hardware_matches(h100, Stack(gpu="NVIDIA H100 80GB HBM3", gpu_count=1, sm="9.0")) == (True, "")
    assert hardware_matches(h100, Stack(gpu="NVIDIA H200", gpu_count=1, sm="9.0")) == (
        False, "GPU 'NVIDIA H200' is not 'H100'")
    assert hardware_matches(h100, Stack(gpu="NVIDIA H100 80GB HBM3", gpu_count=0, sm="9.0")) == (
        False, "0 GPUs visible, the profile needs 1")
    assert hardware_matches(h100, Stack(gpu="NVIDIA H100 80GB HBM3", gpu_count="unknown", sm="9.0")) == (
        False, "GPU count unknown")


def test_a_profile_that_does_not_load_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "baselines" / "x").mkdir(parents=True)
    (tmp_path / "baselines" / "x" / "broken.toml").write_text("schema_version = 1\n[hardware\n")
    paths = [tmp_path / "baselines" / "x" / "broken.toml", *find_profiles(ROOT)]
    got = profile_for(Stack(gpu="NVIDIA H100 80GB HBM3", gpu_count=1, sm="9.0"), paths)
    assert got == (ROOT / "baselines/h100-x1/llama-3.1-8b-dummy.toml").resolve()
