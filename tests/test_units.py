"""Physical units at the front door (fluid.physical), 3D inflow profiles from a file and 3D
probes (issue #21)."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from simsplit import Simulation
from simsplit.case import load_case, validate_case
from simsplit.errors import CaseError
from tests.conftest import body_case, body_case_3d

ROOT = Path(__file__).resolve().parents[1]
PHYSICAL = ROOT / "cases" / "cylinder2d_physical.yaml"


def _physical_case(**physical) -> dict:
    """A 2D channel of 4 x 1 (64 x 16 cells, dx = 1/16 exactly) with fluid.physical."""
    case = body_case(64, 16)
    case["fluid"] = {"collision": "trt", "physical": {"velocity": 2.0, **physical}}
    case["domain"].update(size=[4.0, 1.0], units="physical")
    del case["domain"]["inlet"]["velocity"]
    case["domain"]["bodies"][0].update(centre=[1.0, 0.48], radius=1.0 / 6)
    return case


@pytest.mark.parametrize("choice, value", [("lattice_velocity", 0.125),
                                           ("mach", 0.125 * math.sqrt(3)),
                                           ("time_step", 2.0 ** -8)])
def test_conversions_round_trip(choice: str, value: float) -> None:
    """Each lattice choice gives dx, dt, the lattice speed and viscosity of the same run
    (u = U dt / dx = 1/8, nu = 2^-5 m^2/s dt / dx^2 = 1/32); converting back returns the
    physical values; the chosen lattice speed enters the kernels unchanged."""
    from simsplit.fluid.setup import setup_from_case
    from simsplit.fluid.units import physical_units

    case = validate_case(_physical_case(viscosity=2.0 ** -5, **{choice: value}))
    units = physical_units(case)
    assert units.dx == 1 / 16
    assert units.dt == pytest.approx(2.0 ** -8, rel=1e-15)
    assert units.lattice_velocity == pytest.approx(0.125, rel=1e-15)
    assert units.lattice_viscosity == pytest.approx(1 / 32, rel=1e-15)
    assert units.to_physical_velocity(units.lattice_velocity) == pytest.approx(2.0, rel=1e-15)
    assert units.to_lattice_velocity(2.0) == pytest.approx(units.lattice_velocity, rel=1e-15)
    assert units.to_physical_viscosity(units.lattice_viscosity) == pytest.approx(2.0 ** -5,
                                                                                 rel=1e-15)
    assert units.mach == pytest.approx(0.125 * math.sqrt(3), rel=1e-15)
    setup = setup_from_case(case)
    assert setup.inlet.velocity == units.lattice_velocity
    assert setup.params.viscosity == pytest.approx(1 / 32, rel=1e-14)
    if choice == "lattice_velocity":  # exact in binary: the lattice twin's numbers
        assert (units.dt, units.lattice_velocity, units.lattice_viscosity) == (
            2.0 ** -8, 0.125, 1 / 32)
    # a density gives forces and pressures in physical units: rho dx^3 / dt^2 per lattice unit
    # of force per unit depth, c_s^2 (rho - 1) rho dx^2 / dt^2 for a pressure
    dense = physical_units(validate_case(_physical_case(viscosity=2.0 ** -5, density=1000.0,
                                                        **{choice: value})))
    assert dense.force_factor(2) == pytest.approx(1000 * 16.0 ** -3 * 2.0 ** 16, rel=1e-14)
    assert dense.gauge_pressure(1.03) == pytest.approx(0.01 * 1000 * 16.0 ** 2, rel=1e-12)


def test_physical_case_is_its_lattice_twin_bit_for_bit(tmp_path) -> None:
    """cases/cylinder2d_physical.yaml (SI units) runs the lattice run of cases/cylinder2d.yaml
    (lattice units, fluid.reynolds) bit for bit: the same kernel parameters, populations and
    forces; it reports dx, dt, tau, Mach and Reynolds numbers in the summary and run.json,
    and its velocities, probes and times in physical units."""
    from simsplit.run.report import summary_lines

    sims = []
    for path, out in ((PHYSICAL, "phys"), (ROOT / "cases" / "cylinder2d.yaml", "lat")):
        case = load_case(path, {"run.steps": 60, "output.dir": str(tmp_path / out),
                                "output.forces_every": 30, "output.plots": False,
                                "output.probes": [{"name": "wake", "point": [0.3, 0.2]}]})
        sim = Simulation(case)
        sims.append((sim, sim.run()))
    (phys, summary), (lat, _) = sims
    assert phys.solver.setup.params == lat.solver.setup.params
    assert phys.solver.setup.inlet == lat.solver.setup.inlet
    np.testing.assert_array_equal(phys.solver.populations(), lat.solver.populations())
    runs = [json.loads((tmp_path / out / "run.json").read_text()) for out in ("phys", "lat")]
    assert runs[0]["bodies"]["cylinder"]["force"] == runs[1]["bodies"]["cylinder"]["force"]
    assert (runs[0]["bodies"]["cylinder"]["drag_coefficient"]
            == runs[1]["bodies"]["cylinder"]["drag_coefficient"])
    units = runs[0]["units"]
    assert units["lattice"]["tau"] == pytest.approx(0.6, rel=1e-14)
    assert units["mach"] == pytest.approx(0.1 * math.sqrt(3), rel=1e-14)
    assert units["reynolds"] == pytest.approx(20, rel=1e-14)
    assert units["physical"]["dx"] == pytest.approx(0.01, rel=1e-15)
    assert units["physical"]["dt"] == pytest.approx(1 / 300, rel=1e-14)
    assert units["physical"]["viscosity"] == pytest.approx(1e-3, rel=1e-14)
    assert runs[1]["units"]["physical"] is None  # the lattice twin: no dx, dt
    assert runs[1]["units"]["lattice"] == units["lattice"]
    text = "\n".join(summary_lines(phys, summary))
    assert "physical     dx 0.01 m, dt 0.00333333 s; inflow max 0.3 m/s, mean 0.2 m/s" in text
    assert "60 steps = 0.2 s" in text and "(Mach 0.173)" in text
    # velocities in m/s: the lattice field times dx / dt
    factor = phys.solver.setup.physical.velocity_factor
    u_lat = lat.velocity()
    np.testing.assert_array_equal(phys.velocity(), u_lat / (1 / factor))
    wake = runs[0]["probes"]["wake"]
    i, j = wake["cell"]
    assert wake["velocity_x"] == u_lat[j, i, 0] and wake["time"] == pytest.approx(0.2)
    assert wake["velocity_physical"] == pytest.approx(list(u_lat[j, i] * factor), rel=1e-15)
    assert wake["pressure_physical"] == pytest.approx(
        (wake["density"] - 1) / 3 * 1.0 * factor ** 2, rel=1e-12)
    cyl = runs[0]["bodies"]["cylinder"]
    assert cyl["force_physical"] == pytest.approx(
        [f * 0.01 ** 3 * 300.0 ** 2 for f in cyl["force"]], rel=1e-12)
    with h5py.File(tmp_path / "phys" / "probes.h5") as h5:
        assert h5["time"][:] == pytest.approx([0.1, 0.2])
        assert h5["wake/velocity_physical"][-1] == pytest.approx(u_lat[j, i] * factor)
    with h5py.File(tmp_path / "phys" / "fields.h5") as h5:
        assert "m/s" in h5.attrs["velocity_unit"]


def _bad(case: dict, match: str) -> None:
    with pytest.raises(CaseError) as err:
        validate_case(case)
    assert "\n" not in str(err.value)
    text = str(err.value)
    assert match in text or re.search(match, text), text  # a plain text, else a pattern


@pytest.mark.parametrize("change, match", [
    ({"mach": 0.4}, "fluid.physical.mach: 0.4 is not allowed (Mach 0.4, tau 0.67321): "
                    "expected 0.011547 to 0.3 (Mach <= 0.3 and tau 0.505-2)"),
    ({"lattice_velocity": 0.001}, "fluid.physical.lattice_velocity: 0.001 is not allowed "
                                  "(Mach 0.00173, tau 0.50075): expected 0.00666667 to "
                                  "0.173205"),
    ({"time_step": 0.01}, "fluid.physical.time_step: 0.01 is not allowed (Mach 0.554, tau "
                          "0.74): expected 0.000208333 to 0.00541266 (Mach <= 0.3"),
    ({"viscosity": 3.0}, "fluid.physical.lattice_velocity: 0.125 is not allowed (Mach 0.217, "
                         "tau 9.5): expected 6.94444e-05 to 0.0208333"),
    ({"viscosity": 2e-7}, "fluid.physical.lattice_velocity: 0.125 is not allowed: no lattice "
                          "choice gives Mach <= 0.3 and tau 0.505-2 at dx = 0.0625"),
    ({"mach": 0.2, "time_step": 0.001}, "fluid.physical: give exactly one lattice choice of "
                                        "lattice_velocity, mach, time_step \\(given: mach, "
                                        "time_step\\)"),
])
def test_bad_physical_choices_are_one_line(change: dict, match: str) -> None:
    from simsplit.fluid.units import LATTICE_CHOICES

    chosen = any(k in change for k in LATTICE_CHOICES)
    physical = {"viscosity": 2.0 ** -5, **({} if chosen else {"lattice_velocity": 0.125}),
                **change}
    _bad(_physical_case(**physical), match)


def test_physical_units_conflicts_are_one_line() -> None:
    ok = _physical_case(viscosity=2.0 ** -5, lattice_velocity=0.125)
    cases = []
    c = copy.deepcopy(ok)
    del c["fluid"]["physical"]["lattice_velocity"]
    cases.append((c, r"given: none"))
    c = copy.deepcopy(ok)
    c["domain"]["inlet"]["velocity"] = 0.05
    cases.append((c, "domain.inlet.velocity: not with fluid.physical"))
    c = copy.deepcopy(ok)
    c["fluid"]["reynolds"] = 20
    cases.append((c, "fluid.reynolds: give exactly one of fluid.reynolds, fluid.viscosity "
                     "and fluid.physical.viscosity"))
    c = copy.deepcopy(ok)
    c["fluid"]["viscosity"] = 0.05
    del c["fluid"]["physical"]["viscosity"]
    cases.append((c, "fluid.viscosity: not with fluid.physical"))
    c = copy.deepcopy(ok)
    del c["domain"]["size"], c["domain"]["units"]
    c["domain"]["bodies"][0].update(centre=[16, 7.7], radius=2.7)
    cases.append((c, "fluid.physical: needs domain.size"))
    c = copy.deepcopy(ok)
    c["domain"]["inlet"] = {"profile": "file", "file": "x.npy"}
    cases.append((c, "domain.inlet.profile: file is not available with fluid.physical"))
    c = copy.deepcopy(ok)
    c["domain"] = {"shape": [16, 16], "size": [1, 1], "boundaries": {"lid": True}}
    cases.append((c, "fluid.physical: needs an inlet"))
    for case, match in cases:
        _bad(case, match)
    # fluid.reynolds with physical speeds: the lattice viscosity from Re, dx and dt reported
    c = copy.deepcopy(ok)
    del c["fluid"]["physical"]["viscosity"]
    c["fluid"]["reynolds"] = 20
    validate_case(c)
    c["fluid"]["physical"]["lattice_velocity"] = 0.001  # tau 0.5005 from Re = 20: refused
    _bad(c, "fluid.physical.lattice_velocity: 0.001 is not allowed (Mach 0.00173, tau "
            "0.50053): expected 0.009375 to 0.173205 (Mach <= 0.3 and tau 0.505-2)")
    c["fluid"]["reynolds"] = 5000  # tau 0.5 + 2.7e-4 at Mach 0.3: no lattice speed passes
    c["fluid"]["physical"]["lattice_velocity"] = 0.125
    _bad(c, "fluid.physical.lattice_velocity: 0.125 is not allowed: no lattice choice gives "
            "Mach <= 0.3 and tau 0.505-2 at dx = 0.0625")


def test_physical_units_bad_input_exits_2(run_cli) -> None:
    res = run_cli("run", str(PHYSICAL), "--set", "fluid.physical.lattice_velocity=0.3",
                  "--output", "out")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "fluid.physical.lattice_velocity: 0.3 is not allowed" in lines[0]
    assert "expected 0.0" in lines[0] and "to 0.173" in lines[0]


def _profile_case(tmp_path, inlet: dict, subdomains: int = 1) -> dict:
    case = body_case_3d(16, 8, 10, subdomains)
    case["domain"]["inlet"] = {"ramp_steps": 10, **inlet}
    return case


@pytest.mark.parametrize("suffix", [".npy", ".txt", ".h5"])
def test_3d_inflow_profile_from_a_file(tmp_path, suffix: str) -> None:
    """A (nz, ny) file holding the built-in product parabola's float64 values (as the host
    computes them) gives the parabolic run's bits; its mean is the reference velocity."""
    from simsplit.fluid.inflow import Inlet

    lines = Inlet("parabolic", 0.06, across_z=True).cell_velocities((10, 8))
    path = tmp_path / f"inflow{suffix}"
    if suffix == ".npy":
        np.save(path, lines)
    elif suffix == ".txt":
        np.savetxt(path, lines, fmt="%.17g")
    else:
        with h5py.File(path, "w") as h5:
            h5["profile"] = lines
    runs = []
    for inlet in ({"velocity": 0.06}, {"profile": "file", "file": str(path)}):
        sim = Simulation(_profile_case(tmp_path, inlet))
        sim.step(20)
        runs.append(sim.solver.populations())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert sim.solver.setup.inlet.mean_velocity == pytest.approx(lines.mean())
    assert sim.solver.setup.inlet.velocity == lines.max()


def test_bad_3d_inflow_profiles_are_one_line(tmp_path) -> None:
    good = np.full((10, 8), 0.05)
    for name, array, match in [
        ("shape.npy", good.T, r"holds 80 values: expected 80 finite speeds, an \(nz, ny\) "
                              r"array .* \(shape \[10, 8\] from domain.shape; the file's: "
                              r"\[8, 10\]\)"),
        ("nan.npy", np.where(np.eye(10, 8) > 0, np.nan, good), r"holds nan at index \[0, 0\]"),
        ("neg.npy", np.where(np.eye(10, 8) > 0, -0.01, good), r"holds -0.01 at index \[0, 0\]: "
                                                              r"expected finite speeds 0 to 0.2"),
        ("fast.npy", good + 0.2, r"holds 0.25 at index \[0, 0\]"),
    ]:
        np.save(tmp_path / name, array)
        _bad(_profile_case(tmp_path, {"profile": "file", "file": str(tmp_path / name)}), match)
    (tmp_path / "junk.h5").write_text("not hdf5")
    _bad(_profile_case(tmp_path, {"profile": "file", "file": str(tmp_path / "junk.h5")}),
         "domain.inlet.file: cannot read")
    _bad(_profile_case(tmp_path, {"profile": "file", "file": str(tmp_path / "none.npy")}),
         "domain.inlet.file: .* does not exist")


PROBES_3D = [{"name": "wake", "point": [12.5, 4.2, 5.9]},  # beside slab faces of 2-4 slabs
             {"name": "low", "point": [3.0, 1.0, 0.4]},
             {"name": "top", "point": [20.0, 9.9, 12.0]}]


def test_3d_probes_bitwise_on_1_to_4_slabs(tmp_path) -> None:
    """Probes in 3D: the cell's density and velocity, the same bits on 1-4 slabs, in
    probes.h5, run.json and the summary."""
    from simsplit.run.report import summary_lines

    reports = []
    for n in (1, 2, 3, 4):
        out = tmp_path / f"out{n}"
        case = body_case_3d(24, 10, 12, n, output__dir=str(out), run__steps=40,
                            output__forces_every=20, output__plots=False,
                            output__probes=PROBES_3D)
        sim = Simulation(case)
        summary = sim.run()
        run = json.loads((out / "run.json").read_text())
        reports.append(run["probes"])
        if n == 1:
            u, rho = sim.velocity(), sim.density()
            for p in run["probes"].values():
                i, j, k = p["cell"]
                assert p["density"] == rho[k, j, i]
                assert p["pressure"] == pytest.approx(rho[k, j, i] / 3, rel=1e-15)
                assert [p["velocity_x"], p["velocity_y"], p["velocity_z"]] == list(u[k, j, i])
            assert run["probes"]["wake"]["cell"] == [12, 4, 5]
            assert run["probes"]["top"]["cell"] == [20, 9, 11]
            assert run["probes"]["wake"]["velocity_x"] > 0
            text = "\n".join(summary_lines(sim, summary))
            assert "probe        wake (cell 12, 4, 5): density " in text
            with h5py.File(out / "probes.h5") as h5:
                assert list(h5["step"][:]) == [20, 40]
                assert h5["wake/velocity_z"][-1] == u[5, 4, 12, 2]
                assert h5["top"].attrs["cell"].tolist() == [20, 9, 11]
    for rep in reports[1:]:
        assert rep == reports[0]


def test_bad_3d_probes_are_one_line() -> None:
    inside = [{"name": "p", "point": [8.0, 5.2, 6.1]}]  # the sphere's centre cell
    _bad(body_case_3d(24, 10, 12, output__probes=inside),
         r"output.probes \(p\): cell \[8, 5, 6\] is inside a body")
    _bad(body_case_3d(24, 10, 12, output__probes=[{"name": "p", "point": [3, 4]}]),
         r"output.probes\[0\] \(p\).point: \[3, 4\] is not allowed: expected \[x, y, z\]")
    _bad(body_case_3d(24, 10, 12, output__probes=[{"name": "p", "point": [3, 4, 12.5]}]),
         r"point \[3, 4, 12.5\] lies outside the domain")
