"""The built wheel in a fresh virtualenv, once per session, and a shell that runs a user's commands with it.

``wheel_env`` (session-scoped, registered by tests/conftest.py) builds perfgate's wheel from a copy of the
checkout, installs it into a new virtualenv that borrows this environment's dependencies through a .pth (no
download; :func:`fresh_venv`), and puts ``pytest`` and ``pip`` in its bin: ``pytest`` is that venv's
``python -m pytest``, ``pip`` that venv's pip with no index but the built wheel's folder, so a doc's
``pip install perfgate`` finds the wheel installed. :meth:`WheelEnv.sh` runs a shell command with that bin first
on PATH, no PERFGATE_/PYTEST_ variables and no GPU visible (the simulated server), in a directory of the caller's
(an empty one from :meth:`WheelEnv.empty_dir` by default).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfgate.profiles.shipped import SHIPPED

ROOT = Path(__file__).resolve().parent.parent


def source_copy(dest: Path) -> Path:
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


def fresh_venv(path: Path) -> Path:
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


def build_wheel(src: Path, dist: Path) -> Path:
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = dist.glob("perfgate-*.whl")
    return wheel


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str

    @property
    def out(self) -> str:
        return self.stdout + self.stderr


@dataclass
class WheelEnv:
    wheel: Path
    venv: Path
    py: Path
    base: Path  # where empty_dir() makes its directories
    _n: int = 0

    @property
    def bin(self) -> Path:
        return self.py.parent

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A user's environment: this venv's bin first on PATH (no other venv's), no PERFGATE_/PYTEST_ variables (but the suite's
        PERFGATE_HOST_WATCH, and the simulator at speed-up 2: PERFGATE_SIM_SPEEDUP=2),
        no PYTHONPATH, no GPU visible."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PERFGATE_", "PYTEST_", "PYTHONPATH", "VIRTUAL_ENV", "PIP_"))}
        skip = {str(Path(sys.executable).parent), str(Path(sys.prefix) / "bin")}
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in skip]
        env["PATH"] = os.pathsep.join([str(self.bin), *path])
        env["VIRTUAL_ENV"] = str(self.venv)
        env["CUDA_VISIBLE_DEVICES"] = ""  # the simulated seed box, even on a GPU machine
        if "PERFGATE_HOST_WATCH" in os.environ:  # the suite's own load is not the user's (tests/conftest.py)
            env["PERFGATE_HOST_WATCH"] = os.environ["PERFGATE_HOST_WATCH"]
        # the simulated servers at half the default speed-up unless a command says otherwise: at 4 a trial lasts a
        # quarter of real time, so a stall of the suite's own parallel workers is four times its share, and a loaded
        # runner read one trial of `pytest perftests/ -m baseline` 12 % slow (CV 5.7 % > max_cv 5 %: noisy, a lost
        # verdict); at 2 the same stall is half that share. The commands are the same; the suite's load is not the
        # user's
        env["PERFGATE_SIM_SPEEDUP"] = "2"
        env.update(extra or {})
        return env

    def empty_dir(self, name: str = "user") -> Path:
        self._n += 1
        d = self.base / f"{name}-{self._n}"
        d.mkdir(parents=True)
        return d

    def sh(self, command: str, cwd: Path | None = None, *, env: Mapping[str, str] | None = None,
           timeout: float = 600) -> Result:
        """Run ``command`` with bash in ``cwd`` (a new empty directory if None), as a user with this venv."""
        where = cwd if cwd is not None else self.empty_dir()
        r = subprocess.run(["bash", "-c", command], cwd=where, env=self.env(env), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return Result(r.returncode, r.stdout, r.stderr)


def _scripts(env: WheelEnv) -> None:
    """pytest and pip in the venv's bin: the borrowed packages bring no console scripts of their own."""
    dist = env.wheel.parent
    scripts = {
        "pytest": f'exec "{env.py}" -m pytest "$@"\n',
        # a doc's `pip install perfgate`: the wheel, from its folder, never an index
        "pip": f'export PIP_NO_INDEX=1 PIP_FIND_LINKS="{dist}" PIP_DISABLE_PIP_VERSION_CHECK=1\n'
               f'exec "{env.py}" -m pip "$@"\n',
    }
    for name, body in scripts.items():
        p = env.bin / name
        p.write_text("#!/bin/sh\n" + body)
        p.chmod(0o755)


@pytest.fixture(scope="session")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WheelEnv]:
    """perfgate's wheel, built once per session and installed into a fresh virtualenv (see the module)."""
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(source_copy(base / "src"), base / "dist")
    py = fresh_venv(base / "venv")
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                           "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    env = WheelEnv(wheel=wheel, venv=base / "venv", py=py, base=base / "work")
    _scripts(env)
    yield env
