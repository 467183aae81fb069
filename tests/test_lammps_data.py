"""LAMMPS data files (atom_style atomic) as MD input: what is read, one-line errors naming the
line of a malformed file, the refusal of types the force kernels cannot run yet (exit 2), and a
file with two physically identical types running exactly like its one-type twin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simsplit.io.lammps_data import LammpsDataError, read_lammps_data, write_lammps_data
from simsplit.md import MDSolver
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "lammps"

GOOD = """\
LAMMPS data file # a comment on the title line is part of the title

3 atoms   # three
2 atom types
0 bonds

-1.0 5.0 xlo xhi
0.0 6.0 ylo yhi
0.5 7.5 zlo zhi
0 0 0 xy xz yz

Masses

1 1.5
2 1.5

Atoms # atomic

7 2 0.5 1.0 1.5 0 1 -1
3 1 4.5 5.0 6.5
5 1 0.0 0.0 1.0 2 0 0

Velocities

5 0.1 0.2 0.3
3 -1 -2 -3
7 1e-1 0 0
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "data.test"
    path.write_text(text)
    return path


def test_reads_counts_box_types_images_and_velocities_sorted_by_id(tmp_path: Path) -> None:
    s = read_lammps_data(_write(tmp_path, GOOD))
    assert s.ids.tolist() == [3, 5, 7]
    assert s.typeid.tolist() == [0, 0, 1] and s.type_names == ["1", "2"]
    assert s.masses.tolist() == [1.5, 1.5]
    np.testing.assert_array_equal(s.origin, [-1.0, 0.0, 0.5])
    np.testing.assert_array_equal(s.box, [6.0, 6.0, 7.0])
    np.testing.assert_array_equal(s.positions[2], [1.5, 1.0, 1.0])  # relative to the corner
    assert s.images.tolist() == [[0, 0, 0], [2, 0, 0], [0, 1, -1]]
    np.testing.assert_array_equal(s.unwrapped()[1], [1.0 + 12.0, 0.0, 0.5])
    np.testing.assert_array_equal(s.velocities, [[-1, -2, -3], [0.1, 0.2, 0.3], [0.1, 0, 0]])


def test_write_then_read_gives_the_same_system(tmp_path: Path) -> None:
    s = read_lammps_data(_write(tmp_path, GOOD))
    s.type_names = ["A", "B"]
    write_lammps_data(tmp_path / "data.again", s)
    t = read_lammps_data(tmp_path / "data.again")
    for name in ("positions", "box", "origin", "typeid", "ids", "images", "masses",
                 "velocities"):
        np.testing.assert_array_equal(getattr(t, name), getattr(s, name), err_msg=name)
    assert t.type_names == ["A", "B"]


def test_atom_type_labels_name_types_and_may_stand_in_atoms(tmp_path: Path) -> None:
    text = GOOD.replace("Atoms # atomic", "Atom Type Labels\n\n1 Ar\n2 Kr\n\nAtoms # atomic")
    s = read_lammps_data(_write(tmp_path, text.replace("7 2 0.5", "7 Kr 0.5")))
    assert s.type_names == ["Ar", "Kr"] and s.typeid.tolist() == [0, 0, 1]


def test_reads_the_lammps_written_reference_file() -> None:
    s = read_lammps_data(DATA / "data.binary")
    assert s.n_atoms == 500 and s.n_types == 2
    assert int((s.typeid == 1).sum()) == 100  # set type 1 type/subset 2 100
    assert s.masses.tolist() == [1.0, 0.5]
    assert s.velocities is not None and s.ids.tolist() == list(range(1, 501))
    assert np.abs(s.images).max() >= 1  # write_data kept the image flags


BAD = [
    ("0 bonds", "3 bonds", "line 5: 3 bonds: atom_style atomic has none"),
    ("0 0 0 xy xz yz", "0.5 0 0 xy xz yz", "line 10: triclinic box"),
    ("Atoms # atomic", "Atoms # full", "line 17: Atoms section of atom_style 'full'"),
    ("3 1 4.5 5.0 6.5", "3 1 4.5 5.0", "line 20: Atoms: expected 'id type x y z'"),
    ("3 1 4.5 5.0 6.5", "3 3 4.5 5.0 6.5", "line 20: Atoms: atom 3 has type 3, the header has "
                                           "types 1 to 2"),
    ("3 1 4.5 5.0 6.5", "3 1 4.5 five 6.5", "line 20: Atoms: cannot read"),
    ("3 1 4.5 5.0 6.5", "7 1 4.5 5.0 6.5", "atom id 7 appears twice"),
    ("5 1 0.0 0.0 1.0 2 0 0\n", "", "line 17: section 'Atoms' has 2 entries, the header "
                                    "asks for 3"),
    ("5 0.1 0.2 0.3", "9 0.1 0.2 0.3", "line 25: Velocities: atom 9 is not in the Atoms section"),
    ("2 1.5\n", "2 -1\n", "line 15: Masses: mass '-1' must be a positive number"),
    ("0.0 6.0 ylo yhi\n", "", "no 'ylo yhi' line in the header"),
    ("0.0 6.0 ylo yhi\n", "6.0 0.0 ylo yhi\n", "line 8: box bounds ylo yhi: 6.0 0.0 must have"),
    ("Velocities", "Bonds", "line 23: section 'Bonds' is not supported: atom_style atomic"),
    ("0 bonds", "0 widgets", "line 5: unknown header line '0 widgets'"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD)
def test_a_malformed_file_is_one_line_naming_its_line(tmp_path: Path, old: str, new: str,
                                                      message: str) -> None:
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(LammpsDataError) as err:
        read_lammps_data(path)
    text = str(err.value)
    assert "\n" not in text and str(path) in text
    assert message in text, text


def _case(path: Path, **md: object) -> dict:
    return {"physics": "md",
            "md": {"init_file": str(path), "potential": {"shift": True}, "thermo_every": 10,
                   **md},
            "run": {"backend": "cpu", "steps": 20}, "output": {"dir": None}}


def _two_type_copy(tmp_path: Path, mass2: float, coeffs: str = "") -> Path:
    """data.onetype with every third atom relabelled type 2 (of mass ``mass2``)."""
    s = read_lammps_data(DATA / "data.onetype")
    s.typeid = (np.arange(s.n_atoms) % 3 == 0).astype(np.int32)
    s.type_names = ["1", "2"]
    s.masses = np.array([1.0, mass2])
    path = tmp_path / "two.data"
    write_lammps_data(path, s)
    if coeffs:
        path.write_text(path.read_text().replace("\nAtoms # atomic", coeffs + "\nAtoms # atomic"))
    return path


def test_types_that_differ_in_mass_run_under_langevin(tmp_path: Path, run_cli) -> None:
    """A data file whose types differ in mass runs under Langevin (drag and noise per type,
    tests/test_md_masses.py) through the command line: no refusal, the run's report written."""
    path = _two_type_copy(tmp_path, 0.5)
    (tmp_path / "case.yaml").write_text(
        f"physics: md\nmd:\n  init_file: {path}\n  ensemble: langevin\n"
        f"run: {{steps: 5, backend: cpu}}\noutput: {{dir: out}}\n")
    res = run_cli("run", "case.yaml")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "run.json").exists()


def test_identical_types_run_like_one_type(tmp_path: Path) -> None:
    """Two types of equal mass and matching Pair Coeffs: the same trajectory bit for bit as
    the one-type file, with the type ids kept."""
    coeffs = "\nPair Coeffs # lj/cut\n\n1 1 1\n2 1 1\n"
    two = MDSolver(_case(_two_type_copy(tmp_path, 1.0, coeffs)))
    one = MDSolver(_case(DATA / "data.onetype"))
    for solver in (one, two):
        solver.step(20)
    np.testing.assert_array_equal(two.positions(), one.positions())
    assert two.thermo() == one.thermo()
    from simsplit.md.systems import atom_types

    typeid, names = atom_types(two.case["md"], two.n_atoms)
    assert names == ["1", "2"] and typeid.sum() == len(range(0, two.n_atoms, 3))


def test_md_mass_contradicting_the_file_and_the_file_pair_coeffs(tmp_path: Path) -> None:
    from simsplit.case.loader import validate_case
    from simsplit.errors import CaseError

    with pytest.raises(CaseError, match=r"md.mass: 2 differs from the mass 1 in .*data.onetype"):
        validate_case(_case(DATA / "data.onetype", mass=2))
    # the file's Pair Coeffs win over md.potential; unlike pairs not given are mixed, and a
    # per-pair cutoff not given is md.potential.cutoff
    path = _two_type_copy(tmp_path, 1.0, "\nPairIJ Coeffs\n\n1 1 1 1 2.5\n1 2 1.5 0.8\n"
                                         "2 2 0.5 0.88 3.0\n")
    validate_case(_case(path))
    s = MDSolver(_case(path))
    assert s.typed and s.cutoff == 3.0
    assert s.pairs.epsilon[0, 1] == 1.5 and s.pairs.cutoff[0, 1] == 2.5
    assert s.pairs.sigma[1, 1] == 0.88


def test_the_file_mass_is_the_run_mass(tmp_path: Path) -> None:
    s = read_lammps_data(DATA / "data.onetype")
    s.masses = np.array([2.0])
    write_lammps_data(tmp_path / "heavy.data", s)
    solver = MDSolver(_case(tmp_path / "heavy.data"))
    assert solver.mass == 2.0
    # kinetic energy per atom is m v^2 / 2 with the file's mass
    ke = 0.5 * 2.0 * (s.velocities ** 2).sum() / s.n_atoms
    assert solver.thermo()[0]["ke"] == pytest.approx(ke, rel=1e-12)


@pytest.mark.parametrize(("init_file", "message"), [
    ("missing.data", "md.init_file: 'missing.data' not found"),
    ("missing.xyz", "md.init_file: 'missing.xyz' not found"),
    (".", "md.init_file: '.' is a directory, expected a file"),
    ("case.yaml", "md.init_file: unknown file type '.yaml' (use .xyz, .h5, .hdf5, .gsd, .h5md, "
                  "or a LAMMPS data file"),
    ("bad.data", "bad.data line 3: unknown header line '3 widgets'"),
])
def test_an_init_file_that_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path, run_cli,
                                                                 init_file: str,
                                                                 message: str) -> None:
    (tmp_path / "bad.data").write_text("title\n\n3 widgets\n")
    (tmp_path / "case.yaml").write_text(
        f"physics: md\nmd:\n  init_file: {init_file}\n  box: [9, 9, 9]\n"
        "run: {steps: 5, backend: cpu}\n")
    for command in ("validate", "run"):
        res = run_cli(command, "case.yaml")
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
        assert message in res.stderr, res.stderr


def test_a_file_rewritten_at_once_with_the_same_size_is_read_again(tmp_path: Path) -> None:
    from simsplit.md.schema import fill_md_defaults

    path = _write(tmp_path, GOOD)
    assert fill_md_defaults(_case(path))["md"]["mass"] == 1.5
    path.write_text(GOOD.replace("1 1.5\n2 1.5", "1 2.5\n2 2.5"))  # same size, same mtime tick
    assert fill_md_defaults(_case(path))["md"]["mass"] == 2.5
