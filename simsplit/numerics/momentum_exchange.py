"""Momentum exchange on the links from fluid cells to bodies (Wen et al. 2014): the per-link
formulas, and the table of one slab's links that every backend's force kernel reads.

The formulas here, in NumPy, are the CPU kernel and the reference the device kernels
(kernels/link_forces.cu, simsplit/backends/numba_cuda/link_forces.py) follow operation for
operation, in double precision without fused multiply-adds, so every backend produces the same
momentum per link; the sums over links are exact (:mod:`simsplit.numerics.exact`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simsplit.numerics import neq_storage
from simsplit.numerics.storage import E4M11_DTYPE, e4m11_to_float


def returned_population(f_out: np.ndarray, own_in: np.ndarray, nb: np.ndarray,
                        k: np.ndarray, w1: np.ndarray | None = None,
                        w2: np.ndarray | None = None, far: np.ndarray | None = None
                        ) -> np.ndarray:
    """What the kernels return along -c_q at a wall at rest (simsplit/fluid/geometry/links.py):
    interpolated bounce-back with first weight k (k >= 0 mixes f*_q(x - c_q) = ``nb``, k < 0
    the own f*_qbar(x) = ``own_in``, with weight ``w1``: 1 - |k| for the linear rule, its
    default) plus ``w2`` times ``far`` (quadratic: f*_q(x - 2 c_q) where k >= 0, f*_qbar(x -
    c_q) else; w2 = 0 for linear links). Halfway: k = -1, f_back = f_out."""
    if w1 is None:
        w1 = 1 - np.abs(k)
    back = np.where(k >= 0, k * f_out + w1 * nb, -k * f_out + w1 * own_in)
    return back if w2 is None else back + w2 * far


def link_momentum(f_out: np.ndarray, f_back: np.ndarray, c: np.ndarray,
                  u_wall: np.ndarray) -> np.ndarray:
    """Momentum (per link, ``(n, dim)``) that links with outgoing post-collision populations
    ``f_out`` (n,) along ``c`` (n, dim), and ``f_back`` (n,) returned along -c by the wall
    rule, pass in one step to a wall moving at ``u_wall`` (dim,) (Wen et al. 2014)."""
    return (c - u_wall) * f_out[:, None] - (-c - u_wall) * f_back[:, None]


@dataclass(frozen=True)
class SlabLinkTable:
    """The fluid-to-body links of one slab, in the coordinates of its population array
    ``f[q, layer, *cross]`` (ghost planes and cells counted: interior cell 0 is index 1).

    ``out``: where f*_q(x) is (q pointing into the body); ``own_in``: f*_qbar(x); ``nb``:
    f*_q(x - c_q), which may lie in a ghost plane (the neighbour slab's, current after a
    step), read only where ``k`` >= 0 (elsewhere it repeats ``out``). ``k``: the link's
    interpolated bounce-back weight as the kernels round it (-1: halfway), ``w1`` the weight
    of its second term (1 - |k| for linear links); quadratic links add ``w2`` times ``far``
    (f*_q(x - 2 c_q) where k >= 0, f*_qbar(x - c_q) else; decoded with weight ``w_far``; it
    repeats ``out`` where w2 = 0). ``c``: c_q (n, dim), x first; ``body``: the body index.
    Stored populations are decoded as :class:`simsplit.numerics.storage.PopulationStorage`
    does: ``x * inv_scale + w_q`` in the arithmetic type where ``shifted``, with ``w_out`` /
    ``w_in`` the weights of q and qbar; neq16 records (``records``) are rebuilt as a reader
    rebuilds them (:func:`simsplit.numerics.neq_storage.decode` of the cell's record).
    Positions count the array the table is read from (for blocks with two ghost planes a face,
    the array behind the views).
    """

    out: tuple[np.ndarray, ...]
    own_in: tuple[np.ndarray, ...]
    nb: tuple[np.ndarray, ...]
    k: np.ndarray
    c: np.ndarray
    body: np.ndarray
    n_bodies: int
    arith: np.dtype
    shifted: bool
    inv_scale: float
    w_out: np.ndarray
    w_in: np.ndarray
    far: tuple[np.ndarray, ...]
    w1: np.ndarray
    w2: np.ndarray
    w_far: np.ndarray
    records: bool = False

    @property
    def n(self) -> int:
        return len(self.k)

    @property
    def dim(self) -> int:
        return int(self.c.shape[1])

    def flat(self, strides: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        """Element offsets of ``out``, ``own_in``, ``nb`` and ``far`` in an array with these
        element strides (int64), for kernels that index memory themselves."""
        return tuple(sum(idx.astype(np.int64) * int(s) for idx, s in zip(where, strides,
                                                                          strict=True))
                     for where in (self.out, self.own_in, self.nb, self.far))

    def _decoded(self, f: np.ndarray, where: tuple[np.ndarray, ...],
                 w: np.ndarray) -> np.ndarray:
        if self.records:  # the cells' whole records (slots, n), f*_q of each rebuilt
            rebuilt = neq_storage.decode(f[(slice(None), *where[1:])])
            return rebuilt[where[0], np.arange(len(where[0]))].astype(np.float64)
        x = f[where]
        # e4m11 bits (int16) denote values of their own; fp16 and float convert by value
        x = (e4m11_to_float(x) if x.dtype == E4M11_DTYPE else x).astype(self.arith)
        if self.shifted:
            t = self.arith.type
            x = x * t(self.inv_scale) + w.astype(self.arith)
        return x.astype(np.float64)

    def momentum(self, f: np.ndarray) -> np.ndarray:
        """Per link ``(n, dim)``: the momentum passed in one step, from the slab's host
        population array ``f`` (bodies at rest)."""
        f_out = self._decoded(f, self.out, self.w_out)
        own_in = self._decoded(f, self.own_in, self.w_in)
        nb = self._decoded(f, self.nb, self.w_out)
        far = self._decoded(f, self.far, self.w_far)
        f_back = returned_population(f_out, own_in, nb, self.k, self.w1, self.w2, far)
        return link_momentum(f_out, f_back, self.c, np.zeros(self.dim))
