"""Quadratic interpolated bounce-back (Bouzidi, Firdaouss & Lallemand 2001; issue #21): the
weights and their fallbacks, the same bits on 1-4 slabs in 2D and 3D (links reading two planes
across slab faces: halos two planes deep), and its accuracy against linear and halfway."""

from __future__ import annotations

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.fluid.forces import DeviceForces, body_links, measure_forces
from simsplit.fluid.geometry import build_bodies
from simsplit.fluid.geometry.links import HALFWAY, link_weights
from simsplit.numerics.lattice import D2Q9
from tests.conftest import body_case, body_case_3d, fluid_case


def _box_weights(top: float) -> tuple[np.ndarray, np.ndarray]:
    """Quadratic and linear weights of a box filling y <= ``top`` across a periodic strip."""
    spec = {"shape": [6, 12], "bodies": [{"name": "b", "shape": "box", "lower": [0, 0],
                                          "upper": [6, top]}]}
    (body,) = build_bodies(spec, ("periodic", "periodic"))
    quad = link_weights([body], body.cells, D2Q9, (False, True), quadratic=True)
    lin = link_weights([body], body.cells, D2Q9, (False, True))
    return quad, lin


@pytest.mark.parametrize("top", [3.2, 3.35, 3.7, 3.9])
def test_weights_are_the_papers_and_sum_to_one(top) -> None:
    """The straight link from the first fluid cell (y = 3.5 or 4.5) down to the box: the
    weights of Bouzidi et al.'s quadratic fits at the wall fraction d, summing to 1, the
    linear rule's first weight where the linear table has it."""
    quad, lin = _box_weights(top)
    j = 3 if top < 3.5 else 4  # first fluid row
    d = j + 0.5 - top
    q = 2  # c = (0, 1): pulls from (i, j - 1), in the box
    w0, w1, w2 = quad[q, j, 2], quad[9 + q, j, 2], quad[18 + q, j, 2]
    if d < 0.5:
        want = (d * (1 + 2 * d), 1 - 4 * d * d, -d * (1 - 2 * d))
        assert lin[q, j, 2] == pytest.approx(2 * d)
    else:
        want = (-1 / (d * (2 * d + 1)), (2 * d - 1) / d, -(2 * d - 1) / (2 * d + 1))
        assert lin[q, j, 2] == pytest.approx(-1 / (2 * d))
    assert (w0, w1, w2) == pytest.approx(want, abs=1e-13)
    assert abs(w0) + w1 + w2 == pytest.approx(1.0, abs=1e-13)


def test_fallbacks_depend_on_the_geometry() -> None:
    """A one-cell gap between two boxes: a link nearer than halfway whose x + c_q is fluid but
    x + 2 c_q solid takes the linear rule (w2 = 0); one whose x + c_q is solid bounces back
    halfway; beyond halfway with x + c_q solid the linear rule of that branch."""
    spec = {"shape": [6, 12], "bodies": [
        {"name": "a", "shape": "box", "lower": [0, 0], "upper": [6, 3.3]},
        {"name": "b", "shape": "box", "lower": [0, 5.2], "upper": [6, 12]}]}
    bodies = build_bodies(spec, ("periodic", "periodic"))
    solid = bodies[0].cells | bodies[1].cells
    w = link_weights(bodies, solid, D2Q9, (False, True), quadratic=True)
    up, down = 2, 4  # pulling from below (box a) and from above (box b)
    # row 3 (y 3.5) and row 4 (y 4.5) are fluid; row 5 (5.5) is in box b
    d = 3.5 - 3.3  # row 3 to box a: x + c = row 4 fluid, x + 2c = row 5 solid -> linear
    assert (w[up, 3, 1], w[9 + up, 3, 1], w[18 + up, 3, 1]) == pytest.approx(
        (2 * d, 1 - 2 * d, 0.0))
    d = 5.2 - 4.5  # row 4 to box b, beyond halfway: x + c = row 3 fluid -> quadratic
    assert w[18 + down, 4, 1] == pytest.approx(-(2 * d - 1) / (2 * d + 1))
    d = 4.5 - 3.3  # (not a link: row 4's source row 3 is fluid)
    assert w[up, 4, 1] == HALFWAY and w[9 + up, 4, 1] == 0
    gap = {"shape": [6, 12], "bodies": [
        {"name": "a", "shape": "box", "lower": [0, 0], "upper": [6, 3.4]},
        {"name": "b", "shape": "box", "lower": [0, 3.8], "upper": [6, 12]}]}
    bodies = build_bodies(gap, ("periodic", "periodic"))
    w = link_weights(bodies, bodies[0].cells | bodies[1].cells, D2Q9, (False, True), True)
    # row 3 alone is fluid: to box a (d = 0.1 < 1/2) with x + c in box b -> halfway; to box b
    # (d = 0.3) likewise
    assert (w[up, 3, 1], w[9 + up, 3, 1], w[18 + up, 3, 1]) == (HALFWAY, 0.0, 0.0)
    assert (w[down, 3, 1], w[9 + down, 3, 1], w[18 + down, 3, 1]) == (HALFWAY, 0.0, 0.0)


def _deep_links(sim: Simulation) -> int:
    """Quadratic links of the run whose far population lies two planes away in another slab
    (what the second ghost plane carries)."""
    links = body_links(sim.solver.setup)
    starts = sorted(b.layer0 for b in sim.solver.blocks.values())
    own = np.searchsorted(starts, links.cell[0], side="right")
    far = np.searchsorted(starts, links.far[0], side="right")
    two = np.abs(links.far[0] - links.cell[0]) == 2
    return int(((links.w2 != 0) & (links.k >= 0) & two & (own != far)).sum())


def _check_splits(make_case, splits, steps: int, moving: float) -> None:
    """Run the case of each split (``make_case(n, weights)``): fields and forces the same
    bits as on the first, forces reduced on the backend equal to the host path's, some links
    reading two planes across a slab face, the flow going (``moving``) and pushing."""
    results, deep = [], 0
    for n, weights in splits:
        case = make_case(n, weights)
        case["domain"]["bounce_back"] = "quadratic"
        sim = Simulation(case)
        sim.step(steps)
        links = body_links(sim.solver.setup)
        forces = measure_forces(sim.solver, links)
        assert np.array_equal(DeviceForces(links).measure(sim.solver), forces)
        results.append((sim.velocity(), sim.density(), forces))
        deep += _deep_links(sim)
    u1, rho1, f1 = results[0]
    assert np.abs(u1).max() > moving and np.abs(f1[:, 0]).min() > 0 and deep > 0
    for (n, w), (u, rho, f) in zip(splits[1:], results[1:], strict=True):
        assert np.array_equal(u, u1), f"velocity differs for {n} slabs, weights {w}"
        assert np.array_equal(rho, rho1), f"density differs for {n} slabs, weights {w}"
        assert np.array_equal(f, f1), f"forces differ for {n} slabs, weights {w}"


@pytest.mark.parametrize("precision, outlet, overlap", [
    ("float64", "pressure", True), ("float32", "convective", True),
    ("float64", "zero_gradient", False)])
def test_bitwise_identical_across_splits_2d(precision, outlet, overlap) -> None:
    """A circle across slab faces and a polygon, inlet (ramped) and outlet: fields and forces
    the same bits on 1-4 slabs and an uneven split, overlapped or not."""
    bodies = [{"name": "cyl", "shape": "circle", "centre": [10.0, 11.7], "radius": 3.4},
              {"name": "plate", "shape": "polygon",
               "vertices": [[24, 4], [30, 6], [29, 9], [25, 7.5]]}]

    def make_case(n, weights):
        case = body_case(40, 24, n, bodies=bodies, run__precision=precision,
                         run__overlap=overlap, decomposition__weights=weights)
        case["domain"]["outlet"] = {"kind": outlet}
        return case

    _check_splits(make_case, [(1, None), (2, None), (3, None), (4, None), (3, [3, 1, 2])],
                  120, 0.04)


def test_bitwise_identical_across_splits_2d_slip() -> None:
    """2D free-slip y faces (the split axis's) with quadratic links (one D2Q9 open kernel holds
    both rules): a circle across slab faces beside the slip face y = 0, the same bits on 1-3
    slabs."""
    bodies = [{"name": "cyl", "shape": "circle", "centre": [10.0, 4.1], "radius": 3.4}]

    def make_case(n, weights):
        case = body_case(40, 24, n, bodies=bodies, decomposition__weights=weights)
        case["domain"]["boundaries"]["y"] = "slip"
        return case

    _check_splits(make_case, [(1, None), (2, None), (3, None)], 80, 0.04)


@pytest.mark.parametrize("bounds, precision, storage", [
    ({}, "float64", None), ({}, "float32", "float16"),
    ({"y": "slip"}, "float64", None), ({"y": "slip", "z": "slip"}, "float32", "float16")])
def test_bitwise_identical_across_splits_3d(bounds, precision, storage) -> None:
    """A sphere across slab faces and a cylinder along y through every slab: the same bits
    (fields, forces) on 1-4 slabs, fp16 storage included. With free-slip y faces (and the
    split axis's z faces; valid since BODIES_SLIP_QUADRATIC, issue #21) the sphere sits beside
    a slip face and the cylinder touches both: 1-3 slabs and an uneven split."""
    from simsplit.case import validate_case

    bodies = [{"name": "ball", "shape": "sphere", "centre": [7.3, 2.9 if bounds else 5.2, 6.1],
               "radius": 2.6},
              {"name": "rod", "shape": "cylinder", "centre": [16.4, 0, 5.7], "axis": "y",
               "diameter": 3.1}]

    def make_case(n, weights):
        case = body_case_3d(24, 10, 12, n, bodies=bodies, run__precision=precision,
                            decomposition__weights=weights)
        case["domain"]["boundaries"].update(bounds)
        if storage:
            case["run"]["storage"] = storage
        return case

    case = make_case(1, None)
    case["domain"]["bounce_back"] = "quadratic"
    validate_case(case)
    splits = ([(1, None), (2, None), (3, None), (3, [1, 3, 2])] if bounds else
              [(1, None), (2, None), (3, None), (4, None), (2, [1, 3])])
    _check_splits(make_case, splits, 20, 0.03)


def test_halos_are_deep_only_with_quadratic_links() -> None:
    """Linear links keep the one-plane halo (one packed direction set per face); quadratic
    ones carry three and two ghost planes."""
    for bounce, sets, depth in (("linear", 1, 1), ("quadratic", 3, 2)):
        case = body_case(40, 24, 2)
        case["domain"]["bounce_back"] = bounce
        blk = Simulation(case).solver.blocks[0]
        assert blk.depth == depth
        assert all(b.shape[0] == 3 * sets for b in blk.send.values())


def _channel_error(bounce: str, offset: float, collision: str) -> float:
    """Plane Poiseuille flow (body force, x periodic) between two boxes whose faces lie
    ``offset`` cells off the grid: max |u - u_exact| / max u_exact at steady state."""
    g, nu, ny = 1e-6, 0.1, 20
    lo, hi = 2 + offset, ny - 2 - offset
    case = fluid_case(4, ny, 1, fluid__reynolds=None, fluid__viscosity=nu,
                      fluid__body_force=[g, 0.0], fluid__collision=collision)
    case["domain"] = {"shape": [4, ny], "boundaries": {"x": "periodic", "lid": False},
                      "bounce_back": bounce,
                      "bodies": [{"name": "lo", "shape": "box", "lower": [0, 0],
                                  "upper": [4, lo]},
                                 {"name": "hi", "shape": "box", "lower": [0, hi],
                                  "upper": [4, ny]}]}
    sim = Simulation(case)
    sim.step(4000)
    y = np.arange(ny) + 0.5
    exact = g / (2 * nu) * (y - lo) * (hi - y)
    fluid = (y > lo) & (y < hi)
    u = sim.velocity()[..., 0]
    return float(np.abs(u[fluid] - exact[fluid, None]).max() / exact.max())


@pytest.mark.slow
@pytest.mark.parametrize("collision", ["trt", "bgk"])
def test_poiseuille_between_off_grid_walls(collision) -> None:
    """Walls a fraction d = 0.3, 0.15, 0.85, 0.7 of a link from the first fluid cell: under
    BGK (tau 0.8) quadratic beats linear at every d; under TRT (Lambda 3/16) where the wall is
    nearer than halfway (the branch that reads x + 2 c_q), beyond halfway the linear rule is
    closer there (docs/bodies.md). Both interpolations beat the staircase by an order of
    magnitude. Every error is printed."""
    errors = {}
    for offset in (0.2, 0.35, 0.65, 0.8):
        errors[offset] = {b: _channel_error(b, offset, collision)
                          for b in ("halfway", "linear", "quadratic")}
        print(f"{collision} offset {offset}: " + ", ".join(
            f"{b} {e:.3e}" for b, e in errors[offset].items()))
    better = (0.2, 0.35, 0.65, 0.8) if collision == "bgk" else (0.2, 0.35)
    for offset in better:
        assert errors[offset]["quadratic"] < 0.8 * errors[offset]["linear"], offset
    for e in errors.values():
        assert max(e["linear"], e["quadratic"]) < 0.2 * e["halfway"]


def _slip_channel(bounce: str, offset: float) -> tuple[float, float]:
    """:func:`_channel_error` in 3D with free-slip y faces (the boxes span y, their faces
    normal to z): (max |u - u_exact| / max u_exact, max spread of u across y / max u_exact)."""
    g, nu, ny, nz = 1e-6, 0.1, 4, 20
    lo, hi = 2 + offset, nz - 2 - offset
    case = fluid_case(4, ny, 1, fluid__reynolds=None, fluid__viscosity=nu,
                      fluid__body_force=[g, 0.0, 0.0], fluid__collision="trt")
    case["domain"] = {"shape": [4, ny, nz], "bounce_back": bounce,
                      "boundaries": {"x": "periodic", "y": "slip", "lid": False},
                      "bodies": [{"name": "lo", "shape": "box", "lower": [0, 0, 0],
                                  "upper": [4, ny, lo]},
                                 {"name": "hi", "shape": "box", "lower": [0, 0, hi],
                                  "upper": [4, ny, nz]}]}
    sim = Simulation(case)
    sim.step(4000)
    z = np.arange(nz) + 0.5
    exact = g / (2 * nu) * (z - lo) * (hi - z)
    fluid = (z > lo) & (z < hi)
    u = sim.velocity()[fluid, ..., 0]  # (z, y, x)
    err = np.abs(u - exact[fluid, None, None]).max() / exact.max()
    return float(err), float(np.abs(u - u[:, :1]).max() / exact.max())


def test_poiseuille_between_off_grid_walls_with_slip_side_walls() -> None:
    """The exactly solvable case with quadratic links and slip faces: plane Poiseuille flow
    along a periodic x between boxes whose faces lie 0.2 of a link off the grid, free-slip y
    faces. The profile is the same on every line across y (to 1e-8 of its peak) and its error
    is the 2D channel's (D2Q9, no slip faces) to 1 %; quadratic beats linear, both beat the
    staircase by an order of magnitude (the TRT branch nearer than halfway, as in 2D). Every
    error is printed."""
    offset, errors = 0.2, {}
    for bounce in ("halfway", "linear", "quadratic"):
        err, spread = _slip_channel(bounce, offset)
        flat = _channel_error(bounce, offset, "trt")
        print(f"3D slip channel, {bounce}: error {err:.4e} (2D {flat:.4e}), "
              f"spread across y {spread:.1e}")
        assert spread < 1e-8 and abs(err / flat - 1) < 0.01, bounce
        errors[bounce] = err
    assert errors["quadratic"] < 0.8 * errors["linear"] < 0.08 * errors["halfway"]


def _rod_between_slip_faces(bounce: str, y: str) -> tuple[float, np.ndarray]:
    """Drag per unit length of a cylinder across y (y faces ``y``: slip or periodic) in a flow
    along a periodic x driven by a body force between z walls, after 500 steps, and the
    velocity field."""
    nx, ny, nz = 24, 3, 16
    case = fluid_case(nx, nz, 1, fluid__reynolds=None, fluid__viscosity=0.1,
                      fluid__body_force=[2e-6, 0.0, 0.0], fluid__collision="trt")
    case["domain"] = {"shape": [nx, ny, nz], "bounce_back": bounce,
                      "boundaries": {"x": "periodic", "y": y, "lid": False},
                      "bodies": [{"name": "rod", "shape": "cylinder", "axis": "y",
                                  "centre": [nx / 2, 0, nz / 2 + 0.27], "diameter": 6.6}]}
    sim = Simulation(case)
    sim.step(500)
    return float(measure_forces(sim.solver, body_links(sim.solver.setup))[0, 0] / ny), \
        sim.velocity()


def test_cylinder_between_slip_faces_quadratic_against_linear() -> None:
    """A cylinder across y between free-slip y faces, quadratic against linear links and
    halfway, and against periodic y faces (the same flow, no slip face): quadratic drag
    within 3 % of linear; with halfway links the slip faces give the periodic run's
    velocity field bit for bit; with interpolated links the links that cross a slip face into
    the body bounce back halfway (docs/bodies.md), so the field stays within 4 % of the
    periodic one. Printed: the drags (slip: without the links that reach the body through a
    slip face, which the momentum exchange does not count)."""
    drag, fields = {}, {}
    for bounce in ("halfway", "linear", "quadratic"):
        for y in ("slip", "periodic"):
            drag[bounce, y], fields[bounce, y] = _rod_between_slip_faces(bounce, y)
        print(f"{bounce}: drag per unit length, slip faces {drag[bounce, 'slip']:.5e}, "
              f"periodic y {drag[bounce, 'periodic']:.5e}")
    assert np.array_equal(fields["halfway", "slip"], fields["halfway", "periodic"])
    assert abs(drag["quadratic", "slip"] / drag["linear", "slip"] - 1) < 0.03
    assert drag["quadratic", "slip"] != drag["linear", "slip"]
    for bounce in ("linear", "quadratic"):
        u, ref = fields[bounce, "slip"], fields[bounce, "periodic"]
        assert 0 < np.abs(u - ref).max() < 0.04 * np.abs(ref).max(), bounce
