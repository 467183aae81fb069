"""Halos two planes deep for quadratic interpolated bounce-back (docs/bodies.md), and the
copy of two boundary planes between blocks on one device that two steps per sweep use.

A quadratic link reads, besides what the one-plane halo brings, f*_qbar(x + 2 c_q) (two cells
into the fluid: across a slab face, the neighbour's second plane, incoming directions) and
f*_q(x + c_q) (the neighbour's first plane, in the directions leaving the slab). A block of a
case with quadratic links therefore holds two ghost planes at each halo face (``depth`` 2, the
arrays of :class:`simsplit.fluid.block.SlabBlock`) and moves three packed direction sets per
face instead of one, in one buffer: the transports move that buffer as they move any other.
Only cases with quadratic links pay for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.decomp.slabs import HIGH, LOW

UP_DIRS, DOWN_DIRS = 0, 1  #: halo direction sets, as simsplit.fluid.block has them
#: direction sets per face of a deep halo: plane 1 incoming, plane 2 incoming, plane 1 leaving
SETS = 3


def wants(geometry: Any, halo_faces: list[int]) -> bool:
    """Whether a block with ``geometry`` and these halo faces needs the deep halo."""
    return bool(halo_faces) and geometry is not None and bool(geometry.quadratic)


def _plan(face: int, layers: int, send: bool) -> list[tuple[int, int]]:
    """(layer of the population array behind the block's views, direction set) of each of the
    :data:`SETS` parts of the buffer at ``face``: sent from the boundary planes, received into
    the ghost planes in the same order (the neighbour's face is the other one). Layers count
    the deep array's planes: the views' layer l is deep layer l + 1."""
    n = layers
    if face == LOW:
        out, inc = DOWN_DIRS, UP_DIRS  # leaving through the low face, coming in through it
        planes = (2, 3, 2) if send else (1, 0, 1)
    else:
        out, inc = UP_DIRS, DOWN_DIRS
        planes = (n + 1, n, n + 1) if send else (n + 2, n + 3, n + 2)
    # what the neighbour receives as incoming it sends as its leaving set, and vice versa
    dirs = (out, out, inc) if send else (inc, inc, out)
    return list(zip(planes, dirs, strict=True))


def pack(block: Any, face: int) -> Any:
    """Fill ``block.send[face]`` with its three sets from ``f_src``; return it."""
    buf, deep = block.send[face], block.deep_array(block.f_src)
    step = buf.shape[0] // SETS
    for s, (layer, dirs) in enumerate(_plan(face, block.layers, send=True)):
        block.kernels.pack(deep, layer, dirs, buf[s * step:(s + 1) * step])
    return buf


def unpack(block: Any, face: int) -> None:
    """Write ``block.recv[face]`` into the two ghost planes of ``f_src`` beyond ``face``."""
    buf, deep = block.recv[face], block.deep_array(block.f_src)
    step = buf.shape[0] // SETS
    for s, (layer, dirs) in enumerate(_plan(face, block.layers, send=False)):
        block.kernels.unpack(buf[s * step:(s + 1) * step], deep, layer, dirs)


def padded_links(host: np.ndarray, depth: int) -> np.ndarray:
    """A slab's link weights ``(q, layers + 2, ...)`` with one more (never read) plane at each
    end where the populations have two ghost planes, so that both share one layout."""
    if depth == 1:
        return host
    pad = [(0, 0), (1, 1)] + [(0, 0)] * (host.ndim - 2)
    return np.pad(host, pad, constant_values=0.0)


def far_source(block: Any) -> tuple[Any, int]:
    """(the population array behind ``f_src``, the offset of the views' layer 0 in it): where
    kernels read cells two planes away, which may lie beyond the views."""
    if block.depth == 1:
        return block.f_src, 0
    return block.deep_array(block.f_src), 1


def copy_boundary_planes(src: Any, face: int, dst: Any, dface: int, after: bool) -> None:
    """``src``'s two planes next to ``face`` into ``dst``'s two ghost planes beyond ``dface``
    (depth-2 blocks on one device, two steps per sweep): of f_dst after a sweep (``after``),
    else of f_src."""
    a = src.f_dst if after else src.f_src
    b = dst.f_dst if after else dst.f_src
    dst.deep_ghosts(dface, b)[...] = src.deep_boundary(face, a)


def edge_ranges(layers: int, halo_faces: list[int], depth: int
                ) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """(the layer ranges next to halo faces, ``depth`` layers each, the other layers or None),
    1-based ``[a, b)`` over a block's ``layers``: what an overlapped step sweeps before and
    while its halos travel. Where the edges meet, one range."""
    n = layers
    lo = 1 + depth if LOW in halo_faces else 1
    hi = n + 1 - depth if HIGH in halo_faces else n + 1
    if hi < lo:  # the edges meet: one range (no layer may be updated twice)
        return [(1, n + 1)], None
    edge = [(1, lo)] if lo > 1 else []
    if hi <= n:
        edge.append((hi, n + 1))
    return edge, ((lo, hi) if lo < hi else None)
