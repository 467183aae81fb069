"""How populations are held in memory: full precision, or 16-bit in a shifted encoding.

Two 16-bit formats hold the deviation ``d = f - w`` (docs/storage.md): IEEE binary16 of
``d * 2^10`` (``float16``) and ``e4m11`` of ``d * 2^9``, a 16-bit format of this project's own
with a sign, 4 exponent bits (bias 7) and 11 stored significand bits: one bit more precision
than binary16 over ``2^-15 <= |d| < 1/2``. numpy has no e4m11 type, so its bits travel in int16
arrays (:data:`E4M11_DTYPE`): a 2-byte type of their own by which every backend tells the
formats apart.

Every backend's kernels decode and encode exactly as :class:`PopulationStorage` does, so the
choice changes memory traffic, never which backend or split a result comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simsplit.numerics import neq_storage

#: fp16 population storage keeps (f_q - w_q) * FP16_SCALE. A power of two (exact); 2^10 keeps
#: deviations down to 6e-8 in fp16's normal range (full 11-bit relative precision) and leaves
#: room for |f_q - w_q| up to 64 before overflow (physical runs stay below 1).
FP16_SCALE = 1024.0
#: e4m11 storage keeps (f_q - w_q) * E4M11_SCALE: |f_q - w_q| < 1/2 fits (largest finite
#: 4095 * 2^-4 = 255.9375 before scaling), normal down to 2^-15, in steps of 2^-26 below.
E4M11_SCALE = 512.0
#: e4m11 fields: 11 stored significand bits, exponent bias 7 (exponent 15: inf and NaN)
E4M11_MANT_BITS = 11
E4M11_BIAS = 7
#: the numpy type that carries e4m11 bits
E4M11_DTYPE = np.dtype(np.int16)
#: run.storage names -> the numpy type populations are held in (neq16: records of moments and
#: 16-bit deviations, :mod:`simsplit.numerics.neq_storage`)
STORAGE_DTYPES = {"float16": np.dtype(np.float16), "e4m11": E4M11_DTYPE,
                  "neq16": neq_storage.NEQ16_DTYPE, "neq16s": neq_storage.NEQ16_DTYPE,
                  "float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}
#: the records that keep each cell's stress too (neq_storage's stress-kept variant)
STRESS_RECORDS = "neq16s"
#: population storage types per arithmetic precision (run.storage, no wider than run.precision;
#: neq16 and neq16s keep u in float32)
STORAGE_CHOICES = {"float32": ("float16", "e4m11", "neq16", "neq16s", "float32"),
                   "float64": ("float16", "e4m11", "float32", "float64")}


def storage_dtype(name: Any) -> np.dtype:
    """The numpy type of run.storage ``name`` (a name or a numpy type)."""
    if isinstance(name, str) and name in STORAGE_DTYPES:
        return STORAGE_DTYPES[name]
    return np.dtype(name)


def storage_name(dtype: Any) -> str:
    """run.storage's name for the numpy type ``dtype`` holds populations in."""
    dt = np.dtype(dtype)
    return next((k for k, v in STORAGE_DTYPES.items() if v == dt), str(dt))


def e4m11_from(x: np.ndarray) -> np.ndarray:
    """Floats (float32 or float64, any shape) -> e4m11 bits (int16), one rounding to nearest
    even: 12 significant bits from 2^-6 up, steps of 2^-17 below; inf past 255.9375."""
    a = np.abs(np.asarray(x, np.float64))  # exact
    exp = np.frexp(a)[1] - 1  # 2^exp <= a < 2^(exp + 1)
    small = a < 2.0 ** (1 - E4M11_BIAS)
    m = np.rint(np.ldexp(a, np.where(small, E4M11_MANT_BITS + E4M11_BIAS - 1,
                                     E4M11_MANT_BITS - exp)))  # exact scaling, one rounding
    one = 1 << E4M11_MANT_BITS
    bits = np.where(small, m, ((exp + E4M11_BIAS) << E4M11_MANT_BITS) + m - one)
    inf = 15 << E4M11_MANT_BITS
    bits = np.where(np.isnan(a), inf | (one - 1), np.minimum(bits, inf)).astype(np.uint16)
    return (bits | np.where(np.signbit(x), 0x8000, 0).astype(np.uint16)).view(np.int16)


def e4m11_to_float(bits: np.ndarray) -> np.ndarray:
    """e4m11 bits (int16 or uint16) -> the float64 values they denote (exact)."""
    b = np.asarray(bits).view(np.uint16).astype(np.int64)
    e = (b >> E4M11_MANT_BITS) & 15
    m = b & ((1 << E4M11_MANT_BITS) - 1)
    lead = np.where(e == 0, 0, 1 << E4M11_MANT_BITS)
    v = np.ldexp((lead + m).astype(np.float64),
                 np.maximum(e, 1) - E4M11_BIAS - E4M11_MANT_BITS)
    v = np.where(e == 15, np.where(m == 0, np.inf, np.nan), v)
    return np.where(b & 0x8000, -v, v)


@dataclass(frozen=True)
class PopulationStorage:
    """How populations are held in memory: ``dtype`` for storage, ``arith`` for arithmetic.

    Equal types store ``f_q``. A narrower storage type holds the shifted encoding
    ``(f_q - w_q) * scale`` (the deviation from the rest equilibrium at unit density), rounded
    once to nearest even; the kernels (``lbm_common.cuh``, ``backends/cpu/d3q19.py``) decode
    and encode with exactly the operations of :meth:`decode` and :meth:`encode`.
    """

    dtype: np.dtype
    arith: np.dtype
    #: records that keep each cell's stress too (run.storage neq16s)
    stress: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        object.__setattr__(self, "arith", np.dtype(self.arith))
        if self.dtype.itemsize > self.arith.itemsize:
            raise ValueError(f"storage {self.dtype} is wider than the arithmetic {self.arith}")

    @property
    def shifted(self) -> bool:
        return self.dtype != self.arith

    @property
    def scale(self) -> float:
        return {np.dtype(np.float16): FP16_SCALE, E4M11_DTYPE: E4M11_SCALE}.get(self.dtype, 1.0)

    @property
    def name(self) -> str:
        """run.storage's name of the storage type."""
        return STRESS_RECORDS if self.stress else storage_name(self.dtype)

    @property
    def records(self) -> bool:
        """Whether cells hold neq16 records (moments and deviations) instead of populations."""
        return self.dtype == neq_storage.NEQ16_DTYPE

    def slots(self, q: int) -> int:
        """Stored values per cell for a lattice of ``q`` populations."""
        return neq_storage.record_slots(q, self.stress) if self.records else q

    def halo_slots(self, q: int, crossing: np.ndarray) -> np.ndarray:
        """Stored slots a halo moves for the populations ``crossing`` a face."""
        return neq_storage.halo_slots(q, crossing, self.stress) if self.records \
            else np.asarray(crossing)

    def _weights(self, w: np.ndarray, ndim: int) -> np.ndarray:
        return np.asarray(w, np.float64).astype(self.arith).reshape((-1,) + (1,) * (ndim - 1))

    def encode(self, f: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Populations ``f[q, ...]`` (any float type: rounded to ``arith`` first) -> storage."""
        x = np.asarray(f).astype(self.arith)
        if self.records:
            return neq_storage.encode(x, self.stress)
        if not self.shifted:
            return x
        t = self.arith.type
        d = (x - self._weights(w, x.ndim)) * t(self.scale)
        return e4m11_from(d) if self.dtype == E4M11_DTYPE else d.astype(self.dtype)

    def decode(self, raw: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Stored populations ``raw[q, ...]`` -> ``f`` in the arithmetic type."""
        if self.records:
            return neq_storage.decode(raw).astype(self.arith)
        if not self.shifted:
            return np.array(raw, dtype=self.arith)
        t = self.arith.type
        x = e4m11_to_float(raw) if self.dtype == E4M11_DTYPE else np.asarray(raw)
        x = x.astype(self.arith)
        return x * t(1.0 / self.scale) + self._weights(w, x.ndim)

    def rest(self, w: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Stored fluid at rest with unit density (``f = w``) on ``shape`` per population."""
        out = np.empty((self.slots(len(w)), *shape), self.dtype)
        out[...] = self.encode(np.asarray(w, np.float64).reshape((-1,) + (1,) * len(shape)), w)
        return out

    def bytes_per_update(self, q: int) -> int:
        """Bytes a stream-collide moves through DRAM per cell update (:func:`bytes_per_update`)."""
        return bytes_per_update(q, self.name)


def population_storage(storage: Any, arith: Any) -> PopulationStorage:
    """``storage`` (None: same as ``arith``) for arithmetic type ``arith``."""
    return PopulationStorage(storage_dtype(arith if storage is None else storage), np.dtype(arith),
                             storage == STRESS_RECORDS)


def bytes_per_update(q: int, storage: Any) -> int:
    """DRAM bytes of one cell update of a ``q``-population lattice stored as ``storage`` (a
    run.storage name or numpy type): every stored value read and written once, one flag byte."""
    dt = storage_dtype(storage)
    slots = neq_storage.record_slots(q, storage == STRESS_RECORDS) \
        if dt == neq_storage.NEQ16_DTYPE else q
    return 2 * slots * dt.itemsize + 1
