"""Lennard-Jones coefficients per pair of atom types: what the case and the input file give,
mixing rules for the pairs they do not, and the flat table the typed force kernels read.

Sources, later ones winning: ``md.potential`` for every like pair (i, i); the Pair Coeffs /
PairIJ Coeffs of a LAMMPS data file; ``md.pair_coeffs`` entries of the case. An unlike pair
(i, j) given nowhere is mixed from (i, i) and (j, j) like LAMMPS ``pair_modify mix``:
geometric (epsilon, sigma and cutoff as geometric means; LAMMPS' default for lj/cut) or
arithmetic (Lorentz-Berthelot: sigma and cutoff as arithmetic means). Kob-Andersen's cross pair
is no mixing rule: give it in ``md.pair_coeffs``. The ``wca`` style puts every pair's cutoff at
its minimum, 2^(1/6) sigma (the solver shifts the energy there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

#: columns of :meth:`PairTable.kernel_table` (one row per ordered type pair ti * ntypes + tj)
KERNEL_COLUMNS = ("rcsq", "eps4", "eps24", "sigsq", "eshift")


@dataclass
class PairTable:
    """epsilon, sigma and cutoff per type pair (symmetric ``ntypes x ntypes`` arrays)."""

    names: list[str]
    epsilon: np.ndarray
    sigma: np.ndarray
    cutoff: np.ndarray

    @property
    def ntypes(self) -> int:
        return len(self.names)

    @property
    def max_cutoff(self) -> float:
        return float(self.cutoff.max())

    def list_cutsq(self, skin: float) -> np.ndarray:
        """``ntypes^2`` float64: each ordered pair's squared neighbour-list cutoff
        (rc_ij + skin)^2, as LAMMPS' per-type-pair ``cutneighsq``."""
        reach = (self.cutoff + skin).ravel()
        return reach * reach

    def kernel_table(self, shift: bool) -> np.ndarray:
        """``(ntypes^2, 5)`` float64: rc^2, 4 eps, 24 eps, sigma^2 and the energy shift (0
        unless ``shift``) of each ordered pair, the parameters of the one-type kernel."""
        out = np.empty((self.ntypes * self.ntypes, len(KERNEL_COLUMNS)))
        for i in range(self.ntypes):
            for j in range(self.ntypes):
                eps, sig, rc = self.epsilon[i, j], self.sigma[i, j], self.cutoff[i, j]
                sr6 = (sig / rc) ** 6
                out[i * self.ntypes + j] = (rc * rc, 4.0 * eps, 24.0 * eps, sig * sig,
                                            4.0 * eps * sr6 * (sr6 - 1.0) if shift else 0.0)
        return out

    def force_shift_table(self) -> np.ndarray:
        """``(ntypes^2, 7)`` float64 for the force-shifted kernels (LAMMPS
        ``lj/smooth/linear``): rc^2, 4 eps, 24 eps, sigma^2, e(rc), f(rc) = -e'(rc) and rc of
        each ordered pair."""
        out = np.empty((self.ntypes * self.ntypes, 7))
        for i in range(self.ntypes):
            for j in range(self.ntypes):
                eps, sig, rc = self.epsilon[i, j], self.sigma[i, j], self.cutoff[i, j]
                sr6 = (sig / rc) ** 6
                out[i * self.ntypes + j] = (rc * rc, 4.0 * eps, 24.0 * eps, sig * sig,
                                            4.0 * eps * sr6 * (sr6 - 1.0),
                                            24.0 * eps * sr6 * (2.0 * sr6 - 1.0) / rc, rc)
        return out

    def tail(self, counts: Sequence[int], volume: float) -> tuple[float, float]:
        """Long-range energy and virial of a truncated LJ mixture with ``counts`` atoms per
        type (LAMMPS ``pair_modify tail yes``): per pair type ``8 pi N_i N_j eps sigma^6
        (sigma^6 - 3 rc^6) / (9 rc^9)`` and ``16 pi N_i N_j eps sigma^6 (2 sigma^6 - 3 rc^6) /
        (9 rc^9)``, summed over ordered pairs; the virial is what adds ``ptail / V^2`` to the
        pressure ``(dof T + W) / (3 V)``."""
        energy = ptail = 0.0
        for i in range(self.ntypes):
            for j in range(self.ntypes):
                eps, rc = self.epsilon[i, j], self.cutoff[i, j]
                s6, rc3 = self.sigma[i, j] ** 6, rc ** 3
                rc9 = rc3 * rc3 * rc3
                pairs = float(counts[i]) * float(counts[j])
                energy += 8.0 * math.pi * pairs * eps * s6 * (s6 - 3.0 * rc3 * rc3) / (9.0 * rc9)
                ptail += (16.0 * math.pi * pairs * eps * s6 * (2.0 * s6 - 3.0 * rc3 * rc3)
                          / (9.0 * rc9))
        return energy / volume, 3.0 * ptail / volume


def build_pair_table(md: dict[str, Any], names: list[str],
                     file_coeffs: np.ndarray | None = None) -> PairTable:
    """The table of a case: ``md.potential``, a data file's ``file_coeffs`` (epsilon, sigma,
    cutoff per pair, NaN where not given), ``md.pair_coeffs``, then the mixing rule.
    ``ValueError`` naming the key for a type name that does not exist."""
    pot = md["potential"]
    n = len(names)
    eps = np.full((n, n), np.nan)
    sig = np.full((n, n), np.nan)
    cut = np.full((n, n), np.nan)
    for i in range(n):
        eps[i, i], sig[i, i], cut[i, i] = pot["epsilon"], pot["sigma"], pot["cutoff"]
    if file_coeffs is not None:
        for i in range(n):
            for j in range(n):
                e, s, c = file_coeffs[i, j]
                if not np.isnan(e):
                    eps[i, j], sig[i, j] = e, s
                    cut[i, j] = pot["cutoff"] if np.isnan(c) else c
    given = np.zeros((n, n), bool)
    np.fill_diagonal(given, True)
    if file_coeffs is not None:
        given |= ~np.isnan(file_coeffs[..., 0])
    for k, entry in enumerate(md.get("pair_coeffs") or []):
        i, j = (_type_index(t, names, k) for t in entry["types"])
        for a, b in ((i, j), (j, i)):
            eps[a, b], sig[a, b] = entry["epsilon"], entry["sigma"]
            cut[a, b] = pot["cutoff"] if entry.get("cutoff") is None else entry["cutoff"]
            given[a, b] = True
    arithmetic = pot.get("mixing", "geometric") == "arithmetic"
    for i in range(n):
        for j in range(n):
            if given[i, j]:
                continue
            eps[i, j] = math.sqrt(eps[i, i] * eps[j, j])
            if arithmetic:
                sig[i, j] = 0.5 * (sig[i, i] + sig[j, j])
                cut[i, j] = 0.5 * (cut[i, i] + cut[j, j])
            else:
                sig[i, j] = math.sqrt(sig[i, i] * sig[j, j])
                cut[i, j] = math.sqrt(cut[i, i] * cut[j, j])
    if pot.get("style") == "wca":  # the repulsive part alone: the minimum of every pair
        cut = 2.0 ** (1.0 / 6.0) * sig
    if np.any(sig > cut):
        i, j = np.argwhere(sig > cut)[0]
        raise ValueError(f"md.pair_coeffs: the cutoff {cut[i, j]:g} of types "
                         f"{names[i]}-{names[j]} is below their sigma {sig[i, j]:g}")
    return PairTable(list(names), eps, sig, cut)


def _type_index(name: Any, names: list[str], entry: int) -> int:
    text = str(name)
    if text in names:
        return names.index(text)
    raise ValueError(f"md.pair_coeffs[{entry}].types: no atom type {text!r}; the types are "
                     f"{', '.join(names)}")
