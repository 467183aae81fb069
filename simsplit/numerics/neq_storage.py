"""``run.storage: neq16``: each cell's moments and its populations' 16-bit deviations from
their equilibrium (docs/storage.md, "Non-equilibrium storage").

The kernel that writes cell x's post-collision populations f*_q stores a record of x: rho - 1
as IEEE binary16 of ``(rho - 1) * 2^10``, u in float32 and, per population, the deviation
``d_q = f*_q - f^eq_q(rho, u)`` as an int16 significand ``n_q`` of one power of two ``2^k`` per
cell (block floating point: the least k with every ``|d_q| / 2^k`` rounding below 2^15). The
reader x + c_q rebuilds ``f*_q = f^eq_q(rho, u) + n_q 2^k`` from x's record. Where storing
``f - w`` in 16 bits (``float16``, ``e4m11``) puts the equilibrium's velocity part (~1e-2) in
the rounded bits, d_q is the non-equilibrium part (~1e-6 to 1e-3): the error stays near float32
storage's (measured by ``scripts/fp16_study.py``, ``f32/neq-bfp-rho16``, whose emulation these
operations reproduce bit for bit).

Records are ``Q + 2 + 2 dim`` uint16 slots per cell (:func:`record_slots`), slot planes first
like populations: n_q (int16 bits), k, the fp16 bits of rho - 1, then each u component's float32
bits, low half first. uint16 is the array type by which every backend tells this storage apart
(fp16 travels as float16, e4m11 as int16).

Every number is computed in float32 in a fixed order, the same in every backend's kernels:
moments summed from q = 0 up (momentum components in order, zero products included), the
equilibrium as :meth:`simsplit.numerics.lattice.Lattice.equilibrium` (``((1 + 3 cu) + 4.5 cu
cu) - 1.5 usq``, then ``(w rho) poly``), d = f* - f^eq, its rounding in float64 (exact), and
``f = float32(n_q 2^k) + f^eq`` on reading.
"""

from __future__ import annotations

import numpy as np

from simsplit.numerics.lattice import D2Q9, D3Q19, Lattice

#: the array type of neq16 records
NEQ16_DTYPE = np.dtype(np.uint16)
#: significant bits of the largest |d_q| of a cell (int16 significands: |n_q| <= 2^15 - 1)
NEQ_BITS = 15
#: rho - 1 is stored as binary16 of (rho - 1) * RHO_SCALE (as run.storage: float16 stores f - w)
RHO_SCALE = 1024.0


def lattice_of(q: int) -> Lattice:
    """The lattice with ``q`` populations (9: D2Q9, 19: D3Q19)."""
    return {9: D2Q9, 19: D3Q19}[q]


def record_slots(q: int) -> int:
    """uint16 slots of a cell's record for a lattice of ``q`` populations."""
    return q + 2 + 2 * lattice_of(q).dim


def exponent_slot(q: int) -> int:
    """The slot of the cell's power of two k."""
    return q


def rho_slot(q: int) -> int:
    """The slot of rho - 1 (binary16 bits of (rho - 1) * 2^10)."""
    return q + 1


def velocity_slot(q: int, axis: int) -> int:
    """The first (low-half) slot of velocity component ``axis``."""
    return q + 2 + 2 * axis


def halo_slots(q: int, crossing: np.ndarray) -> np.ndarray:
    """Slots a halo moves for the populations ``crossing`` a face: their n_q and the whole
    record's moments and exponent (the reader rebuilds f*_q from them)."""
    return np.concatenate([np.asarray(crossing, np.int64),
                           np.arange(q, record_slots(q), dtype=np.int64)])


def _equilibrium(lattice: Lattice, rho: np.ndarray, u: np.ndarray) -> np.ndarray:
    """float32 equilibria ``(q, cells)`` with the kernels' operations (those of
    Lattice.equilibrium in float32)."""
    return lattice.equilibrium(rho, *u, dtype=np.float32, order=2)


def _moments(lattice: Lattice, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rounded rho, fp16 bits of rho - 1, u) of float32 populations ``(q, cells)``: sums from
    q = 0 up, u = j * (1 / rho) with the unrounded rho."""
    one = np.float32(1.0)
    r = np.zeros(f.shape[1], np.float32)
    j = np.zeros((lattice.dim, f.shape[1]), np.float32)
    for q in range(lattice.q):
        r += f[q]
        for a in range(lattice.dim):
            j[a] += np.float32(lattice.c[q, a]) * f[q]
    inv = one / r
    u = j * inv
    bits = ((r - one) * np.float32(RHO_SCALE)).astype(np.float16)  # one rounding (RNE)
    rho = one + (bits.astype(np.float64) / RHO_SCALE).astype(np.float32)  # exact
    return rho, bits.view(np.uint16), u


def encode(f: np.ndarray) -> np.ndarray:
    """Populations ``f[q, ...]`` (rounded to float32 first) -> neq16 records ``(slots, ...)``."""
    f32 = np.asarray(f).astype(np.float32)
    lattice = lattice_of(f32.shape[0])
    flat = f32.reshape(lattice.q, -1)
    rho, rho_bits, u = _moments(lattice, flat)
    d = (flat - _equilibrium(lattice, rho, u)).astype(np.float64)  # f* - f^eq in float32
    top = np.abs(d).max(axis=0)
    k = np.frexp(top)[1].astype(np.int64) - NEQ_BITS
    k += np.rint(np.ldexp(top, -k)) >= 2.0**NEQ_BITS
    k = np.where(top > 0, k, 0)
    n = np.rint(np.ldexp(d, -k)).astype(np.int16)
    out = np.empty((record_slots(lattice.q), flat.shape[1]), NEQ16_DTYPE)
    out[:lattice.q] = n.view(np.uint16)
    out[exponent_slot(lattice.q)] = k.astype(np.int16).view(np.uint16)
    out[rho_slot(lattice.q)] = rho_bits
    for a in range(lattice.dim):
        halves = u[a].view(np.uint32)
        s = velocity_slot(lattice.q, a)
        out[s] = (halves & 0xFFFF).astype(np.uint16)
        out[s + 1] = (halves >> 16).astype(np.uint16)
    return out.reshape(out.shape[0], *f32.shape[1:])


def decode(records: np.ndarray) -> np.ndarray:
    """neq16 records ``(slots, ...)`` -> float32 populations ``(q, ...)`` as a reader rebuilds
    them."""
    raw = np.asarray(records).view(NEQ16_DTYPE)
    q = next(n for n in (9, 19) if record_slots(n) == raw.shape[0])
    lattice = lattice_of(q)
    flat = raw.reshape(raw.shape[0], -1)
    bits = flat[rho_slot(q)].view(np.float16)
    rho = np.float32(1.0) + (bits.astype(np.float64) / RHO_SCALE).astype(np.float32)
    u = np.empty((lattice.dim, flat.shape[1]), np.float32)
    for a in range(lattice.dim):
        s = velocity_slot(q, a)
        u[a] = (flat[s].astype(np.uint32) | (flat[s + 1].astype(np.uint32) << 16)).view(
            np.float32)
    k = flat[exponent_slot(q)].view(np.int16).astype(np.int64)
    n = flat[:q].view(np.int16).astype(np.float64)
    f = np.ldexp(n, k).astype(np.float32) + _equilibrium(lattice, rho, u)
    return f.reshape(q, *raw.shape[1:])
