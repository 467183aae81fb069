"""GSD trajectories beside H5MD: what the ``gsd`` package reads back (steps, box, types,
masses, positions, velocities, images, time), the same frames as trajectory.h5md, the types in
both files, OVITO and MDAnalysis opening the file, a restart continuing it, and a GSD frame as
MD input."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from simsplit.case.loader import validate_case
from simsplit.errors import CaseError
from simsplit.io.gsd_trajectory import GSDWriter, read_gsd_frame
from simsplit.io.h5md import read_species
from simsplit.io.lammps_data import read_lammps_data, write_lammps_data
from simsplit.md import MDSolver
from simsplit.run.simulation import Simulation
from tests.conftest import ROOT

gsd_hoomd = pytest.importorskip("gsd.hoomd")

DATA = ROOT / "tests" / "data" / "lammps"
BOX = np.array([4.0, 5.0, 6.0])


def _frame_arrays(seed: int, n: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, 3)) * BOX, rng.normal(size=(n, 3)), rng.integers(-2, 3, (n, 3))


def test_frames_read_back_with_gsd_and_a_restart_drops_later_frames(tmp_path: Path) -> None:
    path = tmp_path / "t.gsd"
    typeid = np.array([0, 1, 1, 0, 1, 0])
    w = GSDWriter(path, BOX, typeid, ["A", "B"], mass=2.0)
    for step in (0, 10, 20):
        w.write_frame(step, step * 0.005, *_frame_arrays(step))
    w.close()
    with gsd_hoomd.open(path, "r") as t:
        assert [int(f.configuration.step) for f in t] == [0, 10, 20]
        f = t[1]
        x, v, img = _frame_arrays(10)
        np.testing.assert_array_equal(f.configuration.box, [4, 5, 6, 0, 0, 0])
        assert f.particles.types == ["A", "B"] and f.particles.typeid.tolist() == typeid.tolist()
        np.testing.assert_array_equal(f.particles.mass, 2.0)
        np.testing.assert_array_equal(f.particles.position, (x - BOX / 2).astype(np.float32))
        np.testing.assert_array_equal(f.particles.velocity, v.astype(np.float32))
        np.testing.assert_array_equal(f.particles.image, img)
        assert f.log["simsplit/time"][0] == 0.05
    # a restart from step 10: step 20 (written after the checkpoint) goes, then comes again
    w = GSDWriter(path, BOX, typeid, ["A", "B"], mass=2.0, resume_step=10)
    w.write_frame(10, 0.05, *_frame_arrays(99))  # already in the file: not written twice
    w.write_frame(20, 0.1, *_frame_arrays(20))
    w.close()
    with gsd_hoomd.open(path, "r") as t:
        assert [int(f.configuration.step) for f in t] == [0, 10, 20]
        np.testing.assert_array_equal(t[1].particles.velocity,
                                      _frame_arrays(10)[1].astype(np.float32))


def _identical_types(tmp_path: Path) -> Path:
    s = read_lammps_data(DATA / "data.onetype")
    s.typeid = (np.arange(s.n_atoms) % 4 == 0).astype(np.int32)
    s.type_names, s.masses = ["A", "B"], np.array([1.0, 1.0])
    path = tmp_path / "ab.data"
    write_lammps_data(path, s)
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 20-step run of 500 atoms of two identical types, frames every 5 steps."""
    tmp = tmp_path_factory.mktemp("gsd_run")
    case = {"physics": "md",
            "md": {"init_file": str(_identical_types(tmp)), "potential": {"shift": True},
                   "thermo_every": 5},
            "run": {"backend": "cpu", "steps": 20},
            "output": {"dir": str(tmp / "out"), "every": 5}}
    Simulation(case).run()
    return tmp / "out"


def test_a_run_writes_the_h5md_frames_to_gsd_too(run_dir: Path) -> None:
    with h5py.File(run_dir / "trajectory.h5md", "r") as h5:
        part = h5["particles/trajectory"]
        steps = part["position/step"][()].tolist()
        pos, vel = part["position/value"][()], part["velocity/value"][()]
        img, box = part["image/value"][()], part["box/edges/value"][0]
    assert steps == [0, 5, 10, 15, 20]
    with gsd_hoomd.open(run_dir / "trajectory.gsd", "r") as t:
        assert [int(f.configuration.step) for f in t] == steps
        for k, f in enumerate(t):
            np.testing.assert_array_equal(f.configuration.box[:3], box.astype(np.float32))
            # float32 positions, shifted by L/2: within one float32 rounding of the H5MD ones
            np.testing.assert_allclose(f.particles.position + box / 2, pos[k], rtol=0,
                                       atol=4e-7 * box.max())
            np.testing.assert_array_equal(f.particles.velocity, vel[k].astype(np.float32))
            np.testing.assert_array_equal(f.particles.image, img[k])
            assert f.log["simsplit/time"][0] == pytest.approx(steps[k] * 0.005)
        assert t[0].particles.types == ["A", "B"]
        typeid = t[-1].particles.typeid
    assert typeid.tolist() == (np.arange(500) % 4 == 0).astype(int).tolist()
    species = read_species(run_dir / "trajectory.h5md")
    assert species is not None and species[1] == ["A", "B"]
    np.testing.assert_array_equal(species[0], typeid)


def test_ovito_opens_the_gsd_trajectory(run_dir: Path) -> None:
    ovito_io = pytest.importorskip("ovito.io")
    pipeline = ovito_io.import_file(str(run_dir / "trajectory.gsd"))
    assert pipeline.source.num_frames == 5
    data = pipeline.compute(2)
    assert data.attributes["Timestep"] == 10
    assert data.particles.count == 500
    assert [t.name for t in data.particles.particle_types.types] == ["A", "B"]
    with gsd_hoomd.open(run_dir / "trajectory.gsd", "r") as t:
        np.testing.assert_array_equal(np.asarray(data.particles.positions),
                                      t[2].particles.position.astype(np.float64))
        np.testing.assert_array_equal(np.asarray(data.particles["Periodic Image"]),
                                      t[2].particles.image)
    cell = np.asarray(data.cell)[:, :3].diagonal()
    print(f"\nOVITO {pipeline.source.num_frames} frames, cell {cell}")


def test_mdanalysis_opens_the_gsd_trajectory(run_dir: Path) -> None:
    mda = pytest.importorskip("MDAnalysis")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = mda.Universe(str(run_dir / "trajectory.gsd"))
    assert u.trajectory.n_frames == 5 and u.atoms.n_atoms == 500
    assert sorted(set(u.atoms.types)) == ["A", "B"]
    with gsd_hoomd.open(run_dir / "trajectory.gsd", "r") as t:
        np.testing.assert_array_equal(u.trajectory[3].positions, t[3].particles.position)
        np.testing.assert_allclose(u.dimensions[:3], t[3].configuration.box[:3])


def test_a_gsd_frame_is_md_input(run_dir: Path) -> None:
    path = run_dir / "trajectory.gsd"
    frame = read_gsd_frame(path)  # the last: step 20
    assert frame.source.endswith("frame 4") and frame.type_names == ["A", "B"]
    case = {"physics": "md", "md": {"init_file": str(path), "potential": {"shift": True}},
            "run": {"backend": "cpu", "steps": 0}, "output": {"dir": None}}
    solver = MDSolver(case)
    assert solver.mass == 1.0
    np.testing.assert_array_equal(solver.velocities(), frame.velocities)
    # positions come back in [0, L), exactly the frame's shifted float32 values
    np.testing.assert_allclose(solver.positions(), frame.positions, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(solver.images(), frame.images)
    from simsplit.md.systems import atom_types

    typeid, names = atom_types(solver.case["md"], solver.n_atoms)
    assert names == ["A", "B"] and typeid.tolist() == frame.typeid.tolist()


def test_gsd_input_without_velocities_and_with_unequal_masses(tmp_path: Path) -> None:
    path = tmp_path / "no_vel.gsd"
    s = read_lammps_data(DATA / "data.onetype")
    f = gsd_hoomd.Frame()
    f.configuration.box = [*s.box, 0, 0, 0]
    f.particles.N = s.n_atoms
    f.particles.types = ["A", "B"]
    f.particles.typeid = np.arange(s.n_atoms) % 2
    f.particles.position = (s.positions - s.box / 2).astype(np.float32)
    with gsd_hoomd.open(path, "w") as t:
        t.append(f)
    case = {"physics": "md", "md": {"init_file": str(path), "temperature": 1.5},
            "run": {"backend": "cpu", "steps": 0}, "output": {"dir": None}}
    solver = MDSolver(case)  # no velocities stored: Maxwell-Boltzmann at md.temperature
    assert solver.thermo()[0]["temp"] == pytest.approx(1.5, rel=1e-12)
    f.particles.mass = np.where(np.arange(s.n_atoms) % 2, 2.0, 1.0)
    with gsd_hoomd.open(path, "w") as t:
        t.append(f)
    assert MDSolver(case).type_mass.tolist() == [1.0, 2.0]  # a mass per type runs
    f.particles.mass = np.where(np.arange(s.n_atoms) % 4 == 1, 2.0, 1.0)  # two within B
    with gsd_hoomd.open(path, "w") as t:
        t.append(f)
    with pytest.raises(CaseError, match="atoms of one type with different masses are not "
                                        "supported"):
        validate_case(case)


def _cli_run(out: Path, steps: int, *extra: str) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "simsplit", "run", str(ROOT / "cases" / "lj_tiny.yaml"),
           "--output", str(out), "--quiet", "--steps", str(steps), "--set", "output.every=50",
           "--set", "output.checkpoint_every=100", *extra]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def test_a_restart_continues_the_gsd_trajectory_bit_for_bit(tmp_path: Path) -> None:
    from simsplit.run.checkpoint import list_checkpoints

    ref, run = tmp_path / "ref", tmp_path / "run"
    _cli_run(ref, 300)
    _cli_run(run, 200)
    newest = list_checkpoints(run / "checkpoints")[0]
    assert newest.name.endswith("0000000200.h5")
    newest.unlink()  # killed after step 200's frame, before its checkpoint
    _cli_run(run, 300, "--restart", "auto")
    with gsd_hoomd.open(ref / "trajectory.gsd") as a, gsd_hoomd.open(run / "trajectory.gsd") as b:
        assert [int(f.configuration.step) for f in b] == list(range(0, 301, 50))
        assert len(a) == len(b)
        for fa, fb in zip(a, b, strict=True):
            for name in ("position", "velocity", "image", "typeid", "mass"):
                np.testing.assert_array_equal(getattr(fb.particles, name),
                                              getattr(fa.particles, name), err_msg=name)


def test_the_last_h5md_frame_is_md_input(run_dir: Path) -> None:
    """H5MD keeps float64: a run from the last frame starts from the state written (positions
    within one rounding of the box length: they pass through unwrapped coordinates, so that the
    image counts carry on), with the types (species) and the mass (/parameters) of the file."""
    path = run_dir / "trajectory.h5md"
    case = {"physics": "md", "md": {"init_file": str(path), "potential": {"shift": True}},
            "run": {"backend": "cpu", "steps": 0}, "output": {"dir": None}}
    solver = MDSolver(case)
    with h5py.File(path, "r") as h5:
        part = h5["particles/trajectory"]
        box = part["box/edges/value"][-1]
        np.testing.assert_allclose(solver.positions(), part["position/value"][-1], rtol=0,
                                   atol=2 * np.finfo(float).eps * box.max())
        np.testing.assert_array_equal(solver.velocities(), part["velocity/value"][-1])
        np.testing.assert_array_equal(solver.images(), part["image/value"][-1])
        pe = h5["observables/potential_energy/value"][-1]
    assert solver.thermo()[0]["pe"] == pytest.approx(pe, rel=1e-13)
    from simsplit.md.systems import atom_types

    typeid, names = atom_types(solver.case["md"], solver.n_atoms)
    assert names == ["A", "B"] and typeid.sum() == 125
    with pytest.raises(CaseError, match="md.mass: 2 differs from the mass 1 in"):
        validate_case({**case, "md": {**case["md"], "mass": 2}})


def test_a_second_run_of_the_same_simulation_continues_the_gsd_file(tmp_path: Path) -> None:
    case = {"physics": "md",
            "md": {"lattice": {"density": 0.8442, "cells": [4, 4, 4]}, "thermo_every": 10},
            "run": {"backend": "cpu", "steps": 20},
            "output": {"dir": str(tmp_path / "out"), "every": 10}}
    sim = Simulation(case)
    sim.run()
    sim.case["run"]["steps"] = 40
    sim.run()
    with gsd_hoomd.open(tmp_path / "out" / "trajectory.gsd") as t:
        assert [int(f.configuration.step) for f in t] == [0, 10, 20, 30, 40]
    with h5py.File(tmp_path / "out" / "trajectory.h5md", "r") as h5:
        assert h5["particles/trajectory/position/step"][()].tolist() == [0, 10, 20, 30, 40]


def test_without_the_gsd_package_the_run_warns_once_and_writes_h5md(tmp_path: Path,
                                                                     monkeypatch) -> None:
    import warnings

    import simsplit.io.gsd_trajectory as gsd_io
    from simsplit.errors import CaseWarning

    monkeypatch.setattr(gsd_io, "gsd_available", lambda: False)
    case = {"physics": "md", "md": {"lattice": {"density": 0.8442, "cells": [4, 4, 4]}},
            "run": {"backend": "cpu", "steps": 5}, "output": {"dir": str(tmp_path / "out")}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Simulation(case).run()
    texts = [str(w.message) for w in caught if issubclass(w.category, CaseWarning)]
    assert len(texts) == 1 and "no trajectory.gsd (the gsd package is not installed" in texts[0]
    assert (tmp_path / "out" / "trajectory.h5md").exists()
    assert not (tmp_path / "out" / "trajectory.gsd").exists()
