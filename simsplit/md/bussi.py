"""Stochastic velocity rescaling (Bussi, Donadio and Parrinello, J. Chem. Phys. 126, 014101,
2007): the canonical-ensemble thermostat LAMMPS calls ``fix temp/csvr``.

After each step every velocity is multiplied by one factor alpha, drawn so that the kinetic
energy K relaxes towards its target K_t with time constant tau while sampling its canonical
distribution:

    K' = K c + (K_t / N_f)(1 - c)(R_1^2 + S) + 2 R_1 sqrt(c (1 - c) K K_t / N_f),
    c = exp(-dt / tau),  alpha = sqrt(K' / K),

with R_1 a standard normal and S a chi-squared variate of N_f - 1 degrees of freedom. K is the
exact (correctly rounded) total, and the random numbers come from a generator seeded with
(seed, step) alone, so alpha, and the trajectory, do not depend on the split, the rank count or
a restart. The energy the thermostat exchanges is accumulated (``ecouple``) so that
``etotal + ecouple`` is the conserved quantity.
"""

from __future__ import annotations

import math

import numpy as np


def rescale_factor(ke: float, target_ke: float, dof: int, dt: float, tau: float, seed: int,
                   step: int) -> float:
    """alpha for kinetic energy ``ke`` (target ``target_ke``, ``dof`` degrees of freedom) at
    ``step``; 1.0 for a system at rest (nothing to rescale)."""
    if not ke > 0.0:
        return 1.0
    rng = np.random.default_rng([int(seed) % 2 ** 63, int(step) % 2 ** 63])
    r1 = float(rng.standard_normal())
    s = float(rng.chisquare(dof - 1)) if dof > 1 else 0.0
    c = math.exp(-dt / tau)
    new = (ke * c + target_ke / dof * (1.0 - c) * (r1 * r1 + s)
           + 2.0 * r1 * math.sqrt(c * (1.0 - c) * ke * target_ke / dof))
    return math.sqrt(new / ke)
