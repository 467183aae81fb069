"""neq16 records (plain or stress-kept: neq16s) stepped through the float32-storage kernels,
a chunk of planes at a time.

The records kernel (:mod:`.cells`) rebuilds a source cell's populations on every pull and runs
one cell at a time. Here each chunk of ``C`` planes along the split axis (k in 3D, rows j in
2D) is decoded once into float32 populations (the chunk's planes and one each side: its pulls'
sources), stepped by the lattice's float32-storage path (row kernel and scalar pass, on views
of the chunk), and its post-collision populations are encoded into the destination records.
Decoding repeats :func:`.neq_codec.pull`'s operations and encoding :func:`.neq_codec.store`'s,
vectorised over x (:mod:`.neq_lines`), so every record, density, velocity and force keeps
its bits: float32 storage under float32 arithmetic stores f as it is (its decode and encode
are identities), so the float32 path collides the very values a pull returns. Quadratic
links' reads two planes away go to the records themselves (through :mod:`.cells`). Two planes
of the source chunk move on to the next chunk instead of being decoded again; scratch stays two
chunks of float32.

``SIMSPLIT_CPU_NEQ_PLANES`` sets C (cells, not planes, when it ends in ``c``; "0": the records
kernel cell by cell, the reference).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numpy as np

from simsplit.backends.cpu.cells import records_arg
from simsplit.backends.cpu.jit_cache import announce_compile
from simsplit.backends.cpu.neq_lines import decode, encode
from simsplit.backends.cpu.rowgen import serial_requested
from simsplit.errors import CaseError

#: environment variable: planes a chunk (0: the records kernel cell by cell)
PLANES_ENV = "SIMSPLIT_CPU_NEQ_PLANES"
#: cells a chunk holds by default: 8 planes of 96^2 (fastest of 2-16 planes at 96^3, one
#: thread, 2026-12-05: 9, 11, 15 and 14 MLUPS at 2, 4, 8 and 16); about 6 MB of float32 D3Q19
CHUNK_CELLS = 80000


def chunk_planes(plane_cells: int) -> int:
    """Planes a chunk takes (``plane_cells``: cells of a plane, ghosts included); 0: none.
    A value of :data:`PLANES_ENV` that is not a count is a :class:`CaseError`."""
    raw = os.environ.get(PLANES_ENV, "").strip()
    if not raw:
        return max(1, CHUNK_CELLS // plane_cells)
    count = raw.removesuffix("c")
    if not count.isdigit():
        raise CaseError(f"{PLANES_ENV}={raw!r}: expected planes a chunk (0: cell by cell) or "
                        "cells a chunk ending in c, e.g. 8 or 80000c")
    return max(1, int(count) // plane_cells) if raw.endswith("c") else int(count)


#: a chunk's step on float32 populations: (f_src chunk, f_dst chunk, flags, macroscopic
#: outputs, first and end plane, inlet, links, outlet slots, far records, their plane offset),
#: each array a view whose plane 0 is the chunk's plane before its first
ChunkStep = Callable[..., None]


def _call(kernel_args: tuple[Any, tuple]) -> None:
    kernel, args = kernel_args
    announce_compile(kernel, args)
    kernel(*args)


def _cut(a: np.ndarray, lo: int, n: int, axis: int, full: int) -> np.ndarray:
    """Planes [lo, lo + n) of ``a`` along ``axis`` when it spans ``full`` planes there (else
    ``a``: a placeholder of the launcher's)."""
    if a.shape[axis] != full:
        return a
    return a[(slice(None),) * axis + (slice(lo, lo + n),)]


def step(run: ChunkStep, f_src: np.ndarray, f_dst: np.ndarray, flags: np.ndarray,
         macro: tuple[np.ndarray, ...], span: tuple[int, int], planes: int,
         scratch: tuple[np.ndarray, np.ndarray], inlet: np.ndarray, links: np.ndarray,
         slots: np.ndarray, far: np.ndarray, far_off: int) -> None:
    """Planes ``span`` (split axis, ghost-based indices) of records ``f_src`` -> ``f_dst``
    (``(slots, planes, [rows,] columns)``), ``planes`` at a time through ``run`` on the
    float32 ``scratch`` (source and destination, ``(q, planes + 2, ...)``). ``inlet``,
    ``links``, ``slots`` as the launchers take them (placeholders stay whole); ``far``:
    the records behind ``f_src`` and the plane of its plane 0 there (``run`` gets them as
    :func:`.cells.records_arg` makes them, the offset of the chunk's plane 0)."""
    src, dst = scratch
    serial = serial_requested()
    three_d = flags.ndim == 3
    full = flags.shape[0]

    def four(a: np.ndarray) -> np.ndarray:  # (.., plane, j, i): 2D rows as planes of one row
        return a if three_d else a[:, :, None]

    rec_src, rec_dst, post = four(f_src), four(f_dst), four(dst)
    far_rec = records_arg(far)
    check_arith(macro[0].dtype)
    flags4 = flags if three_d else flags[:, None]
    rows = (1, flags.shape[1] - 1) if three_d else (0, 1)
    lo, hi = span
    done = 0  # planes of src kept from the last chunk (its last two)
    ks = lo
    while ks < hi:
        n = min(planes, hi - ks)
        off = ks - 1  # global plane of the views' plane 0
        if done:
            src[:, 0:2] = src[:, done:done + 2]
            _call(decode(rec_src, four(src), ks + 1, ks + n + 1, off, serial))
        else:
            _call(decode(rec_src, four(src), ks - 1, ks + n + 1, off, serial))
        cut = planes + 2
        run(src, dst, flags[off:off + cut], tuple(m[off:off + planes] for m in macro), 1, n + 1,
            _cut(inlet, off, cut, 0, full), _cut(links, off, cut, 1, full),
            _cut(slots, off, cut, 1, full), far_rec, far_off + off)
        _call(encode(post, rec_dst, flags4, ks, ks + n, off, rows, serial))
        done = n
        ks += n


def scratch(owner: Any, q: int, planes: int, plane: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """The float32 source and destination chunks (``(q, planes + 2, *plane)``), kept on
    ``owner`` per calling thread (slabs stepped from other threads get their own)."""
    key = (q, planes, tuple(plane), threading.get_ident())
    kept = owner.__dict__.setdefault("_neq_scratch", {})
    if key not in kept:
        if len(kept) >= 8:
            kept.clear()
        kept[key] = tuple(np.zeros((q, planes + 2, *plane), np.float32) for _ in range(2))
    return kept[key]


def check_arith(dtype: Any) -> None:
    """neq16 records are stepped in float32 only."""
    if np.dtype(dtype) != np.float32:
        raise ValueError("run.storage neq16: float32 arithmetic only")
