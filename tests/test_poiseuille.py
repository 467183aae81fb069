"""Poiseuille flow driven by a body force between halfway bounce-back walls (analytic check)."""

import numpy as np
import pytest

from simsplit import Simulation
from tests.conftest import fluid_case

TAU, U_MAX = 0.8, 0.02


def channel_error(height: int, collision: str, subdomains: int = 2) -> float:
    nu = (TAU - 0.5) / 3
    fx = 8 * nu * U_MAX / height**2
    case = fluid_case(
        4,
        height,
        subdomains,
        fluid__reynolds=None,
        fluid__viscosity=nu,
        fluid__collision=collision,
        fluid__body_force=[fx, 0.0],
        domain__boundaries={"x": "periodic", "y": "wall", "lid": False},
        run__tolerance=1e-12,
        run__check_every=100,
        run__steps=200_000,
    )
    sim = Simulation(case)
    assert sim.run(output=False).converged
    u = sim.velocity()
    y = np.arange(height) + 0.5
    exact = fx / (2 * nu) * y * (height - y)
    assert np.abs(u[..., 1]).max() < 1e-12
    assert np.ptp(u[..., 0], axis=1).max() < 1e-14  # uniform along the periodic axis
    prof = u[..., 0].mean(axis=1)
    return float(np.sqrt(np.sum((prof - exact) ** 2) / np.sum(exact**2)))


def test_bgk_second_order_convergence():
    errors = [channel_error(h, "bgk") for h in (8, 16, 32)]
    orders = [np.log2(errors[k] / errors[k + 1]) for k in range(2)]
    print(f"Poiseuille BGK tau={TAU}: L2 errors {errors}, observed orders {orders}")
    assert all(1.8 <= p <= 2.2 for p in orders), orders


@pytest.mark.parametrize("height", [8, 16])
def test_trt_magic_parameter_is_exact(height):
    """With Lambda = 3/16 halfway bounce-back reproduces the parabola to round-off."""
    err = channel_error(height, "trt")
    print(f"Poiseuille TRT Lambda=3/16, H={height}: L2 error {err:.2e}")
    assert err < 1e-10
