"""One slab of a D2Q9 lattice: its arrays, its boundary flags, one time step, its halo layers.

A block knows only what lies across each of its two faces along the split axis: another
block (``HALO``), a resting wall or the moving lid. It never learns how many blocks exist,
where they live or how their halos travel.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import numpy as np

from simsplit.backends.base import Backend
from simsplit.decomp.slabs import HIGH, LOW
from simsplit.fluid import flags as fl
from simsplit.fluid.lattice import D2Q9_W, UP, Q
from simsplit.fluid.params import D2Q9Params

UP_DIRS, DOWN_DIRS = 0, 1  #: halo direction sets, matching the kernels' table order


class Face(Enum):
    HALO = "halo"
    WALL = "wall"
    LID = "lid"


class D2Q9Block:
    """Populations of rows ``[row0, row0 + ny)`` of an ``nx``-wide lattice, plus ghost layers."""

    def __init__(
        self,
        backend: Backend,
        nx: int,
        ny: int,
        row0: int,
        faces: tuple[Face, Face],
        params: D2Q9Params,
        dtype: Any,
    ) -> None:
        self.backend, self.nx, self.ny, self.row0 = backend, nx, ny, row0
        self.faces, self.params, self.dtype = faces, params, np.dtype(dtype)
        shape = (ny + 2, nx + 2)
        with backend.activate():
            # fluid at rest with unit density: the equilibrium is the lattice weights
            feq = np.empty((Q,) + shape, self.dtype)
            feq[...] = D2Q9_W.astype(self.dtype)[:, None, None]
            self.f_src = backend.asarray(feq)
            self.f_dst = backend.asarray(feq)
            del feq
            self.flags = backend.asarray(self._make_flags())
            self.rho = backend.asarray(np.ones((ny, nx), self.dtype))
            self.ux = backend.zeros((ny, nx), self.dtype)
            self.uy = backend.zeros((ny, nx), self.dtype)
            halo = (len(UP), nx + 2)
            self.send = {f: backend.zeros(halo, self.dtype) for f in self.halo_faces()}
            self.recv = {f: backend.zeros(halo, self.dtype) for f in self.halo_faces()}

    # --- set-up ----------------------------------------------------------------------------
    def _make_flags(self) -> np.ndarray:
        flags = np.full((self.ny + 2, self.nx + 2), fl.FLUID, dtype=np.uint8)
        if not self.params.periodic_x:
            flags[:, 0] = flags[:, -1] = fl.WALL
        for face, row in ((LOW, 0), (HIGH, self.ny + 1)):
            kind = self.faces[face]
            if kind is Face.WALL:
                flags[row, :] = fl.WALL
            elif kind is Face.LID:
                flags[row, 1:-1] = fl.LID
                if not self.params.periodic_x:
                    flags[row, 0] = flags[row, -1] = fl.WALL
                else:
                    flags[row, 0] = flags[row, -1] = fl.LID
        flags[1:-1, 1:-1] |= self._near_wall(flags)
        return flags

    def _near_wall(self, flags: np.ndarray) -> np.ndarray:
        """NEAR_WALL on interior fluid cells with a solid pull source (periodic x wraps)."""
        solid = (flags & fl.SOLID) != 0
        if self.params.periodic_x:  # sources across x come from the opposite interior column
            solid[:, 0], solid[:, -1] = solid[:, -2], solid[:, 1]
        near = np.zeros((self.ny, self.nx), dtype=bool)
        for dj in (-1, 0, 1):
            for di in (-1, 0, 1):
                near |= solid[1 + dj:self.ny + 1 + dj, 1 + di:self.nx + 1 + di]
        near &= ~solid[1:-1, 1:-1]
        return np.where(near, fl.NEAR_WALL, 0).astype(np.uint8)

    def halo_faces(self) -> list[int]:
        return [f for f in (LOW, HIGH) if self.faces[f] is Face.HALO]

    # --- time stepping -----------------------------------------------------------------------
    def stream_collide(self, rows: tuple[int, int] | None = None,
                       store_macro: bool = False) -> None:
        """Update local rows ``[rows[0], rows[1])`` (1-based, ghosts excluded); all by default."""
        rows = rows or (1, self.ny + 1)
        self.backend.d2q9.stream_collide(
            self.f_src, self.f_dst, self.flags, self.rho, self.ux, self.uy, rows, self.params,
            store_macro,
        )

    def swap(self) -> None:
        self.f_src, self.f_dst = self.f_dst, self.f_src

    # --- halo layers ---------------------------------------------------------------------------
    def pack(self, face: int) -> Any:
        """Fill ``send[face]`` with the populations leaving through ``face``; return it."""
        row, dirs = (1, DOWN_DIRS) if face == LOW else (self.ny, UP_DIRS)
        self.backend.d2q9.pack(self.f_src, row, dirs, self.send[face])
        return self.send[face]

    def unpack(self, face: int) -> None:
        """Write ``recv[face]`` into the ghost layer beyond ``face``."""
        row, dirs = (0, UP_DIRS) if face == LOW else (self.ny + 1, DOWN_DIRS)
        self.backend.d2q9.unpack(self.recv[face], self.f_src, row, dirs)

    # --- state -----------------------------------------------------------------------------------
    def populations(self) -> np.ndarray:
        """Interior post-collision populations on the host, shape ``(9, ny, nx)``."""
        return self.backend.to_host(self.f_src)[:, 1:-1, 1:-1]

    def set_populations(self, f: np.ndarray) -> None:
        full = self.backend.to_host(self.f_src)
        full[:, 1:-1, 1:-1] = f
        with self.backend.activate():
            self.f_src = self.backend.asarray(full.astype(self.dtype))

    def nbytes_per_cell_update(self) -> int:
        """Bytes a stream-collide touches per cell in DRAM: populations read + written, flag."""
        return 2 * Q * self.dtype.itemsize + 1
