"""Packaging hook: ship the CUDA sources in ``kernels/`` inside the installed package.

The kernels live at the repository root (where nvcc and readers find them); the build copies
them into ``simsplit/kernels/`` so a non-editable install compiles the same files at run time.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent


class BuildWithKernels(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "simsplit" / "kernels"
        target.mkdir(parents=True, exist_ok=True)
        for src in sorted((ROOT / "kernels").glob("*.cu*")):
            shutil.copy2(src, target / src.name)


setup(cmdclass={"build_py": BuildWithKernels})
