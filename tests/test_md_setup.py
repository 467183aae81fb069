"""MD initial conditions: fcc lattice, file readers, Maxwell-Boltzmann velocities, schema."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import yaml
from jsonschema import Draft202012Validator

from simsplit.md import MD_SCHEMA, MDSolver, check_md_case, fill_md_defaults
from simsplit.md.lattice import fcc_lattice, read_positions
from simsplit.md.reference import lj_case
from simsplit.md.velocities import maxwell_boltzmann, temperature


def test_fcc_matches_lammps_convention():
    pos, box = fcc_lattice(0.8442, [2, 3, 4])
    a = (4 / 0.8442) ** (1 / 3)
    assert pos.shape == (4 * 24, 3)
    np.testing.assert_allclose(box, [2 * a, 3 * a, 4 * a])
    np.testing.assert_allclose(pos[:4] / a, [[0, 0, 0], [.5, .5, 0], [.5, 0, .5], [0, .5, .5]])
    assert np.isclose(pos.shape[0] / np.prod(box), 0.8442)
    # all distinct, nearest neighbour distance a / sqrt(2)
    d = pos[:, None] - pos[None]
    d -= box * np.round(d / box)
    r = np.sqrt((d**2).sum(-1)) + np.eye(len(pos)) * 1e9
    assert np.isclose(r.min(), a / np.sqrt(2))


def test_maxwell_boltzmann_exact_temperature_and_momentum():
    v = maxwell_boltzmann(1000, 2.0, 1.44, seed=7)
    assert abs(temperature(v, 2.0) - 1.44) < 1e-14
    assert np.abs(v.sum(axis=0)).max() < 1e-12
    assert np.array_equal(v, maxwell_boltzmann(1000, 2.0, 1.44, seed=7))
    assert not np.array_equal(v, maxwell_boltzmann(1000, 2.0, 1.44, seed=8))


def test_readers_and_solver_from_files(tmp_path):
    pos, box = fcc_lattice(0.8442, [4, 4, 4])
    h5 = tmp_path / "init.h5"
    with h5py.File(h5, "w") as f:
        f["positions"] = pos
        f["box"] = box
    xyz = tmp_path / "init.xyz"
    lat = " ".join(repr(float(v)) for v in np.diag(box).ravel())
    lines = [str(len(pos)), f'Lattice="{lat}" Properties=species:S:1:pos:R:3']
    lines += [f"Ar {float(x)!r} {float(y)!r} {float(z)!r}" for x, y, z in pos]
    xyz.write_text("\n".join(lines) + "\n")
    for path in (h5, xyz):
        p, b, _ = read_positions(path)
        assert np.array_equal(p, pos) and np.array_equal(b, box)
    ref = MDSolver(lj_case())
    for path in (h5, xyz):
        case = lj_case()
        del case["md"]["lattice"]
        case["md"]["init_file"] = str(path)
        s = MDSolver(case)
        assert np.array_equal(s.positions(), ref.positions())
        assert s.thermo()[0] == ref.thermo()[0]
    bare = tmp_path / "bare.xyz"
    bare.write_text("\n".join([lines[0], "no box"] + lines[2:]) + "\n")
    case = lj_case()
    del case["md"]["lattice"]
    case["md"]["init_file"] = str(bare)
    with pytest.raises(ValueError, match="md.box"):
        MDSolver(case)
    case["md"]["box"] = box.tolist()
    assert MDSolver(case).n_atoms == len(pos)


def test_schema_is_valid_and_cases_pass(request):
    Draft202012Validator.check_schema(MD_SCHEMA)
    validator = Draft202012Validator(MD_SCHEMA)
    root = request.config.rootpath
    for name in ("lj_liquid", "lj_tiny"):
        case = yaml.safe_load((root / "cases" / f"{name}.yaml").read_text())
        validator.validate(case["md"])
        check_md_case(fill_md_defaults(case))
    for key, sub in MD_SCHEMA["properties"].items():
        assert "description" in sub, key
    assert MD_SCHEMA["additionalProperties"] is False
    errors = list(validator.iter_errors({"lattice": {"density": 1, "cells": [4, 4, 4]},
                                         "bogus": 1}))
    assert errors


@pytest.mark.parametrize("change, match", [
    ({"lattice": {"density": 0.8442, "cells": [3, 4, 4]}}, "2 \\* \\(cutoff \\+ skin\\)"),
    ({"init_file": "x.xyz"}, "exactly one"),
])
def test_bad_cases_rejected(change, match):
    case = lj_case()
    case["md"].update(change)
    with pytest.raises(ValueError, match=match):
        MDSolver(case)


def test_thin_slabs_rejected():
    with pytest.raises(ValueError, match="cutoff \\+ skin"):
        MDSolver(lj_case(cells=(4, 4, 4), subdomains=3))
    with pytest.raises(ValueError, match="cutoff \\+ skin"):
        MDSolver(lj_case(cells=(4, 4, 9), subdomains=2, weights=[1.0, 5.0]))
