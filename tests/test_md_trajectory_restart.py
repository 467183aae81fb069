"""A restarted MD run continues its H5MD trajectory: the file equals an uninterrupted run's,
also when the interrupted run had written frames after its last checkpoint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from simsplit.run.checkpoint import list_checkpoints
from tests.conftest import ROOT

LJ_TINY = ROOT / "cases" / "lj_tiny.yaml"


def _run(out: Path, steps: int, *extra: str) -> None:
    cmd = [sys.executable, "-m", "simsplit", "run", str(LJ_TINY), "--output", str(out),
           "--quiet", "--steps", str(steps), "--set", "output.every=50",
           "--set", "output.checkpoint_every=100", *extra]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def _contents(path: Path) -> dict[str, np.ndarray]:
    out = {}
    with h5py.File(path) as h5:
        def visit(name: str, obj) -> None:
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[...]
        h5.visititems(visit)
    return out


def test_restart_continues_the_trajectory_bit_for_bit(tmp_path):
    ref, run = tmp_path / "ref", tmp_path / "run"
    _run(ref, 400)
    _run(run, 300)
    newest = list_checkpoints(run / "checkpoints")[0]
    assert newest.name.endswith("0000000300.h5")
    newest.unlink()  # as if killed after step 300's frame but before its checkpoint
    _run(run, 400, "--restart", "auto")
    want, got = _contents(ref / "trajectory.h5md"), _contents(run / "trajectory.h5md")
    assert want.keys() == got.keys()
    steps = got["particles/trajectory/position/step"]
    assert steps.tolist() == list(range(0, 401, 50))  # frames 250 and 300 not doubled
    for name in want:
        assert np.array_equal(want[name], got[name]), name
