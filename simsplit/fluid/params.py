"""Derived lattice parameters (relaxation rates, forcing) and the stability checks on them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from simsplit.fluid.lattice import CS2

#: TRT magic parameter that puts halfway bounce-back walls exactly halfway for Poiseuille flow
DEFAULT_TRT_MAGIC = 3.0 / 16.0
#: cell Reynolds number U dx / nu beyond which no lattice Boltzmann run survives: refused
MAX_CELL_REYNOLDS = 1000.0
#: cell Reynolds number beyond which runs tend to go unstable: warned
WARN_CELL_REYNOLDS = 20.0
#: body force per unit volume above which one step alone changes velocity by a sizeable
#: fraction of the lattice speed of sound: refused
MAX_BODY_FORCE = 0.01
#: above this lid speed (lattice units, Mach ~0.35) compressibility errors dominate
MAX_LID_VELOCITY = 0.2
#: lid speed x viscosity (lattice units) beyond which the pressure singularity at the lid's
#: corners empties the corner cells: the density dip there is about 7 nu U (measured on the
#: cavity at Re 100: nu U = 0.077 left density 0.42 at the corner after 50 steps, 0.1 left
#: 0.26; 0.051 ran). Large grids at low Reynolds numbers get there (nu = U N / Re). Refused
#: beyond the first, warned beyond the second.
MAX_LID_VISCOUS = 0.06
WARN_LID_VISCOUS = 0.02


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


class UnstableSetup(ValueError):
    """The parameters would give an unstable or meaningless lattice Boltzmann run."""


class _Rates:
    omega_plus: float

    @property
    def tau(self) -> float:
        return 1.0 / self.omega_plus

    @property
    def viscosity(self) -> float:
        return CS2 * (self.tau - 0.5)


@dataclass(frozen=True)
class D2Q9Params(_Rates):
    """Everything a stream-collide kernel needs besides arrays; identical on every slab."""

    omega_plus: float
    omega_minus: float
    lid_velocity: float
    force_x: float
    force_y: float
    periodic_x: bool

    @property
    def periodic(self) -> tuple[bool, ...]:
        """Periodicity of the in-slab axes in array order (x)."""
        return (bool(self.periodic_x),)


@dataclass(frozen=True)
class D3Q19Params(_Rates):
    """D3Q19 kernel parameters; the split axis is z, so x and y may be periodic in-slab."""

    omega_plus: float
    omega_minus: float
    lid_velocity: float
    force_x: float
    force_y: float
    force_z: float
    periodic_x: bool
    periodic_y: bool

    @property
    def periodic(self) -> tuple[bool, ...]:
        """Periodicity of the in-slab axes in array order (y, x)."""
        return (bool(self.periodic_y), bool(self.periodic_x))

    @property
    def forced(self) -> bool:
        """A body force acts: every backend's kernel adds the Guo source terms only then (they
        cost a tenth of the D3Q19 kernel's instructions)."""
        return bool(self.force_x or self.force_y or self.force_z)


def relaxation_rates(viscosity: float, collision: str, magic: float) -> tuple[float, float]:
    """(omega_plus, omega_minus) for BGK (equal) or TRT (omega_minus from the magic parameter)."""
    tau = viscosity / CS2 + 0.5
    if tau <= 0.5:
        raise UnstableSetup(f"relaxation time tau = {tau:.6g} must exceed 0.5")
    if not tau < 1e12:  # an overflowed viscosity (tiny Reynolds number) would give omega = 0
        raise UnstableSetup(f"viscosity {viscosity:.6g} (relaxation time tau = {tau:.6g}) is "
                            "too large: raise the Reynolds number or lower the viscosity")
    omega_plus = 1.0 / tau
    if collision == "bgk":
        return omega_plus, omega_plus
    tau_minus = magic / (tau - 0.5) + 0.5
    return omega_plus, 1.0 / tau_minus


def check_stability(tau: float, lid_velocity: float) -> None:
    """Refuse tau <= 0.5 outright; warn where accuracy degrades."""
    if tau <= 0.5:
        raise UnstableSetup(f"relaxation time tau = {tau:.6g} must exceed 0.5")
    if abs(lid_velocity) > MAX_LID_VELOCITY:
        raise UnstableSetup(
            f"lid velocity {lid_velocity:g} exceeds {MAX_LID_VELOCITY} lattice units "
            "(Mach number too high): refine the grid or lower fluid.lid_velocity"
        )
    cell_re = abs(lid_velocity) / (CS2 * (tau - 0.5))
    if cell_re > MAX_CELL_REYNOLDS:
        raise UnstableSetup(
            f"relaxation time tau = {tau:.6g} gives a cell Reynolds number of {cell_re:.3g} "
            f"(limit {MAX_CELL_REYNOLDS:g}): refine the grid or lower the Reynolds number"
        )
    corner = abs(lid_velocity) * CS2 * (tau - 0.5)
    if corner > WARN_LID_VISCOUS:
        text = (f"lid velocity x viscosity = {corner:.3g} puts a density dip of about "
                f"{7 * corner:.2g} at the lid's corners (their pressure grows with viscosity x "
                "lid velocity)")
        fix = ("lower fluid.lid_velocity (at a fixed Reynolds number the viscosity falls with "
               "it) or use fewer cells")
        if corner > MAX_LID_VISCOUS:
            raise UnstableSetup(f"{text}, beyond the {MAX_LID_VISCOUS:g} limit: {fix}")
        warnings.warn(f"{text}: {fix}", stacklevel=3)
    if tau < 0.51 or cell_re > WARN_CELL_REYNOLDS:
        warnings.warn(
            f"relaxation time tau = {tau:.6g} (cell Reynolds number {cell_re:.3g}) is close to "
            "the stability limit: refine the grid or lower the Reynolds number",
            stacklevel=3,
        )
