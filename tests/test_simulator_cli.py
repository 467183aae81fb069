"""Numba's CUDA simulator as a user path: the command line runs GPU kernels on a machine with
neither a GPU nor CuPy, and a GPU backend that lacks its library is refused in one line.

CuPy is blocked in the child (``sys.modules['cupy'] = None``), so these tests prove the path
without CuPy even on a machine that has it installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from tests.conftest import ROOT

CAVITY = str(ROOT / "cases" / "cavity.yaml")
LJ_TINY = str(ROOT / "cases" / "lj_tiny.yaml")

#: runs ``python -m simsplit ARGS`` with every CuPy module made unimportable
_WITHOUT_CUPY = (
    "import runpy, sys\n"
    "for name in ('cupy', 'cupy_backends', 'cupyx'):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = ['simsplit', *sys.argv[1:]]\n"
    "runpy.run_module('simsplit', run_name='__main__')\n"
)


def _simsplit_without_cupy(cwd: Path, *args: str, simulator: bool = True,
                           timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return subprocess.run([sys.executable, "-c", _WITHOUT_CUPY, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_cavity_on_the_simulator_without_cupy(tmp_path: Path) -> None:
    """The README's simulator command, split over two slabs, with output files."""
    res = _simsplit_without_cupy(tmp_path, "run", CAVITY, "--backend", "numba-cuda",
                                 "--set", "domain.shape=[16,16]", "--steps", "20",
                                 "--output", "out", "--monitor", "0.5")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    assert "GPU 0: simulated on the host (Numba's CUDA simulator)" in res.stdout
    assert "numba-cuda" in res.stdout and "(CUDA simulator)" in res.stdout
    assert "steps        20 (total 20)" in res.stdout
    assert "subdomains   2" in res.stdout
    with h5py.File(tmp_path / "out" / "fields.h5") as f:
        assert list(f["snapshots"]) == ["000000020"]
        assert f["snapshots/000000020/velocity"].shape == (1, 16, 16, 3)  # XDMF: 3 components


def test_md_on_the_simulator_without_cupy(tmp_path: Path) -> None:
    res = _simsplit_without_cupy(tmp_path, "run", LJ_TINY, "--backend", "numba-cuda",
                                 "--steps", "4", "--output", "md", "--quiet")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "physics      md" in res.stdout and "(CUDA simulator)" in res.stdout


def test_devices_names_the_simulator(tmp_path: Path) -> None:
    res = _simsplit_without_cupy(tmp_path, "devices")
    assert res.returncode == 0, res.stderr
    assert "NUMBA_ENABLE_CUDASIM=1" in res.stdout
    assert 'pip install "simsplit[gpu]"' in res.stdout


@pytest.mark.parametrize("extra", [[], ["--transport", "nccl"]])
def test_cupy_backend_without_cupy_is_one_line_and_exit_2(tmp_path: Path, extra) -> None:
    res = _simsplit_without_cupy(tmp_path, "run", CAVITY, "--backend", "cupy", "--steps", "2",
                                 "--output", "out", *extra, simulator=False)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("simsplit: error: backend 'cupy' needs CuPy")
    assert 'pip install "simsplit[gpu]"' in lines[0]
    assert not (tmp_path / "out").exists()
