"""D2Q9 launchers for the hand-written CUDA C kernels in ``kernels/d2q9.cu`` (CuPy + NVRTC).

Same call signatures as :class:`simsplit.backends.cpu.d2q9.D2Q9Kernels`: the arithmetic type is
that of the macroscopic fields, populations are held in any of run.storage's types for it
(``source.STORAGE_PAIRS``; 16-bit ones as their raw bits). Every launch goes to
the current CuPy stream of the backend's device, so it is ordered with CuPy's own work and can
be recorded into a CUDA graph.
"""

from __future__ import annotations

import functools
from typing import Any

import cupy
import numpy as np

from simsplit.backends.cuda_c import kernel_names, neq_tiles, source
from simsplit.backends.cuda_c.graph import _capturing, check_launch_device
from simsplit.backends.layout import element_strides, field_strides
from simsplit.gpu import autotune
from simsplit.gpu import cuda_errors as errors
from simsplit.numerics.lattice import UP, Q
from simsplit.numerics.lbm_params import D2Q9Params
from simsplit.numerics.neq_storage import NEQ16_DTYPE, halo_slot_sets, record_slots, stress_kept
from simsplit.numerics.storage import STRESS_RECORDS

_N_CROSS = len(UP)


def compile_options(device: int) -> tuple[str, ...]:
    """NVRTC options: the shared ones plus ``-arch=sm_XY`` of the device.

    The architecture is capped at the newest this NVRTC supports, as CuPy caps the ``-arch``
    it adds itself; the two options then agree.
    """
    cc = int(cupy.cuda.Device(device).compute_capability)
    try:
        from cupy_backends.cuda.libs import nvrtc

        cc = min(cc, max(int(a) for a in nvrtc.getSupportedArchs()))
    except Exception:  # older CuPy: keep the device's own
        pass
    return (*source.COMPILE_OPTIONS, f"-arch=sm_{cc}")


@functools.cache
def _module(device: int, block_x: int = source.BLOCK_X) -> Any:
    """The compiled ``d2q9.cu`` for one device and block size; compiled once per process, cached
    on disk by CuPy (the key covers the complete source, generated header included)."""
    code = (source.kernel_source("d2q9.cu") if block_x == source.BLOCK_X
            else source.variant_source("d2q9.cu", block_x))
    with cupy.cuda.Device(device):
        return cupy.RawModule(code=code, options=compile_options(device),
                              name_expressions=kernel_names.d2q9_module_expressions())


@functools.cache
def _stress_module(device: int) -> Any:
    """neq16s's stress-kept records kernels, a module of their own: compiled where a run takes
    them, not by every run."""
    with cupy.cuda.Device(device):
        return cupy.RawModule(code=source.kernel_source("d2q9.cu"),
                              options=compile_options(device),
                              name_expressions=kernel_names.d2q9_neq_expressions(stress=True))


@functools.cache
def _tile_module(device: int, tile: str) -> Any:
    """A tiled neq16 candidate's kernels (neq_tiles.D2Q9_NEQ_TILES), a module of their own: the
    one every run compiles stays as it is."""
    with cupy.cuda.Device(device):
        return cupy.RawModule(code=source.kernel_source("d2q9.cu"),
                              options=compile_options(device),
                              name_expressions=neq_tiles.d2q9_neq_tile_expressions(tile))


def _grid_x(n: int, block_x: int = source.BLOCK_X) -> int:
    return (n + block_x - 1) // block_x


#: an address no allocation has: the test mode's deliberately broken launch reads it
_BAD_ADDRESS = np.uint64(0xDEAD0000000)


def quadratic_args(links: Any, f_src: Any, far: tuple[Any, int] | None,
                   q: int = Q) -> tuple[Any, ...]:
    """The kernel's (quadratic, far, far_off): whether ``links`` holds quadratic weights (3 q
    planes for a lattice of ``q`` populations; ``f_src`` may hold neq16 records, whose slots
    outnumber q), and where its reads two rows away go (the array behind ``f_src`` and the row
    of f_src's row 0 in it; f_src itself where there is none)."""
    arr, off = (f_src, 0) if far is None else far
    if element_strides(arr) != element_strides(f_src):
        raise ValueError("the array behind f_src must share its layout")
    quadratic = links is not None and links.shape[0] == 3 * q
    return np.int32(quadratic), arr, np.int32(off)


class D2Q9Kernels:
    """CUDA C launchers for one device."""

    #: the kernels read row pitch and plane from the arrays' strides: blocks allocate padded,
    #: 128-byte aligned rows for them (simsplit.backends.layout)
    strided_fields = True
    #: stream_collide takes ``open_rules=False`` for blocks of walls and a lid only
    box_variant = True
    #: takes run.storage neq16 (cell records: d2q9_stream_collide_neq in boxes, and
    #: d2q9_stream_collide on records with bodies, inlets, outlets and free-slip walls)
    records = True
    records_boundaries = True
    #: ... and neq16s's stress-kept records (the same kernels on ``neq::srec``: their module is
    #: compiled by :meth:`prepare`)
    stress_records = True
    _pairs = frozenset(source.STORAGE_PAIRS)

    def __init__(self, device: int) -> None:
        self.device = device
        self._dev = cupy.cuda.Device(device)
        module = _module(device)
        with self._dev:
            self._collide = {(dt, st, s, o): module.get_function(
                kernel_names.stream_collide_name(dt, st, s, o))
                for dt, st in source.STORAGE_PAIRS for s in (False, True) for o in (False, True)}
            stored = (*source.STORAGE_CTYPES, NEQ16_DTYPE)
            self._pack = {st: module.get_function(kernel_names.pack_name("D2Q9", st))
                          for st in stored}
            self._unpack = {st: module.get_function(kernel_names.unpack_name("D2Q9", st))
                            for st in stored}
            #: (store_macro, stress, wide) -> the records' box kernel; (store_macro, stress)
            #: -> with every rule
            self._records = {(s, False, w): module.get_function(
                kernel_names.d2q9_neq_name(s, False, w)) for s in (False, True)
                for w in (False, True)}
            self._records_open = {(s, False): module.get_function(
                kernel_names.d2q9_neq_open_name(s)) for s in (False, True)}
            #: the tiled candidate the neq16 box steps take (None: d2q9_stream_collide_neq)
            self.tile = neq_tiles.neq_tile_from_env(
                neq_tiles.D2Q9_NEQ_TILES, default=neq_tiles.D2Q9_NEQ_TILE_DEFAULT)
            self._records_tile: dict[bool, Any] = {}
            if self.tile:
                tiles = module if self.tile == neq_tiles.D2Q9_NEQ_TILE_DEFAULT else \
                    _tile_module(device, self.tile)
                shared = neq_tiles.d2q9_neq_tile_launch(self.tile, 1, 1)[2]
                for s in (False, True):
                    kern = tiles.get_function(neq_tiles.d2q9_neq_tile_name(self.tile, s))
                    kern.max_dynamic_shared_size_bytes = shared
                    self._records_tile[s] = kern
            # load every kernel now: a first launch inside a graph capture must not load modules
            self.registers = {name: k.num_regs for name, k in self._named().items()}
        self._scalars: dict[tuple[D2Q9Params, np.dtype], tuple[Any, ...]] = {}
        self._zeros: dict[tuple[int, np.dtype], Any] = {}  #: inflow speeds where none is given
        #: tuned stream-collide launches: (dtype, storage, store_macro, open_rules, f shape) ->
        #: (kernel, block_x)
        self._tuned: dict[tuple[Any, ...], tuple[Any, int]] = {}
        self._bad_launch = errors.bad_launch_target()
        props = cupy.cuda.runtime.getDeviceProperties(device)
        name = props["name"]
        self.gpu_name = name.decode() if isinstance(name, bytes) else str(name)
        errors.TRACKER.device_names[device] = self.gpu_name

    def _run(self, name: str, arrays: tuple[Any, ...], launch: Any) -> None:
        """Launch with error context; in debug mode wait for it (never inside a graph capture)."""
        sync = None if _capturing else self._dev.synchronize
        errors.guarded_launch(name, self.device, arrays, launch, sync)

    def _args(self, name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """``args``, with the first array replaced by a bad address when the test mode says so."""
        if not _capturing and errors.wants_bad_launch(name, self._bad_launch):
            return (_BAD_ADDRESS, *args[1:])
        return args

    def prepare(self, storage: Any) -> None:
        """Load the kernels of ``storage`` (a PopulationStorage) that are not loaded yet:
        neq16s's records module (a launch inside a graph capture must not load a module)."""
        if storage.stress:
            self._load_stress()

    def _load_stress(self) -> None:
        """neq16s's records module: at :meth:`prepare`, or at the first launch on such records
        of a kernel set used without it (tests, scripts)."""
        if STRESS_RECORDS in self._pack:
            return
        module = _stress_module(self.device)
        with self._dev:
            for s in (False, True):
                for w in (False, True):
                    self._records[(s, True, w)] = module.get_function(
                        kernel_names.d2q9_neq_name(s, True, w))
                self._records_open[(s, True)] = module.get_function(
                    kernel_names.d2q9_neq_open_name(s, True))
            self._pack[STRESS_RECORDS] = module.get_function(
                kernel_names.pack_name("D2Q9", NEQ16_DTYPE, True))
            self._unpack[STRESS_RECORDS] = module.get_function(
                kernel_names.unpack_name("D2Q9", NEQ16_DTYPE, True))
            self.registers.update({name: k.num_regs for name, k in self._named().items()
                                   if name not in self.registers})

    def _stress(self, f: Any) -> bool:
        """Whether ``f`` holds neq16s's stress-kept records (their kernels then loaded)."""
        if f.dtype != NEQ16_DTYPE or not stress_kept(f.shape[0]):
            return False
        self._load_stress()
        return True

    def _named(self) -> dict[str, Any]:
        out = {kernel_names.stream_collide_name(*v): k for v, k in self._collide.items()}
        for kernels, name in ((self._pack, kernel_names.pack_name),
                              (self._unpack, kernel_names.unpack_name)):
            out.update({name("D2Q9", NEQ16_DTYPE, True) if dt == STRESS_RECORDS
                        else name("D2Q9", dt): k for dt, k in kernels.items()})
        out.update({kernel_names.d2q9_neq_name(*v): k for v, k in self._records.items()})
        out.update({kernel_names.d2q9_neq_open_name(*v): k
                    for v, k in self._records_open.items()})
        if self.tile:
            out.update({neq_tiles.d2q9_neq_tile_name(self.tile, s): k
                        for s, k in self._records_tile.items()})
        return out

    def _params(self, p: D2Q9Params, dtype: np.dtype) -> tuple[Any, ...]:
        key = (p, dtype)
        if key not in self._scalars:
            t = dtype.type  # scalars in the array's precision, rounded as the CPU rounds them
            if len(self._scalars) > 64:  # a ramped inflow gives each step its own params
                self._scalars.clear()
            self._scalars[key] = (t(p.omega_plus), t(p.omega_minus), t(p.lid_velocity),
                                  t(p.force_x), t(p.force_y), np.int32(bool(p.periodic_x)))
        return self._scalars[key]

    def _inlet(self, inlet: Any, rows: int, dt: np.dtype) -> Any:
        """The inflow speeds per row, or a cached zero array where there is no inlet."""
        if inlet is not None:
            return inlet
        key = (rows, dt)
        if key not in self._zeros:
            with self._dev:
                self._zeros[key] = cupy.zeros(rows, dt)
        return self._zeros[key]

    def _links(self, links: Any, f: Any, dt: np.dtype) -> Any:
        """Interpolated bounce-back weights (arithmetic type ``dt``) in f's layout (checked:
        element strides, which padded rows keep whatever the element size), or a cached
        one-element array where there are none (read only where flags say CURVED: never then)."""
        if links is None:
            return self._inlet(None, 1, dt)
        if links.dtype != dt or element_strides(links) != element_strides(f):
            raise ValueError("interpolation weights must share the populations' layout")
        return links

    def _outlet_args(self, p: D2Q9Params, dt: np.dtype, slots: Any, rows: int) -> tuple:
        """The outlet's kind, convective weights and previous values ``(9, rows)`` (a cached
        stand-in where there are none: only a convective outlet's links touch them)."""
        if slots is None:
            slots = self._inlet(None, 1, dt)
        elif slots.shape != (Q, rows) or slots.dtype != dt or not slots.flags.c_contiguous:
            raise ValueError(f"outlet slots {slots.shape} {slots.dtype} do not fit ({Q}, "
                             f"{rows}) {dt}, packed")
        keep, take = p.convective_weights
        return (np.int32(p.outlet_kind), dt.type(keep), dt.type(take),
                dt.type(p.outlet_pressure_weight), slots)

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, rows, p, store_macro,
                       inlet=None, links=None, outlet_slots=None, open_rules=True,
                       columns=None, far=None) -> None:
        """``open_rules``: flags may hold inlets, outlets, free-slip walls or curved cells;
        False (walls and the lid only) launches the kernel compiled without those rules.
        ``columns``: 1-based interior columns ``[i0, i1)`` to update (default all);
        ``outlet_slots``: a convective outlet's previous values ``(9, ny + 2)``; ``links`` of
        27 planes are quadratic, reading two rows away from ``far`` (the array behind
        ``f_src``, the row of its row 0 there; None: ``f_src`` itself). neq16 records: the
        records' box kernel where ``open_rules`` is False (on ``columns``), else the one with
        every rule."""
        records = f_src.dtype == NEQ16_DTYPE
        if records and not open_rules:  # the geometry's arrays, if any, are not read there
            self._stream_collide_records(f_src, f_dst, flags, (rho, ux, uy), rows, p,
                                         store_macro, columns)
            return
        j0, j1 = int(rows[0]), int(rows[1])
        q, h, w = f_src.shape
        ny, nx = h - 2, w - 2
        i0, i1 = (1, nx + 1) if columns is None else (int(columns[0]), int(columns[1]))
        if not 1 <= i0 <= i1 <= nx + 1:
            raise ValueError(f"columns {columns} outside the interior columns [1, {nx + 1})")
        stress = self._stress(f_src)
        if (q != (record_slots(Q, stress) if records else Q) or f_dst.shape != f_src.shape
                or flags.shape != (h, w) or rho.shape != (ny, nx)):
            raise ValueError(f"inconsistent D2Q9 arrays: f {f_src.shape}, f_dst {f_dst.shape}, "
                             f"flags {flags.shape}, rho {rho.shape}")
        if not 1 <= j0 <= j1 <= ny + 1:
            raise ValueError(f"rows {rows} outside the interior rows [1, {ny + 1})")
        if j0 == j1 or i0 == i1:
            return
        dt, st = rho.dtype, f_src.dtype
        pair = (dt, st) in self._pairs or (records and dt == np.float32)
        if f_dst.dtype != st or ux.dtype != dt or uy.dtype != dt or not pair:
            raise TypeError(f"no D2Q9 kernel for populations {st} / {f_dst.dtype} with "
                            f"macroscopic fields {dt}, {ux.dtype}, {uy.dtype}")
        check_launch_device(self.device)
        if records:  # one kernel with every rule (not tuned)
            kern, block_x = self._records_open[(bool(store_macro), stress)], source.BLOCK_X
            name = kernel_names.d2q9_neq_open_name(bool(store_macro), stress)
        else:
            variant = (dt, st, bool(store_macro), bool(open_rules))
            kern, block_x = self._tuned.get((*variant, f_src.shape),
                                            (self._collide[variant], source.BLOCK_X))
            name = kernel_names.stream_collide_name(*variant)
        block_x = source.span_block(i1 - i0, block_x)  # a narrow span: fewer idle threads
        rows_y = min(j1 - j0, source.MAX_GRID_Y)
        grid = (_grid_x(i1 - i0, block_x), rows_y, (j1 - j0 + rows_y - 1) // rows_y)
        t = dt.type
        args = self._args(name, (f_src, f_dst, flags, rho, ux, uy, np.int32(nx), np.int32(ny),
                                 *map(np.int64, field_strides(f_src, flags, f_dst)), np.int32(j0),
                                 np.int32(j1), np.int32(i0), np.int32(i1), *self._params(p, dt),
                                 self._inlet(inlet, h, dt), t(p.inlet_scale), t(p.outlet_density),
                                 self._links(links, f_src, dt),
                                 *self._outlet_args(p, dt, outlet_slots, h),
                                 *quadratic_args(links, f_src, far)))
        with self._dev:
            self._run(name, (f_src, f_dst), lambda: kern(grid, (block_x,), args))

    def _stream_collide_records(self, f_src, f_dst, flags, macro, rows, p: D2Q9Params,
                                store_macro: bool, columns: Any = None) -> None:
        """neq16 records where no cell takes an open rule: walls, the lid, forcing and
        periodic x, on ``columns`` (all by default; the tiled candidate takes whole rows
        only, a part of them runs on the production kernel: the same bits)."""
        j0, j1 = int(rows[0]), int(rows[1])
        _, h, w = f_src.shape
        ny, nx = h - 2, w - 2
        i0, i1 = (1, nx + 1) if columns is None else (int(columns[0]), int(columns[1]))
        if not 1 <= i0 <= i1 <= nx + 1 or f_dst.shape != f_src.shape:
            raise ValueError(f"run.storage neq16: columns {columns} outside [1, {nx + 1}), or "
                             f"two record arrays unlike (f {f_src.shape}, f_dst {f_dst.shape})")
        if not 1 <= j0 <= j1 <= ny + 1 or macro[0].dtype != np.float32:
            raise ValueError(f"rows {rows} of {ny}, float32 fields expected")
        if j0 == j1 or i0 == i1:
            return
        check_launch_device(self.device)
        stress = self._stress(f_src)
        wide = source.needs_wide_offsets(f_src.shape[0] * element_strides(f_src)[0])
        name = kernel_names.d2q9_neq_name(bool(store_macro), stress, wide)
        threads = source.span_block(i1 - i0, source.BLOCK_X)
        rows_y = min(j1 - j0, source.MAX_GRID_Y)
        grid = (_grid_x(i1 - i0, threads), rows_y, (j1 - j0 + rows_y - 1) // rows_y)
        om_p, om_m, lid_u, fx, fy, per_x = self._params(p, np.dtype(np.float32))[:6]
        args = self._args(name, (f_src, f_dst, flags, *macro, np.int32(nx), np.int32(ny),
                                 *map(np.int64, field_strides(f_src, flags, f_dst)), np.int32(j0),
                                 np.int32(j1), om_p, om_m, lid_u, fx, fy, per_x))
        if self.tile and not stress and (i0, i1) == (1, nx + 1):  # plain records, whole rows
            name = neq_tiles.d2q9_neq_tile_name(self.tile, bool(store_macro))
            grid, threads, shared = neq_tiles.d2q9_neq_tile_launch(self.tile, nx, j1 - j0)
            args = (*args, np.int32(neq_tiles.D2Q9_NEQ_TILE_RUN))
            tile = self._records_tile[bool(store_macro)]
            with self._dev:
                self._run(name, (f_src, f_dst),
                          lambda: tile(grid, (threads,), args, shared_mem=shared))
            return
        kern = self._records[(bool(store_macro), stress, wide)]
        args = (*args, np.int32(i0), np.int32(i1))
        with self._dev:
            self._run(name, (f_src, f_dst), lambda: kern(grid, (threads,), args))

    # --- launch-configuration autotuning ---------------------------------------------------
    def autotune(self, f_src: Any, f_dst: Any, flags: Any, p: D2Q9Params,
                 tuner: autotune.Autotuner, dtype: Any = None, open_rules: bool = True) -> None:
        """Pick the fastest block size for the stream-collide kernels on arrays of this shape
        (``dtype``: the arithmetic type, by default the storage's).

        Timing launches write ``f_dst`` (overwritten by the next step anyway) and scratch
        macroscopic fields. Never during a graph capture: timing needs synchronisation.
        """
        if _capturing:
            raise RuntimeError("autotuning cannot run inside a CUDA graph capture")
        if f_src.dtype == NEQ16_DTYPE:  # neq16 records: one kernel, not tuned
            return
        q, h, w = f_src.shape
        ny, nx = h - 2, w - 2
        st = f_src.dtype
        dt = np.dtype(dtype) if dtype is not None else np.dtype(np.promote_types(st, np.float32))
        with self._dev:
            scratch = [cupy.empty((ny, nx), dt) for _ in range(3)]
            slots = cupy.zeros((Q, h), dt)  # timing launches keep off the block's outlet values
        src_hash = autotune.source_hash(source.kernel_source("d2q9.cu"))
        for store in (False, True):
            name = kernel_names.stream_collide_name(dt, st, store, open_rules)

            def time_block(block_x: int, name: str = name) -> float:
                kern = _module(self.device, block_x).get_function(name)
                grid = (_grid_x(nx, block_x), min(ny, source.MAX_GRID_Y),
                        (ny + source.MAX_GRID_Y - 1) // source.MAX_GRID_Y)
                args = (f_src, f_dst, flags, *scratch, np.int32(nx), np.int32(ny),
                        *map(np.int64, field_strides(f_src, flags, f_dst)), np.int32(1),
                        np.int32(ny + 1), np.int32(1), np.int32(nx + 1), *self._params(p, dt),
                        self._inlet(None, h, dt), dt.type(p.inlet_scale), dt.type(p.outlet_density),
                        self._links(None, f_src, dt), *self._outlet_args(p, dt, slots, h),
                        *quadratic_args(None, f_src, None))
                with self._dev:
                    return autotune.launch_seconds(lambda: kern(grid, (block_x,), args))

            block = tuner.choose(self.gpu_name, name, src_hash, (nx, ny), time_block,
                                 source.BLOCK_X)
            if block != source.BLOCK_X:
                with self._dev:
                    kern = _module(self.device, block).get_function(name)
                    _ = kern.num_regs  # load now: a launch inside a graph capture must not load
                self._tuned[(dt, st, store, open_rules, f_src.shape)] = (kern, block)
            else:
                self._tuned.pop((dt, st, store, open_rules, f_src.shape), None)

    def _halo(self, kernels: dict, f, row: int, direction: int, buf, src, dst) -> None:
        q, h, w = f.shape
        cross = len(halo_slot_sets(q)[0]) if f.dtype == NEQ16_DTYPE else _N_CROSS
        if buf.shape != (cross, w) or buf.dtype != f.dtype:
            raise ValueError(f"halo buffer {buf.shape} {buf.dtype} does not fit f {f.shape}")
        if not 0 <= row < h or direction not in (0, 1):
            raise ValueError(f"row {row} / direction {direction} out of range")
        check_launch_device(self.device)
        stress = self._stress(f)
        kern = kernels[STRESS_RECORDS if stress else f.dtype]
        name = (kernel_names.pack_name if kernels is self._pack
                else kernel_names.unpack_name)("D2Q9", f.dtype, stress)
        plane, pitch = (np.int64(v) for v in element_strides(f)[:2])
        # a layer is one row: row length and layer size w, rows (= layers) pitch apart
        args = self._args(name, (src, dst, plane, pitch, pitch, np.int32(w), np.int32(w),
                                 np.int32(row), np.int32(direction)))
        with self._dev:
            self._run(name, (f,), lambda: kern((_grid_x(w), cross), (source.BLOCK_X,), args))

    def pack(self, f, row: int, direction: int, buf) -> None:
        self._halo(self._pack, f, row, direction, buf, f, buf)

    def unpack(self, buf, f, row: int, direction: int) -> None:
        self._halo(self._unpack, f, row, direction, buf, buf, f)
