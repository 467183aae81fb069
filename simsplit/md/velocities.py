"""Maxwell-Boltzmann initial velocities and the temperature they correspond to."""

from __future__ import annotations

import math

import numpy as np


def degrees_of_freedom(n_atoms: int) -> int:
    """3N - 3: total momentum is zero and conserved (LAMMPS default for ``compute temp``)."""
    return max(3 * n_atoms - 3, 1)


def temperature(v: np.ndarray, mass: float | np.ndarray) -> float:
    """Kinetic temperature (k_B = 1) over 3N - 3 degrees of freedom, summed exactly; ``mass``
    one number or one per atom."""
    m = np.asarray(mass, dtype=np.float64)
    mv2 = mass * (v * v).ravel() if m.ndim == 0 else (m[:, None] * (v * v)).ravel()
    return math.fsum(mv2) / degrees_of_freedom(v.shape[0])


def maxwell_boltzmann(n_atoms: int, mass: float | np.ndarray, temp: float, seed: int
                      ) -> np.ndarray:
    """Velocities ``(n_atoms, 3)`` in atom-id order: Gaussian (PCG64 seeded) of variance
    temp / m, zero total momentum, then scaled so the kinetic temperature is exactly ``temp``
    (``mass``: one number, or one per atom)."""
    m = np.asarray(mass, dtype=np.float64)
    if not np.all(m > 0):
        raise ValueError(f"md.mass: must be > 0, got {mass!r}")
    if temp < 0:
        raise ValueError(f"md.temperature: must be >= 0, got {temp!r}")
    rng = np.random.Generator(np.random.PCG64(seed))
    if m.ndim == 0:
        v = rng.standard_normal((n_atoms, 3)) * math.sqrt(temp / mass)
        v -= v.mean(axis=0)
    else:
        v = rng.standard_normal((n_atoms, 3)) * np.sqrt(temp / m)[:, None]
        v -= (m[:, None] * v).sum(axis=0) / m.sum()
    current = temperature(v, mass)
    if current > 0:
        v *= math.sqrt(temp / current)
    return v
