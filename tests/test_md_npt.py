"""Isotropic NPT (``md.ensemble: npt``): Martyna-Tobias-Klein barostat with Nose-Hoover chains.

The conserved quantity converges at second order in the time step; trajectories, boxes and
thermo are bitwise the same on 1, 2 and 3 slabs (while the box, the slab edges and the cell
grid change), after a restart onto another split and on the emulated CUDA C path. Slow: the
mean density at (T, p) gives back p under NVT at that density (a round trip), and agrees with
LAMMPS ``fix npt`` (``tests/data/lammps/log.npt_lj``) within the measured errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simsplit.md import MDSolver
from simsplit.md.reference import lj_case, lj_oracle
from tests.test_md_kernels_compile import emulated, emulated_lib  # noqa: F401

LAMMPS_LOG = Path(__file__).parent / "data" / "lammps" / "log.npt_lj"


def _squeeze(subdomains: int = 1, **kw: Any) -> dict[str, Any]:
    """1296 atoms at density 0.8 pushed to p = 6 with a fast barostat: within 100 steps the
    box shrinks by 8 %, the slab edges move and the cell grid loses a layer along x and y."""
    md: dict[str, Any] = {"temperature": 1.0, "ensemble": "npt", "nose_hoover": {"damping": 0.5},
                          "barostat": {"pressure": 6.0, "damping": 0.5}, "thermo_every": 25}
    md.update(kw)
    return lj_case(cells=(6, 6, 9), density=0.8, subdomains=subdomains, **md)


def _same(a: MDSolver, b: MDSolver, since: int = 0) -> None:
    assert np.array_equal(a.positions(), b.positions())
    assert np.array_equal(a.velocities(), b.velocities())
    assert np.array_equal(a.images(), b.images())
    assert np.array_equal(a.box, b.box)
    rows_a, rows_b = ([r for r in s.thermo() if r["step"] >= since] for s in (a, b))
    assert rows_a == rows_b and rows_a


@pytest.fixture(scope="module")
def one_slab() -> MDSolver:
    s = MDSolver(_squeeze())
    grid = s.ncell.copy()
    s.step(300)
    assert s.ncell[0] < grid[0], (grid, s.ncell)  # the grid followed the box
    return s


@pytest.mark.parametrize(("subdomains", "weights"), [(2, None), (3, None), (3, [1.0, 1.3, 1.1])])
def test_split_independent(one_slab, subdomains, weights) -> None:
    s = MDSolver({**_squeeze(subdomains),
                  "decomposition": {"subdomains": subdomains, "weights": weights}})
    s.step(300)
    _same(s, one_slab)
    assert s.stats()["migrations"] > 0


def test_float32_split_independent() -> None:
    """Positions stored in float32: the box scaling rounds each product to float32 in the
    same way on every split."""
    runs = []
    for n in (1, 3):
        case = _squeeze(n)
        case["run"]["precision"] = "float32"
        s = MDSolver(case)
        s.step(150)
        runs.append(s)
    assert runs[0].positions().dtype == np.float32
    _same(runs[1], runs[0])


def test_lists_stay_complete_while_the_box_shrinks() -> None:
    """Forces on 3 slabs equal the all-pairs oracle in the current box every 7 steps of the
    compression (lists, ghosts and cells of an older, larger box must still hold every
    pair within the cutoff)."""
    s = MDSolver(_squeeze(3))
    worst = 0.0
    for _ in range(15):
        s.step(7)
        f, _, _ = lj_oracle(s.positions(), s.box, 2.5)
        worst = max(worst, float(np.abs(s.forces() - f).max() / np.abs(f).max()))
    assert s.stats()["rebuilds"] < s.steps_done  # lists were reused across box changes
    assert worst < 1e-12, worst


@pytest.mark.parametrize(("first", "then"), [(3, 1), (1, 2)])
def test_restart_onto_another_split(one_slab, first, then) -> None:
    a = MDSolver(_squeeze(first))
    a.step(60)  # mid-compression: the build box differs from the box
    assert not np.array_equal(a.state()["build_box"], a.box)
    b = MDSolver(_squeeze(then))
    b.load_state(a.state())
    b.step(240)
    a.step(240)
    _same(a, one_slab)
    _same(b, one_slab, since=60)


@pytest.mark.parametrize("subdomains", [1, 2])
def test_on_the_device_path(emulated, one_slab, subdomains) -> None:  # noqa: F811
    """The emulated CUDA C kernels: exact sums on the device, the same box, the CPU's bits."""
    emu = MDSolver(_squeeze(subdomains), "emulated")
    assert emu.arena is None  # several slabs on one GPU go through the host path under NPT
    emu.step(300)
    _same(emu, one_slab)


def _econserve_range(dt: float) -> float:
    case = lj_case(cells=(5, 5, 5), density=0.8, temperature=1.0, ensemble="npt",
                   potential={"cutoff": 2.5, "shift": True}, timestep=dt,
                   nose_hoover={"damping": 0.5}, barostat={"pressure": 1.0, "damping": 2.0},
                   thermo_every=int(round(0.2 / dt)))
    s = MDSolver(case)
    s.step(int(round(3.0 / dt)))
    rows = s.thermo()
    assert max(r["density"] for r in rows) - min(r["density"] for r in rows) > 0.1
    e = [r["econserve"] for r in rows]
    return max(e) - min(e)


def test_conserved_quantity_is_second_order() -> None:
    """The density swings from 0.8 to 0.92 and back; the extended energy (shifted LJ, thermostat
    and barostat chains, 3 W omega_dot^2 / 2 + P (V - V0)) varies as dt^2."""
    coarse, fine = _econserve_range(0.004), _econserve_range(0.002)
    print(f"\nNPT conserved quantity range over 3 tau: dt 0.004 {coarse:.3g}, "
          f"dt 0.002 {fine:.3g} (ratio {coarse / fine:.2f})")
    assert fine < 4e-4
    assert coarse / fine > 3.0


def test_missing_pressure_is_one_line_and_exit_2(tmp_path, run_cli) -> None:
    (tmp_path / "case.yaml").write_text(
        "physics: md\nmd:\n  lattice: {density: 0.8, cells: [5, 5, 5]}\n  ensemble: npt\n"
        "run: {steps: 5, backend: cpu}\noutput: {dir: out}\n")
    for command in ("validate", "run"):
        res = run_cli(command, "case.yaml")
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
        assert "md.barostat.pressure" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


def test_a_box_too_small_for_the_slabs_names_the_barostat() -> None:
    """The thinnest slab starts at 2.98 and would be below cutoff + skin = 2.8 at the
    density p = 6 asks for."""
    case = _squeeze(3)
    case["decomposition"]["weights"] = [1.0, 1.0, 0.48]
    s = MDSolver(case)
    with pytest.raises(ValueError, match="md.barostat: the box shrank to .* slab 2 would be"):
        s.step(300)


# --- state points (slow) -----------------------------------------------------------------------
def _blocks(values: np.ndarray, n: int = 10) -> tuple[float, float]:
    """Mean and its standard error from ``n`` block means."""
    b = values[: len(values) // n * n].reshape(n, -1).mean(axis=1)
    return float(b.mean()), float(b.std(ddof=1) / np.sqrt(n))


def _npt_means(cells: tuple[int, int, int], steps: int, equilibrate: int, **kw: Any
               ) -> dict[str, tuple[float, float]]:
    """Means and their errors (density, pe, press, temp) at the LAMMPS reference state
    point (T = 1, p = 1, rc = 3 with tail corrections, Tdamp 0.5, Pdamp 5)."""
    case = lj_case(cells=cells, density=0.8, temperature=1.0, ensemble="npt",
                   potential={"cutoff": 3.0, "tail": True}, nose_hoover={"damping": 0.5},
                   barostat={"pressure": 1.0, "damping": 5.0}, thermo_every=10, **kw)
    s = MDSolver(case)
    s.step(equilibrate)
    first = len(s.thermo())
    s.step(steps)
    rows = s.thermo()[first:]
    return {k: _blocks(np.array([r[k] for r in rows])) for k in LAMMPS_COLUMNS}


#: the block-mean columns of ``log.npt_lj``'s production rows (f_2[1], v_pe_atom, ...)
LAMMPS_COLUMNS = {"density": 5, "pe": 6, "press": 7, "temp": 8}


def _lammps_blocks() -> dict[str, np.ndarray]:
    """The 10 block means of the LAMMPS production run, per quantity."""
    rows = [line.split() for line in LAMMPS_LOG.read_text().splitlines()]
    rows = [r for r in rows if len(r) == 9 and r[0].isdigit() and int(r[0]) >= 40_000]
    return {k: np.array([float(r[c]) for r in rows]) for k, c in LAMMPS_COLUMNS.items()}


@pytest.mark.slow
def test_state_point_agrees_with_lammps_fix_npt() -> None:
    """864 atoms as in ``in.npt_lj``; LAMMPS: 10 blocks of 100 tau. Density, potential
    energy, pressure and temperature within 3 combined standard errors."""
    lmp = _lammps_blocks()
    ours = _npt_means((6, 6, 6), steps=24_000, equilibrate=4_000)
    print()
    for key, blocks in lmp.items():
        assert len(blocks) == 10
        ref, dref = float(blocks.mean()), float(blocks.std(ddof=1) / np.sqrt(len(blocks)))
        mine, dmine = ours[key]
        err = np.hypot(dmine, dref)
        print(f"NPT T=1 p=1 rc=3+tail, {key:>7}: simsplit {mine:.5f} +- {dmine:.5f}, "
              f"LAMMPS fix npt {ref:.5f} +- {dref:.5f}: difference {mine - ref:+.5f} "
              f"({abs(mine - ref) / err:.2f} sigma)")
        assert abs(mine - ref) < 3.0 * err, key


@pytest.mark.slow
def test_round_trip_npt_density_gives_back_the_pressure() -> None:
    """NPT at (T = 1, p = 1) gives a mean density; NVT (Nose-Hoover) at that density gives a
    mean pressure that must be 1 within the errors of both runs (the density error carried
    through the compressibility dp/drho measured from two NVT densities)."""
    rho, drho = _npt_means((5, 5, 5), steps=30_000, equilibrate=4_000)["density"]

    def nvt_pressure(density: float) -> tuple[float, float]:
        case = lj_case(cells=(5, 5, 5), density=density, temperature=1.0,
                       ensemble="nose-hoover", potential={"cutoff": 3.0, "tail": True},
                       nose_hoover={"damping": 0.5}, thermo_every=10)
        s = MDSolver(case)
        s.step(2_000)
        first = len(s.thermo())
        s.step(20_000)
        return _blocks(np.array([r["press"] for r in s.thermo()[first:]]))

    p, dp = nvt_pressure(rho)
    p_hi, _ = nvt_pressure(rho + 0.02)
    slope = (p_hi - p) / 0.02
    err = np.hypot(dp, slope * drho)
    print(f"\nround trip: NPT(T=1, p=1) density {rho:.5f} +- {drho:.5f}; NVT there: "
          f"p = {p:.4f} +- {dp:.4f} (dp/drho {slope:.1f}; combined error {err:.4f}, "
          f"{abs(p - 1.0) / err:.2f} sigma)")
    assert abs(p - 1.0) < 3.0 * err


def test_trajectories_carry_each_frames_box(tmp_path) -> None:
    """H5MD box edges and GSD configuration.box per frame are the box of that step."""
    import h5py

    from simsplit.run.simulation import Simulation

    case = _squeeze()
    case["run"]["steps"] = 40
    case["output"] = {"dir": str(tmp_path / "out"), "every": 20}
    sim = Simulation(case)
    sim.run()
    with h5py.File(tmp_path / "out" / "trajectory.h5md", "r") as h5:
        edges = h5["particles/trajectory/box/edges/value"][()]
    assert edges.shape == (3, 3) and edges[0, 0] > edges[1, 0] > edges[2, 0]
    assert np.array_equal(edges[-1], sim.solver.box)
    gsd_hoomd = pytest.importorskip("gsd.hoomd")
    with gsd_hoomd.open(tmp_path / "out" / "trajectory.gsd") as t:
        boxes = np.array([f.configuration.box[:3] for f in t])
    assert np.allclose(boxes, edges, rtol=1e-7)  # GSD stores float32


MPI_DRIVER = """
import json, sys
import numpy as np
from simsplit.run.simulation import Simulation

md = Simulation(json.loads(sys.argv[1])).solver
md.step(int(sys.argv[3]))
x, v, box = md.positions(), md.velocities(), md.box
if md.rank == 0:
    np.savez(sys.argv[2], positions=x, velocities=v, box=box, thermo=json.dumps(md.thermo()),
             size=0 if md._comm is None else md._comm.Get_size())
"""


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_npt_with_two_masses_and_force_shift_under_mpi(tmp_path, ranks) -> None:
    """One slab per rank: NPT (allreduced virial and kinetic sums through the gathers, box
    and slab edges on every rank), per-type masses and the force-shift kernel together equal
    one process bit for bit."""
    import json

    from tests.conftest import MPIEXEC, mpirun

    if MPIEXEC is None:
        pytest.skip("no mpiexec found")
    case = _squeeze(ranks, masses=[1.0, 0.5], potential={"cutoff": 2.5, "shift": "force"})
    case["md"]["lattice"]["fractions"] = [0.8, 0.2]
    # the one process first: the ranks then load its kernels from Numba's cache instead of
    # each compiling them at once
    ref = MDSolver({**case, "decomposition": {"subdomains": 1, "weights": None}})
    ref.step(150)
    (tmp_path / "driver.py").write_text(MPI_DRIVER)
    out = tmp_path / "md.npz"
    proc = mpirun(ranks, [str(tmp_path / "driver.py"), json.dumps(case), str(out), "150"],
                  timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    assert int(got["size"]) == ranks
    assert ref.multi_mass and ref.force_shift and ref.barostat is not None
    assert np.array_equal(got["positions"], ref.positions())
    assert np.array_equal(got["velocities"], ref.velocities())
    assert np.array_equal(got["box"], ref.box)
    assert json.loads(str(got["thermo"])) == ref.thermo()


CLI_CASE = """physics: md
md:
  lattice: {density: 0.8, cells: [6, 6, 9], fractions: [0.8, 0.2]}
  temperature: 1.0
  masses: [1.0, 0.5]
  ensemble: npt
  nose_hoover: {damping: 0.5}
  barostat: {pressure: 6.0, damping: 0.5}
  potential: {cutoff: 2.5, shift: force}
  thermo_every: 20
decomposition: {subdomains: 3}
run: {steps: STEPS, backend: cpu}
output: {dir: DIR, checkpoint_every: 100, every: 50}
"""


def test_cli_checkpoint_restart_is_bitwise(tmp_path, run_cli) -> None:
    """simsplit run, stopped at step 100 and continued with --restart from its checkpoint,
    writes the thermo values and trajectory (boxes included) of an uninterrupted run."""
    import h5py

    for name, steps in (("full", 200), ("half", 100)):
        (tmp_path / f"{name}.yaml").write_text(
            CLI_CASE.replace("STEPS", str(steps)).replace("DIR", name))
        assert run_cli("run", f"{name}.yaml", "--quiet").returncode == 0
    (tmp_path / "half.yaml").write_text(CLI_CASE.replace("STEPS", "200").replace("DIR", "half"))
    res = run_cli("run", "half.yaml", "--restart", "--quiet")
    assert res.returncode == 0, res.stderr

    def values(name: str) -> list[list[str]]:  # thermo.csv without the throughput column
        rows = (tmp_path / name / "thermo.csv").read_text().splitlines()
        return [r.split(",")[:7] for r in rows]

    assert values("half") == values("full") and len(values("full")) == 12
    assert (tmp_path / "full" / "thermo.csv").read_text().split("\n")[0].split(",")[5:] == [
        "Volume", "Density", "atom-steps/s"]
    with h5py.File(tmp_path / "half" / "trajectory.h5md") as a, \
            h5py.File(tmp_path / "full" / "trajectory.h5md") as b:
        for key in ("position", "velocity", "box/edges"):
            path = f"particles/trajectory/{key}/value"
            assert np.array_equal(a[path][()], b[path][()]), key
        assert a["particles/trajectory/box/edges/value"].shape == (5, 3)
