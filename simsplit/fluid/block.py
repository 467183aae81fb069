"""One slab of a lattice (D2Q9 or D3Q19): its arrays, boundary flags, one time step, its halos.

A block knows only what lies across each of its two faces along the split axis (the slowest
array axis: y in 2D, z in 3D): another block (``HALO``), a resting wall or the moving lid. It
never learns how many blocks exist, where they live or how their halos travel. The kernels it
calls are the backend's set for its lattice (``backend.d2q9``, ``backend.d3q19``).
"""

from __future__ import annotations

import math
from enum import Enum
from functools import cached_property
from typing import Any

import numpy as np

from simsplit.backends.base import Backend
from simsplit.decomp.slabs import HIGH, LOW
from simsplit.fluid import deep_halo
from simsplit.fluid.column_spans import column_spans
from simsplit.fluid.geometry.grid import GridGeometry
from simsplit.fluid.kernel_support import refuse_unsupported
from simsplit.numerics import flags as fl
from simsplit.numerics.lattice import D2Q9, D3Q19, Lattice
from simsplit.numerics.lbm_params import OUTLET_CONVECTIVE, D2Q9Params, D3Q19Params
from simsplit.numerics.storage import population_storage

UP_DIRS, DOWN_DIRS = 0, 1  #: halo direction sets, matching the kernels' table order


class Face(Enum):
    HALO = "halo"
    WALL = "wall"
    LID = "lid"
    SLIP = "slip"  #: free-slip wall (D2Q9)


class SlabBlock:
    """Populations of layers ``[layer0, layer0 + layers)`` of a lattice, plus ghost layers.

    ``cross`` is the shape of one layer in array order without ghosts: ``(nx,)`` in 2D,
    ``(ny, nx)`` in 3D. Arrays: ``f[q, layer, *cross]`` with one ghost cell all round.
    ``dtype`` is the arithmetic type (and that of rho, u); populations and halo buffers are held
    in ``storage`` (default ``dtype``; a narrower one in the shifted encoding of
    :class:`simsplit.numerics.storage.PopulationStorage`). ``streaming="aa"`` keeps one population
    array, updated in place (docs/d3q19.md): ``f_src`` and ``f_dst`` are then two view objects
    of it, and which one is ``f_src`` is the parity of the next step, so ``swap()`` and
    everything keyed on the identity of ``f_src`` (graphs, ghost freshness) stay right.
    """

    def __init__(self, backend: Backend, lattice: Lattice, cross: tuple[int, ...], layers: int,
                 layer0: int, faces: tuple[Face, Face], params: Any, dtype: Any,
                 storage: Any = None, streaming: str = "two-lattice",
                 ghost_depth: int = 1) -> None:
        self.backend, self.lattice, self.cross = backend, lattice, tuple(cross)
        self.layers, self.layer0 = layers, layer0
        self.faces, self.params, self.dtype = faces, params, np.dtype(dtype)
        self.inlet: Any = None  #: inflow speed per row / line (a block with a geometry)
        self.links: Any = None  #: interpolated bounce-back weights per link (bounce_back)
        #: a convective outlet's previous values ``(q, layers + 2, *cross[:-1] + 2)`` (the
        #: arithmetic type): what each outlet link returned last step, by population and line
        self.outlet_slots: Any = None
        self.storage = population_storage(storage, self.dtype)
        self.kernels = getattr(backend, lattice.kernels)
        self.aa = streaming == "aa"
        refuse_unsupported(self.kernels, backend.name, lattice.name, self.storage.records,
                           self.aa, getattr(self, "geometry", None) is not None
                           or Face.SLIP in faces, self.storage.stress)
        # kernels ready now (no module load inside a graph capture), or a one-line refusal
        getattr(self.kernels, "prepare", lambda st: None)(self.storage)
        shape = (layers + 2, *(n + 2 for n in self.cross))
        #: ghost planes per face: 2 for quadratic links (deep_halo) or where halo faces are
        #: crossed two steps per sweep (f_src, f_dst, flags, rho, u: views into arrays with one
        #: more plane at each end), else 1
        self.deep_halo = deep_halo.wants(getattr(self, "geometry", None), self.halo_faces())
        self.depth = 2 if self.deep_halo or ghost_depth == 2 and self._deep_pairs_fit(shape) else 1
        extra = self.depth - 1
        deep = (layers + 2 * self.depth, *shape[1:])
        with backend.activate():
            # at rest with unit density: f = w (in the standard and both AA layouts alike)
            self.f_src = self._rest_field(deep)
            self.f_dst = self._rest_field(deep) if not self.aa else None
            if self.aa:
                self._aa_adopt(self.f_src)
            self.flags = self._field(self._make_flags())
            self.rho = backend.asarray(np.ones((layers + 2 * extra, *self.cross), self.dtype))
            self.u = tuple(backend.zeros((layers + 2 * extra, *self.cross), self.dtype)
                           for _ in range(lattice.dim))
            if extra:
                self._deep = {"f": (self.f_src, self.f_dst), "flags": self.flags,
                              "macro": (self.rho, *self.u)}
                self.f_src, self.f_dst = (a[:, 1:-1] for a in (self.f_src, self.f_dst))
                self.flags = self.flags[1:-1]
                self.rho, self.u = self.rho[1:-1], tuple(u[1:-1] for u in self.u)
                self._views = (self.f_src, self.f_dst)
            sets = deep_halo.SETS if self.deep_halo else 1
            halo = (len(self.storage.halo_slots(lattice.q, lattice.up)) * sets,
                    math.prod(shape[1:]))
            self.send = {f: backend.zeros(halo, self.storage.dtype) for f in self.halo_faces()}
            self.recv = {f: backend.zeros(halo, self.storage.dtype) for f in self.halo_faces()}

    @property
    def ux(self) -> Any:
        return self.u[0]

    @property
    def uy(self) -> Any:
        return self.u[1]

    @property
    def uz(self) -> Any:
        return self.u[2]

    def _rest_field(self, shape: tuple[int, ...]) -> Any:  # f = w, filled on the backend
        if not getattr(self.kernels, "strided_fields", False):  # e.g. Numba device arrays,
            return self.backend.asarray(self.storage.rest(self.lattice.w, shape))  # no [...] =
        rest = self.storage.rest(self.lattice.w, (1,) * len(shape))  # (q, 1, ..., 1)
        out = self.backend.empty_field((self.storage.slots(self.lattice.q), *shape), rest.dtype)
        out[...] = self.backend.asarray(rest)  # broadcast on the device
        return out

    def _field(self, host: np.ndarray) -> Any:  # padded, aligned rows where strided_fields
        if getattr(self.kernels, "strided_fields", False):
            return self.backend.field(host)
        return self.backend.asarray(host)

    def _deep_pairs_fit(self, shape: tuple[int, ...]) -> bool:
        """Whether two ghost planes a face let this block's two-step kernel cross them."""
        if self.aa or not self.halo_faces() or getattr(self, "geometry", None) is not None:
            return False
        fit = getattr(self.kernels, "two_steps_fit_shape", None)
        deep = (self.lattice.q, shape[0] + 2, *shape[1:])
        return fit is not None and fit(deep, self.storage.dtype, self.dtype)

    # --- set-up ----------------------------------------------------------------------------
    def _make_flags(self) -> np.ndarray:
        g = self.depth
        shape = (self.layers + 2 * g, *(n + 2 for n in self.cross))
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
        # a halo face's ghost planes hold the neighbour's planes: fluid, with its side walls;
        # a second ghost plane (depth 2) then gets NEAR_WALL below as the neighbour's plane has
        for face, planes in ((LOW, range(g)), (HIGH, range(self.layers + g, shape[0]))):
            kind = self.faces[face]
            for layer in planes:
                if kind is Face.WALL:
                    flags[layer] = fl.WALL
                elif kind is Face.LID:
                    flags[layer] = fl.LID
                    ghost_faces(flags[layer], 1)  # the lid's edges beyond side walls stay put
                elif kind is Face.SLIP:
                    flags[layer] = fl.SLIP
        self._paint_geometry(flags[self.depth - 1:flags.shape[0] + 1 - self.depth])  # views
        inner = (slice(1, -1),) * flags.ndim
        flags[inner] |= self._near_wall(flags)
        #: some cell takes an inlet, outlet, free-slip or interpolated bounce-back rule
        self.open_rules = bool(np.any(flags & fl.OPEN_RULES))
        #: the open kinds (INLET, OUTLET, SLIP bits) cells hold: ``bodies_variants`` kernels
        self.open_faces = int(np.bitwise_or.reduce(flags & fl.OPEN_FACES, axis=None))
        #: column spans with and without open rules, for kernel sets that launch by them
        #: (None: no open rule anywhere, or one launch a slab)
        self.column_spans = (column_spans(flags, self.lattice)
                             if self.open_rules and self._launches_by_spans else None)
        return flags

    def _paint_geometry(self, flags: np.ndarray) -> None:  # bodies and open faces, if any
        geometry = getattr(self, "geometry", None)
        if geometry is not None:
            halo = tuple(f is Face.HALO for f in self.faces)
            geometry.paint(flags, self.layer0, self.layer0 + self.layers, halo)

    def _load_geometry(self) -> None:
        """The kernels' geometry arrays: the inflow speed per row (2D) or line (3D), ghosts
        included, and interpolated bounce-back weights (in the populations' layout)."""
        geometry, stop = self.geometry, self.layer0 + self.layers
        if geometry is None:
            return
        with self.backend.activate():
            self.inlet = self.backend.asarray(
                geometry.inflow_rows(self.layer0, stop).astype(self.dtype))
            if geometry.links is not None:
                links = self._field(deep_halo.padded_links(geometry.link_rows(
                    self.layer0, stop).astype(self.dtype), self.depth))
                self.links = links[:, 1:-1] if self.depth == 2 else links
        if self.params.outlet_kind == OUTLET_CONVECTIVE and "outlet" in geometry.x_kinds:
            self._reset_outlet_slots()

    def _reset_outlet_slots(self) -> None:
        """A convective outlet's memory from now: each link's own population of its cell."""
        lat, f = self.lattice, self.populations()
        slots = np.zeros((lat.q, self.layers + 2, *(n + 2 for n in self.cross[:-1])),
                         self.dtype)
        inner = (slice(1, -1),) * (slots.ndim - 1)
        for col, kind, sign in ((0, self.geometry.x_kinds[0], 1),
                                (-1, self.geometry.x_kinds[1], -1)):
            for q in range(lat.q):
                if kind == "outlet" and int(lat.c[q][0]) == sign:
                    slots[(q, *inner)] = f[q, ..., col]
        self.set_outlet_slots(slots[(slice(None), slice(1, -1))])

    def set_outlet_slots(self, slots: np.ndarray) -> None:
        """Set a convective outlet's previous values ``(q, layers, ...)``: outlet_values'."""
        full = np.zeros((self.lattice.q, self.layers + 2, *slots.shape[2:]), self.dtype)
        full[:, 1:-1] = slots
        with self.backend.activate():
            self.outlet_slots = self.backend.asarray(full)

    def outlet_values(self) -> np.ndarray:
        """A convective outlet's previous values of the interior layers, on the host."""
        return self.backend.to_host(self.outlet_slots)[:, 1:-1]

    def _near_wall(self, flags: np.ndarray) -> np.ndarray:
        """NEAR_WALL on interior fluid cells with a solid pull source (periodic axes wrap)."""
        solid = (flags & fl.BOUNDARY) != 0
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
        if self.aa:
            self.kernels.stream_collide_aa(self.f_src, self.flags, self.rho, *self.u, rows,
                                           self.params, store_macro, self._aa_next_odd())
            return
        extra: dict[str, Any] = {} if self.inlet is None else {"inlet": self.inlet}
        if self.links is not None:
            extra["links"] = self.links
            if self.geometry.quadratic:  # reads two cells away: from the array behind f_src
                extra["far"] = deep_halo.far_source(self)
        if self.outlet_slots is not None:
            extra["outlet_slots"] = self.outlet_slots
        if self.inlet is not None and getattr(self.kernels, "bodies_variants", False):
            extra["open_faces"] = self.open_faces
        if getattr(self.kernels, "box_variant", False):
            if not self.open_rules:
                extra["open_rules"] = False
            elif self.column_spans is not None and len(self.column_spans) > 1:
                for i0, i1, is_open in self.column_spans:  # open rules only where needed
                    self.kernels.stream_collide(self.f_src, self.f_dst, self.flags, self.rho,
                                                *self.u, rows, self.params, store_macro,
                                                open_rules=is_open, columns=(i0, i1), **extra)
                return
        self.kernels.stream_collide(self.f_src, self.f_dst, self.flags, self.rho, *self.u, rows,
                                    self.params, store_macro, **extra)

    @cached_property
    def _launches_by_spans(self) -> bool:
        """Whether the kernel set launches this block's storage by column spans: it has a box
        variant, and its ``launches_by_spans`` (if any) says so for this storage."""
        if not getattr(self.kernels, "box_variant", False):
            return False
        by_spans = getattr(self.kernels, "launches_by_spans", None)
        return by_spans is None or bool(by_spans(self.storage))

    # --- two steps per sweep (temporal blocking) ---------------------------------------------
    def fuses_two_steps(self) -> bool:
        """Whether this block takes two steps in one sweep: a two-step kernel that takes these
        arrays, gains (``two_steps_fit``) and covers every fluid cell, and ``depth`` 2 at halo
        faces (the sweep recomputes the neighbour's first step on the inner ghost plane)."""
        return (hasattr(self.kernels, "stream_collide_two_steps") and not self.aa
                and not self.open_rules  # halfway bodies are box walls (the same bits)
                and (not self.halo_faces() or self.depth == 2)
                and self.kernels.two_steps_fit(self.f_src, self.dtype)
                and self._two_steps_cover)

    @cached_property
    def _two_steps_cover(self) -> bool:
        """Whether the kernel set's ``two_steps_cover`` (if any) takes every fluid cell."""
        cover = getattr(self.kernels, "two_steps_cover", None)
        return cover is None or bool(cover(self.flags, self.params))

    def stream_collide_two_steps(self, store_macro: bool = False,
                                 planes: tuple[int, int] | None = None) -> None:
        """Steps t + 1 and t + 2 of every layer (depth 2: of the deep array's ``planes``, all
        by default), ``f_src`` -> ``f_dst`` (:meth:`fuses_two_steps` must hold; with depth 2
        the ghost planes of ``f_src`` hold the neighbours' planes at step t): the bits of two
        :meth:`stream_collide` with a :meth:`swap` and a halo exchange between."""
        if self.depth == 1:
            self.kernels.stream_collide_two_steps(self.f_src, self.f_dst, self.flags, self.rho,
                                                  *self.u, (1, self.layers + 1), self.params,
                                                  store_macro)
            return
        self.kernels.stream_collide_two_steps(
            self.deep_array(self.f_src), self.deep_array(self.f_dst), self._deep["flags"],
            *self._deep["macro"], planes or (2, self.layers + 2), self.params, store_macro)

    def deep_array(self, view: Any) -> Any:  # depth 2 only: the array behind f_src or f_dst
        return self._deep["f"][0 if view is self._views[0] else 1]

    def deep_boundary(self, face: int, view: Any) -> Any:
        """The two planes next to ``face`` of the array behind ``view``, in the order the
        neighbour's ghost planes hold them (``depth`` 2 only)."""
        n = self.layers
        return self.deep_array(view)[:, 2:4] if face == LOW else self.deep_array(view)[:, n:n + 2]

    def deep_ghosts(self, face: int, view: Any) -> Any:  # the two ghost planes beyond face
        n = self.layers
        return self.deep_array(view)[:, 0:2] if face == LOW else self.deep_array(view)[:, n + 2:]

    # --- in-place (AA) streaming -------------------------------------------------------------
    def _aa_adopt(self, arr: Any) -> None:
        """Take ``arr`` as the one population array, in the state before an odd step."""
        self._aa_views = (arr, arr.view())  # (next step even, next step odd)
        self.f_dst, self.f_src = self._aa_views

    def _aa_next_odd(self) -> bool:
        return self.f_src is self._aa_views[1]

    def _aa_halo(self, face: int, send: bool) -> tuple[int, int]:
        """(layer, direction set) a pack (send) or unpack moves at ``face`` before the next step.

        Before an odd step (fill) the ghost layers take the neighbours' boundary layers, in the
        slots the odd step reads (opp q: the sets of the two-lattice halo, swapped). Before an
        even step (flush) the values the odd step wrote into ghost slots go back to the
        neighbours' boundary layers, whose next even step reads them.
        """
        n = self.layers
        if self._aa_next_odd():
            if send:
                return (1, UP_DIRS) if face == LOW else (n, DOWN_DIRS)
            return (0, DOWN_DIRS) if face == LOW else (n + 1, UP_DIRS)
        if send:
            return (0, DOWN_DIRS) if face == LOW else (n + 1, UP_DIRS)
        return (1, UP_DIRS) if face == LOW else (n, DOWN_DIRS)

    def _aa_to_standard(self, full: np.ndarray) -> np.ndarray:
        """Interior post-collision populations (stored elements, standard layout) of the host
        copy ``full`` of the AA array: a permutation, exact in any storage type."""
        lat, sizes = self.lattice, (self.layers, *self.cross)
        inner = tuple(slice(1, n + 1) for n in sizes)
        if self._aa_next_odd():  # after an even step: q sits in the own slot opp q
            return np.stack([full[lat.opp[q]][inner] for q in range(lat.q)])
        # after an odd step: q went to x + c_q (wrapping periodic in-slab axes; ghost and
        # solid cells hold what was written there)
        periodic = (False, *self.params.periodic)
        out = np.empty((lat.q, *sizes), full.dtype)
        for q in range(lat.q):
            idx = []
            for d, n, per in zip(lat.c[q][::-1], sizes, periodic, strict=True):
                pos = np.arange(1, n + 1) + int(d)
                idx.append((pos - 1) % n + 1 if per else pos)
            out[q] = full[q][np.ix_(*idx)]
        return out

    def swap(self) -> None:
        self.f_src, self.f_dst = self.f_dst, self.f_src

    # --- halo layers ---------------------------------------------------------------------------
    def pack(self, face: int) -> Any:
        """Fill ``send[face]`` with the populations leaving through ``face``; return it."""
        if self.deep_halo:
            return deep_halo.pack(self, face)
        layer, dirs = (1, DOWN_DIRS) if face == LOW else (self.layers, UP_DIRS)
        if self.aa:
            layer, dirs = self._aa_halo(face, send=True)
        self.kernels.pack(self.f_src, layer, dirs, self.send[face])
        return self.send[face]

    def unpack(self, face: int) -> None:
        """Write ``recv[face]`` into the ghost layer beyond ``face``."""
        if self.deep_halo:
            return deep_halo.unpack(self, face)
        layer, dirs = (0, UP_DIRS) if face == LOW else (self.layers + 1, DOWN_DIRS)
        if self.aa:
            layer, dirs = self._aa_halo(face, send=False)
        self.kernels.unpack(self.recv[face], self.f_src, layer, dirs)

    # --- state -----------------------------------------------------------------------------------
    def _interior(self) -> tuple[slice, ...]:
        return (slice(None),) + (slice(1, -1),) * (1 + len(self.cross))

    def populations(self) -> np.ndarray:
        """Interior post-collision populations on the host, shape ``(q, layers, *cross)``,
        decoded to the arithmetic type."""
        return self.storage.decode(self.raw_populations(), self.lattice.w)

    def raw_populations(self) -> np.ndarray:
        """Interior populations as stored (storage type and encoding), for checkpoints; the
        standard layout whatever the streaming scheme and parity."""
        if self.aa:
            return self._aa_to_standard(self.backend.to_host(self.f_src))
        return self.backend.to_host(self.f_src)[self._interior()]

    def set_populations(self, f: np.ndarray) -> None:
        """Set the interior populations from values ``f`` (rounded to the arithmetic type,
        then encoded as the kernels encode)."""
        self.set_raw_populations(self.storage.encode(f, self.lattice.w))

    def set_raw_populations(self, raw: np.ndarray) -> None:
        """Set the interior populations from stored values (as :meth:`raw_populations`)."""
        full = self.backend.to_host(self.f_src)
        if self.aa:  # the layout before an odd step: q in the own slot opp q; fresh arrays
            inner = self._interior()[1:]
            for q in range(self.lattice.q):
                full[self.lattice.opp[q]][inner] = raw[q]
            with self.backend.activate():
                self._aa_adopt(self.backend.asarray(full.astype(self.storage.dtype)))
            return
        full[self._interior()] = raw
        with self.backend.activate():
            if self.depth == 2:  # in place: the views and their depth-2 arrays stay paired
                self.f_src[...] = self.backend.asarray(full.astype(self.storage.dtype))
            else:
                self.f_src = self._field(full.astype(self.storage.dtype))
        if self.outlet_slots is not None:
            self._reset_outlet_slots()

    def nbytes_per_cell_update(self) -> int:
        """Bytes a stream-collide touches per cell in DRAM: populations read + written, flag."""
        return self.storage.bytes_per_update(self.lattice.q)


class D2Q9Block(SlabBlock):
    """Rows ``[row0, row0 + ny)`` of an ``nx``-wide D2Q9 lattice."""

    def __init__(self, backend: Backend, nx: int, ny: int, row0: int, faces: tuple[Face, Face],
                 params: D2Q9Params, dtype: Any, geometry: GridGeometry | None = None,
                 storage: Any = None, ghost_depth: int = 1) -> None:
        self.geometry = geometry
        super().__init__(backend, D2Q9, (nx,), ny, row0, faces, params, dtype, storage,
                         ghost_depth=ghost_depth)
        self.nx, self.ny, self.row0 = nx, ny, row0
        self._load_geometry()


class D3Q19Block(SlabBlock):
    """Planes ``[layer0, layer0 + nz)`` of an ``nx`` x ``ny`` D3Q19 lattice, split along z."""

    def __init__(self, backend: Backend, nx: int, ny: int, nz: int, layer0: int,
                 faces: tuple[Face, Face], params: D3Q19Params, dtype: Any,
                 storage: Any = None, streaming: str = "two-lattice",
                 ghost_depth: int = 1, geometry: GridGeometry | None = None) -> None:
        if geometry is not None and streaming != "two-lattice":
            raise ValueError("run.streaming: aa is not allowed with domain.bodies, inlets or "
                             "outlets (allowed: two-lattice)")
        self.geometry = geometry
        super().__init__(backend, D3Q19, (ny, nx), nz, layer0, faces, params, dtype, storage,
                         streaming, ghost_depth)
        self.nx, self.ny, self.nz = nx, ny, nz
        self._load_geometry()


def make_block(backend: Backend, lattice: Lattice, cross: tuple[int, ...], layers: int,
               layer0: int, faces: tuple[Face, Face], params: Any, dtype: Any,
               storage: Any = None, streaming: str = "two-lattice",
               ghost_depth: int = 1, geometry: GridGeometry | None = None) -> SlabBlock:
    """The block class of ``lattice`` for a slab (``cross`` in array order); ``storage``
    (population storage type) defaults to ``dtype``; ``streaming`` is
    ``two-lattice`` or (D3Q19 only) ``aa``; ``ghost_depth`` 2 asks for two ghost planes at
    halo faces (where the kernel set sweeps two steps through them)."""
    if lattice is D2Q9:
        if streaming != "two-lattice":
            raise ValueError(f"run.streaming: {streaming!r} is not allowed for D2Q9 (allowed: "
                             "'two-lattice')")
        return D2Q9Block(backend, cross[0], layers, layer0, faces, params, dtype, geometry,
                         storage, ghost_depth)
    if lattice is D3Q19:
        return D3Q19Block(backend, cross[1], cross[0], layers, layer0, faces, params, dtype,
                          storage, streaming, ghost_depth, geometry)
    raise ValueError(f"no block for lattice {lattice.name}")

