"""Thermodynamic output in the LAMMPS convention (LJ units, energies per atom).

Sums run over per-atom values gathered by global id and are taken with ``math.fsum``
(correctly rounded), or exactly on a GPU and rounded once (the same numbers), so they do not
depend on how atoms are split between slabs.

The thermo table has LAMMPS' column names and one extra column, the throughput since the
previous row; the console shows 8 significant digits, ``thermo.csv`` every digit (``repr``
round-trips), so the file's values equal :meth:`MDSolver.thermo`'s bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simsplit.md.velocities import degrees_of_freedom

THERMO_KEYS = ("step", "temp", "pe", "ke", "etotal", "press")

#: the thermo table's columns (console and thermo.csv): LAMMPS' names, then the throughput
COLUMNS = ("Step", "Temp", "PotEng", "TotEng", "Press", "atom-steps/s")
#: the record keys shown in the columns after Step
_SHOWN = ("temp", "pe", "etotal", "press")
#: columns some runs add before the throughput (NPT: the box), by record key
EXTRA_COLUMNS = {"vol": "Volume", "density": "Density"}
_WIDTH = 14


def thermo_record(step: int, pe_atom: np.ndarray, vir_atom: np.ndarray, mv2_atom: np.ndarray,
                  volume: float, tail: tuple[float, float] = (0.0, 0.0)) -> dict[str, Any]:
    """One thermo line from per-atom energy, virial (``r.f / 2`` per pair) and ``m v^2``.

    ``T = sum m v^2 / (3N - 3)``; ``P = (dof T + W) / (3 V)`` with ``W`` the pair virial,
    exactly as LAMMPS ``compute pressure``.
    """
    return thermo_record_from_sums(step, pe_atom.shape[0], math.fsum(mv2_atom),
                                   math.fsum(pe_atom), math.fsum(vir_atom), volume, tail)


def thermo_record_from_sums(step: int, n: int, two_ke: float, pe: float, w: float,
                            volume: float, tail: tuple[float, float] = (0.0, 0.0)
                            ) -> dict[str, Any]:
    """:func:`thermo_record` from the correctly rounded totals of ``m v^2``, energy and virial
    over all ``n`` atoms (summed on a device, or by fsum: the same numbers); ``tail``: the
    long-range energy and virial to add (:meth:`simsplit.md.pair_table.PairTable.tail`)."""
    pe, w = pe + tail[0], w + tail[1]
    dof = degrees_of_freedom(n)
    temp = two_ke / dof
    return {
        "step": int(step),
        "temp": temp,
        "pe": pe / n,
        "ke": 0.5 * two_ke / n,
        "etotal": (pe + 0.5 * two_ke) / n,
        "press": (dof * temp + w) / (3.0 * volume),
    }


def columns(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The table's columns with the :data:`EXTRA_COLUMNS` of record keys ``extra``."""
    return (*COLUMNS[:-1], *(EXTRA_COLUMNS[k] for k in extra), COLUMNS[-1])


def header(extra: tuple[str, ...] = ()) -> str:
    """The console table's header line."""
    names = columns(extra)
    return f"{names[0]:>10}" + "".join(f" {name:>{_WIDTH}}" for name in names[1:])


def format_row(rec: dict[str, Any], rate: float | None = None,
               extra: tuple[str, ...] = ()) -> str:
    """One console row; ``rate``: atom-steps per second since the previous row (None: blank,
    as for the first row of a run)."""
    row = f"{rec['step']:>10d}" + "".join(f" {rec[key]:>{_WIDTH}.8g}"
                                          for key in (*_SHOWN, *extra))
    return row if rate is None else f"{row} {rate:>{_WIDTH}.4g}"


def csv_row(rec: dict[str, Any], rate: float | None = None,
            extra: tuple[str, ...] = ()) -> list[str]:
    """One thermo.csv row: every digit of the values; the rate empty when there is none."""
    values = [repr(float(rec[key])) for key in (*_SHOWN, *extra)]
    return [str(rec["step"]), *values, "" if rate is None else f"{rate:.6g}"]
