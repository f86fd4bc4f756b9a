"""Build hook: the wheel ships the simulated boxes, the prompt sets and the default simulated profile
(``perfgate/profiles/shipped.py`` lists them) under ``perfgate/data/project/``, with the repository's
layout. Everything else is in pyproject.toml."""

import glob
import os
import runpy

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SHIPPED = runpy.run_path(os.path.join(HERE, "perfgate", "profiles", "shipped.py"))["SHIPPED"]


class BuildPyWithProject(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the repository itself
            return
        dest = os.path.join(self.build_lib, "perfgate", "data", "project")
        for pattern in SHIPPED:
            files = sorted(glob.glob(os.path.join(HERE, pattern)))
            if not files:
                raise SystemExit(f"setup.py: nothing matches {pattern} (perfgate/profiles/shipped.py SHIPPED)")
            for src in files:
                out = os.path.join(dest, os.path.relpath(src, HERE))
                self.mkpath(os.path.dirname(out))
                self.copy_file(src, out)


setup(cmdclass={"build_py": BuildPyWithProject})
