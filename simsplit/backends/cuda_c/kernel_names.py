"""Kernel instantiation names (NVRTC name expressions) the CUDA C backends launch and build."""

from __future__ import annotations

import itertools

import numpy as np

from simsplit.backends.cuda_c import neq_tiles
from simsplit.backends.cuda_c.source import (
    CTYPES,
    D3Q19_BODIES_OPEN,
    D3Q19_NEQ_INDEX,
    NEQ_CTYPE,
    NEQ_STRESS_CTYPE,
    OFFSET_TYPES,
    STORAGE_CTYPES,
    STORAGE_PAIRS,
    d3q19_fused_built,
    d3q19_takes_x2,
)
from simsplit.numerics.neq_storage import NEQ16_DTYPE


# --- template instantiations: what the backends launch, and what the compile tests build ----------
def _ctype(dtype: np.dtype | type) -> str:
    try:
        return CTYPES[np.dtype(dtype)]
    except KeyError:
        raise TypeError(
            f"CUDA kernels exist for float32 and float64, not {np.dtype(dtype)}") from None


def _check_storage_pair(lattice: str, dtype: np.dtype | type,
                        storage: np.dtype | type) -> None:
    if (np.dtype(dtype), np.dtype(storage)) not in STORAGE_PAIRS:
        raise TypeError(f"no {lattice} kernel for {np.dtype(dtype)} arithmetic on "
                        f"{np.dtype(storage)} storage")


def stream_collide_name(dtype: np.dtype | type, storage: np.dtype | type, store_macro: bool,
                        open_rules: bool = True) -> str:
    """D2Q9 stream-collide for arithmetic ``dtype`` and population storage ``storage``;
    ``open_rules``: with the inlet, outlet, free-slip and interpolated bounce-back rules (a box
    of walls and a lid runs faster without them)."""
    _check_storage_pair("D2Q9", dtype, storage)
    return (f"d2q9_stream_collide<{_ctype(dtype)}, {_storage_ctype(storage)}, "
            f"{_cbool(store_macro)}, {_cbool(open_rules)}>")


def _storage_ctype(dtype: np.dtype | type) -> str:
    try:
        return STORAGE_CTYPES[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"populations are stored as float16, e4m11, float32 or float64, "
                        f"not {np.dtype(dtype)}") from None


def _cbool(v: bool) -> str:
    return "true" if v else "false"


#: the D3Q19 kernels' element offset types (kernels/d3q19.cu population_at): 32 bits while an


def d3q19_stream_collide_name(dtype: np.dtype | type, storage: np.dtype | type,
                              store_macro: bool, forced: bool, wide: bool = False) -> str:
    """D3Q19 stream-collide for arithmetic ``dtype`` and population storage ``storage``;
    ``forced``: with the body-force (Guo) terms, compiled out of the unforced kernel; ``wide``:
    64-bit element offsets (:func:`needs_wide_offsets`)."""
    _check_storage_pair("D3Q19", dtype, storage)
    return (f"d3q19_stream_collide<{_ctype(dtype)}, {_storage_ctype(storage)}, "
            f"{_cbool(store_macro)}, {_cbool(forced)}, {OFFSET_TYPES[bool(wide)]}>")


def d3q19_aa_name(dtype: np.dtype | type, storage: np.dtype | type, store_macro: bool,
                  forced: bool, wide: bool = False) -> str:
    """In-place (AA) D3Q19 stream-collide, as :func:`d3q19_stream_collide_name`."""
    return d3q19_stream_collide_name(dtype, storage, store_macro, forced, wide).replace(
        "d3q19_stream_collide<", "d3q19_stream_collide_aa<")


def d3q19_x2_name(dtype: np.dtype | type, storage: np.dtype | type, store_macro: bool,
                  forced: bool, wide: bool = False) -> str:
    """D3Q19 stream-collide with two x-cells per thread, as :func:`d3q19_stream_collide_name`."""
    return d3q19_stream_collide_name(dtype, storage, store_macro, forced, wide).replace(
        "d3q19_stream_collide<", "d3q19_stream_collide_x2<")


def d3q19_two_steps_name(dtype: np.dtype | type, storage: np.dtype | type, store_macro: bool,
                         forced: bool) -> str:
    """Two-step (temporally blocked) D3Q19 stream-collide, as
    :func:`d3q19_stream_collide_name`; 32-bit element offsets only."""
    return d3q19_stream_collide_name(dtype, storage, store_macro, forced, False).replace(
        "d3q19_stream_collide<", "d3q19_stream_collide_two_steps<")


def d3q19_bodies_name(dtype: np.dtype | type, storage: np.dtype | type, store_macro: bool,
                      forced: bool, open_faces: str = "any_outlet") -> str:
    """D3Q19 stream-collide with bodies, inlets and outlets (kernels/d3q19.cu
    d3q19_stream_collide_bodies), as :func:`d3q19_stream_collide_name`; 32-bit element offsets
    only; ``open_faces``: the open-face rules compiled in, one of :data:`D3Q19_BODIES_OPEN`."""
    if open_faces not in D3Q19_BODIES_OPEN:
        raise ValueError(f"open_faces must be one of {D3Q19_BODIES_OPEN}, not {open_faces!r}")
    name = d3q19_stream_collide_name(dtype, storage, store_macro, forced, False)
    return name.replace("d3q19_stream_collide<", "d3q19_stream_collide_bodies<").replace(
        f", {OFFSET_TYPES[False]}>", f", BODIES_{open_faces.upper()}>")


def _halo_args(lattice: str, dtype: np.dtype | type, stress: bool = False) -> str:
    """Template arguments of the halo kernels for values stored as ``dtype``: the lattice's
    crossing populations, or for neq16 records (``<lattice>Records``; ``stress``: neq16s's,
    ``<lattice>StressRecords``) their significands and the whole record."""
    if np.dtype(dtype) == NEQ16_DTYPE:
        return f"{lattice}{'Stress' if stress else ''}Records, {NEQ_CTYPE}"
    return f"{lattice}, {_storage_ctype(dtype)}"


def pack_name(lattice: str, dtype: np.dtype | type, stress: bool = False) -> str:
    """Halo pack of populations (or neq16 records; ``stress``: neq16s's) stored as
    ``dtype``."""
    return f"lbm_pack<{_halo_args(lattice, dtype, stress)}>"


def unpack_name(lattice: str, dtype: np.dtype | type, stress: bool = False) -> str:
    return f"lbm_unpack<{_halo_args(lattice, dtype, stress)}>"


def _records_ctype(stress: bool) -> str:
    """The kernels' storage type of neq16 records (``stress``: neq16s's stress-kept ones)."""
    return NEQ_STRESS_CTYPE if stress else NEQ_CTYPE


def _stress_arg(stress: bool) -> str:
    """The last template argument of the records kernels whose storage type defaults to
    neq16's: neq16s's type, or none."""
    return f", {NEQ_STRESS_CTYPE}" if stress else ""


def link_force_sums_name(dtype: np.dtype | type, storage: np.dtype | type) -> str:
    """Exact per-body sums of the momentum exchanged on fluid-to-body links
    (kernels/link_forces.cu) for arithmetic ``dtype`` and population storage ``storage``."""
    return f"link_force_sums<{_ctype(dtype)}, {_storage_ctype(storage)}>"


def link_force_sums_neq_name(dim: int, stress: bool = False) -> str:
    """Exact per-body link momentum sums on neq16 records (``stress``: neq16s's) of the
    ``dim``-D lattice (kernels/link_forces.cu link_force_sums_neq)."""
    return f"link_force_sums_neq<{'D2Q9' if dim == 2 else 'D3Q19'}{_stress_arg(stress)}>"


def d2q9_neq_name(store_macro: bool, stress: bool = False, wide: bool = False) -> str:
    """The D2Q9 pull kernel on neq16 records (``stress``: neq16s's; float32 arithmetic,
    kernels/d2q9.cu); ``wide``: 64-bit element offsets (:func:`source.needs_wide_offsets`)."""
    return (f"d2q9_stream_collide_neq<{_cbool(store_macro)}, {OFFSET_TYPES[bool(wide)]}"
            f"{_stress_arg(stress)}>")


def d2q9_neq_open_name(store_macro: bool, stress: bool = False) -> str:
    """The D2Q9 kernel with the open rules on neq16 records (``stress``: neq16s's; bodies,
    inlets, outlets, free-slip walls: d2q9_stream_collide with S = neq::rec, float32)."""
    return (f"d2q9_stream_collide<float, {_records_ctype(stress)}, {_cbool(store_macro)}, "
            f"{_cbool(True)}>")


def d2q9_neq_expressions(stress: bool = False) -> list[str]:
    """The D2Q9 records' pull kernels (box and open rules) and halo kernels (``stress``:
    neq16s's, a module of their own; neq16's are in the D2Q9 module)."""
    return [*(d2q9_neq_name(s, stress, w) for s, w in itertools.product((False, True), repeat=2)),
            *(d2q9_neq_open_name(s, stress) for s in (False, True)),
            pack_name("D2Q9", NEQ16_DTYPE, stress), unpack_name("D2Q9", NEQ16_DTYPE, stress)]


def d3q19_neq_name(store_macro: bool, forced: bool, index: str = "halves",
                   stress: bool = False) -> str:
    """The D3Q19 pull kernel on neq16 records (``stress``: neq16s's; float32 arithmetic,
    kernels/d3q19_neq.cuh) with the records' ``index`` type (a key of
    :data:`D3Q19_NEQ_INDEX`: :func:`source.d3q19_records_index`)."""
    return (f"d3q19_stream_collide_neq<{_cbool(store_macro)}, {_cbool(forced)}, "
            f"{D3Q19_NEQ_INDEX[index]}{_stress_arg(stress)}>")


#: the one bodies kernel variant instantiated on neq16 records: every open rule (the launcher
#: takes it for any slab with bodies, inlets, outlets or free-slip walls on records; a variant
#: per kind would multiply the records' instantiations by six)
D3Q19_NEQ_BODIES_OPEN = "slip_quadratic"


def d3q19_neq_bodies_name(store_macro: bool, forced: bool, stress: bool = False) -> str:
    """The D3Q19 bodies kernel on neq16 records (S = neq::rec; ``stress``: neq16s's,
    neq::srec; float32, every open rule)."""
    return (f"d3q19_stream_collide_bodies<float, {_records_ctype(stress)}, "
            f"{_cbool(store_macro)}, {_cbool(forced)}, BODIES_{D3Q19_NEQ_BODIES_OPEN.upper()}>")


def d3q19_neq_expressions(stress: bool = False) -> list[str]:
    """The module of neq16's records (``stress``: neq16s's): its pull kernels (box and
    bodies) and the records' halo kernels."""
    flags = (False, True)
    return [*(d3q19_neq_name(s, f, i, stress)
              for s, f, i in itertools.product(flags, flags, D3Q19_NEQ_INDEX)),
            *(d3q19_neq_bodies_name(s, f, stress) for s, f in itertools.product(flags, repeat=2)),
            pack_name("D3Q19", NEQ16_DTYPE, stress), unpack_name("D3Q19", NEQ16_DTYPE, stress)]


def d3q19_pair_expressions(dtype: np.dtype | type, storage: np.dtype | type,
                           halos: bool = True) -> list[str]:
    """The D3Q19 kernel instantiations of one (arithmetic, storage) pair, with the halo
    kernels of its storage type (``halos``): what a run of that pair launches (the backend
    compiles one module per pair; all 264 take NVRTC minutes)."""
    dt, st = np.dtype(dtype), np.dtype(storage)
    out = []
    for forced, wide in itertools.product((False, True), repeat=2):
        out += [d3q19_stream_collide_name(dt, st, s, forced, wide) for s in (False, True)]
        out += [d3q19_aa_name(dt, st, s, forced, wide) for s in (False, True)]
        if d3q19_takes_x2(dt, st):
            out += [d3q19_x2_name(dt, st, s, forced, wide) for s in (False, True)]
    out += [d3q19_bodies_name(dt, st, s, forced, o)
            for forced, s in itertools.product((False, True), repeat=2)
            for o in D3Q19_BODIES_OPEN]
    # the two-step kernel only where the solver takes it on some GPU: every instantiation
    # lengthens the first run's NVRTC compile (the host emulation tests all storage pairs)
    if d3q19_fused_built(dt, st):
        out += [d3q19_two_steps_name(dt, st, s, forced)
                for forced, s in itertools.product((False, True), repeat=2)]
    if halos:
        out += [pack_name("D3Q19", st), unpack_name("D3Q19", st)]
    return out


def d2q9_module_expressions() -> list[str]:
    """The D2Q9 module every cupy run compiles: each storage pair's kernels, neq16's records
    kernels and the production tile, the halo kernels (neq16s's records: a module of their
    own, ``d2q9_neq_expressions(stress=True)``, compiled where a run takes them)."""
    out = []
    for dt, st in STORAGE_PAIRS:
        out += [stream_collide_name(dt, st, s, o)
                for s, o in itertools.product((False, True), repeat=2)]
    out += d2q9_neq_expressions()
    if neq_tiles.D2Q9_NEQ_TILE_DEFAULT:
        out += neq_tiles.d2q9_neq_tile_expressions(neq_tiles.D2Q9_NEQ_TILE_DEFAULT)
    for st in STORAGE_CTYPES:
        out += [pack_name("D2Q9", st), unpack_name("D2Q9", st)]
    return out


def name_expressions(name: str) -> list[str]:
    """Every kernel instantiation of kernel file ``name`` that a backend may launch."""
    if name == "link_forces.cu":
        return [*(link_force_sums_name(dt, st) for dt, st in STORAGE_PAIRS),
                *(link_force_sums_neq_name(d, s) for s in (False, True) for d in (2, 3))]
    if name == "d2q9.cu":
        return [*d2q9_module_expressions(), *d2q9_neq_expressions(stress=True)]
    if name != "d3q19.cu":
        return []
    out = []
    for dt, st in STORAGE_PAIRS:
        out += d3q19_pair_expressions(dt, st, halos=False)
    out += d3q19_neq_expressions() + d3q19_neq_expressions(stress=True)
    for tile in neq_tiles.D3Q19_NEQ_TILES:  # the compile tests build the candidates too
        out += neq_tiles.d3q19_neq_tile_expressions(tile)
    for st in STORAGE_CTYPES:
        out += [pack_name("D3Q19", st), unpack_name("D3Q19", st)]
    return out
