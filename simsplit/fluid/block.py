"""One slab of a lattice (D2Q9 or D3Q19): its arrays, boundary flags, one time step, its halos.

A block knows only what lies across each of its two faces along the split axis (the slowest
array axis: y in 2D, z in 3D): another block (``HALO``), a resting wall or the moving lid. It
never learns how many blocks exist, where they live or how their halos travel. The kernels it
calls are the backend's set for its lattice (``backend.d2q9``, ``backend.d3q19``).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

import numpy as np

from simsplit.backends.base import Backend
from simsplit.decomp.slabs import HIGH, LOW
from simsplit.fluid import flags as fl
from simsplit.fluid.lattice import D2Q9, D3Q19, Lattice
from simsplit.fluid.params import D2Q9Params, D3Q19Params

UP_DIRS, DOWN_DIRS = 0, 1  #: halo direction sets, matching the kernels' table order


class Face(Enum):
    HALO = "halo"
    WALL = "wall"
    LID = "lid"


class SlabBlock:
    """Populations of layers ``[layer0, layer0 + layers)`` of a lattice, plus ghost layers.

    ``cross`` is the shape of one layer in array order without ghosts: ``(nx,)`` in 2D,
    ``(ny, nx)`` in 3D. Arrays: ``f[q, layer, *cross]`` with one ghost cell all round.
    """

    def __init__(self, backend: Backend, lattice: Lattice, cross: tuple[int, ...], layers: int,
                 layer0: int, faces: tuple[Face, Face], params: Any, dtype: Any) -> None:
        self.backend, self.lattice, self.cross = backend, lattice, tuple(cross)
        self.layers, self.layer0 = layers, layer0
        self.faces, self.params, self.dtype = faces, params, np.dtype(dtype)
        self.kernels = getattr(backend, lattice.kernels)
        q = lattice.q
        shape = (layers + 2, *(n + 2 for n in self.cross))
        interior = (layers, *self.cross)
        with backend.activate():
            # fluid at rest with unit density: the equilibrium is the lattice weights
            feq = np.empty((q,) + shape, self.dtype)
            feq[...] = lattice.w.astype(self.dtype).reshape((q,) + (1,) * len(shape))
            self.f_src = backend.asarray(feq)
            self.f_dst = backend.asarray(feq)
            del feq
            self.flags = backend.asarray(self._make_flags())
            self.rho = backend.asarray(np.ones(interior, self.dtype))
            self.u = tuple(backend.zeros(interior, self.dtype) for _ in range(lattice.dim))
            halo = (len(lattice.up), math.prod(shape[1:]))
            self.send = {f: backend.zeros(halo, self.dtype) for f in self.halo_faces()}
            self.recv = {f: backend.zeros(halo, self.dtype) for f in self.halo_faces()}

    @property
    def ux(self) -> Any:
        return self.u[0]

    @property
    def uy(self) -> Any:
        return self.u[1]

    @property
    def uz(self) -> Any:
        return self.u[2]

    # --- set-up ----------------------------------------------------------------------------
    def _make_flags(self) -> np.ndarray:
        shape = (self.layers + 2, *(n + 2 for n in self.cross))
        flags = np.full(shape, fl.FLUID, dtype=np.uint8)
        walls = [ax for ax, p in enumerate(self.params.periodic, start=1) if not p]

        def ghost_faces(arr: np.ndarray, offset: int) -> None:
            """Set the ghost cells of ``arr`` across non-periodic in-slab axes to WALL."""
            for ax in walls:
                for end in (0, -1):
                    idx: list[Any] = [slice(None)] * arr.ndim
                    idx[ax - offset] = end
                    arr[tuple(idx)] = fl.WALL

        ghost_faces(flags, 0)
        for face, layer in ((LOW, 0), (HIGH, self.layers + 1)):
            kind = self.faces[face]
            if kind is Face.WALL:
                flags[layer] = fl.WALL
            elif kind is Face.LID:
                flags[layer] = fl.LID
                ghost_faces(flags[layer], 1)  # the lid's edges beyond side walls do not move
        inner = (slice(1, -1),) * flags.ndim
        flags[inner] |= self._near_wall(flags)
        return flags

    def _near_wall(self, flags: np.ndarray) -> np.ndarray:
        """NEAR_WALL on interior fluid cells with a solid pull source (periodic axes wrap)."""
        solid = (flags & fl.SOLID) != 0
        for ax, periodic in enumerate(self.params.periodic, start=1):
            if periodic:  # sources across the axis come from the opposite interior cells
                solid = np.concatenate([solid.take([-2], ax), solid.take(range(1, solid.shape[ax]
                                        - 1), ax), solid.take([1], ax)], axis=ax)
        n = solid.shape
        near = np.zeros(tuple(s - 2 for s in n), dtype=bool)
        offsets = {tuple(int(v) for v in c[::-1]) for c in self.lattice.c}  # array axis order
        for off in sorted(offsets):
            near |= solid[tuple(slice(1 + d, s - 1 + d) for d, s in zip(off, n, strict=True))]
        near &= ~solid[(slice(1, -1),) * solid.ndim]
        return np.where(near, fl.NEAR_WALL, 0).astype(np.uint8)

    def halo_faces(self) -> list[int]:
        return [f for f in (LOW, HIGH) if self.faces[f] is Face.HALO]

    # --- time stepping -----------------------------------------------------------------------
    def stream_collide(self, rows: tuple[int, int] | None = None,
                       store_macro: bool = False) -> None:
        """Update local layers ``[rows[0], rows[1])`` (1-based, ghosts excluded); all by default."""
        rows = rows or (1, self.layers + 1)
        self.kernels.stream_collide(self.f_src, self.f_dst, self.flags, self.rho, *self.u, rows,
                                    self.params, store_macro)

    def swap(self) -> None:
        self.f_src, self.f_dst = self.f_dst, self.f_src

    # --- halo layers ---------------------------------------------------------------------------
    def pack(self, face: int) -> Any:
        """Fill ``send[face]`` with the populations leaving through ``face``; return it."""
        layer, dirs = (1, DOWN_DIRS) if face == LOW else (self.layers, UP_DIRS)
        self.kernels.pack(self.f_src, layer, dirs, self.send[face])
        return self.send[face]

    def unpack(self, face: int) -> None:
        """Write ``recv[face]`` into the ghost layer beyond ``face``."""
        layer, dirs = (0, UP_DIRS) if face == LOW else (self.layers + 1, DOWN_DIRS)
        self.kernels.unpack(self.recv[face], self.f_src, layer, dirs)

    # --- state -----------------------------------------------------------------------------------
    def _interior(self) -> tuple[slice, ...]:
        return (slice(None),) + (slice(1, -1),) * (1 + len(self.cross))

    def populations(self) -> np.ndarray:
        """Interior post-collision populations on the host, shape ``(q, layers, *cross)``."""
        return self.backend.to_host(self.f_src)[self._interior()]

    def set_populations(self, f: np.ndarray) -> None:
        full = self.backend.to_host(self.f_src)
        full[self._interior()] = f
        with self.backend.activate():
            self.f_src = self.backend.asarray(full.astype(self.dtype))

    def nbytes_per_cell_update(self) -> int:
        """Bytes a stream-collide touches per cell in DRAM: populations read + written, flag."""
        return 2 * self.lattice.q * self.dtype.itemsize + 1


class D2Q9Block(SlabBlock):
    """Rows ``[row0, row0 + ny)`` of an ``nx``-wide D2Q9 lattice."""

    def __init__(self, backend: Backend, nx: int, ny: int, row0: int, faces: tuple[Face, Face],
                 params: D2Q9Params, dtype: Any) -> None:
        super().__init__(backend, D2Q9, (nx,), ny, row0, faces, params, dtype)
        self.nx, self.ny, self.row0 = nx, ny, row0


class D3Q19Block(SlabBlock):
    """Planes ``[layer0, layer0 + nz)`` of an ``nx`` x ``ny`` D3Q19 lattice, split along z."""

    def __init__(self, backend: Backend, nx: int, ny: int, nz: int, layer0: int,
                 faces: tuple[Face, Face], params: D3Q19Params, dtype: Any) -> None:
        super().__init__(backend, D3Q19, (ny, nx), nz, layer0, faces, params, dtype)
        self.nx, self.ny, self.nz = nx, ny, nz


def make_block(backend: Backend, lattice: Lattice, cross: tuple[int, ...], layers: int,
               layer0: int, faces: tuple[Face, Face], params: Any, dtype: Any) -> SlabBlock:
    """The block class of ``lattice`` for a slab (``cross`` in array order)."""
    if lattice is D2Q9:
        return D2Q9Block(backend, cross[0], layers, layer0, faces, params, dtype)
    if lattice is D3Q19:
        return D3Q19Block(backend, cross[1], cross[0], layers, layer0, faces, params, dtype)
    raise ValueError(f"no block for lattice {lattice.name}")


