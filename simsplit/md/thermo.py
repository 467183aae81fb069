"""Thermodynamic output in the LAMMPS convention (LJ units, energies per atom).

Sums run over per-atom values gathered by global id and are taken with ``math.fsum``
(correctly rounded), so they do not depend on how atoms are split between slabs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simsplit.md.velocities import degrees_of_freedom

THERMO_KEYS = ("step", "temp", "pe", "ke", "etotal", "press")
_HEADER = f"{'Step':>10} {'Temp':>14} {'E_pair':>14} {'TotEng':>14} {'Press':>14}"


def thermo_record(step: int, pe_atom: np.ndarray, vir_atom: np.ndarray, mv2_atom: np.ndarray,
                  volume: float) -> dict[str, Any]:
    """One thermo line from per-atom energy, virial (``r.f / 2`` per pair) and ``m v^2``.

    ``T = sum m v^2 / (3N - 3)``; ``P = (dof T + W) / (3 V)`` with ``W`` the pair virial,
    exactly as LAMMPS ``compute pressure``.
    """
    n = pe_atom.shape[0]
    dof = degrees_of_freedom(n)
    two_ke = math.fsum(mv2_atom)
    pe = math.fsum(pe_atom)
    w = math.fsum(vir_atom)
    temp = two_ke / dof
    return {
        "step": int(step),
        "temp": temp,
        "pe": pe / n,
        "ke": 0.5 * two_ke / n,
        "etotal": (pe + 0.5 * two_ke) / n,
        "press": (dof * temp + w) / (3.0 * volume),
    }


def header() -> str:
    return _HEADER


def format_row(rec: dict[str, Any]) -> str:
    return (f"{rec['step']:>10d} {rec['temp']:>14.8g} {rec['pe']:>14.8g} "
            f"{rec['etotal']:>14.8g} {rec['press']:>14.8g}")
