"""Body flows as whole runs (issue #21): under mpiexec and after a restart on another split,
the fields, forces and coefficients are the bits of one uninterrupted process."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import yaml

from simsplit import Simulation
from tests.conftest import body_case, mpirun, needs_mpiexec


def _forces(path) -> dict[str, np.ndarray]:
    with h5py.File(path) as h5:
        return {f"{g}/{k}": h5[g][k][()] for g in h5 if g != "step" for k in h5[g]} | {
            "step": h5["step"][()]}


@pytest.mark.parametrize("outlet", ["pressure", "convective"])
def test_restart_on_another_split_during_the_ramp(tmp_path, outlet) -> None:
    """Checkpoint at step 30 (inside the 40-step ramp), resume on 3 slabs: the same bits as
    120 steps straight on 2 (a convective outlet's previous values travel in the checkpoint)."""
    def case(n: int, **over):
        c = body_case(36, 18, n, **over)
        c["domain"]["outlet"] = {"kind": outlet}
        return c

    straight = Simulation(case(2, run__steps=120))
    straight.run(output=False)
    first = Simulation(case(2, run__steps=30, output__dir=str(tmp_path / "a")))
    first.run()
    with h5py.File(sorted((tmp_path / "a" / "checkpoints").glob("*.h5"))[-1]) as h5:
        assert ("outlet_slots" in h5) == (outlet == "convective")
    resumed = Simulation(case(3, run__steps=120, output__dir=str(tmp_path / "b")))
    resumed.restart(tmp_path / "a" / "checkpoints")
    assert resumed.steps_done == 30
    summary = resumed.run()
    assert np.array_equal(resumed.velocity(), straight.velocity())
    assert summary.extra["bodies"] == straight.body_forces.report()


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("bounce", ["halfway", "quadratic"])
def test_mpiexec_matches_one_process(tmp_path, bounce) -> None:
    """Two ranks against one process; quadratic links exchange halos two planes deep through
    the MPI transport."""
    case = body_case(40, 18, 2, run__steps=90, output__forces_every=30, run__backend="cpu",
                     output__probes=[{"name": "a", "point": [30, 3]},
                                     {"name": "b", "point": [30, 15]}])  # one per rank
    case["domain"]["bounce_back"] = bounce
    case["run"]["transport"] = "auto"
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case))
    one = tmp_path / "one"
    res = mpirun(1, ["-m", "simsplit", "run", str(path), "--output", str(one), "--quiet",
                     "--set", "decomposition.subdomains=1"], timeout=300)
    assert res.returncode == 0, res.stderr
    two = tmp_path / "two"
    res = mpirun(2, ["-m", "simsplit", "run", str(path), "--output", str(two), "--quiet"],
                 timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("body         cyl: Cd ") == 1  # rank 0 prints the summary
    a, b = (json.loads((d / "run.json").read_text()) for d in (one, two))
    assert a["bodies"] == b["bodies"] and a["bodies"]["cyl"]["drag_coefficient"] > 0
    assert a["probes"] == b["probes"] and a["probes"]["b"]["velocity_x"] > 0
    fa, fb = _forces(one / "forces.h5"), _forces(two / "forces.h5")
    assert fa.keys() == fb.keys() and list(fa["step"]) == [30, 60, 90]
    for key in fa:
        assert np.array_equal(fa[key], fb[key]), key
