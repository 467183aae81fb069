"""Thermostats: Bussi stochastic velocity rescaling (``md.ensemble: bussi``) and Nose-Hoover
chains (``md.ensemble: nose-hoover``).

Each against the NIST Standard Reference Simulation Website's Lennard-Jones fluid (rc = 3 sigma
with long-range corrections, N = 500, T* = 0.85, rho* = 0.776: U/N = -5.5121, p* = 0.0068),
with the statistical error measured here by block averages; bitwise the same on every split,
on the device path (emulated CUDA C) and after a restart.
"""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.md import MDSolver
from simsplit.md.bussi import rescale_factor
from simsplit.md.reference import lj_case
from tests.test_md_kernels_compile import emulated, emulated_lib  # noqa: F401

NIST_U, NIST_P = -5.5121, 0.0068


ENSEMBLES = ["bussi", "nose-hoover"]


def _nist_case(ensemble: str = "bussi", **kw):
    return lj_case(cells=(5, 5, 5), density=0.776, temperature=0.85, ensemble=ensemble,
                   potential={"cutoff": 3.0, "tail": True}, neighbor={"skin": 0.3},
                   thermo_every=20, **kw)


def _blocks(values: np.ndarray, n: int = 10) -> tuple[float, float]:
    """Mean and its standard error from ``n`` block means."""
    b = values[: len(values) // n * n].reshape(n, -1).mean(axis=1)
    return float(b.mean()), float(b.std(ddof=1) / np.sqrt(n))


@pytest.mark.slow
@pytest.mark.parametrize("ensemble", ENSEMBLES)
def test_nist_lj_state_point(ensemble) -> None:
    s = MDSolver(_nist_case(ensemble))
    s.step(2000)  # melt the lattice and equilibrate
    first = len(s.thermo())
    s.step(10_000)
    rows = s.thermo()[first:]
    u, du = _blocks(np.array([r["pe"] for r in rows]))
    p, dp = _blocks(np.array([r["press"] for r in rows]))
    t, dt = _blocks(np.array([r["temp"] for r in rows]))
    print(f"\n{ensemble}: U/N {u:.4f} +- {du:.4f} (NIST {NIST_U}), "
          f"p {p:.4f} +- {dp:.4f} (NIST {NIST_P}), T {t:.4f} +- {dt:.4f} (target 0.85)")
    assert abs(u - NIST_U) < 3 * du + 2e-3
    assert abs(p - NIST_P) < 3 * dp + 2e-3
    assert abs(t - 0.85) < 3 * dt + 2e-3
    drift = abs(rows[-1]["econserve"] - rows[0]["econserve"])
    assert drift < 5e-3  # etotal + the energy the thermostat exchanged


@pytest.mark.parametrize("ensemble", ENSEMBLES)
def test_split_independent_and_restartable(ensemble) -> None:
    one = MDSolver(_nist_case(ensemble))
    one.step(300)
    two = MDSolver(_nist_case(ensemble, subdomains=2))
    two.step(120)
    fresh = MDSolver(_nist_case(ensemble, subdomains=1))
    fresh.load_state(two.state())
    fresh.step(180)
    two.step(180)
    for s in (two, fresh):
        assert np.array_equal(s.positions(), one.positions())
        assert np.array_equal(s.velocities(), one.velocities())
    assert two.thermo() == one.thermo()
    assert abs(one.thermo()[-1]["temp"] - 0.85) < 0.2


@pytest.mark.parametrize("ensemble", ENSEMBLES)
def test_on_the_device_path(emulated, ensemble) -> None:  # noqa: F811
    """The emulated CUDA C kernels (two slabs in one arena): exact kinetic energy on the
    device, the same rescaling, the CPU's bits."""
    cpu = MDSolver(_nist_case(ensemble))
    emu = MDSolver(_nist_case(ensemble, subdomains=2), "emulated")
    assert emu.arena is not None
    for s in (cpu, emu):
        s.step(150)
    assert np.array_equal(emu.positions(), cpu.positions())
    assert np.array_equal(emu.velocities(), cpu.velocities())
    assert emu.thermo() == cpu.thermo()


def test_rescale_factor_samples_the_canonical_kinetic_energy() -> None:
    """Iterating the map alone (no dynamics): K samples the canonical gamma distribution
    with mean N_f T / 2 and variance N_f T^2 / 2."""
    dof, t = 30, 1.3
    k, ks = 5.0, []
    for step in range(20_000):
        k *= rescale_factor(k, 0.5 * dof * t, dof, 0.005, 0.05, 7, step) ** 2
        ks.append(k)
    ks = np.array(ks[1000:])
    assert abs(ks.mean() / (0.5 * dof * t) - 1) < 0.03
    assert abs(ks.var() / (0.5 * dof * t * t) - 1) < 0.1
    assert rescale_factor(0.0, 1.0, dof, 0.005, 0.5, 1, 1) == 1.0
