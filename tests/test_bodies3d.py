"""Bodies in 3D (issue #21, D3Q19): spheres, cylinders (any axis), boxes and voxel masks
rasterised to cells; interpolated bounce-back weights from the exact shape; the duct's inflow
profile; inlets, outlets and bodies giving the same bits on any split; momentum exchange
balancing the driving force; bad geometry refused in one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.case import validate_case
from simsplit.errors import CaseError
from simsplit.fluid.forces import DeviceForces, body_links, measure_forces
from simsplit.fluid.geometry import build_bodies
from simsplit.fluid.geometry.links import HALFWAY, link_weights
from simsplit.fluid.inflow import Inlet
from simsplit.numerics.lattice import D3Q19
from tests.conftest import body_case_3d, fluid_case


def _one(shape: list[int], body: dict, faces=("wall", "wall"), **domain):
    (b,) = build_bodies({"shape": shape, "bodies": [{"name": "b", **body}], **domain}, faces)
    return b


def test_sphere_cells_volume_and_reference_area() -> None:
    b = _one([40, 40, 40], {"shape": "sphere", "centre": [20.3, 19.6, 20.1], "radius": 12})
    volume = 4 / 3 * math.pi * 12**3
    assert abs(b.size / volume - 1) < 0.01
    assert b.reference_length == 24 and b.reference_area == pytest.approx(math.pi * 144)
    assert b.cells.shape == (40, 40, 40)
    # array order (k, j, i): the centre cell is solid, a corner fluid
    assert b.cells[20, 19, 20] and not b.cells[0, 0, 0]
    physical = _one([20, 10, 10], {"shape": "sphere", "centre": [0.5, 0.25, 0.25],
                                   "diameter": 0.2}, size=[2.0, 1.0, 1.0], units="physical")
    lattice = _one([20, 10, 10], {"shape": "sphere", "centre": [5, 2.5, 2.5], "radius": 1})
    assert np.array_equal(physical.cells, lattice.cells) and lattice.size > 0


def test_cylinders_along_an_axis_and_oblique() -> None:
    span = _one([30, 20, 12], {"shape": "cylinder", "centre": [10.2, 9.7, 0], "axis": "z",
                               "diameter": 8})
    for k in range(12):  # every plane the same disc
        assert np.array_equal(span.cells[k], span.cells[0])
    assert abs(span.cells[0].sum() / (math.pi * 16) - 1) < 0.05
    assert span.reference_area == pytest.approx(8 * 12) and span.extent[4:] == (0.0, 12.0)
    along_x = _one([30, 20, 20], {"shape": "cylinder", "centre": [15, 10, 10], "axis": "x",
                                  "radius": 4, "length": 10})
    assert np.flatnonzero(along_x.cells.any(axis=(0, 1))).tolist() == list(range(10, 20))
    tilted = _one([48, 48, 48], {"shape": "cylinder", "centre": [24, 24, 24],
                                 "axis": [1, 1, 1], "radius": 8, "length": 24})
    assert abs(tilted.size / (math.pi * 64 * 24) - 1) < 0.015
    x, y, z = (np.argwhere(tilted.cells)[:, ::-1] + 0.5 - 24).T  # symmetric about the axis
    assert abs(np.corrcoef(x, y)[0, 1] - np.corrcoef(y, z)[0, 1]) < 1e-9
    with pytest.raises(CaseError, match="spans the domain along x, y or z"):
        _one([20, 20, 20], {"shape": "cylinder", "centre": [10, 10, 10], "axis": [1, 1, 0],
                            "radius": 3})


def test_box_and_masks_in_3d(tmp_path) -> None:
    box = _one([12, 8, 6], {"shape": "box", "lower": [2, 1, 3], "upper": [5, 3, 6]})
    assert np.argwhere(box.cells.any(axis=(0, 1))).ravel().tolist() == [2, 3, 4]
    assert np.argwhere(box.cells.any(axis=(0, 2))).ravel().tolist() == [1, 2]
    assert np.argwhere(box.cells.any(axis=(1, 2))).ravel().tolist() == [3, 4, 5]
    assert box.reference_area == 2 * 3
    arr = np.zeros((3, 4, 5), dtype=np.uint8)  # [k, j, i]
    arr[1, 1:3, 1:4] = 1
    np.save(tmp_path / "m.npy", arr)
    import h5py

    with h5py.File(tmp_path / "m.h5", "w") as h5:
        h5["mask"] = arr.astype(bool)
    for name in ("m.npy", "m.h5"):
        mask = _one([12, 8, 6], {"shape": "mask", "file": str(tmp_path / name),
                                 "origin": [2, 3, 1]})
        assert np.array_equal(mask.cells[1:4, 3:7, 2:7], arr != 0) and mask.size == 6
        assert mask.extent == (3.0, 6.0, 4.0, 6.0, 2.0, 3.0)
    with pytest.raises(CaseError, match="expected a 3D numeric"):
        np.save(tmp_path / "flat.npy", np.ones((4, 4)))
        _one([12, 8, 6], {"shape": "mask", "file": str(tmp_path / "flat.npy")})


def test_sphere_link_weights_from_the_exact_distance() -> None:
    """A fluid cell at x = 2.5 next to a sphere of radius 2.3 around (5, 5, 5), half a cell
    off its axis in y and z: the wall crosses the link towards +x at 5 - sqrt(2.3^2 - 0.5),
    delta = 0.31139 of the link, so k = 2 delta; the diagonal link (1, 0, 1) from (2.5, 5.5,
    3.5) meets it at the smaller root of the ray-sphere equation."""
    (b,) = build_bodies({"shape": [10, 10, 10], "bodies": [
        {"name": "s", "shape": "sphere", "centre": [5, 5, 5], "radius": 2.3}]}, ("wall", "wall"))
    k = link_weights([b], b.cells, D3Q19, (False, False, False))
    q = int(np.flatnonzero((D3Q19.c == [-1, 0, 0]).all(axis=1))[0])  # pulls from x + (1, 0, 0)
    delta = (5 - math.sqrt(2.3**2 - 0.5)) - 2.5  # the wall's x from the centre x = 2.5
    assert delta == pytest.approx(0.31139, abs=1e-5)
    assert k[q, 5, 5, 2] == pytest.approx(2 * delta, abs=1e-12)
    qd = int(np.flatnonzero((D3Q19.c == [-1, 0, -1]).all(axis=1))[0])  # source x + (1, 0, 1)
    p, d = np.array([2.5, 5.5, 3.5]), np.array([1.0, 0.0, 1.0])
    o = p - 5
    a, bb, c = d @ d, o @ d, o @ o - 2.3**2
    t = (-bb - math.sqrt(bb * bb - a * c)) / a
    assert b.cells[4, 5, 3] and not b.cells[3, 5, 2]  # source (3.5, 5.5, 4.5) solid
    want = 2 * t if t < 0.5 else -1 / (2 * t)
    assert k[qd, 3, 5, 2] == pytest.approx(want, abs=1e-12)
    assert (k[:, b.cells] == HALFWAY).all()  # solid cells keep no weight


def test_product_inflow_profile_and_its_mean() -> None:
    """Schäfer & Turek 3D: U(y, z) = 16 U y (H - y) z (H - z) / H^4, mean 4 U / 9."""
    inlet = Inlet("parabolic", 0.09, across_z=True)
    u = inlet.cell_velocities((41, 41))
    y = np.arange(41) + 0.5
    want = 16 * 0.09 * np.outer(y * (41 - y), y * (41 - y)) / 41**4
    assert np.allclose(u, want, rtol=1e-14, atol=0) and u.shape == (41, 41)
    assert inlet.mean_velocity == pytest.approx(0.04)
    # the cells' mean approaches the exact mean to O(1/n^2)
    assert abs(u.mean() / inlet.mean_velocity - 1) < 2 / 41**2
    assert np.allclose(Inlet("parabolic", 0.09, across_z=False).cell_velocities((5, 41)),
                       np.tile(4 * 0.09 * y * (41 - y) / 41**2, (5, 1)))


SPLITS = [(1, None), (2, None), (3, None), (2, [1, 3])]


@pytest.mark.parametrize("precision, storage, bounce, outlet", [
    ("float64", None, "linear", "pressure"), ("float32", None, "linear", "pressure"),
    ("float64", None, "halfway", "pressure"), ("float32", "float16", "linear", "pressure"),
    ("float64", None, "linear", "zero_gradient"), ("float32", "float16", "linear", "convective"),
    ("float64", "float32", "halfway", "convective")])
def test_bitwise_identical_across_splits(precision, storage, bounce, outlet) -> None:
    """Inlet (ramped), outlet (each kind), a sphere across slab boundaries and a cylinder along
    y through every slab: the same bits (fields and forces) on 1, 2 and 3 slabs, uneven ones
    too, narrow storage included."""
    bodies = [{"name": "ball", "shape": "sphere", "centre": [7.3, 5.2, 6.1], "radius": 2.6},
              {"name": "rod", "shape": "cylinder", "centre": [16.4, 0, 5.7], "axis": "y",
               "diameter": 3.1}]
    results = []
    for n, weights in SPLITS:
        case = body_case_3d(24, 10, 12, n, bodies=bodies, run__precision=precision,
                            decomposition__weights=weights)
        if storage:
            case["run"]["storage"] = storage
        case["domain"]["bounce_back"] = bounce
        case["domain"]["outlet"] = {"kind": outlet}
        sim = Simulation(case)
        sim.step(25)
        links = body_links(sim.solver.setup)
        forces = measure_forces(sim.solver, links)
        # reduced on the backend from each slab's own arrays (fp16 decoded as stored)
        assert np.array_equal(DeviceForces(links).measure(sim.solver), forces)
        results.append((sim.velocity(), sim.density(), forces))
    u1, rho1, f1 = results[0]
    assert np.abs(u1).max() > 0.03 and np.abs(f1[:, 0]).min() > 0
    for (n, w), (u, rho, f) in zip(SPLITS[1:], results[1:], strict=True):
        assert np.array_equal(u, u1), f"velocity differs for {n} slabs, weights {w}"
        assert np.array_equal(rho, rho1), f"density differs for {n} slabs, weights {w}"
        assert np.array_equal(f, f1), f"forces differ for {n} slabs, weights {w}"


def test_bouzidi_mixes_neighbours_across_slab_faces() -> None:
    """The sphere's interpolated links whose neighbour x + c_q lies in another slab exist for
    the 3-slab split above (so the bitwise test covers halo neighbours)."""
    case = body_case_3d(24, 10, 12, 3, bodies=[
        {"name": "ball", "shape": "sphere", "centre": [7.3, 5.2, 6.1], "radius": 2.6}])
    case["domain"]["bounce_back"] = "linear"
    sim = Simulation(case)
    links = body_links(sim.solver.setup)
    starts = sorted(b.layer0 for b in sim.solver.blocks.values())
    slab = np.searchsorted(starts, links.cell[0], side="right")
    nslab = np.searchsorted(starts, links.nbr[0], side="right")
    assert ((links.k >= 0) & (slab != nslab)).any()


@pytest.mark.slow
def test_duct_flux_is_conserved_and_the_outlet_holds_its_pressure() -> None:
    """No body: the product inflow through a square duct; at steady state every cross-section
    carries the same mass flux and the density beside the outlet is the one asked for."""
    case = body_case_3d(16, 8, 8, 2, bodies=[], fluid__viscosity=0.1, run__tolerance=1e-8,
                        run__check_every=100, run__steps=8000)
    case["domain"]["inlet"] = {"velocity": 0.04, "start": "inflow"}
    case["domain"]["outlet"] = {"density": 1.01}
    sim = Simulation(case)
    summary = sim.run(output=False)
    assert summary.converged, summary.reason
    u, rho = sim.velocity()[..., 0], sim.density()
    flux = (rho * u).sum(axis=(0, 1))
    print(f"flux spread {np.ptp(flux) / flux.mean():.3g}, outlet density "
          f"{rho[..., -1].mean():.6f}")
    assert np.ptp(flux) / flux.mean() < 1e-6
    assert abs(rho[2:-2, 2:-2, -1].mean() - 1.01) < 1e-3
    assert rho[..., 0].mean() > rho[..., -1].mean()


@pytest.mark.slow
def test_momentum_exchange_balances_the_body_force() -> None:
    """A periodic box driven by a body force past a cube (halfway bounce-back) across the slab
    boundary: at steady state the force on the cube is the force put into the fluid. The
    steady state carries a period-2 oscillation of the fluid's momentum (-1.8e-3 of g N per
    step for a prism across the box, 9e-5 here), so the force is averaged over two steps."""
    g = 2e-6
    case = fluid_case(10, 8, 2, fluid__reynolds=None, fluid__viscosity=0.25,
                      fluid__body_force=[g, 0.0, 0.0], run__tolerance=1e-10, run__steps=20000,
                      run__check_every=200)
    case["domain"] = {"shape": [10, 8, 8], "bodies": [
        {"name": "cube", "shape": "box", "lower": [3, 2.2, 2.6], "upper": [6, 5.3, 5.4]}],
        "boundaries": {"x": "periodic", "y": "periodic", "z": "periodic", "lid": False}}
    sim = Simulation(case)
    summary = sim.run(output=False)
    assert summary.converged, summary.reason
    links = body_links(sim.solver.setup)
    first = measure_forces(sim.solver, links)
    sim.step(1)
    force = (first + measure_forces(sim.solver, links)) / 2
    fluid_cells = 10 * 8 * 8 - sim.solver.setup.bodies[0].size
    err = abs(force[0, 0] / (g * fluid_cells) - 1)
    print(f"momentum exchange: {force[0, 0]:.6e} against g N = {g * fluid_cells:.6e} "
          f"(relative error {err:.2e}); transverse {force[0, 1]:.2e}, {force[0, 2]:.2e}")
    assert err < 1e-6
    assert abs(force[0, 1]) < 1e-9 * g * fluid_cells and abs(force[0, 2]) < 1e-9 * g * fluid_cells


BAD = [
    ({"shape": "sphere", "centre": [22, 5, 6], "radius": 3}, "leaves the domain"),
    ({"shape": "sphere", "centre": [1.2, 5, 6], "radius": 1}, "touches the inlet at x = 0"),
    ({"shape": "box", "lower": [20, 2, 2], "upper": [24, 4, 4]}, "touches the outlet at x = 1"),
    ({"shape": "sphere", "centre": [10, 5, 6], "diameter": 0.9}, "thinner than a cell (0.9"),
    ({"shape": "cylinder", "centre": [10, 5, 6], "axis": "z", "diameter": 0.8},
     "thinner than a cell"),
    ({"shape": "sphere", "centre": [10, 5]}, "expected [x, y, z] on a 3D grid"),
    ({"shape": "circle", "centre": [10, 5], "radius": 2}, "a circle needs a 2D grid"),
    ({"shape": "mask", "file": "missing.npy"}, "does not exist"),
    ({"shape": "mask", "file": "diagonal.npy", "origin": [8, 2, 3]}, "meet only at a corner"),
]


@pytest.mark.parametrize("body, message", BAD)
def test_bad_geometry_is_one_line(tmp_path, monkeypatch, body, message) -> None:
    monkeypatch.chdir(tmp_path)
    diagonal = np.zeros((3, 3, 3), dtype=bool)
    diagonal[1, 0, 0] = diagonal[1, 1, 1] = True  # an edge contact in the plane k = 1
    np.save(tmp_path / "diagonal.npy", diagonal)
    with pytest.raises(CaseError) as err:
        validate_case(body_case_3d(24, 10, 12, bodies=[{"name": "b", **body}]))
    text = str(err.value)
    assert message in text and "\n" not in text


def test_aa_streaming_with_bodies_is_refused() -> None:
    case = body_case_3d()
    case["run"]["streaming"] = "aa"
    with pytest.raises(CaseError, match="run.streaming: aa is not allowed with domain.bodies"):
        validate_case(case)


def test_cylinder3d_case_is_schaefer_turek_3d_1z() -> None:
    """cases/cylinder3d.yaml: the duct 2.5 x 0.41 x 0.41, D = 0.1 along z through the whole
    height at (0.5, 0.2), the product inflow, Re = U_mean D / nu = 20 with U_mean = 4/9 U_max;
    coefficients over the area D x H."""
    from pathlib import Path

    from simsplit.case import load_case
    from simsplit.fluid.setup import setup_from_case

    case = load_case(Path(__file__).resolve().parents[1] / "cases" / "cylinder3d.yaml")
    setup = setup_from_case(case)
    (body,) = setup.bodies
    assert setup.shape == (250, 41, 41) and body.kind == "cylinder"
    assert body.reference_length == pytest.approx(10) and body.reference_area == 10 * 41
    assert body.cells.all(axis=0).sum() == body.cells.any(axis=0).sum() > 70  # a prism in z
    assert body.extent[:4] == pytest.approx((45, 55, 15, 25))
    u_mean = setup.inlet.mean_velocity
    assert u_mean == pytest.approx(4 / 9 * 0.1)
    assert u_mean * 10 / setup.params.viscosity == pytest.approx(20)
    assert setup.bounce_back == "linear" and setup.x_kinds == ("inlet", "outlet")


def test_run_reports_3d_forces(tmp_path) -> None:
    """A 3D run's outputs: run.json per body with its reference area, forces.h5 with force_z,
    velocity.png of the middle plane; coefficients over the sphere's cross-section."""
    import json

    import h5py

    case = body_case_3d(24, 10, 12, 2, run__steps=40, output__dir=str(tmp_path),
                        output__forces_every=20)
    summary = Simulation(case).run()
    ball = json.loads((tmp_path / "run.json").read_text())["bodies"]["ball"]
    assert ball["reference_area_cells"] == pytest.approx(math.pi * 2.6**2)
    assert ball["drag_coefficient"] == summary.extra["bodies"]["ball"]["drag_coefficient"]
    with h5py.File(tmp_path / "forces.h5") as h5:
        fx, fz = h5["ball/force_x"][-1], h5["ball/force_z"][-1]
        cd = h5["ball/drag_coefficient"][-1]
    u_mean = 4 / 9 * 0.06
    assert cd == pytest.approx(2 * fx / (u_mean**2 * math.pi * 2.6**2), rel=1e-12)
    assert fx > 0 and abs(fz) < fx and (tmp_path / "velocity.png").stat().st_size > 1000


def test_halfway_bodies_without_open_faces_take_the_box_kernels() -> None:
    """A sphere and a box with halfway walls in a lid-driven cavity: no cell takes an open
    rule, so a slab may run the box kernels (on a GPU two steps per sweep, fuses_two_steps);
    from the same populations the bodies path (inflow speeds given) and the box path (none)
    give the same bits, and a curved link brings the bodies path back."""
    bodies = [{"name": "ball", "shape": "sphere", "centre": [7.3, 5.2, 6.1], "radius": 2.6},
              {"name": "brick", "shape": "box", "lower": [13, 2, 3], "upper": [16, 6, 8]}]
    case = body_case_3d(20, 10, 12, 1, bodies=bodies)
    case["domain"]["boundaries"] = {"lid": True}
    del case["domain"]["inlet"]
    sim = Simulation(case)
    sim.step(30)
    (blk,) = sim.solver.blocks.values()
    assert blk.inlet is not None and not blk.open_rules and not blk.open_faces
    outs = []
    for extra in ({"inlet": blk.inlet}, {}):
        dst = np.zeros_like(blk.f_dst)
        macro = [np.zeros_like(blk.rho) for _ in range(4)]
        blk.kernels.stream_collide(blk.f_src, dst, blk.flags, *macro, (1, blk.layers + 1),
                                   blk.params, True, **extra)
        outs.append((dst, *macro))
    assert np.abs(outs[0][1] - 1).max() > 1e-4  # the lid has stirred it
    inner = (slice(None), *(slice(1, -1),) * 3)
    np.testing.assert_array_equal(outs[0][0][inner], outs[1][0][inner])
    for a, b in zip(outs[0][1:], outs[1][1:], strict=True):
        np.testing.assert_array_equal(a, b)
    case["domain"]["bounce_back"] = "linear"
    (curved,) = Simulation(case).solver.blocks.values()
    assert curved.open_rules and not curved.open_faces and not curved.fuses_two_steps()
