"""D3Q19 on the CPU: split identity, Taylor-Green decay, Poiseuille, the cavity against D2Q9."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.case import CaseError, validate_case
from tests.conftest import fluid_case

PERIODIC = {"x": "periodic", "y": "periodic", "z": "periodic", "lid": False}


def case3d(shape: tuple[int, int, int], subdomains: int = 1, **over: Any) -> dict[str, Any]:
    return fluid_case(shape[0], shape[1], subdomains, domain__shape=list(shape), **over)


def steady(case: dict[str, Any], tol: float = 1e-10, steps: int = 200_000) -> Simulation:
    case["run"].update(tolerance=tol, check_every=100, steps=steps)
    sim = Simulation(case)
    assert sim.run(output=False).converged
    return sim


# --- schema and API --------------------------------------------------------------------------
def test_shapes_and_api() -> None:
    sim = Simulation(case3d((6, 5, 4), 2))
    sim.step(3)
    assert sim.velocity().shape == (4, 5, 6, 3) and sim.density().shape == (4, 5, 6)
    assert sim.solver.populations().shape == (19, 4, 5, 6)


@pytest.mark.parametrize("over, message", [
    ({"fluid": {"body_force": [1e-5, 0.0]}}, "fluid.body_force"),
    ({"fluid": {"body_force": [0.0, 0.0, 1e-6]}, "domain": {"shape": [8, 8]}},
     "fluid.body_force"),
    ({"domain": {"shape": [8, 8], "boundaries": {"z": "periodic"}}}, "domain.boundaries.z"),
    ({"domain": {"shape": [8, 8, 8], "boundaries": {"z": "periodic"}}},
     "domain.boundaries.lid"),
])
def test_dimension_errors_name_the_key(over: dict, message: str) -> None:
    case = case3d((8, 8, 8))
    for section, values in over.items():
        case[section].update(values)
    with pytest.raises(CaseError, match=message) as info:
        validate_case(case)
    assert "\n" not in str(info.value)


# --- 1, 2, 3 slabs give bitwise identical fields ----------------------------------------------
@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("collision", ["bgk", "trt"])
# the cavity's also through the row kernels (tests/conftest.py): the scalar kernel's bits
@pytest.mark.parametrize("flow", [pytest.param("cavity", marks=pytest.mark.cpu_rows), "channel"])
def test_bitwise_identical_across_splits(precision: str, collision: str, flow: str) -> None:
    over: dict[str, Any] = {"run__precision": precision, "fluid__collision": collision}
    if flow == "channel":  # periodic in z across the slabs, walls in y, force along x and z
        over.update(fluid__reynolds=None, fluid__viscosity=0.05,
                    fluid__body_force=[2e-5, 0.0, 4e-6],
                    domain__boundaries={"x": "periodic", "y": "wall", "z": "periodic",
                                        "lid": False})
    runs = []
    for n in (1, 2, 3):
        sim = Simulation(case3d((10, 7, 12), n, **over))
        sim.step(120)
        runs.append((sim.solver.populations(), sim.velocity(), sim.density()))
    assert np.abs(runs[0][1]).max() > (0.05 if flow == "cavity" else 1e-4)
    for run in runs[1:]:
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


# --- Taylor-Green vortex: kinetic energy decays as exp(-2 nu k^2 t) ---------------------------
def taylor_green_viscosity_error(n: int, nu: float = 0.05, u0: float = 1e-3,
                                 subdomains: int = 2) -> float:
    """Relative error of the viscosity measured from the energy decay of a 3D mode."""
    case = case3d((n, n, n), subdomains, fluid__reynolds=None, fluid__viscosity=nu,
                  domain__boundaries=PERIODIC)
    sim = Simulation(case)
    k = 2 * np.pi / n
    x = (np.arange(n) + 0.5) * k
    z, y, xx = np.meshgrid(x, x, x, indexing="ij")
    # divergence-free: u . grad = 0 for (cos x sin y sin z, sin x cos y sin z, -2 sin x sin y cos z)
    u = u0 * np.stack([np.cos(xx) * np.sin(y) * np.sin(z), np.sin(xx) * np.cos(y) * np.sin(z),
                       -2 * np.sin(xx) * np.sin(y) * np.cos(z)], axis=-1)
    sim.solver.set_fields(np.ones((n, n, n)), u)
    t0, t1 = n, 5 * n  # skip the start: equilibrium initialisation has no non-equilibrium part
    sim.step(t0)
    e0 = float(np.sum(sim.velocity() ** 2))
    sim.step(t1 - t0)
    e1 = float(np.sum(sim.velocity() ** 2))
    rate = np.log(e0 / e1) / (t1 - t0)
    nu_measured = rate / (2 * 3 * k**2)  # k^2 = kx^2 + ky^2 + kz^2
    return abs(nu_measured / nu - 1)


def test_taylor_green_decay_32() -> None:
    err = taylor_green_viscosity_error(32)
    print(f"Taylor-Green 32^3: viscosity from energy decay off by {err:.3e}")
    assert err < 0.01


@pytest.mark.slow
def test_taylor_green_decay_64() -> None:
    err = taylor_green_viscosity_error(64)
    print(f"Taylor-Green 64^3: viscosity from energy decay off by {err:.3e}")
    assert err < 0.01


# --- Poiseuille between two z-walls ------------------------------------------------------------
TAU, U_MAX = 0.8, 0.02


def channel_error(height: int, collision: str, subdomains: int = 1) -> float:
    nu = (TAU - 0.5) / 3
    fx = 8 * nu * U_MAX / height**2
    case = case3d((2, 3, height), subdomains, fluid__reynolds=None, fluid__viscosity=nu,
                  fluid__collision=collision, fluid__body_force=[fx, 0.0, 0.0],
                  domain__boundaries={"x": "periodic", "y": "periodic", "z": "wall",
                                      "lid": False})
    u = steady(case, tol=1e-12).velocity()
    z = np.arange(height) + 0.5
    exact = fx / (2 * nu) * z * (height - z)
    assert np.abs(u[..., 1:]).max() < 1e-12
    assert np.ptp(u[..., 0].reshape(height, -1), axis=1).max() < 1e-14
    prof = u[:, 0, 0, 0]
    return float(np.sqrt(np.sum((prof - exact) ** 2) / np.sum(exact**2)))


@pytest.mark.parametrize("height", [8, 16])
def test_poiseuille_trt_magic_is_exact(height: int) -> None:
    err = channel_error(height, "trt", subdomains=2)
    print(f"D3Q19 Poiseuille TRT Lambda=3/16, H={height}: L2 error {err:.2e}")
    assert err < 1e-10


def test_poiseuille_bgk_second_order() -> None:
    # the halfway walls' slip error of BGK falls as H^-2 from the coarsest grids on (orders
    # 1.998 and 2.000 here), and the steps to steady state grow as H^2
    errors = [channel_error(h, "bgk") for h in (4, 8, 16)]
    orders = [float(np.log2(errors[k] / errors[k + 1])) for k in range(2)]
    print(f"D3Q19 Poiseuille BGK tau={TAU}: L2 errors {errors}, orders {orders}")
    assert all(1.8 <= p <= 2.2 for p in orders), orders


# --- lid-driven cavity, infinitely wide (periodic y): the mid-plane is the 2D cavity ------------
@functools.cache
def cavity_midplane(n: int) -> np.ndarray:
    """u_x, u_z / U_lid in the plane y = 0.5 of an n x 2 x n cavity, periodic in y, Re = 100."""
    case = case3d((n, 2, n), domain__boundaries={"x": "wall", "y": "periodic", "z": "wall",
                                                  "lid": True})
    u = steady(case, tol=1e-9).velocity()
    assert np.abs(u[..., 1]).max() < 1e-12  # nothing varies along y
    return u[:, 0][..., (0, 2)]


def cavity_2d(n: int) -> np.ndarray:
    return steady(fluid_case(n, n), tol=1e-9).velocity()


def test_cavity_wide_equals_2d() -> None:
    n = 32
    u3, u2 = cavity_midplane(n), cavity_2d(n)
    centre = slice(n // 2 - 1, n // 2 + 1)  # the centreline x = 0.5 lies between two columns
    line = np.abs(u3[:, centre, 0].mean(axis=1) - u2[:, centre, 0].mean(axis=1)).max()
    field = np.abs(u3 - u2).max()
    print(f"cavity {n}x2x{n} D3Q19 vs {n}x{n} D2Q9, Re 100: max |du_x| on the centreline "
          f"{line:.2e}, max |du| over the plane {field:.2e} (lid units)")
    assert line < 0.02 and field < 0.02


@pytest.mark.slow
def test_cavity_converges_with_resolution() -> None:
    def centreline(n: int) -> np.ndarray:
        u = cavity_midplane(n)
        prof = u[:, n // 2 - 1:n // 2 + 1, 0].mean(axis=1)
        return np.interp(np.linspace(0.05, 0.95, 19), (np.arange(n) + 0.5) / n, prof)

    finest = centreline(32)  # the 32-cell cavity of test_cavity_wide_equals_2d, run once
    errors = [float(np.abs(centreline(n) - finest).max()) for n in (8, 16)]
    print(f"cavity D3Q19 centreline u_x vs 32 cells: 8 -> {errors[0]:.3e}, 16 -> {errors[1]:.3e}")
    assert errors[1] < errors[0] / 2
