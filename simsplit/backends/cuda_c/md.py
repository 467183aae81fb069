"""Lennard-Jones MD kernel sets for GPUs: the launch sequence shared by both GPU backends, and
its CuPy + NVRTC flavour running ``kernels/md_lj.cu``.

:class:`DeviceMDKernels` holds everything but the launches: argument order and types, grids,
the cell-list pipeline (count, scan, scatter, per-cell sort), neighbour-list storage
(``nl[k, i]``: neighbour ``k`` of all atoms contiguous) and the host reads the solver needs
(one ``int32`` per displacement check and per list build). :class:`CupyMDKernels` and
:class:`simsplit.backends.numba_cuda.md.NumbaMDKernels` only say how a kernel is launched and
how memory is allocated. Block size, list capacity limit and scan chunk come from
``kernels/md_common.cuh``. This module imports CuPy only inside :class:`CupyMDKernels`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from simsplit.backends.cuda_c import source

COMMON_HEADER = "md_common.cuh"
KERNEL_FILE = "md_lj.cu"
#: kernels templated on the storage type of x, v, f (float or double)
FLOAT_KERNELS = ("md_initial_integrate", "md_final_integrate", "md_langevin",
                 "md_displacement_flag", "md_snapshot", "md_gather_rows", "md_cell_count",
                 "md_build_neighbors", "md_lj_forces")
#: kernels templated on the cell-list index type (int)
INDEX_KERNELS = ("md_scan_chunks", "md_scan_serial", "md_scan_write", "md_cell_scatter",
                 "md_cell_sort")


@functools.cache
def md_constants() -> dict[str, int]:
    """``SIMSPLIT_MD_*`` macros of ``md_common.cuh`` (lower-case names without the prefix)."""
    text = (source.kernel_dir() / COMMON_HEADER).read_text()
    found = re.findall(r"^#define SIMSPLIT_MD_(\w+) (\d+)\s*$", text, re.MULTILINE)
    return {name.lower(): int(value) for name, value in found}


BLOCK = md_constants()["block"]
MAX_NEIGHBORS = md_constants()["max_neighbors"]
SCAN_CHUNK = md_constants()["scan_chunk"]


def kernel_name(name: str, dtype: Any = None) -> str:
    """C++ name expression of a kernel: ``md_lj_forces<double>``, ``md_cell_sort<int>``."""
    if name in INDEX_KERNELS:
        return f"{name}<int>"
    return f"{name}<{source.CTYPES[np.dtype(dtype)]}>"


def name_expressions() -> list[str]:
    """Every instantiation the CuPy launchers use."""
    return ([kernel_name(k, dt) for dt in source.CTYPES for k in FLOAT_KERNELS]
            + [kernel_name(k) for k in INDEX_KERNELS])


def stencil_ranges(offsets: Sequence[np.ndarray]) -> tuple[int, ...]:
    """``(first, count)`` per axis of the solver's stencil offsets (each a contiguous range)."""
    out: list[int] = []
    for off in offsets:
        off = np.asarray(off)
        if off.size == 0 or not np.array_equal(off, np.arange(off[0], off[0] + off.size)):
            raise ValueError(f"stencil offsets must be a contiguous range, got {off}")
        out += [int(off[0]), int(off.size)]
    return tuple(out)


@dataclass
class DeviceCells:
    """Cell-list scratch of one slab, reused while it is large enough."""

    atoms: int
    ncells: int
    cell_of: Any
    counts: Any
    cell_start: Any
    fill: Any
    cell_atoms: Any
    chunk_sums: Any


class DeviceMDKernels:
    """The MD kernel set of a GPU backend (same calls as the solver's CPU kernel set).

    Arrays are the backend's device arrays; ``ids`` are int64 global ids; ``box`` a host
    float64 array. Everything is queued on the device's current stream; only
    :meth:`displacement_flagged` and :meth:`build_neighbors` wait for the device.
    """

    is_device = True
    #: threads per block (the simulator uses fewer: one Python thread each)
    block = BLOCK

    def __init__(self) -> None:
        self._flag = self.zeros((1,), np.int32)
        self._worst = self.zeros((1,), np.int32)
        self._flag_dirty = False

    # --- what a backend provides ------------------------------------------------------------
    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        raise NotImplementedError

    def to_device(self, host: np.ndarray) -> Any:
        raise NotImplementedError

    def to_host(self, arr: Any) -> np.ndarray:
        """A host copy of a device array (host arrays pass through)."""
        raise NotImplementedError

    def _launch(self, name: str, dtype: Any, threads: int, *args: Any) -> None:
        """Run kernel ``name`` (instantiated for ``dtype``) on ``threads`` threads."""
        raise NotImplementedError

    def _zero(self, arr: Any) -> None:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    # --- integration ------------------------------------------------------------------------
    def _grid(self, threads: int) -> int:
        return (threads + self.block - 1) // self.block

    def initial_integrate(self, x, v, f, img, n: int, dtf: float, dt: float,
                          box: np.ndarray) -> None:
        if n:
            self._launch("md_initial_integrate", x.dtype, n, x, v, f, img, np.int32(n),
                         np.float64(dtf), np.float64(dt), *_box(box))

    def final_integrate(self, v, f, n: int, dtf: float) -> None:
        if n:
            self._launch("md_final_integrate", v.dtype, n, v, f, np.int32(n), np.float64(dtf))

    def langevin_forces(self, f, v, ids, n: int, drag: float, noise: float, seed: int,
                        step: int) -> None:
        if n:
            # np.uint64 of a negative int wraps modulo 2^64, as the CPU kernel's does
            self._launch("md_langevin", f.dtype, n, f, v, ids, np.int32(n), np.float64(drag),
                         np.float64(noise), np.uint64(int(seed) % 2 ** 64),
                         np.uint64(int(step) % 2 ** 64))

    def lj_forces(self, x, n_own: int, nl, cnt, box: np.ndarray, rcsq: float, eps4: float,
                  eps24: float, sigsq: float, eshift: float, f, pe, vir) -> None:
        if n_own:
            self._launch("md_lj_forces", x.dtype, n_own, x, np.int32(n_own), nl,
                         np.int32(nl.shape[1]), cnt, *_box(box), np.float64(rcsq),
                         np.float64(eps4), np.float64(eps24), np.float64(sigsq),
                         np.float64(eshift), f, pe, vir)

    def kinetic_per_atom(self, v, n: int, mass: float) -> np.ndarray:
        """``m |v|^2`` per owned atom, on the host (thermo steps only): the CPU kernel's bits."""
        from simsplit.backends.cpu import md as cpu

        return cpu.kinetic_per_atom(self.to_host(v[:n]), n, mass)

    # --- displacement check -----------------------------------------------------------------
    def flag_displacement(self, x, x0, n: int, box: np.ndarray, limit2: float) -> None:
        """Queue: raise the flag if an owned atom moved more than ``sqrt(limit2)``."""
        if n:
            self._launch("md_displacement_flag", x.dtype, n, x, x0, np.int32(n), *_box(box),
                         np.float64(limit2), self._flag)

    def displacement_flagged(self) -> bool:
        """Whether any :meth:`flag_displacement` since the last call fired (waits; resets)."""
        hit = bool(self._read_int(self._flag))
        if hit:
            self._zero(self._flag)
        return hit

    def snapshot(self, x, n: int, out: Any = None) -> Any:
        """Float64 copy of the owned rows of ``x``, the reference of the displacement check,
        into ``out`` when it has the right shape (no allocation at most rebuilds)."""
        fits = out is not None and out.shape == (n, 3) and out.dtype == np.float64
        x0 = out if fits else self.zeros((n, 3), np.float64)
        if n:
            self._launch("md_snapshot", x.dtype, 3 * n, x, np.int32(n), x0)
        return x0

    def gather_rows(self, src, idx, dst, row0: int) -> None:
        """``dst[row0 + r] = src[idx[r]]`` for every row index in ``idx`` (ghost refresh)."""
        m = int(idx.shape[0])
        if m:
            self._launch("md_gather_rows", src.dtype, m, src, idx, np.int32(m), dst[row0:])

    # --- cells and lists --------------------------------------------------------------------
    def neighbor_list(self, nl, cnt, n_own: int, capacity: int) -> tuple[Any, Any]:
        """Storage ``nl[capacity, rows]`` and ``cnt[rows]`` for ``n_own`` rows: the given
        arrays when they fit, else new ones with room for 1/8 more atoms."""
        if capacity > MAX_NEIGHBORS:
            raise ValueError(
                f"md.neighbor.capacity: GPU neighbour lists hold at most {MAX_NEIGHBORS} "
                f"atoms per row, {capacity} are needed (reduce the skin or the density)")
        if nl is not None and nl.shape[1] >= n_own and nl.shape[0] == capacity:
            return nl, cnt
        rows = max(n_own + n_own // 8 + 16, 0 if nl is None else nl.shape[1])
        return self.zeros((capacity, rows), np.int32), self.zeros((rows,), np.int32)

    def bin_atoms(self, x, n: int, box: np.ndarray, ncell: np.ndarray,
                  cells: DeviceCells | None = None) -> DeviceCells:
        """Counting sort of the first ``n`` rows into cells; ascending rows within a cell."""
        nc = int(np.prod(ncell))
        nchunks = (nc + SCAN_CHUNK - 1) // SCAN_CHUNK
        if cells is None or cells.atoms < n or cells.ncells != nc:
            atoms = n + n // 8 + 16
            cells = DeviceCells(
                atoms, nc, self.zeros((atoms,), np.int32), self.zeros((nc,), np.int32),
                self.zeros((nc + 1,), np.int32), self.zeros((nc,), np.int32),
                self.zeros((atoms,), np.int32), self.zeros((nchunks + 1,), np.int32))
        self._zero(cells.counts)
        nx, ny, nz = (np.int32(c) for c in ncell)
        n32, nc32 = np.int32(n), np.int32(nc)
        if n:
            self._launch("md_cell_count", x.dtype, n, x, n32, *_box(box), nx, ny, nz,
                         cells.cell_of, cells.counts)
        self._launch("md_scan_chunks", None, nchunks, cells.counts, nc32, cells.chunk_sums)
        self._launch("md_scan_serial", None, 1, cells.chunk_sums, np.int32(nchunks))
        self._launch("md_scan_write", None, nchunks, cells.counts, nc32, cells.chunk_sums,
                     cells.cell_start, cells.fill)
        if n:
            self._launch("md_cell_scatter", None, n, cells.cell_of, n32, cells.fill,
                         cells.cell_atoms)
        self._launch("md_cell_sort", None, nc, cells.cell_start, nc32, cells.cell_atoms)
        return cells

    def build_neighbors(self, x, gid, n_own: int, box: np.ndarray, ncell: np.ndarray,
                        cells: DeviceCells, offsets: Sequence[np.ndarray], cutsq: float, nl,
                        cnt) -> int:
        """Full, id-sorted lists of the owned atoms. Waits for the device; returns the largest
        row count if some row overflowed the capacity ``nl.shape[0]``, else 0."""
        if n_own == 0:
            return 0
        self._zero(self._worst)
        self._launch("md_build_neighbors", x.dtype, n_own, x, gid, np.int32(n_own), *_box(box),
                     *(np.int32(c) for c in ncell),
                     *(np.int32(v) for v in stencil_ranges(offsets)),
                     cells.cell_of, cells.cell_start, cells.cell_atoms, np.float64(cutsq), nl,
                     np.int32(nl.shape[1]), np.int32(nl.shape[0]), cnt, self._worst)
        return self._read_int(self._worst)

    def _read_int(self, arr: Any) -> int:
        return int(self.to_host(arr)[0])


def _box(box: np.ndarray) -> tuple[np.float64, np.float64, np.float64]:
    return np.float64(box[0]), np.float64(box[1]), np.float64(box[2])


@functools.cache
def _module(device: int) -> Any:
    """``md_lj.cu`` compiled for one device (once per process; CuPy caches it on disk)."""
    import cupy

    from simsplit.backends.cuda_c.d2q9 import compile_options

    with cupy.cuda.Device(device):
        return cupy.RawModule(code=source.kernel_source(KERNEL_FILE),
                              options=compile_options(device),
                              name_expressions=name_expressions())


class CupyMDKernels(DeviceMDKernels):
    """MD kernels of ``kernels/md_lj.cu`` on CuPy arrays of one device."""

    def __init__(self, device: int) -> None:
        import cupy

        self._cp = cupy
        self.device = device
        self._dev = cupy.cuda.Device(device)
        module = _module(device)
        with self._dev:
            self._kernels = {expr: module.get_function(expr) for expr in name_expressions()}
            self.registers = {expr: k.num_regs for expr, k in self._kernels.items()}
        super().__init__()

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        with self._dev:
            return self._cp.zeros(shape, dtype=dtype)

    def to_device(self, host: np.ndarray) -> Any:
        with self._dev:
            return self._cp.array(np.ascontiguousarray(host), copy=True)

    def to_host(self, arr: Any) -> np.ndarray:
        return arr if isinstance(arr, np.ndarray) else self._cp.asnumpy(arr)

    def _zero(self, arr: Any) -> None:
        with self._dev:
            arr.fill(0)

    def synchronize(self) -> None:
        self._dev.synchronize()

    def _launch(self, name: str, dtype: Any, threads: int, *args: Any) -> None:
        with self._dev:
            self._kernels[kernel_name(name, dtype)]((self._grid(threads),), (self.block,), args)
