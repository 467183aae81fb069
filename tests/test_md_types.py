"""Several atom types: pair coefficients per type pair (``md.pair_coeffs``), mixing rules,
types on lattice sites (``md.lattice.fractions``), tail corrections of a mixture.

Against LAMMPS (22 Jul 2025) on the same two-type data file with Kob-Andersen coefficients
(tests/data/lammps/in.nve_binary_equal_mass*: equal masses, which is what the integrator takes
so far), and bitwise the same on every split and on the emulated CUDA C device path.
"""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.md import MDSolver
from simsplit.md.pair_table import build_pair_table
from simsplit.md.reference import lj_case
from tests.test_md_kernels_compile import emulated, emulated_lib  # noqa: F401
from tests.test_md_lammps_reference import (
    DATA,
    assert_thermo_matches,
    data_file_case,
    lammps_thermo,
)

KOB_ANDERSEN = [
    {"types": [1, 1], "epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5},
    {"types": [1, 2], "epsilon": 1.5, "sigma": 0.8, "cutoff": 2.0},
    {"types": [2, 2], "epsilon": 0.5, "sigma": 0.88, "cutoff": 2.2},
]


@pytest.mark.parametrize("tail", [False, True])
@pytest.mark.parametrize("subdomains", [1, 2])
def test_kob_andersen_data_file_matches_lammps(subdomains: int, tail: bool) -> None:
    log = "log.nve_binary_equal_mass" + ("_tail" if tail else "")
    s = MDSolver(data_file_case(DATA / "data.binary_equal_mass", subdomains,
                                potential={"shift": not tail, "tail": tail},
                                pair_coeffs=KOB_ANDERSEN))
    assert s.typed and s.cutoff == 2.5
    s.step(200)
    assert_thermo_matches(s, lammps_thermo(DATA / log), ("pe", "press", "temp", "etotal"))


def _ka_case(subdomains: int = 1):
    case = lj_case(cells=(5, 5, 9), density=1.2, temperature=1.0, subdomains=subdomains,
                   pair_coeffs=KOB_ANDERSEN, potential={"shift": True, "cutoff": 2.5})
    case["md"]["lattice"]["fractions"] = [0.8, 0.2]
    return case


def test_kob_andersen_lattice_split_and_device_bitwise(emulated) -> None:  # noqa: F811
    """80:20 on fcc sites: 1, 3 slabs on the CPU, one emulated GPU slab and 2, 3 slabs in one
    emulated GPU arena all give the one-slab bits (the device lists carry each neighbour's
    type above bit 30)."""
    one = MDSolver(_ka_case())
    counts = np.bincount(one.atom_type)
    assert counts.tolist() == [720, 180] and one.typed
    one.step(150)
    for backend, n in (("cpu", 3), ("emulated", 1), ("emulated", 2), ("emulated", 3)):
        s = MDSolver(_ka_case(n), backend)
        s.step(150)
        assert s.slabs[0].type_shift == (30 if backend == "emulated" else 0)
        assert np.array_equal(s.positions(), one.positions()), (backend, n)
        assert np.array_equal(s.forces(), one.forces()), (backend, n)
        assert s.thermo() == one.thermo(), (backend, n)


#: a third type for the kernels' general path (coefficients gathered by index)
THIRD_TYPE = [{"types": [1, 3], "epsilon": 1.2, "sigma": 0.9, "cutoff": 2.3},
              {"types": [2, 3], "epsilon": 0.7, "sigma": 0.85, "cutoff": 2.1},
              {"types": [3, 3], "epsilon": 0.9, "sigma": 0.95, "cutoff": 2.4}]


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize(("shift", "ntypes"), [(True, 2), ("force", 2), (True, 3),
                                               ("force", 3), ("force", 1)])
def test_typed_parallel_forces_match_serial(monkeypatch, precision, shift, ntypes) -> None:
    """The staged, vectorised typed force kernel (energy- and force-shifted; two types by
    selects, one and three by gathers; Langevin so the atoms move far) on 2 slabs, threaded
    and on one thread, gives the one-loop reference kernel's bits."""
    from simsplit.backends.cpu import md as kernels
    from simsplit.backends.cpu import md_forces
    from tests.test_md_split import use_reference_kernels

    def run():
        case = _ka_case(2)
        case["md"]["potential"]["shift"] = shift
        if ntypes == 1:
            del case["md"]["pair_coeffs"], case["md"]["lattice"]["fractions"]
        if ntypes == 3:
            case["md"]["pair_coeffs"] = KOB_ANDERSEN + THIRD_TYPE
            case["md"]["lattice"]["fractions"] = [0.6, 0.2, 0.2]
        case["md"].update(ensemble="langevin", langevin={"temperature": 1.5, "damping": 0.5})
        case.setdefault("run", {})["precision"] = precision
        s = MDSolver(case)
        assert s.typed and s.pairs.ntypes == ntypes
        s.step(150)
        return s

    calls = []

    def counted(kernel):
        def call(*args):
            calls.append((kernel.__name__, args[8]))
            return kernel(*args)
        return call

    with monkeypatch.context() as m:
        use_reference_kernels(m)
        serial = run()
    monkeypatch.setattr(md_forces, "lj_typed_forces_staged",
                        counted(md_forces.lj_typed_forces_staged))
    staged = run()
    monkeypatch.setattr(kernels, "PARALLEL_MIN_ATOMS", 0)
    monkeypatch.setattr(md_forces, "lj_typed_forces_parallel",
                        counted(md_forces.lj_typed_forces_parallel))
    parallel = run()
    assert set(calls) == {("lj_typed_forces_staged", shift == "force"),
                          ("lj_typed_forces_parallel", shift == "force")}
    for s in (staged, parallel):
        assert np.array_equal(s.positions(), serial.positions())
        assert np.array_equal(s.velocities(), serial.velocities())
        assert s.thermo() == serial.thermo()


@pytest.mark.parametrize("backend", ["emulated", "cpu", "cpu-threads", "cpu-reference"])
def test_typed_lists_keep_each_pair_within_its_own_cutoff(request, monkeypatch,
                                                          backend) -> None:
    """A typed list (device; CPU staged on one thread, threaded, and the one-loop reference
    build) holds exactly the pairs within (rc_ij + skin), as LAMMPS' per-type-pair list
    cutoffs: Kob-Andersen's A-B pairs reach 2.3, not 2.8."""
    from simsplit.backends.cpu import md as kernels
    from tests.test_md_split import use_reference_kernels

    if backend == "emulated":
        request.getfixturevalue("emulated")
    if backend == "cpu-threads":
        monkeypatch.setattr(kernels, "PARALLEL_MIN_ATOMS", 0)
    if backend == "cpu-reference":
        use_reference_kernels(monkeypatch)
    s = MDSolver(_ka_case(), "emulated" if backend == "emulated" else "cpu")
    g, k = s.slabs[0], s.kernels
    nl, cnt = k.to_host(g.nl), k.to_host(g.cnt)
    ids, x = s.slab_ids(g), s.positions()
    typ = s.atom_type
    cut = s.pairs.list_cutsq(s.skin).reshape(2, 2)
    if backend == "emulated":  # nl[k, i], each entry's type above the row's bits
        mask = (1 << g.type_shift) - 1
        rows = [nl[: cnt[r], r] & mask for r in range(g.n_own)]
    else:
        rows = [nl[r, : cnt[r]] for r in range(g.n_own)]
    fewer = 0
    for r in range(g.n_own):
        i = int(ids[r])
        d = x - x[i]
        d -= s.box * np.round(d / s.box)
        r2 = (d * d).sum(axis=1)
        near = r2 < s.reach * s.reach
        want = near & (r2 < cut[typ[i], typ])
        want[i] = False
        got = ids[rows[r]]
        assert sorted(got.tolist()) == np.flatnonzero(want).tolist(), i
        fewer += int(near.sum()) - 1 - int(want.sum())
    assert fewer > 0.1 * cnt.sum()  # the A-B pairs between 2.3 and 2.8 are left out


def test_mixing_rules() -> None:
    md = {"potential": {"epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5, "mixing": "geometric"},
          "pair_coeffs": [{"types": ["2", "2"], "epsilon": 0.25, "sigma": 2.0,
                           "cutoff": 4.0}]}
    geo = build_pair_table(md, ["1", "2"])
    assert geo.epsilon[0, 1] == 0.5 and geo.sigma[0, 1] == 2 ** 0.5
    assert geo.cutoff[1, 0] == 10 ** 0.5 and geo.max_cutoff == 4.0
    md["potential"]["mixing"] = "arithmetic"
    ari = build_pair_table(md, ["1", "2"])
    assert ari.epsilon[0, 1] == 0.5 and ari.sigma[0, 1] == 1.5 and ari.cutoff[0, 1] == 3.25
    md["pair_coeffs"].append({"types": [1, 3], "epsilon": 1.0, "sigma": 1.0})
    with pytest.raises(ValueError, match=r"md.pair_coeffs\[1\].types: no atom type '3'; the "
                                         r"types are 1, 2"):
        build_pair_table(md, ["1", "2"])


def test_identical_types_take_the_one_pair_kernel() -> None:
    """Two types with the same coefficients (mixed or given) run the untyped kernel, with the
    bits of one type."""
    a = lj_case(cells=(4, 4, 4))
    b = lj_case(cells=(4, 4, 4), pair_coeffs=[{"types": [1, 2], "epsilon": 1.0, "sigma": 1.0}])
    b["md"]["lattice"]["fractions"] = [0.5, 0.5]
    sa, sb = MDSolver(a), MDSolver(b)
    assert not sb.typed and sorted(set(sb.atom_type.tolist())) == [0, 1]
    for s in (sa, sb):
        s.step(50)
    assert np.array_equal(sa.positions(), sb.positions())


def test_wca_is_lj_cut_at_the_minimum_shifted() -> None:
    """The wca style equals lj/cut with cutoff 2^(1/6) sigma and the energy shift, bit for bit,
    and is purely repulsive (every atom's energy >= 0, pressure above the ideal gas's)."""
    rc = 2.0 ** (1.0 / 6.0)
    wca = MDSolver(lj_case(cells=(5, 5, 5), potential={"style": "wca", "cutoff": 2.5}))
    cut = MDSolver(lj_case(cells=(5, 5, 5), potential={"cutoff": rc, "shift": True}))
    assert wca.cutoff == rc
    for s in (wca, cut):
        s.step(100)
    assert np.array_equal(wca.positions(), cut.positions())
    assert wca.thermo() == cut.thermo()
    assert wca.per_atom_energy().min() >= 0.0
    rec = wca.thermo()[-1]
    assert rec["press"] > 0.8442 * rec["temp"]


@pytest.mark.parametrize(("coeffs", "message"), [
    ("[{types: [1, 3], epsilon: 1.0, sigma: 1.0}]",
     "md.pair_coeffs[0].types: no atom type '3'; the types are 1, 2"),
    ("[{types: [1, 2], epsilon: 1.0, sigma: 1.0, cutoff: 0.5}]",
     "md.pair_coeffs: the cutoff 0.5 of types 1-2 is below their sigma 1"),
])
def test_bad_pair_coeffs_are_one_line_and_exit_2(tmp_path, run_cli, coeffs, message) -> None:
    (tmp_path / "case.yaml").write_text(
        "physics: md\nmd:\n  lattice: {density: 0.8442, cells: [5, 5, 5], "
        f"fractions: [0.5, 0.5]}}\n  pair_coeffs: {coeffs}\n"
        "run: {steps: 5, backend: cpu}\noutput: {dir: out}\n")
    for command in ("validate", "run"):
        res = run_cli(command, "case.yaml")
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
        assert message in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


def test_the_largest_pair_cutoff_sets_the_box_check() -> None:
    from simsplit.case.loader import validate_case
    from simsplit.errors import CaseError

    case = lj_case(cells=(4, 4, 4), pair_coeffs=[{"types": [1, 2], "epsilon": 1.0,
                                                  "sigma": 1.0, "cutoff": 3.5}])
    case["md"]["lattice"]["fractions"] = [0.5, 0.5]
    with pytest.raises(CaseError, match=r"md.lattice.cells: 4 cells along x .* shorter than "
                                        r"2 \* \(cutoff \+ skin\) = 7.6"):
        validate_case(case)
