"""The argument types of the Numba MD kernels' launches (a helper of the tests, not a test).

Numba's CUDA simulator runs a kernel on whatever arrays it is handed; NVVM on a GPU types each
launch first, so an array of another rank or dtype than the kernel indexes it with fails only
there. :func:`numba_signatures` is each kernel's argument types as the launchers mean to pass
them (the PTX test compiles them for sm_90); :func:`record_launches` records what a run on the
simulator actually passes, and :func:`fits_signatures` holds the two together.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def numba_signatures(t: Any) -> dict[str, tuple[Any, ...]]:
    """Each Numba MD kernel's argument types as :class:`DeviceMDKernels` launches it, for
    positions of the numba scalar type ``t`` (the PTX test compiles them; the rank path's test
    under mpiexec checks its launches against them)."""
    from numba import types as nt

    f64, i32, i64, u64 = nt.float64, nt.int32, nt.int64, nt.uint64

    def arr(dt: Any, nd: int = 1) -> Any:
        return nt.Array(dt, nd, "C")

    ints = arr(i32)
    x = arr(t, 2)
    box = (f64, f64, f64)
    return {
        "md_advance": (x, x, x, arr(i64, 2), i32, i32, f64, f64, *box, arr(f64, 2), f64,
                       f64, i32, ints, ints, i32),
        "md_final_integrate": (x, x, i32, f64),
        "md_langevin": (x, x, arr(i64), i32, f64, f64, u64, u64, ints, i32),
        "md_langevin_typed": (x, x, arr(i64), ints, i32, arr(f64), arr(f64), u64, u64, ints,
                              i32),
        "md_rank_classify": (x, i32, arr(f64), i32, i32, i32, i32, i32, ints, ints, ints,
                             ints, ints),
        "md_rank_gather": (ints, i32, x, x, arr(i64, 2), arr(i64), i32, x, x, arr(i64, 2),
                           arr(i64)),
        "md_rank_gather_message": (ints, i32, ints, i32, x, x, arr(i64, 2), arr(i64), x, x,
                                   arr(i64, 2), arr(i64), x, arr(i64)),
        "md_rank_place_message": (arr(i64), arr(t), *(i32,) * 8, x, x, arr(i64, 2),
                                  arr(i64), i32, i32),
        "md_rank_select": (x, i32, arr(f64), i32, i32, f64, f64, i32, ints, ints, ints),
        "md_rank_route": (x, i32, arr(f64), i32, i32, i32, i32, f64, f64, i32, i32, ints,
                          ints, ints, ints),
        "md_rank_mark": (x, i32, i32, arr(f64), i32, i32, i32, i32, f64, f64, ints),
        "md_rank_compact": (ints, ints, i32, i32, i32, arr(i64), ints),
        "md_rank_keys": (x, i32, i32, *box, i32, i32, i32, ints, ints),
        "md_rank_ghost_rows": (i32, i32, ints, x, arr(i64), x, arr(i64), ints),
        "md_rank_compose": (ints, i32, i32, i32, ints, arr(i64)),
        "md_scatter_rows": (x, arr(i64), i32, x),
        "md_rank_pack": (x, arr(i64), i32, ints, i32, x, arr(i32, 2)),
        "md_rank_land": (x, arr(i64), i32, ints, x, arr(i32, 2)),
        "md_snapshot": (x, i32, arr(f64, 2)),
        "md_gather_rows": (x, arr(i64), i32, x),
        "md_cell_count": (x, i32, *box, i32, i32, i32, ints, ints),
        "md_permute": (i32, ints, ints, x, x, arr(i64, 2), arr(i64), ints, x, x,
                       arr(i64, 2), arr(i64)),
        "md_build_neighbors": (x, i32, *box, i32, i32, i32, *box, *(i32,) * 6, ints, ints,
                               ints, i32, f64,
                               arr(i32, 2), i32, i32, ints, ints, ints, i32, arr(f64),
                               i32),
        "md_lj_forces": (x, i32, i32, arr(i32, 2), i32, ints, *box, *(f64,) * 5, x, arr(f64),
                         arr(f64), ints, i32),
        "md_scan_chunks": (ints, i32, i32, ints),
        "md_scan_serial": (ints, i32),
        "md_scan_inplace": (ints, i32, i32, ints),
        "md_scan_write": (ints, i32, i32, ints, ints, ints),
        "md_cell_scatter": (ints, i32, ints, ints),
        "md_cell_sort": (ints, i32, arr(i64), ints, ints),
        "md_arena_classify": (x, i32, *box, i32, i32, i32, arr(f64), i32, f64, ints, i32,
                              ints, ints, ints),
        "md_arena_bounds": (ints, i32, i32, ints, ints, ints),
        "md_kinetic": (x, i32, f64, arr(f64)),
        "md_nonfinite": (x, x, i32, ints),
        "md_scale_rows": (x, i32, f64),
        "md_lj_forces_typed": (x, ints, i32, i32, arr(i32, 2), i32, ints, *box, arr(f64, 2),
                               i32, i32, x, arr(f64), arr(f64), ints, i32),
        "md_lj_forces_fshift": (x, ints, i32, i32, arr(i32, 2), i32, ints, *box, arr(f64, 2),
                                i32, i32, x, arr(f64), arr(f64), ints, i32),
        "md_kick_typed": (x, x, ints, i32, arr(f64), ints, i32),
        "md_kinetic_typed": (x, ints, i32, arr(f64), arr(f64)),
        "md_row_types": (arr(i64), i32, ints, ints),
        "md_pack_types": (arr(i32, 2), i32, ints, i32, ints, i32),
        "md_exact_accumulate": (arr(i64), i32, i32, arr(u64), ints),
        "md_exact_merge": (arr(u64), ints, arr(i64)),
        "md_arena_scatter": (ints, i32, ints, ints),
        "md_arena_owned": (i32, ints, ints, x, x, arr(i64, 2), arr(i64), ints, x, x,
                           arr(i64, 2), arr(i64), ints, ints),
        "md_arena_ghosts": (i32, i32, ints, i32, ints, ints, ints, x, arr(i64), x,
                            arr(i64), ints),
        "md_arena_build_neighbors": (x, i32, i32, *box, i32, i32, i32, *box, *(i32,) * 7, ints,
                                     ints, arr(i64), f64, arr(i32, 2), i32, i32, ints,
                                     ints, arr(f64, 2)),
    }


def record_launches(kernels_cls: type) -> dict[str, set[tuple[Any, ...]]]:
    """Record every launch of ``kernels_cls`` from now on, by kernel name: the distinct
    argument kinds, ``(ndim, dtype)`` of an array and ``(None, dtype)`` of a scalar."""
    launched: dict[str, set[tuple[Any, ...]]] = {}
    plain = kernels_cls._launch

    def spy(self: Any, name: str, dtype: Any, threads: int, *args: Any) -> Any:
        kinds = tuple((None, np.asarray(a).dtype.str) if np.isscalar(a) else
                      (int(a.ndim), np.dtype(a.dtype).str) for a in args)
        launched.setdefault(name, set()).add(kinds)
        return plain(self, name, dtype, threads, *args)

    kernels_cls._launch = spy
    return launched


def as_json(launched: dict[str, set[tuple[Any, ...]]]) -> str:
    """:func:`record_launches`' record as JSON (what :func:`fits_signatures` takes back)."""
    return json.dumps({name: sorted(kinds) for name, kinds in launched.items()})


def fits_signatures(launched: dict[str, list[list[list[Any]]]]) -> None:
    """Every recorded launch passes arrays of the ranks and dtypes, and scalars of the
    dtypes, that the Numba kernels are compiled for on a GPU (the simulator checks neither: a
    stand-in array of another rank only fails to type on a real GPU)."""
    from numba import types as nt
    from numba.np.numpy_support import as_dtype

    for name, variants in launched.items():
        base = name.split("<")[0]
        for kinds in variants:
            real = [np.dtype(dt) for nd, dt in kinds if nd == 2 and np.dtype(dt).kind == "f"]
            t = nt.float32 if real and real[0] == np.float32 else nt.float64
            sig = numba_signatures(t)[base]
            assert len(sig) == len(kinds), (name, kinds)
            for k, ((nd, dt), want) in enumerate(zip(kinds, sig, strict=True)):
                if isinstance(want, nt.Array):
                    got = (nd, np.dtype(dt))
                    assert got == (want.ndim, as_dtype(want.dtype)), (name, k, got, want)
                else:
                    assert nd is None and np.dtype(dt) == as_dtype(want), (name, k, dt, want)
