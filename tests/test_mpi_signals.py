"""SIGTERM to mpiexec: every rank stops at the same step, the checkpoint is complete, the run
reports 143, and ``--restart auto`` under mpiexec continues bit for bit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import MPIEXEC, ROOT, mpi_env, mpirun, needs_mpiexec

pytestmark = needs_mpiexec

SETS = ["--backend", "cpu", "--set", "domain.shape=[48,48]", "--set", "run.tolerance=0",
        "--set", "output.plots=false", "--quiet"]


def _fields(directory):
    """(step, velocity, density) of the newest snapshot in ``fields.h5``."""
    import h5py

    with h5py.File(directory / "fields.h5") as h5:
        last = max(h5["snapshots"].values(), key=lambda g: int(g.attrs["step"]))
        return int(last.attrs["step"]), last["velocity"][...], last["density"][...]


def test_sigterm_under_mpiexec_checkpoints_and_restarts(tmp_path):
    out = tmp_path / "run"
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "simsplit", "run", "cases/cavity.yaml",
           *SETS, "--steps", "10000000", "--set", "output.checkpoint_every=500",
           "--output", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=mpi_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list((out / "checkpoints").glob("*.h5"))) < 2:  # running, past set-up
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no checkpoint within 60 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.count("stopped by signal 15") == 1, err  # one line, from rank 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "interrupted", manifest
    stop = manifest["steps_done"]
    files = sorted((out / "checkpoints").iterdir())
    assert files and all(f.suffix == ".h5" for f in files), files  # no half-written .tmp
    assert files[-1].name.endswith(f"{stop:010d}.h5")

    total = stop + 300
    done = mpirun(2, ["-m", "simsplit", "run", "cases/cavity.yaml", *SETS, "--steps", str(total),
                      "--output", str(out), "--restart", "auto"], timeout=90)
    assert done.returncode == 0, done.stderr
    ref = tmp_path / "ref"
    one = subprocess.run([sys.executable, "-m", "simsplit", "run", "cases/cavity.yaml", *SETS,
                          "--steps", str(total), "--output", str(ref)], cwd=ROOT,
                         env=mpi_env(), capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stderr
    step_a, u_a, rho_a = _fields(out)
    step_b, u_b, rho_b = _fields(ref)
    assert step_a == step_b == total
    assert np.array_equal(u_a, u_b) and np.array_equal(rho_a, rho_b)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
