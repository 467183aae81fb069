"""Reference implementations for checking MD kernels: a small-case builder and an all-pairs
NumPy Lennard-Jones oracle (O(N^2) memory: a few thousand atoms at most)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def lj_case(cells: Sequence[int] = (4, 4, 4), density: float = 0.8442, subdomains: int = 1,
            weights: list[float] | None = None, **md: Any) -> dict[str, Any]:
    """A case dict for an fcc LJ system; keyword arguments override ``md`` keys."""
    section: dict[str, Any] = {
        "lattice": {"type": "fcc", "density": density, "cells": list(cells)},
        "temperature": 1.44,
        "seed": 12345,
        "potential": {"style": "lj/cut", "epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5},
        "neighbor": {"skin": 0.3},
        "timestep": 0.005,
        "thermo_every": 50,
    }
    section.update(md)
    return {
        "physics": "md",
        "md": section,
        "run": {"steps": 100, "backend": "cpu", "precision": "float64"},
        "decomposition": {"subdomains": subdomains, "weights": weights},
        "output": {"dir": None, "every": 0},
    }


def lj_oracle(x: np.ndarray, box: np.ndarray, rc: float, eps: float = 1.0, sigma: float = 1.0
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All-pairs minimum-image LJ: forces (N, 3), per-atom energy and per-atom virial."""
    d = x[:, None, :] - x[None, :, :]
    d -= box * np.round(d / box)
    r2 = np.einsum("ijk,ijk->ij", d, d)
    np.fill_diagonal(r2, np.inf)
    inside = r2 < rc * rc
    r2 = np.where(inside, r2, 1.0)
    sr6 = np.where(inside, (sigma * sigma / r2) ** 3, 0.0)
    fpair = 24.0 * eps * sr6 * (2.0 * sr6 - 1.0) / r2
    f = np.einsum("ijk,ij->ik", d, fpair)
    pe = 0.5 * np.sum(4.0 * eps * sr6 * (sr6 - 1.0), axis=1)
    vir = 0.5 * np.sum(np.where(inside, r2 * fpair, 0.0), axis=1)
    return f, pe, vir
