"""Masses per atom type (``md.masses``, a LAMMPS data file's Masses).

Against LAMMPS on ``data.binary`` (Kob-Andersen, masses 1 and 0.5; ``in.nve_binary``,
``in.forces_binary``): step 0 and 200 NVE steps, thermo and every atom (errors printed);
bitwise the same on 1, 2 and 3 slabs, on the emulated CUDA C path and after a restart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit.md import MDSolver
from simsplit.md.reference import lj_case
from simsplit.md.velocities import maxwell_boltzmann
from tests.test_md_force_shift import KA
from tests.test_md_kernels_compile import emulated, emulated_lib  # noqa: F401
from tests.test_md_lammps_reference import (
    DATA,
    assert_thermo_matches,
    data_file_case,
    lammps_dump,
    lammps_thermo,
)


@pytest.mark.parametrize("subdomains", [1, 2])
def test_two_masses_match_lammps(subdomains: int) -> None:
    solver = MDSolver(data_file_case(DATA / "data.binary", subdomains,
                                     potential={"cutoff": 2.5, "shift": True}, pair_coeffs=KA))
    assert solver.multi_mass and solver.type_mass.tolist() == [1.0, 0.5]
    dump = lammps_dump(DATA / "dump.forces_binary")
    box = solver.box
    for step in (0, 200):
        solver.step(step - solver.steps_done)
        want = dump[step]
        v = np.stack([want["vx"], want["vy"], want["vz"]], axis=1)
        f = np.stack([want["fx"], want["fy"], want["fz"]], axis=1)
        dx = solver.positions() - np.stack([want["x"], want["y"], want["z"]], axis=1)
        dx -= box * np.rint(dx / box)
        errs = {"force": np.abs(solver.forces() - f).max() / np.abs(f).max(),
                "velocity": np.abs(solver.velocities() - v).max() / np.abs(v).max(),
                "position": np.abs(dx).max() / box.min()}
        print(f"\nstep {step}, {subdomains} slab(s): max deviation from LAMMPS, relative to the "
              "largest value: " + ", ".join(f"{k} {e:.1e}" for k, e in errs.items()))
        assert max(errs.values()) < (1e-12 if step == 0 else 1e-9), errs
    assert_thermo_matches(solver, lammps_thermo(DATA / "log.nve_binary"),
                          ("pe", "press", "temp", "etotal"))


def _ka_lattice(subdomains: int = 1, **kw: Any) -> dict[str, Any]:
    """Kob-Andersen 80:20 on a lattice, B atoms half as heavy, Nose-Hoover at T = 1."""
    md: dict[str, Any] = {"masses": [1.0, 0.5], **kw}
    case = lj_case(cells=(6, 6, 9), density=1.2, subdomains=subdomains, temperature=1.0,
                   ensemble="nose-hoover", pair_coeffs=KA,
                   potential={"cutoff": 2.5, "shift": True}, thermo_every=25, **md)
    case["md"]["lattice"]["fractions"] = [0.8, 0.2]
    return case


@pytest.fixture(scope="module")
def one_slab() -> MDSolver:
    s = MDSolver(_ka_lattice())
    s.step(200)
    return s


def _same(a: MDSolver, b: MDSolver) -> None:
    assert np.array_equal(a.positions(), b.positions())
    assert np.array_equal(a.velocities(), b.velocities())
    rows_b = {r["step"]: r for r in b.thermo()}
    assert all(rows_b[r["step"]] == r for r in a.thermo() if r["step"] in rows_b)


@pytest.mark.parametrize("subdomains", [2, 3])
def test_split_identity(one_slab, subdomains) -> None:
    s = MDSolver(_ka_lattice(subdomains))
    s.step(200)
    _same(s, one_slab)
    assert s.thermo() == one_slab.thermo()


def test_restart_onto_another_split(one_slab) -> None:
    a = MDSolver(_ka_lattice(3))
    a.step(80)
    b = MDSolver(_ka_lattice(2))
    b.load_state(a.state())
    b.step(120)
    _same(one_slab, b)


@pytest.mark.parametrize("subdomains", [1, 2])
def test_on_the_emulated_device(emulated, one_slab, subdomains) -> None:  # noqa: F811
    s = MDSolver(_ka_lattice(subdomains), "emulated")
    s.step(200)
    _same(s, one_slab)
    assert s.thermo() == one_slab.thermo()
    assert s.kernels.launches["md_kinetic_typed<double>"] >= 200  # exact sums on the device


def test_equipartition_by_mass() -> None:
    """Light and heavy atoms share the temperature: after 2 tau of NVT each kind's mean
    m v^2 / 3 is T within its noise (the light ones move faster)."""
    s = MDSolver(_ka_lattice())
    s.step(800)
    v2 = (s.velocities() ** 2).sum(axis=1)
    for t, m in enumerate((1.0, 0.5)):
        sel = s.atom_type == t
        temp = m * v2[sel].mean() / 3.0
        print(f"type {t + 1} (mass {m}): T = {temp:.3f} over {sel.sum()} atoms")
        assert abs(temp - 1.0) < 4.0 * np.sqrt(2.0 / (3.0 * sel.sum())) + 0.05


def _langevin(subdomains: int = 1) -> dict[str, Any]:
    """The Kob-Andersen lattice under Langevin at T = 1 (damping 0.5), masses 1 and 0.25."""
    case = _ka_lattice(subdomains, masses=[1.0, 0.25])
    case["md"].update(ensemble="langevin", langevin={"damping": 0.5})
    return case


@pytest.fixture(scope="module")
def langevin_one_slab() -> MDSolver:
    s = MDSolver(_langevin())
    s.step(120)
    return s


@pytest.mark.parametrize("subdomains", [2, 3])
def test_langevin_with_masses_split_identity(langevin_one_slab, subdomains) -> None:
    """Drag and noise per type (m / damping, sqrt(2 m T / (damping dt))) give the same bits on
    every split."""
    s = MDSolver(_langevin(subdomains))
    assert s.multi_mass
    s.step(120)
    _same(s, langevin_one_slab)


@pytest.mark.parametrize("subdomains", [1, 2])
def test_langevin_with_masses_on_the_emulated_device(emulated, langevin_one_slab,  # noqa: F811
                                                     subdomains) -> None:
    """Per-type kicks run in batches too (one flag read per batch, kicks of the steps after
    a rebuild request skipped): the CPU's bits."""
    s = MDSolver(_langevin(subdomains), "emulated")
    s.step(120)
    _same(s, langevin_one_slab)
    assert s.kernels.launches["md_langevin_typed<double>"] >= 120
    assert 0 < s.stats()["batches"] < 120 / 2


def test_langevin_with_masses_thermalises_each_kind() -> None:
    """Langevin drag and noise scale with each atom's mass, so light and heavy atoms both
    reach the bath's temperature: started hot (T = 2.5) and held at T = 1 for 16 damping
    times, each kind's m v^2 / 3 is 1 within its noise. With one type's drag and noise for
    all (the light ones given the heavy ones' mass), the light atoms would stay far off."""
    case = _langevin()
    case["md"].update(temperature=2.5, langevin={"damping": 0.5, "temperature": 1.0})
    s = MDSolver(case)
    s.step(1600)
    v2 = (s.velocities() ** 2).sum(axis=1)
    for t, m in enumerate((1.0, 0.25)):
        sel = s.atom_type == t
        temp = m * v2[sel].mean() / 3.0
        err = np.sqrt(2.0 / (3.0 * sel.sum()))  # relative spread of a mean of chi^2_3 / 3
        print(f"type {t + 1} (mass {m}): T = {temp:.3f} over {sel.sum()} atoms "
              f"(bath 1.0, one-sigma {err:.3f})")
        assert abs(temp - 1.0) < 4 * err + 0.03, (t, temp)


def test_initial_velocities_with_masses() -> None:
    m = np.where(np.arange(1000) % 5 == 0, 0.5, 1.0)
    v = maxwell_boltzmann(1000, m, 1.3, 7)
    assert np.abs((m[:, None] * v).sum(axis=0)).max() < 1e-12
    assert np.sum(m[:, None] * v * v) / (3 * 1000 - 3) == pytest.approx(1.3, rel=1e-13)


def test_equal_masses_keep_the_one_mass_path() -> None:
    s = MDSolver(_ka_lattice(masses=[1.0, 1.0]))
    assert not s.multi_mass


@pytest.mark.parametrize(("md", "message"), [
    ("masses: [1.0, 0.5, 2.0]", "md.masses: 3 masses for 2 atom type(s) (1, 2)"),
])
def test_bad_masses_are_one_line_and_exit_2(tmp_path, run_cli, md, message) -> None:
    (tmp_path / "case.yaml").write_text(
        "physics: md\nmd:\n  lattice: {density: 0.8442, cells: [5, 5, 5], "
        f"fractions: [0.5, 0.5]}}\n  {md}\nrun: {{steps: 5, backend: cpu}}\n"
        "output: {dir: out}\n")
    for command in ("validate", "run"):
        res = run_cli(command, "case.yaml")
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
        assert message in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


def test_trajectories_keep_the_masses(tmp_path) -> None:
    """H5MD /parameters mass holds one mass per type; a run started from that trajectory
    has them again; GSD stores each atom's mass."""
    import h5py

    from simsplit.run.simulation import Simulation

    case = _ka_lattice()
    case["run"]["steps"] = 10
    case["output"] = {"dir": str(tmp_path / "out"), "every": 10}
    sim = Simulation(case)
    sim.run()
    with h5py.File(tmp_path / "out" / "trajectory.h5md", "r") as h5:
        assert h5["parameters"].attrs["mass"].tolist() == [1.0, 0.5]
    again = MDSolver({"physics": "md", "md": {"init_file": str(tmp_path / "out" /
                                                               "trajectory.h5md"),
                                               "pair_coeffs": KA},
                      "run": {"backend": "cpu", "steps": 0}, "output": {"dir": None}})
    assert again.multi_mass and again.type_mass.tolist() == [1.0, 0.5]
    assert np.array_equal(again.atom_mass, sim.solver.atom_mass)
    gsd_hoomd = pytest.importorskip("gsd.hoomd")
    with gsd_hoomd.open(tmp_path / "out" / "trajectory.gsd") as t:
        assert np.array_equal(t[-1].particles.mass, sim.solver.atom_mass.astype(np.float32))
