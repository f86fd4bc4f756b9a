"""perfgate works outside a checkout: the wheel, installed into a fresh virtualenv, runs a test of the user's
own in an empty directory on the simulated seed box (its boxes, prompt sets and default profile ship with
it, perfgate/profiles/shipped.py), as the README's main job does in a checkout. The wheel and its venv:
tests/wheelenv.py, built once per session."""

from __future__ import annotations

import os
import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.wheelenv import WheelEnv

USER_TEST = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="decode", modes=["baseline"])


def test_decode_speed(perf_server, measure, perf_check):
    m = measure(perf_server, max_new_tokens=32, trials=3)
    perf_check(m, "tok_s")
'''


@pytest.mark.slow
def test_the_wheel_runs_a_users_test_in_an_empty_directory(wheel_env: WheelEnv, tmp_path: Path) -> None:
    wheel, py = wheel_env.wheel, wheel_env.py
    data = [n.removeprefix("perfgate/data/project/") for n in zipfile.ZipFile(wheel).namelist()
            if n.startswith("perfgate/data/project/")]
    assert "baselines/sim-rtxpro6000-x8/kimi-k2.5.toml" in data  # the profiles ship, the run evidence does not
    assert not [n for n in data if n.startswith("evidence/") or not n.endswith((".toml", ".jsonl"))], data

    work = tmp_path / "empty"
    work.mkdir()
    (work / "test_mine.py").write_text(textwrap.dedent(USER_TEST))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERFGATE_", "PYTEST_", "PYTHONPATH"))}
    env["CUDA_VISIBLE_DEVICES"] = ""  # the simulated seed box, even on a GPU machine
    where = subprocess.run([str(py), "-c", "import perfgate; print(perfgate.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(wheel_env.venv), where  # the wheel's perfgate, not the checkout's

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
    assert "7 tests collected" in collect.stdout, collect.stdout  # test_mine.py 4, test_stack_pair.py 3 (one per mode)

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
