"""How populations are held in memory: full precision, or 16-bit in a shifted encoding.

Every backend's kernels decode and encode exactly as :class:`PopulationStorage` does, so the
choice changes memory traffic, never which backend or split a result comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: fp16 population storage keeps (f_q - w_q) * FP16_SCALE. A power of two (exact); 2^10 keeps
#: deviations down to 6e-8 in fp16's normal range (full 11-bit relative precision) and leaves
#: room for |f_q - w_q| up to 64 before overflow (physical runs stay below 1).
FP16_SCALE = 1024.0
#: population storage types per arithmetic precision (run.storage, no wider than run.precision)
STORAGE_CHOICES = {"float32": ("float16", "float32"), "float64": ("float16", "float32", "float64")}


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
        return FP16_SCALE if self.dtype == np.float16 else 1.0

    def _weights(self, w: np.ndarray, ndim: int) -> np.ndarray:
        return np.asarray(w, np.float64).astype(self.arith).reshape((-1,) + (1,) * (ndim - 1))

    def encode(self, f: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Populations ``f[q, ...]`` (any float type: rounded to ``arith`` first) -> storage."""
        x = np.asarray(f).astype(self.arith)
        if not self.shifted:
            return x
        t = self.arith.type
        return ((x - self._weights(w, x.ndim)) * t(self.scale)).astype(self.dtype)

    def decode(self, raw: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Stored populations ``raw[q, ...]`` -> ``f`` in the arithmetic type."""
        if not self.shifted:
            return np.array(raw, dtype=self.arith)
        t = self.arith.type
        x = np.asarray(raw).astype(self.arith)
        return x * t(1.0 / self.scale) + self._weights(w, x.ndim)

    def rest(self, w: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Stored fluid at rest with unit density (``f = w``) on ``shape`` per population."""
        out = np.empty((len(w), *shape), self.dtype)
        out[...] = self.encode(np.asarray(w, np.float64).reshape((-1,) + (1,) * len(shape)), w)
        return out


def population_storage(storage: Any, arith: Any) -> PopulationStorage:
    """``storage`` (None: same as ``arith``) for arithmetic type ``arith``."""
    return PopulationStorage(np.dtype(arith if storage is None else storage), np.dtype(arith))
