"""Mean-squared displacement from unwrapped positions (wrapped positions plus image counts
times the box), per type and over all atoms, averaged over every pair of frames with the same
step difference (all time origins):

    MSD(lag) = < |r_i(t + lag) - r_i(t)|^2 >_{i, t}

Frames need not be evenly spaced; each distinct step difference is one lag. Atoms are taken in
chunks so memory stays near ``frames x chunk x 3`` doubles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simsplit.errors import InputFileError
from simsplit.io.trajectory import Trajectory

#: atoms per chunk: frames x chunk x 3 doubles at a time
CHUNK_BYTES = 64 * 2**20


@dataclass
class MSD:
    """``lag_steps`` (L,), ``lag_time`` (L,) or None, ``msd`` (types, L) and ``msd_all`` (L,),
    ``pairs`` frame pairs averaged per lag."""

    lag_steps: np.ndarray
    lag_time: np.ndarray | None
    msd: np.ndarray
    msd_all: np.ndarray
    pairs: np.ndarray
    type_names: list[str]


def mean_squared_displacement(traj: Trajectory, frames: list[int]) -> MSD:
    """MSD of every type over ``frames`` (at least two, with image counts in the file)."""
    if len(frames) < 2:
        raise InputFileError(f"{traj.path}: the MSD needs at least 2 frames, "
                             f"{len(frames)} selected")
    if not traj.has_images:
        raise InputFileError(f"{traj.path}: no image counts: the MSD needs unwrapped "
                             "positions")
    steps = traj.steps[frames]
    if np.any(np.diff(steps) <= 0):
        raise InputFileError(f"{traj.path}: frame steps are not increasing")
    ntypes = len(traj.type_names)
    typeid = traj.typeid
    lags = np.unique((steps[None, :] - steps[:, None])[np.triu_indices(len(frames), 1)])
    sums = np.zeros((ntypes, lags.size))
    pairs = np.zeros(lags.size, np.int64)
    chunk = max(1, CHUNK_BYTES // (len(frames) * 3 * 8))
    for start in range(0, traj.n_atoms, chunk):
        stop = min(start + chunk, traj.n_atoms)
        r = np.stack([traj.unwrapped(k)[start:stop] for k in frames])  # (F, n, 3)
        onehot = np.zeros((stop - start, ntypes))
        onehot[np.arange(stop - start), typeid[start:stop]] = 1.0
        for m in range(1, len(frames)):
            d = r[m:] - r[:-m]
            sq = np.einsum("fnk,fnk->fn", d, d) @ onehot  # (F - m, types)
            where = np.searchsorted(lags, steps[m:] - steps[:-m])
            np.add.at(sums.T, where, sq)
            if start == 0:
                np.add.at(pairs, where, 1)
    counts = np.bincount(typeid, minlength=ntypes).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_type = sums / (pairs[None, :] * counts[:, None])
    msd_all = sums.sum(axis=0) / (pairs * traj.n_atoms)
    lag_time = None
    if traj.times is not None:
        t = traj.times[frames]
        dt = (t[-1] - t[0]) / (steps[-1] - steps[0]) if steps[-1] > steps[0] else 0.0
        lag_time = lags * dt
    return MSD(lags, lag_time, per_type, msd_all, pairs, list(traj.type_names))
