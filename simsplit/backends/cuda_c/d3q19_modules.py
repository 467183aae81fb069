"""D3Q19 kernel modules and launch geometry for ``kernels/d3q19.cu``: which compiled module
holds a kernel (one per (arithmetic, storage) pair and block size, compiled once a process),
blocks along x, whether arrays suit the two-cell kernel's vector accesses and whether they need
64-bit offsets. :mod:`simsplit.backends.cuda_c.d3q19` launches the kernels.
"""

from __future__ import annotations

import functools
from typing import Any

import cupy
import numpy as np

from simsplit.backends.cuda_c import kernel_names, source
from simsplit.backends.cuda_c.d2q9 import _grid_x, compile_options
from simsplit.backends.layout import element_strides
from simsplit.numerics.lattice import D3Q19


def grid_x(nx: int, cells_x: int = 1, block_x: int = source.BLOCK_X) -> int:
    """Blocks along x of the two-lattice kernel: ``cells_x`` cells per thread."""
    return _grid_x(nx, block_x * cells_x)


def pair_alignment_problem(ptr: int, itemsize: int, strides: tuple[int, ...]) -> str | None:
    """Why a population array at address ``ptr`` (of element ``[0, 0, 0, 0]``) with element
    ``strides`` (plane, layer, pitch, 1) cannot take the pair kernel's 2-element vector
    accesses, or None: every element ``[q, k, j, 1]`` must lie on a ``2 * itemsize`` boundary,
    so the plane, layer and row strides must be even and element 1 aligned."""
    if strides[3] != 1:
        return f"x is not the contiguous axis (strides in elements {strides})"
    odd = [name for name, v in zip(("plane", "layer", "row"), strides[:3], strict=True) if v % 2]
    if odd:
        return f"{', '.join(odd)} stride odd (strides in elements {strides})"
    if (ptr + itemsize) % (2 * itemsize):
        return f"element [.., 1] at address {ptr + itemsize:#x} is not {2 * itemsize}-byte aligned"
    return None


def pairs_aligned(*arrays: Any) -> bool:
    """Whether every array suits the two-cell kernel's 2-element vector accesses."""
    return all(pair_alignment_problem(int(a.data.ptr), a.itemsize, element_strides(a)) is None
               for a in arrays)


#: the kernels address a cell within one population's array by a 32-bit offset
MAX_PLANE = 2**32


def wide_offsets(f: Any) -> bool:
    """Whether ``f`` needs the kernels with 64-bit element offsets; ValueError if one
    population's array holds too many cells even for their 32-bit in-plane offsets (about
    1600^3 cells: more than an fp16 field in 140 GB)."""
    plane = element_strides(f)[0]
    if plane > MAX_PLANE:
        raise ValueError(f"D3Q19 population arrays of {plane} cells exceed the kernels' 32-bit "
                         f"cell offsets ({MAX_PLANE} cells); split the domain over more slabs")
    return source.needs_wide_offsets(D3Q19.q * plane)


@functools.cache
def _module(device: int, block_x: int, names: tuple[str, ...]) -> Any:
    """The kernels ``names`` of ``d3q19.cu`` compiled for one device and block size (once per
    process; CuPy caches it on disk)."""
    code = (source.kernel_source("d3q19.cu") if block_x == source.BLOCK_X
            else source.variant_source("d3q19.cu", block_x))
    with cupy.cuda.Device(device):
        return cupy.RawModule(code=code, options=compile_options(device),
                              name_expressions=list(names))


def _pair_module(device: int, dtype: np.dtype, storage: np.dtype) -> Any:
    """The module of one (arithmetic, storage) pair's kernels at the default block size."""
    return _module(device, source.BLOCK_X,
                   tuple(kernel_names.d3q19_pair_expressions(dtype, storage)))


@functools.cache
def _pair_of(name: str) -> tuple[np.dtype, np.dtype]:
    """The (arithmetic, storage) pair whose module holds kernel ``name``."""
    for dt, st in source.STORAGE_PAIRS:
        if name in kernel_names.d3q19_pair_expressions(dt, st, halos=False):
            return dt, st
    raise KeyError(f"no D3Q19 kernel {name}")


def default_block(storage: Any) -> int:
    """Threads per block of the untuned two-lattice launch for populations stored as
    ``storage``: source.D3Q19_FP16_BLOCK_X for the 16-bit formats, source.BLOCK_X otherwise."""
    return source.D3Q19_FP16_BLOCK_X if np.dtype(storage).itemsize == 2 else source.BLOCK_X


def _kernel(device: int, block_x: int, name: str) -> Any:
    """Kernel ``name`` for blocks of ``block_x`` threads: from its storage pair's module at the
    default size (or at the fp16 default, a smaller launch of the same build), else from a module of
    that one kernel (an autotuner's candidate: compiling the 80 others for it would take most
    of the tuning time)."""
    if block_x in (source.BLOCK_X, source.D3Q19_FP16_BLOCK_X):
        return _pair_module(device, *_pair_of(name)).get_function(name)
    return _module(device, block_x, (name,)).get_function(name)
