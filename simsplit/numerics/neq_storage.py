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

The stress-kept variant (``stress=True``; the reference of a storage choice being built, issue
25) adds the cell's stress ``Pi_ab = sum_q c_qa c_qb (f*_q - f^eq_q)`` in ``dim (dim + 1) / 2``
more slots (xx, xy, (xz), yy, (yz), (zz)), each as binary16 of ``Pi_ab * 2^10``
(:func:`round_stress`), and takes the deviations from ``f^eq_q + f^1_q(Pi)``, the first-order
non-equilibrium of that stress (:func:`first_order`): where the stress is large (next to walls)
what shares the cell's power of two is then small, and the other deviations keep more bits
(``scripts/fp16_study.py``'s ``neq-bfp-rho16-reg``, whose emulation this reproduces bit for
bit). Records are then ``Q + 2 + 2 dim + dim (dim + 1) / 2`` slots: 18 in 2D, 33 in 3D.

Every number is computed in float32 in a fixed order, the same in every backend's kernels:
moments summed from q = 0 up (momentum components in order, zero products included), the
equilibrium as :meth:`simsplit.numerics.lattice.Lattice.equilibrium` (``((1 + 3 cu) + 4.5 cu
cu) - 1.5 usq``, then ``(w rho) poly``), d = f* - f^eq, its rounding in float64 (exact), and
``f = float32(n_q 2^k) + f^eq`` on reading.
"""

from __future__ import annotations

import functools

import numpy as np

from simsplit.numerics.lattice import D2Q9, D3Q19, Lattice

#: the array type of neq16 records
NEQ16_DTYPE = np.dtype(np.uint16)
#: significant bits of the largest |d_q| of a cell (int16 significands: |n_q| <= 2^15 - 1)
NEQ_BITS = 15
#: rho - 1 is stored as binary16 of (rho - 1) * RHO_SCALE (as run.storage: float16 stores f - w)
RHO_SCALE = 1024.0
#: the stress-kept records' Pi_ab as binary16 of Pi_ab * STRESS_SCALE: 11 significant bits for
#: 6e-8 < |Pi_ab| < 64, steps of 2^-34 below
STRESS_SCALE = 1024.0


def lattice_of(q: int) -> Lattice:
    """The lattice with ``q`` populations (9: D2Q9, 19: D3Q19)."""
    return {9: D2Q9, 19: D3Q19}[q]


def stress_components(dim: int) -> tuple[tuple[int, int], ...]:
    """The stress components a stress-kept record holds, in slot order: (a, b) with a <= b."""
    return tuple((a, b) for a in range(dim) for b in range(a, dim))


def record_slots(q: int, stress: bool = False) -> int:
    """uint16 slots of a cell's record for a lattice of ``q`` populations (``stress``: the
    stress-kept variant's)."""
    dim = lattice_of(q).dim
    return q + 2 + 2 * dim + (len(stress_components(dim)) if stress else 0)


def stress_slot(q: int, index: int) -> int:
    """The slot of the ``index``-th component of :func:`stress_components` in a stress-kept
    record."""
    return q + 2 + 2 * lattice_of(q).dim + index


@functools.cache
def record_layout(slots: int) -> tuple[int, bool]:
    """(q, stress) of records of ``slots`` slots: the lattice's population count and whether
    they are stress-kept (every record layout has its own slot count; cached: the GPU
    launchers ask at every launch on records)."""
    for q in (9, 19):
        for stress in (False, True):
            if record_slots(q, stress) == slots:
                return q, stress
    raise ValueError(f"no neq16 record has {slots} slots")


def stress_kept(slots: int) -> bool:
    """Whether records of ``slots`` slots are the stress-kept ones."""
    return record_layout(slots)[1]


def exponent_slot(q: int) -> int:
    """The slot of the cell's power of two k."""
    return q


def rho_slot(q: int) -> int:
    """The slot of rho - 1 (binary16 bits of (rho - 1) * 2^10)."""
    return q + 1


def velocity_slot(q: int, axis: int) -> int:
    """The first (low-half) slot of velocity component ``axis``."""
    return q + 2 + 2 * axis


def halo_slots(q: int, crossing: np.ndarray, stress: bool = False) -> np.ndarray:
    """Slots a halo moves for the populations ``crossing`` a face: their n_q and the whole
    record's moments and exponent (and stress: the reader rebuilds f*_q from them)."""
    return np.concatenate([np.asarray(crossing, np.int64),
                           np.arange(q, record_slots(q, stress), dtype=np.int64)])


@functools.cache
def halo_slot_sets(slots: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The slots a halo moves for records of ``slots`` slots, crossing up and crossing down
    (:func:`halo_slots` of the lattice's up and down sets): the kernels' halo tables."""
    q, stress = record_layout(slots)
    lattice = lattice_of(q)
    return tuple(tuple(int(v) for v in halo_slots(q, crossing, stress))
                 for crossing in (lattice.up, lattice.down))  # type: ignore[return-value]


def round_stress(pi: np.ndarray) -> np.ndarray:
    """Stress components (float32) as a record keeps them: one rounding (nearest even) of
    ``pi * STRESS_SCALE`` to binary16, scaled back (exact)."""
    return _stress_from_bits(_stress_bits(pi))


def _stress_bits(pi: np.ndarray) -> np.ndarray:
    """The slots' bits of stress components ``pi`` (float32)."""
    return (np.asarray(pi, np.float32) * np.float32(STRESS_SCALE)).astype(np.float16).view(
        np.uint16)


def _stress_from_bits(bits: np.ndarray) -> np.ndarray:
    """float32 stress components from their slots' bits (exact)."""
    return (np.asarray(bits, np.uint16).view(np.float16).astype(np.float64)
            / STRESS_SCALE).astype(np.float32)


def stress_weights(lattice: Lattice) -> np.ndarray:
    """float32 ``(q, components)``: the weight of each stress component in the first-order
    non-equilibrium of population q, ``w_q 9/2 (c_qa c_qb - delta_ab / 3)``, twice for a != b,
    computed in float32 as ``(w * (4.5 * (c_a c_b - 1/3))) * 2`` (the kernels take this
    table)."""
    return stress_weight_table(lattice.c, lattice.w)


def stress_weight_table(c: np.ndarray, w: np.ndarray) -> np.ndarray:
    """:func:`stress_weights` of the velocities ``c`` (``(q, dim)``) and weights ``w``."""
    dt = np.float32
    w = np.asarray(w, np.float64).astype(dt)
    dim = c.shape[1]
    c = np.asarray(c).astype(dt)
    cols = []
    for a, b in stress_components(dim):
        weight = dt(4.5) * (c[:, a] * c[:, b] - dt(1 / 3 if a == b else 0))
        cols.append(w * weight * dt(1 if a == b else 2))
    return np.stack(cols, axis=1)


def stress_of(lattice: Lattice, d: np.ndarray) -> np.ndarray:
    """float32 ``(components, cells)``: ``Pi_ab = sum_q c_qa c_qb d_q`` of float32 deviations
    ``d`` (``(q, cells)``), summed from q = 0 up (products with c_a c_b in {-1, 0, 1}: exact)."""
    c = lattice.c.astype(np.float32)
    out = np.zeros((len(stress_components(lattice.dim)), d.shape[1]), np.float32)
    for j, (a, b) in enumerate(stress_components(lattice.dim)):
        cab = c[:, a] * c[:, b]
        for q in range(lattice.q):
            out[j] += cab[q] * d[q]
    return out


def first_order(lattice: Lattice, pi: np.ndarray) -> np.ndarray:
    """float32 ``(q, cells)``: the first-order non-equilibrium of the stress components ``pi``
    (``(components, cells)``), their terms added in slot order from zero, those of zero weight
    left out (a component population q does not see: for finite stresses the same bits, and
    the kernels need not load it)."""
    weights = stress_weights(lattice)
    out = np.zeros((lattice.q, pi.shape[1]), np.float32)
    for j in range(pi.shape[0]):
        seen = weights[:, j] != 0
        out[seen] += weights[seen, j, None] * pi[j][None, :]
    return out


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


def encode(f: np.ndarray, stress: bool = False) -> np.ndarray:
    """Populations ``f[q, ...]`` (rounded to float32 first) -> neq16 records ``(slots, ...)``
    (``stress``: the stress-kept variant's)."""
    f32 = np.asarray(f).astype(np.float32)
    lattice = lattice_of(f32.shape[0])
    flat = f32.reshape(lattice.q, -1)
    rho, rho_bits, u = _moments(lattice, flat)
    base = _equilibrium(lattice, rho, u)
    if stress:
        pi_bits = _stress_bits(stress_of(lattice, flat - base))
        base = base + first_order(lattice, _stress_from_bits(pi_bits))
    d = (flat - base).astype(np.float64)  # f* - f^eq (- f^1) in float32
    top = np.abs(d).max(axis=0)
    k = np.frexp(top)[1].astype(np.int64) - NEQ_BITS
    k += np.rint(np.ldexp(top, -k)) >= 2.0**NEQ_BITS
    k = np.where(top > 0, k, 0)
    n = np.rint(np.ldexp(d, -k)).astype(np.int16)
    out = np.empty((record_slots(lattice.q, stress), flat.shape[1]), NEQ16_DTYPE)
    out[:lattice.q] = n.view(np.uint16)
    out[exponent_slot(lattice.q)] = k.astype(np.int16).view(np.uint16)
    out[rho_slot(lattice.q)] = rho_bits
    for a in range(lattice.dim):
        halves = u[a].view(np.uint32)
        s = velocity_slot(lattice.q, a)
        out[s] = (halves & 0xFFFF).astype(np.uint16)
        out[s + 1] = (halves >> 16).astype(np.uint16)
    if stress:
        out[stress_slot(lattice.q, 0):] = pi_bits
    return out.reshape(out.shape[0], *f32.shape[1:])


def decode(records: np.ndarray) -> np.ndarray:
    """neq16 records ``(slots, ...)`` -> float32 populations ``(q, ...)`` as a reader rebuilds
    them."""
    raw = np.asarray(records).view(NEQ16_DTYPE)
    q, stress = record_layout(raw.shape[0])
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
    base = _equilibrium(lattice, rho, u)
    if stress:
        base = base + first_order(lattice, _stress_from_bits(flat[stress_slot(q, 0):]))
    f = np.ldexp(n, k).astype(np.float32) + base
    return f.reshape(q, *raw.shape[1:])
