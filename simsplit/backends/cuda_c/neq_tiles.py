"""Tiled candidates of the neq16 box kernels (``kernels/d3q19_neq_tile.cuh``,
``kernels/d2q9_neq_tile.cuh``): their shapes, kernel names, launch shapes, the defaults the
tuner's timings chose (``scripts/tune_neq16.py``) and the environment variable that makes a
launcher take another. Imports neither CuPy nor a GPU library.
"""

from __future__ import annotations

import itertools
import os
from typing import Mapping

from simsplit.errors import CaseError
from simsplit.numerics.lattice import D3Q19


def _c(v: bool) -> str:
    return "true" if v else "false"


#: tiled candidates for the D3Q19 neq16 box kernel (kernels/d3q19_neq_tile.cuh: each record
#: rebuilt once into shared memory, not once per pull): name -> (TX, TY, EXTRA, resident blocks
#: per SM asked of the register allocator, FAST); TX * TY threads a block. EXTRA 0: two
#: barriers a plane, 38 floats a footprint cell ((TX + 2) (TY + 2) cells: 51.7 KB at 32 x 8);
#: 1: one barrier, 57 floats (77.5 KB). FAST: records rebuilt and stored with
#: kernels/neq_fast.cuh's shortcuts (same bits for finite values) instead of neq::pull's and
#: neq::store's own operations: PTX executed per cell (rebuild x 1.33 for 32 x 8, pulls from
#: shared memory, collide, store) about 1,390 fast and 1,670 not, against about 2,650 in the
#: production kernel. ptxas sm_90: 80 registers (94-96 for the one-barrier kernels with the
#: force; tile32x8f4's unforced kernels 64: four blocks, 32 warps an SM, its forced ones stay
#: at three), no spills; 32 x 16 at two blocks (64 registers) spilled 8 bytes. Not the default
#: until timed on a GPU (scripts/tune_neq16.py): the launcher takes one where
#: D3Q19NeqKernels.tile (NEQ_TILE_ENV) names it
D3Q19_NEQ_TILES = {"tile32x8": (32, 8, 0, 3, False), "tile32x8r": (32, 8, 1, 2, False),
                   "tile32x4": (32, 4, 0, 6, False), "tile32x8f": (32, 8, 0, 3, True),
                   "tile32x8rf": (32, 8, 1, 2, True), "tile32x8f4": (32, 8, 0, 4, True)}
#: planes per block's run along z of the tiled candidates
D3Q19_NEQ_TILE_RUN = 32
#: names the kernel the neq16 box steps take: a candidate, or "production"; unset or empty
#: (or the other lattice's candidate): the lattice's default (D3Q19_NEQ_TILE_DEFAULT,
#: D2Q9_NEQ_TILE_DEFAULT)
NEQ_TILE_ENV = "SIMSPLIT_NEQ16_TILE"
#: the candidates the box steps take by default (None: the production kernels), from
#: scripts/tune_neq16.py on an H200 (2026-12-05, raw
#: benchmarks/logs/tune_neq16_h200_2026-12-05.log).
#: D3Q19 keeps production: tile32x8f, the fastest candidate, gains 7 % at 512^3 (9,571 against
#: 8,957 MLUPS) but loses 9 % at 256^3 (8,193 against 8,976). D2Q9 took strip128f on
#: 2026-12-06 (the solver at 8192^2 on an H200: 22,508 against production's 19,731) until the
#: production kernel took 32-bit offsets (646ee8c); since then production is ahead: 24,440 /
#: 24,437 against strip128f's 22,245 / 22,223 MLUPS, the solver at 8192^2 on an H100
#: alternating twice (2026-12-07, STAGES=neq2d, raw
#: benchmarks/logs/neq2d_h100_2026-12-07.log; the GPU tests of both passed)
D3Q19_NEQ_TILE_DEFAULT: str | None = None
D2Q9_NEQ_TILE_DEFAULT: str | None = None


def neq_tile_from_env(tiles: Mapping[str, tuple], env: Mapping[str, str] | None = None, *,
                      default: str | None = None) -> str | None:
    """The candidate :data:`NEQ_TILE_ENV` names if it is one of ``tiles`` (a lattice's:
    :data:`D3Q19_NEQ_TILES`, :data:`D2Q9_NEQ_TILES`), None for "production", else ``default``
    (unset, or the other lattice's); :class:`CaseError` for a name neither lattice has."""
    name = (os.environ if env is None else env).get(NEQ_TILE_ENV, "").strip()
    if name == "production":
        return None
    if name and name not in D3Q19_NEQ_TILES and name not in D2Q9_NEQ_TILES:
        raise CaseError(f"{NEQ_TILE_ENV}={name!r}: one of {sorted(D3Q19_NEQ_TILES)} (D3Q19), "
                        f"{sorted(D2Q9_NEQ_TILES)} (D2Q9), production or unset")
    return name if name in tiles else default


def d3q19_neq_tile_name(tile: str, store_macro: bool, forced: bool) -> str:
    """A tiled candidate of the D3Q19 neq16 box kernel (:data:`D3Q19_NEQ_TILES`)."""
    tx, ty, extra, blocks, fast = D3Q19_NEQ_TILES[tile]
    return (f"d3q19_stream_collide_neq_tile<{tx}, {ty}, {extra}, {blocks}, {_c(fast)}, "
            f"{_c(store_macro)}, {_c(forced)}>")


def d3q19_neq_tile_launch(tile: str, nx: int, ny: int, planes: int,
                          run: int = D3Q19_NEQ_TILE_RUN) -> tuple[tuple[int, int, int], int, int]:
    """(grid, threads per block, dynamic shared bytes) of candidate ``tile`` for ``planes``
    planes of an ``nx`` x ``ny`` grid, runs of ``run`` planes."""
    tx, ty, extra, _, _ = D3Q19_NEQ_TILES[tile]
    slots = (2 + extra) * D3Q19.q  # 2 + cz_q + extra planes of each q; the cz_q sum to 0
    grid = (-(-nx // tx), -(-ny // ty), -(-planes // run))
    return grid, tx * ty, slots * (tx + 2) * (ty + 2) * 4


def d3q19_neq_tile_expressions(tile: str) -> list[str]:
    """A tiled candidate's instantiations (with and without rho/u stores and the force)."""
    return [d3q19_neq_tile_name(tile, s, f) for s, f in itertools.product((False, True),
                                                                          repeat=2)]


#: tiled candidates for the D2Q9 neq16 box kernel (kernels/d2q9_neq_tile.cuh): name -> (TX,
#: EXTRA, resident blocks per SM asked of the register allocator, FAST), as
#: :data:`D3Q19_NEQ_TILES` (TX threads a block, a strip of TX columns; 18 or 27 floats a strip
#: cell). The default (D2Q9_NEQ_TILE_DEFAULT) is in the D2Q9 module every run compiles; for
#: another that NEQ_TILE_ENV names, D2Q9Kernels compiles a module of its own (the names of both
#: lattices' candidates differ)
D2Q9_NEQ_TILES = {"strip256": (256, 0, 4, False), "strip256f": (256, 0, 4, True),
                  "strip128f": (128, 0, 8, True), "strip256rf": (256, 1, 4, True)}
#: rows per block's run along y of the D2Q9 candidates
D2Q9_NEQ_TILE_RUN = 64


def d2q9_neq_tile_name(tile: str, store_macro: bool) -> str:
    """A tiled candidate of the D2Q9 neq16 box kernel (:data:`D2Q9_NEQ_TILES`)."""
    tx, extra, blocks, fast = D2Q9_NEQ_TILES[tile]
    return (f"d2q9_stream_collide_neq_tile<{tx}, {extra}, {blocks}, {_c(fast)}, "
            f"{_c(store_macro)}>")


def d2q9_neq_tile_launch(tile: str, nx: int, rows: int,
                         run: int = D2Q9_NEQ_TILE_RUN) -> tuple[tuple[int, int], int, int]:
    """(grid, threads per block, dynamic shared bytes) of candidate ``tile`` for ``rows`` rows
    of ``nx`` columns, runs of ``run`` rows."""
    tx, extra, _, _ = D2Q9_NEQ_TILES[tile]
    grid = (-(-nx // tx), -(-rows // run))
    return grid, tx, (2 + extra) * 9 * (tx + 2) * 4  # 2 + c_y + extra rows of each q


def d2q9_neq_tile_expressions(tile: str) -> list[str]:
    """A D2Q9 candidate's instantiations (with and without rho/u stores)."""
    return [d2q9_neq_tile_name(tile, s) for s in (False, True)]
