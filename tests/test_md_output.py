"""What an MD run shows a user: the LAMMPS-style thermo table on the console and in
thermo.csv (also across a restart), the progress unit, the default trajectory interval, and an
H5MD file that MDAnalysis opens with its default arguments."""

from __future__ import annotations

import csv
import subprocess
import sys
import time
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest

from simsplit.case import load_case
from simsplit.io.h5md import H5MDWriter
from simsplit.md import MDSolver
from simsplit.md.observables import default_frame_interval
from simsplit.md.thermo import COLUMNS
from simsplit.run.checkpoint import checkpoint_path
from simsplit.run.progress import RunProgress
from simsplit.run.simulation import Simulation
from tests.conftest import ROOT, fluid_case

LJ_TINY = ROOT / "cases" / "lj_tiny.yaml"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, "-m", "simsplit", "run", str(LJ_TINY), *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res


def _library_thermo(steps: int, thermo_every: int) -> list[dict]:
    sim = Simulation(load_case(LJ_TINY, [f"run.steps={steps}", "output.dir=null",
                                         f"md.thermo_every={thermo_every}"]))
    sim.run()
    return sim.thermo()


def _read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def _table_rows(stdout: str) -> list[list[str]]:
    """The console thermo table's rows (after its header), split into cells."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["Step", "Temp"])
    rows = []
    for line in lines[start + 1:]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        rows.append(cells)
    return rows


# --- thermo table ----------------------------------------------------------------------------
def test_cli_prints_the_thermo_table_and_writes_the_same_rows_to_thermo_csv(tmp_path):
    res = _cli("--steps", "100", "--set", "md.thermo_every=25", "--output", str(tmp_path))
    assert res.stdout.split("\n")[0].split() == list(COLUMNS)
    assert res.stdout.count("PotEng") == 1
    want = _library_thermo(100, 25)
    rows = _table_rows(res.stdout)
    assert [int(r[0]) for r in rows] == [r["step"] for r in want] == [0, 25, 50, 75, 100]
    for row, rec in zip(rows, want, strict=True):
        shown = [float(v) for v in row[1:5]]
        assert shown == pytest.approx([rec["temp"], rec["pe"], rec["etotal"], rec["press"]],
                                      rel=1e-7)
    assert len(rows[0]) == 5  # the first row has no interval to rate
    assert all(len(r) == 6 and float(r[5]) > 0 for r in rows[1:])
    # the table is the progress display: no tqdm bar, no lattice units
    assert "MLUPS" not in res.stdout + res.stderr
    assert "%|" not in res.stderr and "step/s" not in res.stderr

    table = _read_csv(tmp_path / "thermo.csv")
    assert table[0] == list(COLUMNS)
    assert [int(r[0]) for r in table[1:]] == [r["step"] for r in want]
    for row, rec in zip(table[1:], want, strict=True):  # every digit: bit for bit
        assert [float(v) for v in row[1:5]] == [rec["temp"], rec["pe"], rec["etotal"],
                                                rec["press"]]
    assert table[1][5] == "" and all(float(r[5]) > 0 for r in table[2:])


def test_quiet_prints_no_table_but_writes_thermo_csv(tmp_path):
    res = _cli("--steps", "60", "--set", "md.thermo_every=20", "--output", str(tmp_path),
               "--quiet")
    assert "PotEng" not in res.stdout and "Step" not in res.stdout
    assert "steps        60" in res.stdout  # the summary still comes
    steps = [int(r[0]) for r in _read_csv(tmp_path / "thermo.csv")[1:]]
    assert steps == [0, 20, 40, 60]


def test_restart_continues_thermo_csv_without_duplicate_rows(tmp_path):
    ref, run = tmp_path / "ref", tmp_path / "run"
    common = ("--set", "md.thermo_every=50", "--set", "output.checkpoint_every=100")
    _cli("--steps", "400", "--output", str(ref), "--quiet", *common)
    _cli("--steps", "300", "--output", str(run), "--quiet", *common)
    # as if killed after step 300's thermo row but before its checkpoint: resumes at 200
    checkpoint_path(run / "checkpoints", 300).unlink()
    res = _cli("--steps", "400", "--output", str(run), "--restart", "auto", *common)
    assert [int(r[0]) for r in _table_rows(res.stdout)] == [200, 250, 300, 350, 400]
    want, got = _read_csv(ref / "thermo.csv"), _read_csv(run / "thermo.csv")
    assert [r[0] for r in got[1:]] == [str(s) for s in range(0, 401, 50)]
    assert [r[:5] for r in got] == [r[:5] for r in want]  # the rates are wall-clock times


# --- progress unit -----------------------------------------------------------------------------
def test_progress_bar_names_the_rate_of_its_physics(capsys):
    fluid = Simulation(fluid_case(16, 16))
    md = Simulation(load_case(LJ_TINY, ["output.dir=null"]))
    shown = {}
    for sim in (fluid, md):
        unit = getattr(sim.solver, "rate_unit", "MLUPS")
        with RunProgress(20, 0, enabled=True, cells=sim.solver.mlups_cells(), unit=unit) as bar:
            time.sleep(0.01)
            bar.update(20, None)  # closing draws the bar with its rate
        shown[sim.physics] = capsys.readouterr().err
    assert "MLUPS=" in shown["fluid"] and "atom-steps" not in shown["fluid"]
    assert "Matom-steps/s=" in shown["md"] and "MLUPS" not in shown["md"]


def test_md_run_with_progress_prints_the_table_instead_of_a_bar(capsys):
    sim = Simulation(load_case(LJ_TINY, ["output.dir=null", "run.steps=40",
                                         "md.thermo_every=20"]))
    sim.run(progress=True)
    out, err = capsys.readouterr()
    assert [int(r[0]) for r in _table_rows(out)] == [0, 20, 40]
    assert "%|" not in err
    sim.solver.step(20)  # the table ended with the run
    assert "PotEng" not in capsys.readouterr().out


# --- default trajectory interval ---------------------------------------------------------------
@pytest.mark.parametrize("steps, frame_bytes, every", [
    (500, 10_000, 5),        # lj_tiny: 101 frames
    (200, 10_000, 2),
    (100, 10_000, 1),
    (30_000, 10_000, 500),   # 300 rounds up to 500: 61 frames
    (100_000, 10_000, 1000),
    (0, 10_000, 1),
    (100, 2**27, 50),        # 128 MiB frames: 4 fit in 512 MiB, so every 25 -> 50
    (100, 2**30, 100),       # a frame above the budget: the first and the last only
])
def test_default_frame_interval(steps, frame_bytes, every):
    assert default_frame_interval(steps, frame_bytes) == every


def test_md_trajectory_gets_about_100_frames_by_default(tmp_path):
    case = load_case(LJ_TINY, [f"output.dir={tmp_path}", "run.steps=200"])
    assert case["output"]["every"] is None
    Simulation(case).run()
    with h5py.File(tmp_path / "trajectory.h5md") as f:
        assert f["particles/trajectory/position/step"][()].tolist() == list(range(0, 201, 2))


def test_output_every_zero_still_writes_only_the_final_frame(tmp_path):
    Simulation(load_case(LJ_TINY, [f"output.dir={tmp_path}", "run.steps=30",
                                   "output.every=0"])).run()
    with h5py.File(tmp_path / "trajectory.h5md") as f:
        assert f["particles/trajectory/position/step"][()].tolist() == [30]


def test_fluid_default_still_writes_only_the_final_snapshot(tmp_path):
    from simsplit.io.fields import list_snapshots

    case = fluid_case(16, 16, output__dir=str(tmp_path), run__steps=40)
    case["output"]["plots"] = False
    Simulation(case).run()
    assert [step for step, _ in list_snapshots(tmp_path)] == [40]


# --- H5MD as readers expect it -------------------------------------------------------------------
def _run_with_frames(directory: Path, steps: int = 20, every: int = 5) -> Simulation:
    sim = Simulation(load_case(LJ_TINY, [f"output.dir={directory}", f"run.steps={steps}",
                                         f"output.every={every}", "md.thermo_every=10"]))
    sim.run()
    return sim


def test_h5md_carries_units_step_time_and_per_frame_boxes(tmp_path):
    sim = _run_with_frames(tmp_path)
    dt = sim.case["md"]["timestep"]
    with h5py.File(tmp_path / "trajectory.h5md") as f:
        part = f["particles/trajectory"]
        for name, unit, lj_unit in [("position", "A", "sigma"), ("box/edges", "A", "sigma"),
                                    ("velocity", "A ps-1", "sigma tau-1")]:
            value = part[name]["value"]
            assert (value.attrs["unit"], value.attrs["lj_unit"]) == (unit, lj_unit), name
            assert h5py.check_string_dtype(value.attrs.get_id("unit").dtype).length is None
            assert part[name]["time"].attrs["unit"] == "ps"
            assert part[name]["step"][()].tolist() == [0, 5, 10, 15, 20]
            assert part[name]["time"][()] == pytest.approx([s * dt for s in range(0, 21, 5)])
        assert part["box/edges/value"].shape == (5, 3)
        assert np.array_equal(part["box/edges/value"][()], np.tile(sim.solver.box, (5, 1)))
        assert "unit" not in part["image/value"].attrs  # counts of boxes: no unit
        params = f["parameters"].attrs
        assert params["unit_system"] == "lj" and "reduced Lennard-Jones" in params["units"]
        assert params["timestep"] == dt and params["sigma"] == 1.0
        assert f["observables/pressure/value"].attrs["lj_unit"] == "epsilon sigma-3"


def test_mdanalysis_opens_the_trajectory_with_default_arguments(tmp_path):
    mda = pytest.importorskip(
        "MDAnalysis", reason="MDAnalysis is not installed (it comes with simsplit[test])")
    sim = _run_with_frames(tmp_path)
    path = str(tmp_path / "trajectory.h5md")
    quiet = {**sim.case, "output": {**sim.case["output"], "dir": None}}
    reference = MDSolver(quiet)  # the same case again, stepped to each frame
    dt = sim.case["md"]["timestep"]
    thermo = {r["step"]: r for r in sim.thermo()}
    for kwargs in ({}, {"format": "H5MD"}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            u = mda.Universe(path, **kwargs)
            assert u.atoms.n_atoms == sim.solver.n_atoms
            assert u.trajectory.units["length"] == "Angstrom"  # known unit: nothing converted
            steps = []
            for ts in u.trajectory:
                step = int(ts.data["step"])
                reference.step(step - reference.steps_done)
                steps.append(step)
                assert ts.time == pytest.approx(step * dt, rel=1e-12)  # from the file, not dt
                assert np.array_equal(ts.positions, reference.positions().astype(np.float32))
                assert np.array_equal(ts.velocities, reference.velocities().astype(np.float32))
                np.testing.assert_allclose(ts.dimensions[:3], sim.solver.box, rtol=1e-6)
                if step in thermo:  # observables are per frame, as MDAnalysis reads them
                    assert ts.data["temperature"] == thermo[step]["temp"]
        assert steps == [0, 5, 10, 15, 20]
        # only "no types or masses to guess from" (there are none in an LJ system); none about
        # units or a missing time step, which the issue saw. (Asking MDAnalysis 2.11 for
        # trajectory.dt itself still warns: its H5MD reader has no _get_dt and skips a 'dt'
        # observable, MDAnalysis issue #2825.)
        texts = [str(w.message) for w in caught]
        assert texts and all("guess" in t for t in texts), texts
        reference = MDSolver(quiet)


def _frame(writer: H5MDWriter, step: int) -> None:
    x = np.full((4, 3), float(step))
    writer.write_frame(step, 0.1 * step, x, -x)


def test_a_damaged_trajectory_is_moved_aside_and_a_restart_goes_on(tmp_path):
    path = tmp_path / "trajectory.h5md"
    with H5MDWriter(path, 4, np.ones(3)) as writer:
        _frame(writer, 0)
    cut = path.read_bytes()[:300]
    path.write_bytes(cut)  # as if killed while HDF5 wrote it
    with pytest.warns(UserWarning, match=r"moved to trajectory\.h5md\.damaged"):
        writer = H5MDWriter(path, 4, np.ones(3), resume_step=10)
    _frame(writer, 20)
    writer.close()
    assert (tmp_path / "trajectory.h5md.damaged").read_bytes() == cut
    with h5py.File(path) as f:
        assert f["particles/trajectory/position/step"][()].tolist() == [20]


def test_restart_keeps_only_complete_entries_of_an_interrupted_append(tmp_path):
    path = tmp_path / "trajectory.h5md"
    with H5MDWriter(path, 4, np.ones(3)) as writer:
        for step in (0, 10, 20):
            _frame(writer, step)
    with h5py.File(path, "a") as f:  # killed inside the next append: a step allocated only
        f["particles/trajectory/position/step"].resize(4, axis=0)
    with H5MDWriter(path, 4, np.ones(3), resume_step=20) as writer:
        _frame(writer, 20)  # in the file already: not written twice
        _frame(writer, 30)
    with h5py.File(path) as f:
        pos = f["particles/trajectory/position"]
        assert pos["step"][()].tolist() == [0, 10, 20, 30]
        assert pos["value"][:, 0, 0].tolist() == [0.0, 10.0, 20.0, 30.0]
        assert f["particles/trajectory/velocity/step"][()].tolist() == [0, 10, 20, 30]
