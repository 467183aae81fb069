"""Force-shifted Lennard-Jones (``md.potential.shift: force``, LAMMPS ``pair lj/smooth/linear``).

Against LAMMPS on the reference data files (``tests/data/lammps/in.fshift_*``): forces atom by
atom and step-0 energy and pressure to 1e-12, 200 NVE steps to 1e-9 (errors printed); one and
several types, 1 and 2 slabs; the emulated CUDA C kernel equals the CPU bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.backends.cpu import md_forces
from simsplit.md import MDSolver
from simsplit.md.schema import check_md_case, fill_md_defaults
from tests.test_md_kernels_compile import emulated, emulated_lib  # noqa: F401
from tests.test_md_lammps_reference import (
    DATA,
    assert_thermo_matches,
    data_file_case,
    lammps_dump,
    lammps_thermo,
)

KA = [{"types": [1, 1], "epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5},
      {"types": [1, 2], "epsilon": 1.5, "sigma": 0.8, "cutoff": 2.0},
      {"types": [2, 2], "epsilon": 0.5, "sigma": 0.88, "cutoff": 2.2}]

RUNS = {"onetype": ("data.onetype", {}),
        "binary": ("data.binary_equal_mass", {"pair_coeffs": KA})}


def _case(run: str, subdomains: int = 1) -> dict:
    data, extra = RUNS[run]
    return data_file_case(DATA / data, subdomains, potential={"cutoff": 2.5, "shift": "force"},
                          **extra)


def test_the_pair_force_and_energy_vanish_at_the_cutoff() -> None:
    rc = 2.5
    sr6 = (1.0 / rc) ** 6
    e_rc, f_rc = 4.0 * sr6 * (sr6 - 1.0), 24.0 * sr6 * (2.0 * sr6 - 1.0) / rc
    for r in (rc * (1 - 1e-9), 1.1, 2.0):
        _, fpair, e = md_forces._lj_pair_fshift.py_func(r, 0.0, 0.0, rc * rc, 4.0, 24.0, 1.0,
                                                     e_rc, f_rc, rc)
        lj_f = 24.0 * r ** -7 * (2.0 * r ** -6 - 1.0)
        lj_e = 4.0 * r ** -6 * (r ** -6 - 1.0)
        assert fpair * r == pytest.approx(lj_f - f_rc, abs=1e-14)
        assert e == pytest.approx(lj_e - e_rc + (r - rc) * f_rc, abs=1e-14)
    near = md_forces._lj_pair_fshift.py_func(rc * (1 - 1e-9), 0.0, 0.0, rc * rc, 4.0, 24.0, 1.0,
                                          e_rc, f_rc, rc)
    assert abs(near[1] * rc) < 1e-8 and abs(near[2]) < 1e-15


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("subdomains", [1, 2])
def test_matches_lammps_lj_smooth_linear(run: str, subdomains: int) -> None:
    ref = lammps_thermo(DATA / f"log.fshift_{run}")
    assert [r["step"] for r in ref] == [0, 50, 100, 150, 200]
    solver = MDSolver(_case(run, subdomains))
    f_ref = lammps_dump(DATA / f"dump.fshift_{run}")[0]
    f = np.stack([f_ref["fx"], f_ref["fy"], f_ref["fz"]], axis=1)
    err = np.abs(solver.forces() - f).max() / np.abs(f).max()
    first = solver.thermo()[0]
    rel = {k: abs(first[k] - ref[0][k]) / abs(ref[0][k]) for k in ("pe", "press")}
    print(f"\n{run}, {subdomains} slab(s), step 0 vs LAMMPS lj/smooth/linear: forces {err:.1e} "
          f"of the largest, PE {rel['pe']:.1e}, pressure {rel['press']:.1e}")
    assert err < 1e-12 and max(rel.values()) < 1e-12
    solver.step(200)
    assert_thermo_matches(solver, ref, ("pe", "press", "temp", "etotal"))


def test_split_identity_and_emulated_cuda_c(emulated) -> None:  # noqa: F811
    one = MDSolver(_case("binary"))
    one.step(200)
    for solver in (MDSolver(_case("binary", 2)), MDSolver(_case("binary", 1), "emulated"),
                   MDSolver(_case("binary", 2), "emulated")):
        solver.step(200)
        assert np.array_equal(solver.positions(), one.positions())
        assert np.array_equal(solver.velocities(), one.velocities())
        assert solver.thermo() == one.thermo()


def test_force_shift_with_tail_is_refused_naming_the_key() -> None:
    case = fill_md_defaults(_case("onetype"))
    case["md"]["potential"]["tail"] = True
    with pytest.raises(ValueError, match=r"^md\.potential\.tail: "):
        check_md_case(case)
