"""D3Q19 launchers for the hand-written CUDA C kernels in ``kernels/d3q19.cu`` (CuPy + NVRTC).

Same call signatures as :class:`simsplit.backends.cpu.d3q19.D3Q19Kernels`; launches go to the
current CuPy stream of the backend's device (graph-capturable), as for D2Q9. Halos use the
lattice-generic ``lbm_pack_strided``/``lbm_unpack_strided`` of ``lbm_common.cuh`` on whole
xy-planes. The
kernel is chosen by the arithmetic type (that of rho/u) and the population storage type (that
of f: float16 and e4m11 (int16) arrays hold the shifted 16-bit encodings, see ``lbm_common.cuh``).

The two-lattice step of float32 arithmetic on fp16 storage takes two adjacent x-cells per
thread (``d3q19_stream_collide_x2``, :func:`source.d3q19_takes_x2`): every population
moves as a 2-element vector, which needs both population arrays aligned for them
(:func:`~simsplit.backends.cuda_c.d3q19_modules.pair_alignment_problem`; blocks allocate padded
rows, ``simsplit.backends.layout``).
Arrays that are not take the one-cell kernel of the same module (the same bits).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import cupy
import numpy as np

from simsplit.backends.cuda_c import kernel_names, source
from simsplit.backends.cuda_c.d2q9 import _grid_x, quadratic_args
from simsplit.backends.cuda_c.d3q19_modules import (
    MAX_PLANE,
    _kernel,
    _module,
    _pair_module,
    default_block,
    grid_x,
    pairs_aligned,
    wide_offsets,
)
from simsplit.backends.cuda_c.d3q19_neq import D3Q19NeqKernels
from simsplit.backends.cuda_c.graph import check_launch_device
from simsplit.backends.layout import element_strides, field_strides, padded_pitch
from simsplit.gpu import autotune
from simsplit.numerics.flags import OPEN_FACES
from simsplit.numerics.lattice import D3Q19
from simsplit.numerics.lbm_params import D3Q19Params
from simsplit.numerics.neq_storage import NEQ16_DTYPE, halo_slot_sets, stress_kept
from simsplit.numerics.storage import STRESS_RECORDS

_NAME = "D3Q19"
_N_CROSS = len(D3Q19.up)


def _storage_key(f: Any) -> Any:
    """What picks the kernels of populations ``f``: their dtype, or for neq16s's stress-kept
    records (neq16's dtype, more slots) :data:`STRESS_RECORDS`."""
    return STRESS_RECORDS if f.dtype == NEQ16_DTYPE and stress_kept(f.shape[0]) else f.dtype


class D3Q19Kernels:
    """CUDA C launchers for one device."""

    #: the kernels read their strides from the arrays: blocks allocate padded, 128-byte aligned
    #: rows for them (simsplit.backends.layout)
    strided_fields = True
    #: stream_collide takes ``open_faces``, the open kinds of a slab's flags (0 for bodies in a
    #: slab without inlet, outlet or slip cells: a bodies kernel without those rules)
    bodies_variants = True
    #: takes run.storage neq16 (cell records, :mod:`.d3q19_neq`), with bodies, inlets,
    #: outlets and free-slip walls too (the bodies kernel on records)
    records = True
    records_boundaries = True
    #: ... and neq16s's stress-kept records (the same kernels on ``neq::srec``, a module of
    #: their own)
    stress_records = True
    #: stream_collide takes ``open_rules`` and ``columns``: a slab with bodies or open faces
    #: may be launched by column spans (SlabBlock.column_spans; :meth:`launches_by_spans`),
    #: the spans without open rules on the storage's box kernel where it has one with
    #: columns (neq16 records), else on the bodies kernel without open-face rules
    box_variant = True

    def __init__(self, device: int) -> None:
        self.device = device
        self._dev = cupy.cuda.Device(device)
        self._collide: dict[tuple, Any] = {}
        self._collide_aa: dict[tuple, Any] = {}
        #: the two-cell kernels of the storages that take them (source.d3q19_takes_x2)
        self._collide_x2: dict[tuple, Any] = {}
        #: (f_src, f_dst) data pointers, shape and strides -> whether they suit the two-cell
        #: kernel
        self._aligned: dict[tuple, bool] = {}
        self._bodies: dict[tuple, Any] = {}
        self._two_steps: dict[tuple, Any] = {}
        self._pack: dict[np.dtype, Any] = {}
        self._unpack: dict[np.dtype, Any] = {}
        #: registers of every kernel loaded so far (:meth:`prepare`)
        self.registers: list[int] = []
        self._prepared: set[tuple[np.dtype, np.dtype]] = set()
        self._scalars: dict[tuple[D3Q19Params, np.dtype], tuple[Any, ...]] = {}
        #: stand-ins of links (never read: no CURVED) and outlet slots (no convective outlet)
        self._halfway: dict[Any, Any] = {}
        #: threads per block of the bodies kernel (scripts/bench_bodies.py times others)
        self.bodies_block_x = source.D3Q19_BODIES_BLOCK_X
        #: None: the bodies kernel variant source.d3q19_bodies_open picks; a name of
        #: source.D3Q19_BODIES_OPEN forces a larger one (scripts/bench_bodies.py times the
        #: general one against the choice)
        self.bodies_open: str | None = None
        #: tuned two-lattice launches: (dtype, storage, store_macro, forced, wide, f shape)
        #: -> (kernel, block)
        self._tuned: dict[tuple[Any, Any, bool, bool, bool, tuple[int, ...]], tuple[Any, int]] = {}
        records_module = functools.partial(_module, device, source.BLOCK_X)
        self._records = D3Q19NeqKernels(device, records_module)
        self._stress_records = D3Q19NeqKernels(device, records_module, stress=True)
        props = cupy.cuda.runtime.getDeviceProperties(device)
        name = props["name"]
        self.gpu_name = name.decode() if isinstance(name, bytes) else str(name)
        #: (arithmetic, storage) pairs stepped two per sweep on this GPU
        self.fused_pairs = source.d3q19_fused_pairs(self.gpu_name)

    @staticmethod
    def launches_by_spans(storage: Any) -> bool:
        """Whether slabs with a geometry on ``storage`` (a PopulationStorage) are launched by
        column spans: records yes (their bodies kernel holds one block per SM, their box
        kernel more: about half the box's speed in one launch); float storage no (its bodies
        kernel runs within 8-14 % of the box in one launch, and a column-span candidate ran
        slower in float32: 16,389 against 20,857 MLUPS at 3D-1Z D = 20, BENCHMARKS.md)."""
        return bool(storage.records)

    @property
    def tile(self) -> str | None:
        """The tiled neq16 candidate the records' box steps take (None: production's)."""
        return self._records.tile

    def prepare(self, storage: Any) -> None:
        """Compile and load the kernels of ``storage`` (a PopulationStorage) before any launch:
        a launch inside a graph capture must not load a module."""
        if storage.records:
            self._load_records(storage.stress)
            return
        self._load(storage.arith, storage.dtype)

    def _load_records(self, stress: bool) -> D3Q19NeqKernels:
        """The neq16 records' kernels (``stress``: neq16s's): pull steps and halos (a module of
        their own)."""
        records = self._stress_records if stress else self._records
        key = STRESS_RECORDS if stress else NEQ16_DTYPE
        if key in self._pack:
            return records
        self.registers += records.prepare()
        for s, forced in itertools.product((False, True), repeat=2):
            self._bodies[(np.dtype(np.float32), key, s, forced,
                          kernel_names.D3Q19_NEQ_BODIES_OPEN)] = records.kernel(
                kernel_names.d3q19_neq_bodies_name(s, forced, stress))
        self._pack[key] = records.kernel(kernel_names.pack_name(_NAME, NEQ16_DTYPE, stress))
        self._unpack[key] = records.kernel(kernel_names.unpack_name(_NAME, NEQ16_DTYPE, stress))
        return records

    def _load(self, dtype: Any, storage: Any) -> None:
        """The kernels of (arithmetic ``dtype``, ``storage``) populations: one module per pair
        (a run needs one pair; NVRTC takes minutes for all of them)."""
        dt, st = np.dtype(dtype), np.dtype(storage)
        if (dt, st) in self._prepared:
            return
        if (dt, st) not in source.STORAGE_PAIRS:
            raise TypeError(f"no D3Q19 kernel for {dt} arithmetic on {st} storage")
        module = _pair_module(self.device, dt, st)
        with self._dev:
            kern = {n: module.get_function(n) for n in kernel_names.d3q19_pair_expressions(dt, st)}
            for s, forced, wide in itertools.product((False, True), repeat=3):
                v = (dt, st, s, forced, wide)
                self._collide[v] = kern[kernel_names.d3q19_stream_collide_name(*v)]
                self._collide_aa[v] = kern[kernel_names.d3q19_aa_name(*v)]
                if source.d3q19_takes_x2(dt, st):
                    self._collide_x2[v] = kern[kernel_names.d3q19_x2_name(*v)]
            for s, forced in itertools.product((False, True), repeat=2):
                for o in source.D3Q19_BODIES_OPEN:
                    self._bodies[(dt, st, s, forced, o)] = kern[
                        kernel_names.d3q19_bodies_name(dt, st, s, forced, o)]
                if (dt, st) in self.fused_pairs:
                    two = kern[kernel_names.d3q19_two_steps_name(dt, st, s, forced)]
                    # beyond the default 48 KB
                    two.max_dynamic_shared_size_bytes = source.d3q19_two_steps_launch(
                        1, 1, 1, st.itemsize)[2]
                    self._two_steps[(dt, st, s, forced)] = two
            self._pack[st] = kern[kernel_names.pack_name(_NAME, st)]
            self._unpack[st] = kern[kernel_names.unpack_name(_NAME, st)]
            # load every kernel now (num_regs loads the module)
            self.registers += [k.num_regs for k in kern.values()]
        self._prepared.add((dt, st))

    def _params(self, p: D3Q19Params, dtype: np.dtype) -> tuple[Any, ...]:
        key = (p, dtype)
        if key not in self._scalars:
            t = dtype.type  # scalars in the array's precision, rounded as the CPU rounds them
            self._scalars[key] = (t(p.omega_plus), t(p.omega_minus), t(p.lid_velocity),
                                  t(p.force_x), t(p.force_y), t(p.force_z),
                                  np.int32(bool(p.periodic_x)), np.int32(bool(p.periodic_y)))
        return self._scalars[key]

    @staticmethod
    def _check_pull(f_src, f_dst, flags, rho, ux, uy, uz, layers) -> tuple[int, int]:
        """Planes ``(k0, k1)`` of a two-lattice update, after checking the arrays agree."""
        k0, k1 = int(layers[0]), int(layers[1])
        q, d, h, w = f_src.shape
        nz, ny, nx = d - 2, h - 2, w - 2
        if (q != D3Q19.q or f_dst.shape != f_src.shape or flags.shape != (d, h, w)
                or rho.shape != (nz, ny, nx)):
            raise ValueError(f"inconsistent D3Q19 arrays: f {f_src.shape}, f_dst {f_dst.shape}, "
                             f"flags {flags.shape}, rho {rho.shape}")
        if not 1 <= k0 <= k1 <= nz + 1:
            raise ValueError(f"planes {layers} outside the interior planes [1, {nz + 1})")
        dt, st = rho.dtype, f_src.dtype
        if f_dst.dtype != st or any(a.dtype != dt for a in (ux, uy, uz)):
            raise TypeError("f_src/f_dst must share the storage dtype, rho/u the arithmetic one")
        if (dt, st) not in source.STORAGE_PAIRS:
            raise TypeError(f"no D3Q19 kernel for {dt} arithmetic on {st} storage")
        if ny > source.MAX_GRID_Y or k1 - k0 > source.MAX_GRID_Y:
            raise ValueError(f"D3Q19 grids are limited to {source.MAX_GRID_Y} cells along y, z")
        return k0, k1

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p,
                       store_macro, inlet=None, links=None, outlet_slots=None,
                       open_faces: int = OPEN_FACES, far=None, open_rules: bool = True,
                       columns=None) -> None:
        """``inlet`` (a block with bodies, inlets or outlets: the inflow speed of each line
        (k, j), ``(nz + 2, ny + 2)``, the arithmetic type) selects the kernel with the
        geometry's boundary rules; ``links``: interpolated bounce-back weights in f's layout
        (None: no CURVED cell); ``outlet_slots``: a convective outlet's previous values
        ``(19, nz + 2, ny + 2)``, the arithmetic type; ``open_faces``: the INLET, OUTLET and
        SLIP bits the flags may hold (0: a bodies kernel without their rules); ``links`` of 57
        planes are quadratic, reading two planes away from ``far`` (the array behind ``f_src``,
        the plane of its plane 0 there; None: ``f_src`` itself). ``open_rules`` False: no
        updated cell takes an open rule or a link (their arrays may still be given), so a
        box kernel may run; ``columns``: 1-based interior columns ``[i0, i1)`` to update
        (default all; a part only with a geometry, ``inlet`` given)."""
        nx = f_src.shape[3] - 2
        cols = (1, nx + 1) if columns is None else (int(columns[0]), int(columns[1]))
        if not 1 <= cols[0] <= cols[1] <= nx + 1 or inlet is None and cols != (1, nx + 1):
            raise ValueError(f"columns {columns} outside the interior columns [1, {nx + 1}), "
                             "or a part of them without a geometry")
        if f_src.dtype == NEQ16_DTYPE:
            self._stream_collide_records(f_src, f_dst, flags, (rho, ux, uy, uz), layers, p,
                                         store_macro, inlet, links, outlet_slots, open_faces,
                                         far, open_rules, cols)
            return
        k0, k1 = self._check_pull(f_src, f_dst, flags, rho, ux, uy, uz, layers)
        self._load(rho.dtype, f_src.dtype)
        if k0 == k1 or cols[0] == cols[1]:
            return
        if inlet is not None:
            self._stream_collide_bodies(f_src, f_dst, flags, (rho, ux, uy, uz), k0, k1, p,
                                        store_macro, inlet, links, outlet_slots,
                                        open_faces if open_rules else 0, far, cols)
            return
        nx, ny = f_src.shape[3] - 2, f_src.shape[2] - 2
        dt, st = rho.dtype, f_src.dtype
        check_launch_device(self.device)
        variant = (dt, st, bool(store_macro), p.forced, wide_offsets(f_src))
        kern, block_x, cells_x = self._pull_launch(variant, f_src, f_dst)
        with self._dev:
            kern((grid_x(nx, cells_x, block_x), ny, k1 - k0), (block_x,),
                 self._collide_args(f_src, f_dst, flags, (rho, ux, uy, uz), k0, k1, p))

    def _pull_launch(self, variant: tuple, f_src: Any, f_dst: Any) -> tuple[Any, int, int]:
        """(kernel, threads per block, x-cells per thread) of a two-lattice step: a tuned
        launch, else the two-cell kernel where the storage takes it and the arrays suit it,
        else the one-cell kernel at the storage's default block."""
        tuned = self._tuned.get((*variant, f_src.shape))
        if tuned is not None:
            return (*tuned, 1)
        x2 = self._collide_x2.get(variant)
        if x2 is not None:
            key = (int(f_src.data.ptr), int(f_dst.data.ptr), f_src.shape, f_src.strides,
                   f_dst.strides)
            if key not in self._aligned:
                if len(self._aligned) > 64:
                    self._aligned.clear()
                self._aligned[key] = pairs_aligned(f_src, f_dst)
            if self._aligned[key]:
                return x2, source.D3Q19_X2_16BIT[0], 2  # type: ignore[index]
        return self._collide[variant], default_block(variant[1]), 1

    def _stream_collide_records(self, f_src, f_dst, flags, macro, layers, p: D3Q19Params,
                                store_macro: bool, inlet, links, outlet_slots,
                                open_faces: int, far, open_rules: bool,
                                columns: tuple[int, int]) -> None:
        """neq16 records: walls, the lid, forcing, periodic x and y (the records' pull
        kernel: no geometry, or ``open_rules`` False), or with a geometry (``inlet`` given)
        the bodies kernel on records with every rule (kernel_names.D3Q19_NEQ_BODIES_OPEN)."""
        k0, k1 = int(layers[0]), int(layers[1])
        nz, ny, nx = (n - 2 for n in f_src.shape[1:])
        if (inlet is None and (links is not None or outlet_slots is not None)
                or f_dst.shape != f_src.shape):
            raise ValueError("run.storage neq16: links and outlets come with inlet speeds, two "
                             f"record arrays alike (f {f_src.shape}, f_dst {f_dst.shape})")
        if not 1 <= k0 <= k1 <= nz + 1 or ny > source.MAX_GRID_Y:
            raise ValueError(f"planes {layers} of {nz}, or {ny} rows, out of range")
        if k0 == k1 or columns[0] == columns[1]:
            return
        records = self._load_records(_storage_key(f_src) == STRESS_RECORDS)
        if inlet is not None and open_rules:
            if macro[0].dtype != np.float32:
                raise TypeError("run.storage neq16 computes in float32")
            self._stream_collide_bodies(f_src, f_dst, flags, macro, k0, k1, p, store_macro,
                                        inlet, links, outlet_slots, open_faces, far, columns)
            return
        records.stream_collide(self._collide_args(f_src, f_dst, flags, macro, k0, k1, p), f_src,
                               bool(store_macro), p.forced, ny, columns)

    def _stream_collide_bodies(self, f_src, f_dst, flags, macro, k0: int, k1: int,
                               p: D3Q19Params, store_macro: bool, inlet, links,
                               outlet_slots, open_faces: int, far,
                               columns: tuple[int, int]) -> None:
        nz, ny, nx = (n - 2 for n in f_src.shape[1:])
        dt = macro[0].dtype
        quadratic = quadratic_args(links, f_src, far, D3Q19.q)
        if wide_offsets(f_src) or wide_offsets(quadratic[1]):
            raise ValueError(f"D3Q19 bodies, inlets and outlets take population arrays of at "
                             f"most {source.FLAT_LIMIT} elements (f {f_src.shape}); split "
                             "the domain over more slabs")
        if inlet.shape != (nz + 2, ny + 2) or inlet.dtype != dt or not inlet.flags.c_contiguous:
            raise ValueError(f"inlet speeds {inlet.shape} {inlet.dtype} do not fit f "
                             f"{f_src.shape} (expected ({nz + 2}, {ny + 2}) {dt}, packed)")
        if links is None:
            if dt not in self._halfway:
                with self._dev:
                    self._halfway[dt] = cupy.full(1, -1.0, dt)
            links = self._halfway[dt]
        elif links.dtype != dt or element_strides(links) != element_strides(f_src):
            raise ValueError("interpolated bounce-back weights must have the populations' "
                             "layout in the arithmetic type")
        if outlet_slots is None:  # touched only by a convective outlet's links: never then
            if ("slots", dt) not in self._halfway:
                with self._dev:
                    self._halfway[("slots", dt)] = cupy.zeros(1, dt)
            outlet_slots = self._halfway[("slots", dt)]
        elif (outlet_slots.shape != (D3Q19.q, nz + 2, ny + 2) or outlet_slots.dtype != dt
              or not outlet_slots.flags.c_contiguous):
            raise ValueError(f"outlet slots {outlet_slots.shape} {outlet_slots.dtype} do not "
                             f"fit ({D3Q19.q}, {nz + 2}, {ny + 2}) {dt}, packed")
        check_launch_device(self.device)
        variant = (kernel_names.D3Q19_NEQ_BODIES_OPEN if f_src.dtype == NEQ16_DTYPE
                   else source.d3q19_bodies_open(open_faces, p.outlet_kind, True) if quadratic[0]
                   else self.bodies_open or source.d3q19_bodies_open(open_faces, p.outlet_kind))
        kern = self._bodies[(dt, _storage_key(f_src), bool(store_macro), p.forced, variant)]
        args = self._collide_args(f_src, f_dst, flags, macro, k0, k1, p)
        keep, take = p.convective_weights
        i0, i1 = columns
        threads = source.span_block(i1 - i0, self.bodies_block_x)
        with self._dev:
            kern((_grid_x(i1 - i0, threads), ny, k1 - k0), (threads,),
                 (*args, inlet, dt.type(p.inlet_scale), dt.type(p.outlet_density), links,
                  np.int32(p.outlet_kind), dt.type(keep), dt.type(take),
                  dt.type(p.outlet_pressure_weight), outlet_slots, *quadratic, np.int32(i0),
                  np.int32(i1)))

    # --- two steps per sweep (temporal blocking) ---------------------------------------------
    def two_steps_fit(self, f: Any, dtype: Any) -> bool:
        """Whether two steps per sweep suit population arrays like ``f`` with arithmetic in
        ``dtype``: the kernel takes them (32-bit element offsets: at most 2^32 elements) and
        ran faster than one-step sweeps for that storage on this GPU (:attr:`fused_pairs`)."""
        return (np.dtype(dtype), f.dtype) in self.fused_pairs and not wide_offsets(f)

    def two_steps_fit_shape(self, shape: tuple[int, ...], storage: Any, dtype: Any) -> bool:
        """:meth:`two_steps_fit` for padded population arrays of ``shape`` (populations first)
        in ``storage`` that are not allocated yet: a block decides its ghost depth with it."""
        plane = math.prod(shape[1:-1]) * padded_pitch(shape[-1])
        return ((np.dtype(dtype), np.dtype(storage)) in self.fused_pairs
                and plane <= MAX_PLANE and not source.needs_wide_offsets(D3Q19.q * plane))

    def stream_collide_two_steps(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p,
                                 store_macro) -> None:
        """Steps t + 1 and t + 2 of planes ``layers`` in one sweep, f_src (step t) -> f_dst
        (step t + 2), the step t + 1 populations kept in shared memory (kernels/d3q19.cu
        d3q19_stream_collide_two_steps): the bits of two :meth:`stream_collide` calls, with
        55 % of their DRAM traffic (float32, 512^3, H200). It reads planes ``k0 - 2 .. k1 + 1``
        of ``f_src`` and computes step t + 1 on planes ``k0 - 1 .. k1`` that exist: a slab
        with halo faces holds two ghost planes there (the neighbour's two planes at step t), so
        step t + 1 of its inner ghost plane is recomputed here, as the neighbour computes it.
        rho/u, if stored, are step t + 2's."""
        k0, k1 = self._check_pull(f_src, f_dst, flags, rho, ux, uy, uz, layers)
        self._load(rho.dtype, f_src.dtype)
        if wide_offsets(f_src):
            raise ValueError(f"the two-step D3Q19 kernel takes arrays of at most "
                             f"{source.FLAT_LIMIT} elements (f {f_src.shape})")
        if k0 == k1:
            return
        if (rho.dtype, f_src.dtype) not in self.fused_pairs:
            raise TypeError(f"the two-step D3Q19 kernel is taken for "
                            f"{self.fused_pairs} (arithmetic, storage) on {self.gpu_name}, not "
                            f"{(rho.dtype, f_src.dtype)}")
        nx, ny = f_src.shape[3] - 2, f_src.shape[2] - 2
        check_launch_device(self.device)
        kern = self._two_steps[(rho.dtype, f_src.dtype, bool(store_macro), p.forced)]
        grid, threads, shared = source.d3q19_two_steps_launch(nx, ny, k1 - k0, f_src.itemsize)
        args = self._collide_args(f_src, f_dst, flags, (rho, ux, uy, uz), k0, k1, p,
                                  np.int32(source.D3Q19_FUSED_RUN_PLANES))
        with self._dev:
            kern(grid, (threads,), args, shared_mem=shared)

    def _collide_args(self, f_src, f_dst, flags, macro, k0: int, k1: int,
                      p: D3Q19Params, *after_planes: Any) -> tuple[Any, ...]:
        """Arguments of the two-lattice kernels; ``after_planes``: those the two-step kernel
        takes after k0, k1 (its run length)."""
        nz, ny, nx = (n - 2 for n in f_src.shape[1:])
        return (f_src, f_dst, flags, *macro, np.int32(nx), np.int32(ny), np.int32(nz),
                *map(np.int64, field_strides(f_src, flags, f_dst)), np.int32(k0), np.int32(k1),
                *after_planes, *self._params(p, macro[0].dtype))

    # --- launch-configuration autotuning ---------------------------------------------------
    def autotune(self, f_src: Any, f_dst: Any, flags: Any, p: D3Q19Params,
                 tuner: autotune.Autotuner, dtype: Any = None, open_rules: bool = True) -> None:
        """Pick the fastest block size for the two-lattice kernels on arrays of this shape
        (``dtype``: the arithmetic type, by default the storage's; ``open_rules``: the box
        kernel is the one tuned either way, the bodies kernel keeps its block). Timing
        launches write ``f_dst`` (overwritten by the next step anyway) and scratch
        macroscopic fields; the in-place (AA) kernel, the neq16 records' kernel and fp16
        storage's two-cell kernel (source.D3Q19_X2_16BIT) are not tuned."""
        if f_dst is None or f_src.dtype == NEQ16_DTYPE:
            return
        nz, ny, nx = (n - 2 for n in f_src.shape[1:])
        st = f_src.dtype
        dt = np.dtype(dtype) if dtype is not None else np.dtype(np.promote_types(st, np.float32))
        if source.d3q19_takes_x2(dt, st):
            return  # the two-cell kernel runs at its measured launch (source.D3Q19_X2_16BIT)
        with self._dev:
            scratch = [cupy.empty((nz, ny, nx), dt) for _ in range(4)]
        src_hash = autotune.source_hash(source.kernel_source("d3q19.cu"))
        for store in (False, True):
            variant = (dt, st, store, p.forced, wide_offsets(f_src))
            name = kernel_names.d3q19_stream_collide_name(*variant)
            args = self._collide_args(f_src, f_dst, flags, scratch, 1, nz + 1, p)

            def time_block(block_x: int, name: str = name, args: tuple = args) -> float:
                kern = _kernel(self.device, block_x, name)
                grid = (grid_x(nx, block_x=block_x), ny, nz)
                with self._dev:
                    return autotune.launch_seconds(lambda: kern(grid, (block_x,), args))

            block = tuner.choose(self.gpu_name, name, src_hash, (nx, ny, nz), time_block,
                                 default_block(st))
            key = (*variant, f_src.shape)
            if block != default_block(st):
                with self._dev:
                    kern = _kernel(self.device, block, name)
                    _ = kern.num_regs  # load now: a launch inside a graph capture must not load
                self._tuned[key] = (kern, block)
            else:
                self._tuned.pop(key, None)

    def stream_collide_aa(self, f, flags, rho, ux, uy, uz, layers, p, store_macro,
                          odd) -> None:
        """In-place (AA) update of planes ``layers`` of the one array ``f``, parity ``odd``."""
        k0, k1 = int(layers[0]), int(layers[1])
        q, d, h, w = f.shape
        nz, ny, nx = d - 2, h - 2, w - 2
        if q != D3Q19.q or flags.shape != (d, h, w) or rho.shape != (nz, ny, nx):
            raise ValueError(f"inconsistent D3Q19 arrays: f {f.shape}, flags {flags.shape}, "
                             f"rho {rho.shape}")
        if not 1 <= k0 <= k1 <= nz + 1:
            raise ValueError(f"planes {layers} outside the interior planes [1, {nz + 1})")
        if k0 == k1:
            return
        dt, st = rho.dtype, f.dtype
        if any(a.dtype != dt for a in (ux, uy, uz)) or (dt, st) not in source.STORAGE_PAIRS:
            raise TypeError(f"no D3Q19 kernel for {dt} arithmetic on {st} storage")
        if ny > source.MAX_GRID_Y or k1 - k0 > source.MAX_GRID_Y:
            raise ValueError(f"D3Q19 grids are limited to {source.MAX_GRID_Y} cells along y, z")
        check_launch_device(self.device)
        self._load(dt, st)
        kern = self._collide_aa[(dt, st, bool(store_macro), p.forced, wide_offsets(f))]
        with self._dev:
            kern((_grid_x(nx), ny, k1 - k0), (source.BLOCK_X,),
                 (f, flags, rho, ux, uy, uz, np.int32(nx), np.int32(ny), np.int32(nz),
                  *map(np.int64, field_strides(f, flags)), np.int32(k0), np.int32(k1),
                  *self._params(p, dt), np.int32(bool(odd))))

    def _halo(self, kernels: dict, f, layer: int, direction: int, buf, src, dst) -> None:
        q, d, h, w = f.shape
        size = h * w
        records = f.dtype == NEQ16_DTYPE
        cross = len(halo_slot_sets(q)[0]) if records else _N_CROSS
        if buf.shape != (cross, size) or buf.dtype != f.dtype:
            raise ValueError(f"halo buffer {buf.shape} {buf.dtype} does not fit f {f.shape}")
        if not 0 <= layer < d or direction not in (0, 1):
            raise ValueError(f"layer {layer} / direction {direction} out of range")
        check_launch_device(self.device)
        if records:
            self._load_records(_storage_key(f) == STRESS_RECORDS)
        elif f.dtype not in kernels:  # any pair of this storage type holds its halo kernels
            self._load(next(a for a, st in source.STORAGE_PAIRS if st == f.dtype), f.dtype)
        plane, layer_stride, pitch = (np.int64(v) for v in element_strides(f)[:3])
        with self._dev:
            kernels[_storage_key(f)]((_grid_x(size), cross), (source.BLOCK_X,),
                             (src, dst, plane, layer_stride, pitch, np.int32(w), np.int32(size),
                              np.int32(layer), np.int32(direction)))

    def pack(self, f, layer: int, direction: int, buf) -> None:
        self._halo(self._pack, f, layer, direction, buf, f, buf)

    def unpack(self, buf, f, layer: int, direction: int) -> None:
        self._halo(self._unpack, f, layer, direction, buf, buf, f)
