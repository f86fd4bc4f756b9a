"""Each arm of a stack-pair run on its own stack (issue 31): the candidate's stack fingerprinted from the candidate's
own environment (``python=`` or ``env.PYTHONPATH=``), and each arm's flags checked by its own release's parser before
any launch.

Fake releases are folders on a Python path holding ``sglang`` (a ``__version__`` and a dist-info), ``sgl_kernel``
and ``flashinfer`` (a ``__version__`` only), and where a test needs one a stand-in ``sglang.srt.server_args``; every
probe and check runs in a real subprocess. The real parsers of SGLang 0.5.16 and 0.5.17 are used where
``ci/install-sglang-parsers.sh DIR`` filled ``PERFGATE_SGLANG_PARSERS=DIR``; elsewhere those tests skip saying so.
"""

from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfgate.flagcheck import installed_parser
from perfgate.plugin.pool import Pool
from perfgate.plugin.stackpair import candidate_stack_properties
from perfgate.profiles.config import ServerConfig
from perfgate.profiles.load import load_profile
from perfgate.profiles.settings import parse_candidate
from perfgate.profiles.variants import load_variants
from perfgate.serving.arms import arm_stack
from perfgate.serving.preflight import argv_for
from perfgate.stack import Stack, detect_stack_in

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "baselines" / "h200-x1" / "llama-3.1-8b-dummy.toml"
VARIANTS = ROOT / "baselines" / "variants.toml"
#: the current arm's stack as the session fingerprints it (the older release, ahead on the pytest process's path)
CURRENT = Stack(gpu="NVIDIA H200", gpu_count=1, sm="9.0", interconnect="pcie", driver="580.95.05", cuda="13.0",
                torch="2.11.0", nccl="2.28.9", sglang="0.5.16", sgl_kernel="0.4.5", flashinfer="0.6.14")


def fake_release(root: Path, sglang: str, *, kernel: str = "0.4.5", flashinfer: str = "0.6.15.post1",
                 flags: list[str] | None = None) -> Path:
    """A folder that, first on PYTHONPATH, makes ``sglang`` ``sglang`` (with its dist-info), ``sgl_kernel`` (the
    ``sglang-kernel`` dist-info) and ``flashinfer`` (a ``__version__`` only); with ``flags``, a stand-in
    ``sglang.srt.server_args`` whose ``ServerArgs.add_cli_args`` knows exactly those flags (and --model-path)."""
    def dist(name: str, version: str) -> None:
        d = root / f"{name}-{version}.dist-info"
        d.mkdir(parents=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")

    for pkg in ("sglang", "sgl_kernel", "flashinfer"):
        (root / pkg).mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text(f'__version__ = "{sglang}"\n')
    dist("sglang", sglang)
    (root / "sgl_kernel" / "__init__.py").write_text("")
    dist("sglang_kernel", kernel)
    (root / "flashinfer" / "__init__.py").write_text(f'__version__ = "{flashinfer}"\n')
    if flags is not None:
        (root / "sglang" / "srt").mkdir()
        (root / "sglang" / "srt" / "__init__.py").write_text("")
        (root / "sglang" / "srt" / "server_args.py").write_text(textwrap.dedent(f"""\
            class ServerArgs:
                @staticmethod
                def add_cli_args(parser):
                    parser.add_argument("--model-path", required=True)
                    for flag in {sorted(set(flags) - {"--model-path"})!r}:
                        parser.add_argument(flag, nargs="?")
            """))
    return root


def interpreter(path: Path, pythonpath: Path) -> str:
    """A ``python=`` candidate: an interpreter of its own (a script running this one) whose path has ``pythonpath``."""
    path.write_text(f'#!/bin/sh\nPYTHONPATH="{pythonpath}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _state(cand_spec: str, *, current: Stack = CURRENT) -> SimpleNamespace:
    prof = load_profile(PROFILE)
    return SimpleNamespace(profile=prof, variants=load_variants(VARIANTS), stack=current, sim_stack="",
                           settings=SimpleNamespace(candidate=parse_candidate(cand_spec), sim_stack="", sim_fault="",
                                                    crosscheck="off"), selected_configs={})


def _arms(st: SimpleNamespace, mode: str = "baseline") -> tuple[ServerConfig, ServerConfig]:
    cur = st.profile.config(mode)
    return cur, st.settings.candidate.apply(cur)


# ---------------------------------------------------------------- the candidate's stack, from its own environment


def test_the_stack_of_another_environment_is_what_its_own_interpreter_would_import(tmp_path: Path) -> None:
    """The overlay ahead of the base release wins, as it does for the server: the upgrade run's two arms."""
    new = fake_release(tmp_path / "sgl", "0.5.17")
    old = fake_release(tmp_path / "sgl-0.5.16", "0.5.16", flashinfer="0.6.14")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    s_old = detect_stack_in("", {**env, "PYTHONPATH": f"{old}{os.pathsep}{new}"})
    s_new = detect_stack_in("", {**env, "PYTHONPATH": str(new)})
    assert (s_old.sglang, s_old.sgl_kernel, s_old.flashinfer) == ("0.5.16", "0.4.5", "0.6.14")
    assert (s_new.sglang, s_new.sgl_kernel, s_new.flashinfer) == ("0.5.17", "0.4.5", "0.6.15.post1")
    # nothing of it in this process's environment: none of it here
    assert detect_stack_in("", env).sglang == "unknown"


def test_an_interpreter_that_cannot_run_leaves_the_software_unknown(tmp_path: Path) -> None:
    s = detect_stack_in(str(tmp_path / "no-such-python"), {})
    assert (s.sglang, s.torch, s.flashinfer, s.simulated) == ("unknown", "unknown", "unknown", False)


@pytest.mark.parametrize("form", ["env", "python"])
def test_the_candidate_stack_is_fingerprinted_from_the_candidate_for_both_spec_forms(tmp_path: Path,
                                                                                   form: str) -> None:
    """``env.PYTHONPATH=`` and ``python=`` candidates alike record the candidate's own SGLang, FlashInfer and
    kernel package under ``candidate.stack.*`` (the probe recorded both arms as 0.5.17 before)."""
    rel = fake_release(tmp_path / "sgl", "0.5.17", kernel="0.4.6")
    spec = f"env.PYTHONPATH={rel}" if form == "env" else f"python={interpreter(tmp_path / 'python', rel)}"
    st = _state(spec)
    _, cand = _arms(st)
    props = candidate_stack_properties(st, cand)  # type: ignore[arg-type]
    assert props["candidate.stack.sglang"] == "0.5.17"
    assert props["candidate.stack.flashinfer"] == "0.6.15.post1"
    assert props["candidate.stack.sgl_kernel"] == "0.4.6"
    # the box's pieces are the session's: not repeated for the candidate
    assert not {"candidate.stack.gpu", "candidate.stack.driver", "candidate.stack.sm"} & set(props)
    # the current arm is the session's stack
    assert arm_stack(st, st.profile.config("baseline")) is CURRENT


def test_the_candidates_engine_spells_its_flags_for_the_candidates_own_release(tmp_path: Path) -> None:
    rel = fake_release(tmp_path / "sgl", "0.5.23")
    st = _state(f"env.PYTHONPATH={rel}")
    cur, cand = _arms(st)
    pool = Pool(st)
    assert pool.engine_for(cand).version() == "0.5.23"
    assert pool.engine_for(cur).version() != "0.5.23"


# ---------------------------------------------------------------- each arm's flags, by its own release's parser


class _Pool(Pool):
    """The server pool's launch checks, its notes kept."""

    def __init__(self, state: Any) -> None:
        super().__init__(state)
        self.notes: list[str] = []

    def note(self, msg: str, *, live: bool = False) -> None:
        self.notes.append(msg)


def _flags(config: ServerConfig, st: SimpleNamespace, version: str) -> list[str]:
    return [t for t in argv_for(config, st.variants, version) if t.startswith("--")]


@pytest.mark.parametrize("form", ["env", "python"])
def test_the_candidates_flags_are_checked_by_the_candidates_own_sglang_before_any_launch(tmp_path: Path,
                                                                                       form: str) -> None:
    """The candidate's own SGLang (on its PYTHONPATH, or its interpreter's) parses its command line: a flag that
    release does not know fails the candidate arm as bad-flag before it launches; the current arm is checked
    apart, in its own environment (this one has no SGLang: not pre-checked, and said)."""
    st = _state("env.PYTHONPATH=/nowhere")
    cur, _ = _arms(st)
    dropped = _flags(cur, st, "0.5.17")[-1]
    rel = fake_release(tmp_path / "sgl", "0.5.17", flags=[f for f in _flags(cur, st, "0.5.17") if f != dropped])
    st = _state(f"env.PYTHONPATH={rel}" if form == "env" else f"python={interpreter(tmp_path / 'python', rel)}")
    cur, cand = _arms(st)
    st.selected_configs = {cur.key: cur, cand.key: cand}
    pool = _Pool(st)
    v = pool.launch_problem(cand)
    assert v is not None and v.category == "bad-flag"
    assert "SGLang 0.5.17's own parser rejects" in v.message and dropped in v.message
    assert pool.launch_problem(cur) is None
    assert any("not pre-checked" in n for n in pool.notes), pool.notes
    where = str(rel) if form == "env" else str(tmp_path / "python")
    assert any("checked against SGLang 0.5.17's parser" in n and where in n for n in pool.notes), pool.notes


def test_a_release_with_no_parser_in_its_environment_is_checked_by_the_installed_parser_of_its_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidate's environment names its release (0.5.16) but cannot parse (no ``sglang.srt`` there, as on a
    CPU box): the installed parser of that version, ``$PERFGATE_SGLANG_PARSERS/sglang-0.5.16``, checks it."""
    rel = fake_release(tmp_path / "cand", "0.5.16")
    st = _state(f"env.PYTHONPATH={rel}")
    cur, cand = _arms(st)
    parsers = tmp_path / "parsers"
    fake_release(parsers / "sglang-0.5.16", "0.5.16", flags=["--tp-size"])  # knows almost nothing
    monkeypatch.setenv("PERFGATE_SGLANG_PARSERS", str(parsers))
    assert installed_parser("0.5.16") == str(parsers / "sglang-0.5.16") and installed_parser("0.5.99") is None
    st.selected_configs = {cand.key: cand}
    pool = _Pool(st)
    v = pool.launch_problem(cand)
    assert v is not None and v.category == "bad-flag" and "SGLang 0.5.16's own parser" in v.message
    assert any(f"the installed parser {parsers / 'sglang-0.5.16'}" in n for n in pool.notes), pool.notes


# ---------------------------------------------------------------- the real parsers (ci/install-sglang-parsers.sh)

PARSERS = os.environ.get("PERFGATE_SGLANG_PARSERS")


def _real(version: str) -> str:
    if not PARSERS:
        pytest.skip("set PERFGATE_SGLANG_PARSERS=DIR after `ci/install-sglang-parsers.sh DIR` (.ci/run does)")
    path = installed_parser(version, {"PERFGATE_SGLANG_PARSERS": PARSERS})
    if path is None:
        pytest.skip(f"no SGLang {version} parser under {PARSERS}: re-run ci/install-sglang-parsers.sh {PARSERS}")
    return path


@pytest.mark.parametrize("mode", ["baseline", "eagle3-acc2"])
def test_real_each_arm_of_the_upgrade_is_checked_by_its_own_release(tmp_path: Path, mode: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The upgrade of issue 31, on a CPU box: the current arm (0.5.16) and the candidate (0.5.17, from its
    fingerprint) each spelled for and checked by the real parser of its own release, which accepts the profile's
    flags (``--cuda-graph-max-bs-decode`` in both: 0.5.14 added it); the notes name both."""
    real16, real17 = _real("0.5.16"), _real("0.5.17")
    monkeypatch.setenv("PERFGATE_SGLANG_PARSERS", str(PARSERS))
    rel = fake_release(tmp_path / "sgl", "0.5.17")  # the candidate's environment: names 0.5.17, cannot parse
    st = _state(f"env.PYTHONPATH={rel}")
    # the current arm's release (this process has no SGLang to find it in): as a profile pins it
    st.profile = _with_version(st.profile, "0.5.16")
    cur, cand = _arms(st, mode)
    st.selected_configs = {cur.key: cur, cand.key: cand}
    pool = _Pool(st)
    assert pool.launch_problem(cur) is None and pool.launch_problem(cand) is None
    assert pool.flag_results is not None
    assert pool.flag_results[cur.key].sglang_version == "0.5.16"
    assert pool.flag_results[cand.key].sglang_version == "0.5.17"
    assert any(real16 in n for n in pool.notes) and any(real17 in n for n in pool.notes), pool.notes


def test_real_a_flag_the_newer_release_dropped_fails_only_the_arm_of_that_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """0.5.23 rejects 0.5.17's deprecated ``--cuda-graph-max-bs``: a candidate on 0.5.23 fails as bad-flag before
    launching, naming the new spelling, while the same flag on the 0.5.17 arm passes."""
    _real("0.5.17"), _real("0.5.23")
    monkeypatch.setenv("PERFGATE_SGLANG_PARSERS", str(PARSERS))
    rel = fake_release(tmp_path / "sgl", "0.5.23")
    st = _state(f"env.PYTHONPATH={rel}")
    st.profile = _with_version(st.profile, "0.5.17")
    cur, cand = (_with_flag(c, "cuda-graph-max-bs", 16) for c in _arms(st))
    st.selected_configs = {cur.key: cur, cand.key: cand}
    pool = _Pool(st)
    v = pool.launch_problem(cand)
    assert v is not None and v.category == "bad-flag" and "SGLang 0.5.23's own parser" in v.message
    assert "--cuda-graph-max-bs-decode" in v.message
    assert pool.launch_problem(cur) is None


def _with_version(profile: Any, version: str) -> Any:
    from dataclasses import replace

    return replace(profile, engine=replace(profile.engine, sglang_version=version))


def _with_flag(config: ServerConfig, key: str, value: object) -> ServerConfig:
    from dataclasses import replace

    return replace(config, flags=tuple(sorted({**dict(config.flags), key: value}.items())))
