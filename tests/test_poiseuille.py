"""Poiseuille flow driven by a body force between halfway bounce-back walls (analytic check)."""

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.case import load_case, validate_case
from simsplit.fluid.poiseuille import Channel, channel_of, compare_to_poiseuille, measured_profile
from tests.conftest import ROOT, fluid_case

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
    error = float(np.sqrt(np.sum((prof - exact) ** 2) / np.sum(exact**2)))
    # the comparison the run summary prints for channel cases computes the same number
    assert compare_to_poiseuille(u, channel_of(sim.case))["l2_error"] == pytest.approx(error)
    return error


def test_bgk_second_order_convergence():
    # the halfway walls' slip error of BGK falls as H^-2 from the coarsest grids on (orders
    # 1.998 and 2.000 here), and the steps to steady state grow as H^2
    errors = [channel_error(h, "bgk") for h in (4, 8, 16)]
    orders = [np.log2(errors[k] / errors[k + 1]) for k in range(2)]
    print(f"Poiseuille BGK tau={TAU}: L2 errors {errors}, observed orders {orders}")
    assert all(1.8 <= p <= 2.2 for p in orders), orders


@pytest.mark.parametrize("height", [8, 16])
def test_trt_magic_parameter_is_exact(height):
    """With Lambda = 3/16 halfway bounce-back reproduces the parabola to round-off."""
    err = channel_error(height, "trt")
    print(f"Poiseuille TRT Lambda=3/16, H={height}: L2 error {err:.2e}")
    assert err < 1e-10


def test_channel_of_recognises_channels_only():
    channel = channel_of(load_case(ROOT / "cases" / "channel.yaml"))
    assert channel is not None and channel.names == ("x", "y") and channel.height == 32
    assert channel.exact().max() == pytest.approx(0.05 * (1 - 1 / 32**2))  # cell centres
    assert channel_of(load_case(ROOT / "cases" / "cavity.yaml")) is None
    plates = fluid_case(8, 8, 1, fluid__reynolds=None, fluid__viscosity=0.1,
                        fluid__body_force=[0.0, 1e-5, 0.0],
                        domain__shape=[8, 8, 8],
                        domain__boundaries={"x": "periodic", "y": "periodic", "z": "wall",
                                            "lid": False})
    found = channel_of(validate_case(plates))
    assert found is not None and found.names == ("y", "z")
    duct = dict(plates, domain={"shape": [8, 8, 8], "boundaries": {
        "x": "periodic", "y": "wall", "z": "wall", "lid": False}})
    assert channel_of(validate_case(duct)) is None  # a square duct has no parabola


def test_3d_plates_summary_comparison_matches_parabola():
    """D3Q19 between plates at z = 0 and z = H, force along y: the comparison the summary
    prints reads u_y(z) averaged over x and y from the run's field (TRT: round-off)."""
    case = fluid_case(4, 4, 1, fluid__reynolds=None, fluid__viscosity=0.1,
                      fluid__body_force=[0.0, 2e-5, 0.0], domain__shape=[4, 4, 12],
                      domain__boundaries={"x": "periodic", "y": "periodic", "z": "wall",
                                          "lid": False},
                      run__tolerance=1e-12, run__check_every=100, run__steps=100_000)
    sim = Simulation(case)
    assert sim.run(output=False).converged
    channel = channel_of(sim.case)
    assert channel == Channel(flow_axis=1, wall_axis=2, force=2e-5, viscosity=0.1, height=12)
    profile = measured_profile(sim.velocity(), channel)
    assert profile.shape == (12,) and profile[5] == pytest.approx(2e-5 / 0.2 * 5.5 * 6.5)
    assert compare_to_poiseuille(sim.velocity(), channel)["l2_error"] < 1e-10
