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
