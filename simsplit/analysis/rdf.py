"""Radial distribution functions g_ab(r) per type pair, averaged over frames, with the running
coordination number n_ab(r) = 4 pi rho_b int_0^r g_ab(s) s^2 ds.

Pairs within ``r_max`` (at most half the shortest box edge: minimum image) are found with cell
lists (atoms sorted by cell, cells of r_max / 2) and binned by a Numba kernel. Normalisation:
for a != b, g_ab = V <pairs (i in a, j in b) in the shell> / (N_a N_b shell volume); for a == b
the pairs i != j are counted in both orders and divided by N_a (N_a - 1), so an ideal gas gives
g = 1 on average. (MDAnalysis' InterRDF
divides by N_a N_b in both cases: its g_aa is ours times (N_a - 1) / N_a.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from simsplit.errors import InputFileError
from simsplit.io.trajectory import Trajectory

#: default r_max (LJ sigma) where half the box allows more: a liquid's g(r) is flat beyond it
DEFAULT_RMAX = 5.0


@dataclass
class RDF:
    """``edges`` (bins + 1,) and ``r`` (bin centres); ``g[a, b]`` and ``coordination[a, b]``
    (types, types, bins); ``counts`` atoms per type; ``frames`` averaged; ``density`` N / V."""

    edges: np.ndarray
    g: np.ndarray
    coordination: np.ndarray
    counts: np.ndarray
    frames: int
    density: float
    type_names: list[str]

    @property
    def r(self) -> np.ndarray:
        return 0.5 * (self.edges[1:] + self.edges[:-1])

    def pairs(self) -> list[tuple[int, int]]:
        """Type pairs (a <= b) that have atoms on both sides."""
        n = len(self.type_names)
        return [(a, b) for a in range(n) for b in range(a, n)
                if self.counts[a] > (a == b) and self.counts[b] > 0]


@numba.njit(cache=True)
def _bin_pairs(x, box, typeid, rmax, nbins, ncell, reach, hist):  # pragma: no cover - compiled
    """Add each pair i < j closer than rmax to hist[ti, tj, bin] and hist[tj, ti, bin].

    Atoms are sorted by cell (cells of at least rmax / reach, ``reach`` cells searched each way,
    each stencil cell distinct: ncell >= 2 reach + 1), so each neighbour cell is one contiguous
    run of rows; reach 0 means one cell holding every atom (all pairs)."""
    n = x.shape[0]
    rmax2 = rmax * rmax
    scale = nbins / rmax
    nx, ny, nz = ncell[0], ncell[1], ncell[2]
    cell = np.empty(n, np.int64)
    for i in range(n):
        cx = min(int(x[i, 0] / box[0] * nx), nx - 1)
        cy = min(int(x[i, 1] / box[1] * ny), ny - 1)
        cz = min(int(x[i, 2] / box[2] * nz), nz - 1)
        cell[i] = (cz * ny + cy) * nx + cx
    order = np.argsort(cell, kind="mergesort")
    xs = x[order]
    ts = typeid[order]
    start = np.searchsorted(cell[order], np.arange(nx * ny * nz + 1))
    for c in range(nx * ny * nz):
        cx, cy, cz = c % nx, (c // nx) % ny, c // (nx * ny)
        for dz in range(-reach, reach + 1):
            for dy in range(-reach, reach + 1):
                for dx in range(-reach, reach + 1):
                    c2 = (((cz + dz) % nz) * ny + (cy + dy) % ny) * nx + (cx + dx) % nx
                    if c2 < c:
                        continue  # each pair of cells once, from the lower one
                    for i in range(start[c], start[c + 1]):
                        j0 = i + 1 if c2 == c else start[c2]
                        for j in range(j0, start[c2 + 1]):
                            _add(xs, box, ts, i, j, rmax2, scale, nbins, hist)


@numba.njit(cache=True, inline="always")
def _add(x, box, typeid, i, j, rmax2, scale, nbins, hist):  # pragma: no cover - compiled
    r2 = 0.0
    for k in range(3):
        d = x[j, k] - x[i, k]
        d -= box[k] * np.rint(d / box[k])
        r2 += d * d
    if r2 < rmax2:
        b = int(np.sqrt(r2) * scale)
        if b < nbins:
            hist[typeid[i], typeid[j], b] += 1
            hist[typeid[j], typeid[i], b] += 1


def _cells(box: np.ndarray, r_max: float) -> tuple[np.ndarray, int]:
    """Cells per axis and stencil reach: cells of r_max / 2 searched 2 each way where every
    axis has 5 of them, else cells of r_max searched 1 each way where every axis has 3, else
    one cell (all pairs)."""
    for reach in (2, 1):
        ncell = (box * reach // r_max).astype(np.int64)
        if ncell.min() >= 2 * reach + 1:
            return ncell, reach
    return np.ones(3, np.int64), 0


def radial_distribution(traj: Trajectory, frames: list[int], r_max: float | None = None,
                        bins: int = 200) -> RDF:
    """g_ab(r) of every type pair over ``frames`` of ``traj`` (``r_max`` None: the smaller of
    :data:`DEFAULT_RMAX` and half the shortest box edge)."""
    if not frames:
        raise InputFileError(f"{traj.path}: no frames selected")
    if bins < 1:
        raise InputFileError(f"--bins: {bins} must be at least 1")
    half = 0.5 * float(traj.boxes[frames].min())
    if r_max is None:
        r_max = min(DEFAULT_RMAX, half)
    if not 0 < r_max <= half:
        raise InputFileError(f"--rmax: {r_max:g} must be > 0 and at most half the shortest "
                             f"box edge ({half:g}) of {traj.path}")
    ntypes = len(traj.type_names)
    typeid = traj.typeid.astype(np.int64)
    hist = np.zeros((ntypes, ntypes, bins), np.int64)
    volume = 0.0
    for k in frames:
        box = traj.boxes[k].astype(np.float64)
        ncell, reach = _cells(box, float(r_max))
        _bin_pairs(traj.positions(k), box, typeid, float(r_max), bins, ncell, reach, hist)
        volume += float(np.prod(box))
    volume /= len(frames)
    counts = np.bincount(typeid, minlength=ntypes).astype(np.int64)
    edges = np.linspace(0.0, r_max, bins + 1)
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    g = np.zeros((ntypes, ntypes, bins))
    coord = np.zeros_like(g)
    for a in range(ntypes):
        for b in range(ntypes):
            partners = counts[b] - (a == b)
            if counts[a] == 0 or partners <= 0:
                continue
            rho_b = partners / volume
            g[a, b] = hist[a, b] / (len(frames) * counts[a] * rho_b * shell)
            coord[a, b] = np.cumsum(rho_b * g[a, b] * shell)
    return RDF(edges, g, coord, counts, len(frames), traj.n_atoms / volume,
               list(traj.type_names))
