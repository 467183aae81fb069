"""LJ forces, per-atom energy and virial against a brute-force oracle; LAMMPS step 0."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
import yaml

from simsplit.backends.cpu import md as kernels
from simsplit.md import MDSolver
from simsplit.md.lattice import fcc_lattice
from simsplit.md.reference import lj_case, lj_oracle


def _jittered(cells, seed):
    pos, box = fcc_lattice(0.8442, cells)
    rng = np.random.default_rng(seed)
    return pos + rng.uniform(-0.25, 0.25, pos.shape), box


def _random_gas(n, box, dmin, seed):
    rng = np.random.default_rng(seed)
    pts = np.empty((0, 3))
    while len(pts) < n:
        p = rng.uniform(0, box)
        d = pts - p
        d -= box * np.round(d / box)
        if len(pts) == 0 or np.einsum("ij,ij->i", d, d).min() > dmin * dmin:
            pts = np.vstack([pts, p])
    return pts


def _solver_on(tmp_path, pos, box, subdomains=1, skin=0.3):
    path = tmp_path / f"conf{subdomains}.h5"
    with h5py.File(path, "w") as f:
        f["positions"] = pos
        f["box"] = box
    case = lj_case(subdomains=subdomains, neighbor={"skin": skin, "capacity": 8})
    del case["md"]["lattice"]
    case["md"]["init_file"] = str(path)
    return MDSolver(case)


def _configs():
    yield _jittered((5, 5, 6), 1)
    yield _jittered((6, 5, 7), 2)
    box = np.array([7.0, 6.5, 10.0])
    yield _random_gas(300, box, 0.85, 3), box


@pytest.mark.parametrize("k", range(3))
@pytest.mark.parametrize("subdomains", [1, 3])
def test_forces_match_bruteforce(tmp_path, k, subdomains):
    pos, box = list(_configs())[k]
    s = _solver_on(tmp_path, pos, box, subdomains)
    f_ref, pe_ref, vir_ref = lj_oracle(pos % box, box, 2.5)
    scale = np.abs(f_ref).max()
    assert np.abs(s.forces() - f_ref).max() <= 1e-12 * scale
    assert np.abs(s.per_atom_energy() - pe_ref).max() <= 1e-12 * np.abs(pe_ref).max()
    assert np.abs(s.per_atom_virial() - vir_ref).max() <= 1e-12 * np.abs(vir_ref).max()
    assert math.isclose(math.fsum(s.per_atom_energy()), math.fsum(pe_ref), rel_tol=1e-12)
    assert math.isclose(math.fsum(s.per_atom_virial()), math.fsum(vir_ref), rel_tol=1e-12)
    # capacity 8 is far too small: the list must have grown and rebuilt
    assert s.stats()["capacity_growths"] >= 1
    assert s.stats()["neighbor_capacity"] > 8


def test_lammps_bench_step0(request):
    """LAMMPS bench/in.lj, step 0: E_pair -6.7733681, Press -5.0197073 (T is exact)."""
    case = yaml.safe_load((request.config.rootpath / "cases" / "lj_liquid.yaml").read_text())
    s = MDSolver(case)
    th = s.thermo()[0]
    assert s.n_atoms == 32000
    assert th["step"] == 0
    assert abs(th["temp"] - 1.44) < 1e-12
    assert abs(th["pe"] - -6.7733681) < 1e-6
    assert abs(th["press"] - -5.0197073) < 1e-5
    assert abs(th["etotal"] - (th["pe"] + th["ke"])) < 1e-12


def test_counter_normals_statistics_and_keys():
    ids = np.arange(200_000, dtype=np.int64)
    g = kernels.normals_table(5, 17, ids)
    assert abs(g.mean()) < 0.01 and abs(g.std() - 1.0) < 0.01
    assert abs(np.corrcoef(g[:, 0], g[:, 1])[0, 1]) < 0.01
    assert np.array_equal(g[1234], kernels.normals_table(5, 17, ids[1234:1235])[0])
    assert not np.array_equal(g, kernels.normals_table(5, 18, ids))
    assert not np.array_equal(g, kernels.normals_table(6, 17, ids))
