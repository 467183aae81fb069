"""Two steps per sweep across halo faces (``run.temporal_blocking`` on blocks of depth 2).

A sweep takes every slab from step t to t + 2 and recomputes step t + 1 on its inner ghost
planes from the neighbours' two boundary planes at step t (:meth:`SlabBlock.fuses_two_steps`).
After each sweep every halo face's two boundary planes of step t + 2 go into the neighbour's
two ghost planes. Where every slab lives on one device of this process the sweeps copy them
there directly, each slab on a lane of its own (``direct``); otherwise (slabs on several
devices or ranks) each face's two planes travel as one buffer through the run's transport,
which moves it as any halo buffer (``buffered``). Both give the bits of one step per sweep.
"""

from __future__ import annotations

from typing import Any, Mapping

from simsplit.decomp.slabs import LOW
from simsplit.fluid.deep_halo import DOWN_DIRS, UP_DIRS, copy_boundary_planes, edge_ranges
from simsplit.transport.base import Key, Transport, finish_exchange, start_exchange


class PairSweeps:
    """The pair sweeps of the blocks of this process and the filling of their ghost planes."""

    def __init__(self, blocks: Mapping[int, Any], keys: list[Key],
                 links: list[tuple[int, int, int, int]], transport: Transport, timer: Any,
                 direct: bool) -> None:
        """``keys``: the (slab, face) of each halo face of ``blocks``."""
        self.blocks, self.transport, self.timer = blocks, transport, timer
        #: copies straight into the neighbours' arrays (every slab on one device here)
        self.direct = direct
        #: per slab of this process: (face, neighbour slab, its face) of each halo link
        self.links_from: dict[int, list[tuple[int, int, int]]] = {k: [] for k in blocks}
        for src, face, dst, dface in links:
            if src in self.links_from:
                self.links_from[src].append((face, dst, dface))
        self.keys = keys
        self._send: dict[Key, Any] = {}  # the buffered path's, made at the first pack
        self._recv: dict[Key, Any] = {}

    def advance(self, last: bool, overlap: bool = True) -> None:
        """Steps t + 1 and t + 2 of every block, and its ghost planes of f_dst filled with the
        neighbours' planes of step t + 2 (rho and u stored if ``last``); then the swap. On the
        buffered path with ``overlap`` the planes next to halo faces are swept first and travel
        while the others are."""
        blocks = list(self.blocks.items())
        if not self.keys:
            with self.timer.phase("compute"):
                for _, blk in blocks:
                    blk.stream_collide_two_steps(store_macro=last)
        elif self.direct:
            # no sweep writes or reads the ghost planes of f_dst, so each slab's copies into
            # its neighbours need not wait for the neighbours' sweeps
            backend = blocks[0][1].backend
            with self.timer.phase("compute"), backend.lanes(len(blocks)) as lanes:
                for (k, blk), lane in zip(blocks, lanes, strict=True):
                    with lane:
                        blk.stream_collide_two_steps(store_macro=last)
                        for face, dst, dface in self.links_from[k]:
                            copy_boundary_planes(blk, face, self.blocks[dst], dface, after=True)
        else:
            plans = {k: _sweep_ranges(blk) if overlap else ([(2, blk.layers + 2)], None)
                     for k, blk in blocks}
            with self.timer.phase("compute"):
                for k, blk in blocks:
                    for planes in plans[k][0]:
                        blk.stream_collide_two_steps(store_macro=last, planes=planes)
            self._pack(after=True)
            with self.timer.phase("exchange"):
                handle = start_exchange(self.transport, self._send, self._recv)
            with self.timer.phase("compute"):
                for k, blk in blocks:
                    if plans[k][1] is not None:
                        blk.stream_collide_two_steps(store_macro=last, planes=plans[k][1])
            self._unpack(handle, after=True)
        for _, blk in blocks:
            blk.swap()

    def fill(self) -> None:
        """Both ghost planes of every halo face of f_src from the neighbours' f_src (before a
        run of pairs, where the ghost planes are stale)."""
        if self.direct:
            with self.timer.phase("exchange"):
                for k, links in self.links_from.items():
                    for face, dst, dface in links:
                        copy_boundary_planes(self.blocks[k], face, self.blocks[dst], dface,
                                             after=False)
            return
        self._pack(after=False)
        with self.timer.phase("exchange"):
            handle = start_exchange(self.transport, self._send, self._recv)
        self._unpack(handle, after=False)

    # --- the buffered path -------------------------------------------------------------------
    def _pack(self, after: bool) -> None:
        """Each halo face's buffer from f_dst (``after`` a sweep) or f_src: every population
        slot of the boundary plane the neighbour's inner ghost plane mirrors (the neighbour's
        sweep recomputes step t + 1 there, bounce-back included), then the crossing ones of
        the plane behind it (all that sweep pulls from the outer ghost plane: :func:`_layers`).
        """
        with self.timer.phase("pack"):
            for key in self.keys:
                blk = self.blocks[key[0]]
                deep = blk.deep_array(blk.f_dst if after else blk.f_src)
                inner, outer, dirs = _layers(key[1], blk.layers, send=True)
                buf = self._buffers(key, deep)[0]
                q = deep.shape[0]
                buf[:q].reshape((q, *deep.shape[2:]))[...] = deep[:, inner]
                blk.kernels.pack(deep, outer, dirs, buf[q:])

    def _unpack(self, handle: Any, after: bool) -> None:
        """Finish the exchange; each received buffer into the two ghost planes of its face."""
        with self.timer.phase("wait"):
            finish_exchange(self.transport, handle)
        with self.timer.phase("pack"):
            for key in self.keys:
                blk = self.blocks[key[0]]
                deep = blk.deep_array(blk.f_dst if after else blk.f_src)
                inner, outer, dirs = _layers(key[1], blk.layers, send=False)
                buf, q = self._recv[key], deep.shape[0]
                deep[:, inner] = buf[:q].reshape((q, *deep.shape[2:]))
                blk.kernels.unpack(buf[q:], deep, outer, dirs)

    def _buffers(self, key: Key, deep: Any) -> tuple[Any, Any]:
        """The send and receive buffers of halo face ``key``: one row per population slot of a
        plane and per crossing population, a plane's cells (ghost rows included) long."""
        if key not in self._send:
            blk = self.blocks[key[0]]
            cross = len(blk.storage.halo_slots(blk.lattice.q, blk.lattice.up))
            shape = (deep.shape[0] + cross, deep[0, 0].size)
            with blk.backend.activate():
                self._send[key] = blk.backend.zeros(shape, deep.dtype)
                self._recv[key] = blk.backend.zeros(shape, deep.dtype)
        return self._send[key], self._recv[key]


def _layers(face: int, n: int, send: bool) -> tuple[int, int, int]:
    """(the plane all of whose slots move, the plane whose crossing ones do, their direction
    set) at ``face`` of a depth-2 block of ``n`` layers, in deep-array planes: a sender's two
    boundary planes, a receiver's inner and outer ghost planes (the sender's first boundary
    plane is the receiver's inner ghost)."""
    if face == LOW:
        return (2, 3, DOWN_DIRS) if send else (1, 0, UP_DIRS)
    return (n + 1, n, UP_DIRS) if send else (n + 2, n + 3, DOWN_DIRS)


def _sweep_ranges(blk: Any) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """(the deep-array plane ranges next to halo faces, the other planes or None) of a pair
    sweep of ``blk``: the two planes each neighbour needs first (:func:`edge_ranges`, whose
    layer l is deep plane l + 1)."""
    edges, inner = edge_ranges(blk.layers, blk.halo_faces(), 2)
    return ([(a + 1, b + 1) for a, b in edges],
            None if inner is None else (inner[0] + 1, inner[1] + 1))
