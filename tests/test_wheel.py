"""perfgate works outside a checkout: the wheel, installed into a fresh virtualenv, runs a test of the user's
own in an empty directory on the simulated seed box (its boxes, prompt sets and default profile ship with
it, perfgate/profiles/shipped.py), as the README's main job does in a checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from perfgate.profiles.shipped import SHIPPED

ROOT = Path(__file__).resolve().parent.parent

USER_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="decode", modes=["baseline"])


def test_decode_speed(perf_server, measure, perf_check):
    m = measure(perf_server, max_new_tokens=32, trials=3)
    perf_check(m, "tok_s")
'''


def _source_copy(dest: Path) -> Path:
    """What the wheel is built from: the package, its build files, the shipped data, and every profile and the
    run evidence of the checkout, which must stay out of the wheel (no stale build/)."""
    shutil.copytree(ROOT / "perfgate", dest / "perfgate", ignore=shutil.ignore_patterns("__pycache__", "project"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    for tree in ("baselines", "evidence"):
        shutil.copytree(ROOT / tree, dest / tree)
    for pattern in SHIPPED:
        for src in ROOT.glob(pattern):
            out = dest / src.relative_to(ROOT)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, out)
    return dest


def _fresh_venv(path: Path) -> Path:
    """A virtualenv that sees this environment's dependencies (no download), but not its perfgate: a path
    line in a .pth file adds the site-packages directory without running its .pth files, so the editable
    install's finder stays out."""
    venv.create(path, with_pip=False)
    py = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    (Path(site) / "_perfgate_test_deps.pth").write_text("\n".join(deps) + "\n")
    return py


@pytest.mark.slow
def test_the_wheel_runs_a_users_test_in_an_empty_directory(tmp_path: Path) -> None:
    src = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = dist.glob("perfgate-*.whl")
    data = [n.removeprefix("perfgate/data/project/") for n in zipfile.ZipFile(wheel).namelist()
            if n.startswith("perfgate/data/project/")]
    assert "baselines/sim-rtxpro6000-x8/kimi-k2.5.toml" in data  # the profiles ship, the run evidence does not
    assert not [n for n in data if n.startswith("evidence/") or not n.endswith((".toml", ".jsonl"))], data
    py = _fresh_venv(tmp_path / "venv")
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                           "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert inst.returncode == 0, inst.stdout + inst.stderr

    work = tmp_path / "empty"
    work.mkdir()
    (work / "test_mine.py").write_text(textwrap.dedent(USER_TEST))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERFGATE_", "PYTEST_", "PYTHONPATH"))}
    env["CUDA_VISIBLE_DEVICES"] = ""  # the simulated seed box, even on a GPU machine
    where = subprocess.run([str(py), "-c", "import perfgate; print(perfgate.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where  # the wheel's perfgate, not the checkout's

    run = subprocess.run([str(py), "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--junitxml=run.xml"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "1 passed" in out and "SIMULATED" in out, out
    assert "perfgate/data/project/baselines/sim-rtxpro6000-x8/kimi-k2.5.toml" in (work / "run.xml").read_text()
    assert sorted(p.name for p in work.iterdir() if p.name != "perfgate-logs") == ["run.xml", "test_mine.py"]

    # perfgate init from the wheel: the shipped profile and its parent copied into a project of the user's, which
    # then runs from its own baselines/ (its relative fixture paths falling back to the installed copies)
    init = subprocess.run([str(py), "-m", "perfgate.cli", "init", "proj"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)
    assert init.returncode == 0, init.stdout + init.stderr
    proj = work / "proj"
    assert (proj / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml").is_file()
    collect = subprocess.run([str(py), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"], cwd=proj,
                             env=env, capture_output=True, text=True, timeout=300)
    assert collect.returncode == 0, collect.stdout + collect.stderr
    assert f"perfgate: profile {proj / 'baselines' / 'sim-rtxpro6000-x8' / 'kimi-k2.5.toml'}" in collect.stdout
    assert "4 tests collected" in collect.stdout, collect.stdout

    # a limit the shipped profile lacks: the skip says to set up a project (the installed copy is never written)
    other = tmp_path / "other"
    other.mkdir()
    (other / "test_output.py").write_text(textwrap.dedent(USER_TEST).replace('"tok_s"', '"output_tok_s"'))
    skip = subprocess.run([str(py), "-m", "pytest", "-p", "no:cacheprovider", "-rs"], cwd=other, env=env,
                          capture_output=True, text=True, timeout=600)
    assert skip.returncode == 0 and "1 skipped" in skip.stdout, skip.stdout + skip.stderr
    assert "no limit for it" in skip.stdout and "`perfgate init --from sim-rtxpro6000-x8/kimi-k2.5`" in skip.stdout
    # the update that skip suggested, run on the installed copy anyway: refused before any test, naming the fix
    update = subprocess.run([str(py), "-m", "pytest", "-p", "no:cacheprovider", "--perfgate-update-baselines"],
                            cwd=other, env=env, capture_output=True, text=True, timeout=600)
    said = update.stdout + update.stderr
    assert update.returncode == 4 and "fix: `perfgate init --from sim-rtxpro6000-x8/kimi-k2.5`" in said, said
    assert "launching" not in said, said
