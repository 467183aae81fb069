"""Names of the MD kernels and the constants of ``kernels/md_common.cuh``: the template
instantiations the CuPy launchers compile, block size, list capacity, scan chunks, and the
small argument helpers every MD launcher shares (both GPU backends and the tests)."""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

import numpy as np

from simsplit.backends.cuda_c import source

COMMON_HEADER = "md_common.cuh"
KERNEL_FILE = "md_lj.cu"
#: kernels templated on the storage type of x, v, f (float or double)
FLOAT_KERNELS = ("md_advance", "md_final_integrate", "md_langevin", "md_snapshot",
                 "md_gather_rows", "md_cell_count", "md_permute", "md_build_neighbors",
                 "md_lj_forces")
#: kernels templated on the cell-list index type (int)
INDEX_KERNELS = ("md_scan_chunks", "md_scan_serial", "md_scan_inplace", "md_scan_write",
                 "md_cell_scatter", "md_cell_sort")
#: the kernels of several slabs in one arena (``kernels/md_arena.cuh``) and of the exact thermo
#: sums (``kernels/md_sums.cuh``), by template type
ARENA_FLOAT_KERNELS = ("md_arena_classify", "md_arena_owned", "md_arena_ghosts",
                       "md_arena_build_neighbors", "md_kinetic", "md_nonfinite",
                       "md_scale_rows", "md_lj_forces_typed", "md_lj_forces_fshift",
                       "md_kick_typed", "md_kinetic_typed", "md_langevin_typed")
ARENA_INDEX_KERNELS = ("md_arena_bounds", "md_arena_scatter", "md_exact_accumulate",
                       "md_exact_merge", "md_row_types", "md_pack_types")
#: the kernels of one slab per process (``kernels/md_ranks.cuh``), by template type
RANK_FLOAT_KERNELS = ("md_rank_classify", "md_rank_route", "md_rank_mark", "md_rank_gather",
                      "md_rank_gather_message", "md_rank_place_message", "md_rank_select",
                      "md_rank_keys",
                      "md_rank_ghost_rows", "md_scatter_rows", "md_rank_pack", "md_rank_land")
RANK_INDEX_KERNELS = ("md_rank_compose", "md_rank_compact")


@functools.cache
def md_constants() -> dict[str, int]:
    """``SIMSPLIT_MD_*`` macros of ``md_common.cuh`` (lower-case names without the prefix)."""
    text = (source.kernel_dir() / COMMON_HEADER).read_text()
    found = re.findall(r"^#define SIMSPLIT_MD_(\w+) (\d+)\s*$", text, re.MULTILINE)
    return {name.lower(): int(value) for name, value in found}


BLOCK = md_constants()["block"]
MAX_NEIGHBORS = md_constants()["max_neighbors"]
SCAN_CHUNK = md_constants()["scan_chunk"]
SCAN_SERIAL = md_constants()["scan_serial"]
SUM_LIMBS = md_constants()["sum_limbs"]
SUM_QUANTITIES = md_constants()["sum_quantities"]
SUM_REPLICAS = md_constants()["sum_replicas"]


def scan_levels(n: int) -> list[int]:
    """Chunk sums per level of the exclusive scan of ``n`` counts (see ``md_lj.cu``): chunks
    of :data:`SCAN_CHUNK` until at most :data:`SCAN_SERIAL` are left for one thread."""
    levels = []
    while True:
        n = max(1, -(-n // SCAN_CHUNK))
        levels.append(n)
        if n <= SCAN_SERIAL:
            return levels


def scan_scratch(n: int) -> int:
    """Length of the one buffer that holds every level of :func:`scan_levels` (and totals)."""
    return sum(m + 1 for m in scan_levels(n))


def type_shift(ntypes: int, rows: int) -> int:
    """The bit where a packed list entry's type starts (see ``md_pack_types``): rows below
    it, types in the bits up to the sign bit; 0 with one type or too many rows."""
    bits = (int(ntypes) - 1).bit_length()
    shift = 31 - bits
    return shift if bits and int(rows) <= 1 << shift else 0


def kernel_name(name: str, dtype: Any = None) -> str:
    """C++ name expression of a kernel: ``md_lj_forces<double>``, ``md_cell_sort<int>``."""
    if name in INDEX_KERNELS or name in ARENA_INDEX_KERNELS or name in RANK_INDEX_KERNELS:
        return f"{name}<int>"
    return f"{name}<{source.CTYPES[np.dtype(dtype)]}>"


def name_expressions() -> list[str]:
    """Every instantiation the CuPy launchers use."""
    return ([kernel_name(k, dt) for dt in source.CTYPES
             for k in (*FLOAT_KERNELS, *ARENA_FLOAT_KERNELS, *RANK_FLOAT_KERNELS)]
            + [kernel_name(k) for k in (*INDEX_KERNELS, *ARENA_INDEX_KERNELS,
                                        *RANK_INDEX_KERNELS)])


def stencil_ranges(offsets: Sequence[np.ndarray]) -> tuple[int, ...]:
    """``(first, count)`` per axis of the solver's stencil offsets (each a contiguous range)."""
    out: list[int] = []
    for off in offsets:
        off = np.asarray(off)
        if off.size == 0 or not np.array_equal(off, np.arange(off[0], off[0] + off.size)):
            raise ValueError(f"stencil offsets must be a contiguous range, got {off}")
        out += [int(off[0]), int(off.size)]
    return tuple(out)


def box_args(box: np.ndarray) -> tuple[np.float64, np.float64, np.float64]:
    """The box lengths as the kernels take them (three float64 arguments)."""
    return np.float64(box[0]), np.float64(box[1]), np.float64(box[2])
