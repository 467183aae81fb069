"""Ghia et al. reference data, centreline extraction and cubic interpolation."""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.fluid.reference import available_reynolds, compare_to_ghia, ghia_u_centreline
from simsplit.numerics.profiles import centreline_u, compare_profile, lagrange4_interp


def _field_from_profile(u_of_y, ny: int, nx: int) -> np.ndarray:
    """Velocity (ny, nx, 2) whose u depends on y only, v = 0."""
    y = (np.arange(ny) + 0.5) / ny
    vel = np.zeros((ny, nx, 2))
    vel[:, :, 0] = u_of_y(y)[:, None]
    return vel


def _natural_spline(x: np.ndarray, y: np.ndarray):
    """C2 natural cubic spline through (x, y), so resampling it has no kinks at the knots."""
    n = x.size
    h = np.diff(x)
    a = np.zeros((n, n))
    rhs = np.zeros(n)
    a[0, 0] = a[-1, -1] = 1.0
    for i in range(1, n - 1):
        a[i, i - 1 : i + 2] = h[i - 1], 2 * (h[i - 1] + h[i]), h[i]
        rhs[i] = 6 * ((y[i + 1] - y[i]) / h[i] - (y[i] - y[i - 1]) / h[i - 1])
    m = np.linalg.solve(a, rhs)

    def evaluate(t: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(x, t) - 1, 0, n - 2)
        dx0, dx1, hk = t - x[k], x[k + 1] - t, h[k]
        return (
            m[k] * dx1**3 / (6 * hk)
            + m[k + 1] * dx0**3 / (6 * hk)
            + (y[k] / hk - m[k] * hk / 6) * dx1
            + (y[k + 1] / hk - m[k + 1] * hk / 6) * dx0
        )

    return evaluate


def test_ghia_table_values_and_order():
    assert available_reynolds() == [100, 1000]
    ref = ghia_u_centreline(100)
    assert ref["y"].shape == ref["u"].shape == (17,)
    assert np.all(np.diff(ref["y"]) > 0)
    assert (ref["y"][0], ref["u"][0]) == (0.0, 0.0)
    assert (ref["y"][-1], ref["u"][-1]) == (1.0, 1.0)
    # spot values from Table I
    assert ref["u"][ref["y"] == 0.5][0] == pytest.approx(-0.20581)
    ref1000 = ghia_u_centreline(1000)
    assert ref1000["u"][ref1000["y"] == 0.1719][0] == pytest.approx(-0.38289)
    # callers may mutate what they get without corrupting the cached table
    ref["u"][:] = 7.0
    assert ghia_u_centreline(100)["u"][0] == 0.0


@pytest.mark.parametrize("reynolds", [400, 100.5, 0])
def test_ghia_unknown_reynolds_lists_available(reynolds):
    with pytest.raises(ValueError, match=r"100, 1000"):
        ghia_u_centreline(reynolds)


def test_ghia_accepts_integral_float():
    assert ghia_u_centreline(1000.0)["reynolds"] == 1000


@pytest.mark.parametrize("nx", [5, 6])
def test_centreline_positions_walls_and_even_odd_nx(nx):
    ny = 4
    y_c = (np.arange(ny) + 0.5) / ny
    x_c = (np.arange(nx) + 0.5) / nx
    vel = np.zeros((ny, nx, 2))
    # linear in x, so the even-nx average of the two middle columns is exact at x = 0.5
    vel[:, :, 0] = (x_c[None, :] + 1.0) * y_c[:, None]
    vel[:, :, 1] = 99.0  # v must not leak into u
    y, u = centreline_u(vel)
    np.testing.assert_allclose(y, np.concatenate(([0.0], y_c, [1.0])))
    np.testing.assert_allclose(u, np.concatenate(([0.0], 1.5 * y_c, [1.0])))


def test_centreline_rejects_wrong_shape():
    with pytest.raises(ValueError):
        centreline_u(np.zeros((8, 8)))
    with pytest.raises(ValueError):
        centreline_u(np.zeros((8, 8, 8, 3)))


def test_lagrange4_exact_on_cubic_with_nonuniform_nodes():
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 1, 12))
    x[0], x[-1] = 0.0, 1.0

    def cubic(t):
        return 2.0 - 3.0 * t + 5.0 * t**2 - 7.0 * t**3

    t = np.linspace(0, 1, 101)
    np.testing.assert_allclose(lagrange4_interp(t, x, cubic(x)), cubic(t), atol=1e-12)
    # a quartic is not reproduced: the test above would also pass for a broken "exact" lookup
    assert np.max(np.abs(lagrange4_interp(t, x, x**4) - t**4)) > 1e-6


def test_lagrange4_rejects_extrapolation_and_bad_nodes():
    x = np.linspace(0, 1, 5)
    with pytest.raises(ValueError):
        lagrange4_interp(np.array([1.01]), x, x)
    with pytest.raises(ValueError):
        lagrange4_interp(np.array([0.5]), x[:3], x[:3])
    with pytest.raises(ValueError):
        lagrange4_interp(np.array([0.5]), x[::-1], x)


@pytest.mark.parametrize("nx", [7, 8])
def test_compare_profile_exact_on_cubic_profile(nx):
    # cubic with the wall values u(0) = 0 and u(1) = 1, as the centreline end points assume
    def profile(y):
        return y * (1.0 - 4.0 * (1.0 - y) * (1.5 - y))

    vel = _field_from_profile(profile, ny=10, nx=nx)
    y_ref = np.array([0.0, 0.03, 0.5, 0.97, 0.99, 1.0])
    result = compare_profile(vel, y_ref, profile(y_ref))
    assert result["max_abs_error"] < 1e-12
    np.testing.assert_allclose(result["u_interp"], profile(y_ref), atol=1e-12)


@pytest.mark.parametrize("reynolds", [100, 1000])
def test_compare_to_ghia_zero_on_field_built_from_ghia(reynolds):
    ref = ghia_u_centreline(reynolds)
    vel = _field_from_profile(_natural_spline(ref["y"], ref["u"]), ny=512, nx=16)
    result = compare_to_ghia(vel, reynolds)
    assert result["reynolds"] == reynolds
    assert result["y"].shape == result["errors"].shape == result["u_interp"].shape == (17,)
    np.testing.assert_array_equal(result["u_ref"], ref["u"])
    np.testing.assert_allclose(result["errors"], result["u_interp"] - ref["u"])
    assert result["max_abs_error"] == pytest.approx(np.max(np.abs(result["errors"])))
    assert result["max_abs_error"] < 1e-4
    # at 128 cells linear interpolation would err by ~3e-3 under the lid; cubic stays well below
    coarse = _field_from_profile(_natural_spline(ref["y"], ref["u"]), ny=128, nx=16)
    assert compare_to_ghia(coarse, reynolds)["max_abs_error"] < 5e-4


def test_compare_to_ghia_detects_flipped_and_shifted_fields():
    ref = ghia_u_centreline(1000)
    spline = _natural_spline(ref["y"], ref["u"])
    ny = 128
    flipped = _field_from_profile(lambda y: spline(1.0 - y), ny=ny, nx=16)
    assert compare_to_ghia(flipped, 1000)["max_abs_error"] > 0.3
    # cell-centre vs node confusion: profile sampled half a cell off
    shifted = _field_from_profile(lambda y: spline(np.clip(y + 0.5 / ny, 0, 1)), ny=ny, nx=16)
    assert compare_to_ghia(shifted, 1000)["max_abs_error"] > 0.01


def test_compare_to_ghia_nan_field_never_passes():
    vel = np.full((16, 16, 2), np.nan)
    assert np.isnan(compare_to_ghia(vel, 100)["max_abs_error"])


def test_packaged_csv_keeps_citation():
    from importlib import resources

    text = (resources.files("simsplit.fluid") / "data" / "ghia1982_u_centreline.csv").read_text()
    assert text.startswith("# Ghia, Ghia & Shin (1982), J. Comput. Phys. 48:387-411")


# --- the cube: Albensoeder & Kuhlmann (2005) ------------------------------------------------


def test_cube_table_in_simsplits_frame():
    """Their Tables 5 and 6 (cube [-1/2, 1/2]^3, lid at x = -1/2 moving +y) mapped onto the
    cube [0, 1]^3 with the lid at z = 1 moving +x; spot values checked through the mapping."""
    from simsplit.fluid.reference import CUBE_REYNOLDS, cube_centrelines

    assert CUBE_REYNOLDS == (1000,)
    ref = cube_centrelines(1000.0)
    for pos, vel in (("y", "u"), ("x", "v")):
        assert ref[pos].shape == ref[vel].shape == (17,)
        assert np.all(np.diff(ref[pos]) > 0) and (ref[pos][0], ref[pos][-1]) == (0.0, 1.0)
    assert (ref["u"][0], ref["u"][-1]) == (0.0, 1.0)  # resting floor, lid at z = 1
    assert (ref["v"][0], ref["v"][-1]) == (0.0, 0.0)  # resting side walls
    # Table 5, x = 0.3984 (near the wall facing the lid): v = -0.27293 -> z = 0.1016
    assert ref["u"][np.isclose(ref["y"], 0.1016)][0] == pytest.approx(-0.27293)
    # Table 6, y = 0.4063 (downstream): u = 0.43423 away from the lid -> x = 0.9063, u_z < 0
    assert ref["v"][np.isclose(ref["x"], 0.9063)][0] == pytest.approx(-0.43423)
    # the points are Ghia et al.'s, as the paper tabulates them
    np.testing.assert_allclose(ref["y"], ghia_u_centreline(1000)["y"], atol=1e-12)
    with pytest.raises(ValueError, match=r"Re = 100\b.*available: \[1000\]"):
        cube_centrelines(100)


def _cube_field(ref: dict, n: int) -> np.ndarray:
    """(n, n, n, 3) whose two middle y-layers carry the reference centrelines (u_x(z) on
    every column, u_z(x) on every row) and whose other layers carry garbage."""
    z = (np.arange(n) + 0.5) / n
    vel = np.random.default_rng(1).normal(size=(n, n, n, 3))
    mid = slice((n - 1) // 2, n // 2 + 1)
    vel[:, mid, :, 0] = _natural_spline(ref["y"], ref["u"])(z)[:, None, None]
    vel[:, mid, :, 2] = _natural_spline(ref["x"], ref["v"])(z)[None, None, :]
    vel[:, mid, :, 1] = 0.0
    return vel


def test_compare_to_cube_on_its_own_centrelines_and_flipped():
    from simsplit.fluid.reference import compare_to_cube, cube_centrelines

    ref = cube_centrelines(1000)
    result = compare_to_cube(_cube_field(ref, 256), 1000)
    assert result["reynolds"] == 1000
    assert result["vertical"]["max_abs_error"] < 2e-3
    assert result["horizontal"]["max_abs_error"] < 2e-3
    np.testing.assert_array_equal(result["horizontal"]["v_ref"], ref["v"])
    # the lid on the wrong side, or u_z with the paper's sign: far off
    flipped = dict(ref, u=ref["u"][::-1].copy(), v=-ref["v"])
    wrong = compare_to_cube(_cube_field(flipped, 256), 1000)
    assert wrong["vertical"]["max_abs_error"] > 0.3 and wrong["horizontal"]["max_abs_error"] > 0.3


def test_cube_csv_states_its_source():
    from importlib import resources

    text = (resources.files("simsplit.fluid") / "data"
            / "albensoeder_kuhlmann2005_cube_re1000.csv").read_text()
    assert text.startswith("# Albensoeder & Kuhlmann (2005)")
    assert "J. Comput. Phys. 206:536-558" in text and "Table 5" in text and "Table 6" in text
    assert "tum-pbs/PICT" in text  # where the numbers were taken from


@pytest.mark.filterwarnings("ignore:fluid.reynolds")  # tau near 0.5 on these small grids
@pytest.mark.parametrize("shape, boundaries, reynolds, expected", [
    ([32, 32], {"x": "wall", "y": "wall", "lid": True}, 100, "Ghia"),
    ([32, 32], {"x": "wall", "y": "wall", "lid": True}, 400, None),
    ([16, 16, 16], {"x": "wall", "y": "wall", "z": "wall", "lid": True}, 1000, "Albensoeder"),
    ([16, 16, 16], {"x": "wall", "y": "wall", "z": "wall", "lid": True}, 100, None),
    ([16, 16, 8], {"x": "wall", "y": "wall", "z": "wall", "lid": True}, 1000, None),
    ([16, 4, 16], {"x": "wall", "y": "periodic", "z": "wall", "lid": True}, 100, "Ghia"),
])
def test_cavity_reference_picks_the_table_that_fits(shape, boundaries, reynolds, expected):
    from simsplit.case import validate_case
    from simsplit.fluid.reference import cavity_reference
    from simsplit.fluid.setup import setup_from_case
    from tests.conftest import fluid_case

    case = fluid_case(domain__shape=shape, domain__boundaries=boundaries,
                      fluid__reynolds=reynolds, fluid__lid_velocity=0.05)
    setup = setup_from_case(validate_case(case))
    ref = cavity_reference(setup, reynolds)
    assert (ref and ref["label"].split()[0]) == expected
