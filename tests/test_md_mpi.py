"""MD under mpiexec (CPU backend, one slab per rank): bitwise identical to one process, and
one rank failing ends the job."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from simsplit.case import load_case
from simsplit.run.simulation import Simulation
from tests.conftest import mpirun, needs_mpiexec

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "cases" / "lj_tiny.yaml"
STEPS = 300
#: 6x6x9 fcc cells (1296 atoms): 15.1 tall, so 3 slabs stay thicker than cutoff + skin (2.8)
TALL = ["md.lattice.cells=[6,6,9]", "run.backend=cpu", "output.dir=null", f"run.steps={STEPS}",
        "md.thermo_every=25"]

pytestmark = pytest.mark.mpi


DRIVER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from simsplit.case import load_case
    from simsplit.run.simulation import Simulation

    sim = Simulation(load_case(sys.argv[1], json.loads(sys.argv[2])))
    md = sim.solver
    md.step(sim.case["run"]["steps"])
    x, v, st, stats = md.positions(), md.velocities(), md.state(), md.stats()
    if sim.context.rank == 0:
        np.savez(sys.argv[3], positions=x, velocities=v, forces=st["forces"],
                 images=st["images"], size=sim.context.size,
                 thermo=json.dumps(md.thermo()), stats=json.dumps(stats))
""")


def _one_process(overrides: list[str]) -> Simulation:
    sim = Simulation(load_case(CASE, overrides + ["decomposition.subdomains=1"]))
    sim.solver.step(sim.case["run"]["steps"])
    return sim


@needs_mpiexec
@pytest.mark.parametrize("ranks", [2, 3])
def test_md_mpi_bitwise_identical_to_one_process(tmp_path, ranks):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "md.npz"
    proc = mpirun(ranks, [str(script), str(CASE), json.dumps(TALL), str(out)], timeout=90)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    assert int(got["size"]) == ranks
    ref = _one_process(TALL).solver
    assert np.array_equal(got["positions"], ref.positions())
    assert np.array_equal(got["velocities"], ref.velocities())
    assert np.array_equal(got["forces"], ref.forces())
    assert np.array_equal(got["images"], ref.images())
    assert json.loads(str(got["thermo"])) == ref.thermo()  # every value, bit for bit
    stats = json.loads(str(got["stats"]))
    assert len(stats["atoms_per_slab"]) == ranks and sum(stats["atoms_per_slab"]) == 1296
    assert stats["rebuilds"] >= 10 and stats["migrations"] > 100 and stats["ghosts"] > 0
    assert stats["rebuilds"] == ref.stats()["rebuilds"]


@needs_mpiexec
def test_md_cli_under_mpiexec_writes_once_matches_and_restarts(tmp_path):
    import h5py

    from simsplit.run.checkpoint import load_latest
    from simsplit.run.output import CHECKPOINT_DIR

    out = tmp_path / "two"
    args = ["-m", "simsplit", "run", str(CASE), "--backend", "cpu", "--set", "md.thermo_every=50",
            "--output", str(out)]
    proc = mpirun(2, args + ["--steps", "200"], timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("physics") == 1  # rank 0 alone reports
    assert "2 MPI ranks" in proc.stdout and "MPICH" not in proc.stderr
    one = Simulation(load_case(CASE, ["md.thermo_every=50", "decomposition.subdomains=1",
                                      "run.backend=cpu", "output.dir=null"]))
    one.solver.step(200)
    _, attrs, arrays = load_latest(out / CHECKPOINT_DIR, one.case)
    assert int(attrs["step"]) == 200
    assert np.array_equal(arrays["ids"], np.arange(864))
    assert np.array_equal(arrays["positions"], one.positions())
    assert np.array_equal(arrays["velocities"], one.velocities())
    with h5py.File(out / "trajectory.h5md") as fh:
        obs = {k: fh["observables"][k]["value"][()] for k in fh["observables"]}
        obs_steps = fh["observables/pressure/step"][()]
        last = fh["particles/trajectory/position/value"][-1]
    assert np.array_equal(last, one.positions())
    thermo = one.thermo()
    assert len(thermo) == 5
    at_thermo = np.searchsorted(obs_steps, [r["step"] for r in thermo])
    assert np.array_equal(obs["pressure"][at_thermo], [r["press"] for r in thermo])
    assert np.array_equal(obs["total_energy"][at_thermo], [r["etotal"] for r in thermo])
    table = np.genfromtxt(out / "thermo.csv", delimiter=",", names=True)  # rank 0 wrote it once
    assert table["Step"].tolist() == [r["step"] for r in thermo]
    assert np.array_equal(table["Press"], [r["press"] for r in thermo])
    assert proc.stdout.count("PotEng") == 1  # one thermo table, rank 0's

    # restart the 2-rank checkpoint on 3 ranks: still the one-process trajectory
    proc = mpirun(3, args + ["--steps", "300", "--restart", "auto", "--quiet"], timeout=90)
    assert proc.returncode == 0, proc.stderr
    one.solver.step(100)
    _, attrs, arrays = load_latest(out / CHECKPOINT_DIR, one.case)
    assert int(attrs["step"]) == 300
    assert np.array_equal(arrays["positions"], one.positions())
    assert np.array_equal(arrays["velocities"], one.velocities())


@needs_mpiexec
def test_md_too_many_ranks_is_refused():
    # lj_tiny is 10.08 tall: 4 slabs would be 2.52 thick, less than cutoff + skin = 2.8
    proc = mpirun(4, ["-m", "simsplit", "run", str(CASE), "--quiet", "--backend", "cpu",
                      "--set", "output.dir=null"], timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("simsplit: error")]
    assert len(lines) == 1 and "less than cutoff + skin" in lines[0], proc.stderr



@needs_mpiexec
@pytest.mark.parametrize("cli", [True, False])
def test_md_failing_rank_ends_the_job(tmp_path, cli):
    """One rank raising mid-run (here on purpose, at step 20 of a long run) ends every rank
    within seconds with its one-line error: through the command line, and through a program
    that drives the solver itself (a hook that :class:`MPIContext` installs)."""
    steps = "100000"
    if cli:
        args = ["-m", "simsplit", "run", str(CASE), "--quiet", "--backend", "cpu",
                "--set", "output.dir=null", "--steps", steps]
    else:
        script = tmp_path / "driver.py"
        script.write_text(DRIVER)
        overrides = [o for o in TALL if not o.startswith("run.steps=")] + [f"run.steps={steps}"]
        args = [str(script), str(CASE), json.dumps(overrides), str(tmp_path / "md.npz")]
    t0 = time.monotonic()
    proc = mpirun(3, args, timeout=60, SIMSPLIT_TEST_FAIL_RANK="1:20")
    assert time.monotonic() - t0 < 30, proc.stderr
    assert proc.returncode != 0
    assert "simsplit: error: rank 1: InjectedFailure" in proc.stderr, proc.stderr
    assert "rank 0:" not in proc.stderr and "rank 2:" not in proc.stderr
    assert "Traceback" not in proc.stderr
