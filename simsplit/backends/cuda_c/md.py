"""Lennard-Jones MD kernel sets for GPUs: the launch sequence shared by both GPU backends.

:class:`DeviceMDKernels` holds everything but the launches: argument order and types, grids
and the host reads the solver needs (two ``int32`` flags per batch of steps, one ``int32`` per
list build); the cell-list pipeline and the neighbour lists are in :mod:`.md_cell_launches`,
the launches of several slabs' arrangements in :mod:`.md_slab_launches`.
:class:`~simsplit.backends.cuda_c.md_cupy.CupyMDKernels` and
:class:`simsplit.backends.numba_cuda.md.NumbaMDKernels` only say how a kernel is launched and
how memory is allocated. Kernel names and the constants of ``kernels/md_common.cuh`` are in
:mod:`.md_names` (and re-exported here).
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager

import numpy as np

from simsplit.backends.cuda_c.md_cell_launches import CellLaunches, DeviceCells
from simsplit.backends.cuda_c.md_names import (
    ARENA_FLOAT_KERNELS,
    ARENA_INDEX_KERNELS,
    BLOCK,
    COMMON_HEADER,
    FLOAT_KERNELS,
    INDEX_KERNELS,
    KERNEL_FILE,
    MAX_NEIGHBORS,
    RANK_FLOAT_KERNELS,
    RANK_INDEX_KERNELS,
    SCAN_CHUNK,
    SCAN_SERIAL,
    SUM_LIMBS,
    SUM_QUANTITIES,
    SUM_REPLICAS,
    box_args,
    kernel_name,
    md_constants,
    name_expressions,
    scan_levels,
    scan_scratch,
    stencil_ranges,
    type_shift,
)
from simsplit.backends.cuda_c.md_slab_launches import ArenaScratch, SlabLaunches
from simsplit.numerics.exact import limbs_total


class DeviceMDKernels(SlabLaunches, CellLaunches):
    """The MD kernel set of a GPU backend (same calls as the solver's CPU kernel set).

    Arrays are the backend's device arrays; ``ids`` are int64 global ids; ``box`` a host
    float64 array. Everything is queued on the device's current stream; only
    :meth:`displacement_flags` and :meth:`build_neighbors` wait for the device.
    """

    is_device = True
    #: the solver may queue several steps before reading the flags (see :meth:`advance`)
    batches = True
    #: threads per block (the simulator uses fewer: one Python thread each)
    block = BLOCK

    def __init__(self) -> None:
        # [0]: moved beyond the rebuild limit, [1]: beyond the jump limit; [2]: [0] as the
        # last ghost pack of a rank slab's step found it before clearing (see rank_pack)
        self._flags = self.zeros((3,), np.int32)
        self._worst = self.zeros((1,), np.int32)
        self._no_cutsq = self.zeros((1,), np.float64)  # never read: untyped lists
        #: advance's ghost_of where there are no ghost copies to write (never read)
        self._no_ghosts = self.zeros((2,), np.int32)

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

    def _read_small(self, arr: Any) -> np.ndarray:
        """Wait for the queued work and return a small device array's values (a backend may
        read into a reused pinned buffer: no allocation per step)."""
        return self.to_host(arr)

    def host_buffer(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Host memory the device copies to and from without staging (pinned on a GPU)."""
        raise NotImplementedError

    def upload_rows_queued(self, host: np.ndarray, dst, row0: int) -> None:
        """Queue ``dst[row0 : row0 + len(host)] = host`` straight from ``host``, which the
        caller leaves unchanged until the queue passes the copy (this version copies at once)."""
        self.upload_rows(host, dst, row0)

    def pin_host(self, buf: np.ndarray) -> Any:
        """Register host memory allocated elsewhere (say shared with another process) for
        asynchronous copies; returns a handle for :meth:`unpin_host` (here: nothing to do)."""
        return None

    def unpin_host(self, handle: Any) -> None:
        """Undo :meth:`pin_host`."""

    def read_ints(self, arr: Any) -> np.ndarray:
        """Wait for the queued work; a host copy of a small integer device array."""
        return np.array(self._read_small(arr), dtype=np.int64)

    #: times the host waited for the device (reads, downloads, flag reads; counted by the
    #: backends whose queue runs apart from the host): instrumentation for the benchmarks
    host_waits = 0

    def side_queue(self) -> ContextManager[Any]:
        """A block whose work goes on a second, high-priority queue, ordered against the main
        one only by :meth:`mark` / :meth:`wait_mark` (here: the one queue, in order)."""
        return contextlib.nullcontext()

    def mark(self, reuse: Any = None) -> Any:
        """A mark after the work queued so far on the current queue (``reuse``: an earlier
        mark to record again); None here, where everything runs in order."""
        return None

    def wait_mark(self, mark: Any) -> None:
        """Make the current queue's next work wait for ``mark`` (None: nothing to wait for)."""

    def queue_read(self, arr: Any) -> Any:
        """Queue the copy of a small integer device array to the host; :meth:`queued_read`
        returns it once the queue has passed the copy (this version copies at once)."""
        return np.array(self.to_host(arr), dtype=np.int64)

    def queued_read(self, handle: Any) -> np.ndarray:
        """The values of a :meth:`queue_read` (the caller has waited for the queue since)."""
        return handle

    def download_rows(self, src, m: int, out: np.ndarray) -> np.ndarray:
        """Wait for the queued work, copy rows ``src[:m]`` into ``out[:m]``; returns that view."""
        raise NotImplementedError

    def upload_rows(self, host: np.ndarray, dst, row0: int, staging: Any = None) -> None:
        """Queue ``dst[row0 : row0 + len(host)] = host``. With ``staging`` (a
        :meth:`host_buffer` at least as long, owned by the caller) the rows go through it and
        the host does not wait for the copy; without, the call returns when ``host`` may be
        reused."""
        raise NotImplementedError

    def peer_capable(self, other: DeviceMDKernels) -> bool:
        """Whether :meth:`send_rows` may copy straight from this kernel set's device to
        ``other``'s (peer access on, or the same device)."""
        return False

    # --- integration ------------------------------------------------------------------------
    def _grid(self, threads: int) -> int:
        return (threads + self.block - 1) // self.block

    def advance(self, x, v, f, img, n: int, kick: bool, dtf: float, dt: float,
                box: np.ndarray, x0, limit2: float, jump2: float, tick: int = 1,
                ghost_of: Any = None) -> None:
        """Queue one launch: the previous step's second half kick (if ``kick``), this step's
        half kick, drift and wrap, and the displacement check against ``x0`` (read with
        :meth:`displacement_flags`). ``tick`` (>= 1) numbers the steps of a batch: the launch
        does nothing if an earlier step of the batch asked for a rebuild. ``ghost_of``: the
        ghost rows of each owned row in an arena (two per row, -1 for none), which get the
        row's new position too."""
        if n:
            self._launch("md_advance", x.dtype, n, x, v, f, img, np.int32(n),
                         np.int32(1 if kick else 0), np.float64(dtf), np.float64(dt),
                         *box_args(box), x0, np.float64(limit2), np.float64(jump2),
                         np.int32(tick), self._flags,
                         self._no_ghosts if ghost_of is None else ghost_of,
                         np.int32(ghost_of is not None))

    def final_integrate(self, v, f, n: int, dtf: float) -> None:
        if n:
            self._launch("md_final_integrate", v.dtype, n, v, f, np.int32(n), np.float64(dtf))

    def kick_typed(self, v, f, typ, n: int, table, tick: int = 0) -> None:
        """Half kick with per-type masses (``table``: dt / 2m per type, on the device), part
        of batch step ``tick``'s drift (skipped with it; ``tick`` 0: always run)."""
        if n:
            self._launch("md_kick_typed", v.dtype, n, v, f, typ, np.int32(n), table,
                         self._flags, np.int32(tick))

    def langevin_forces(self, f, v, ids, n: int, drag: float, noise: float, seed: int,
                        step: int, tick: int = 0) -> None:
        """Queue the Langevin forces (skipped, like :meth:`lj_forces`, from the batch step
        ``tick`` on that asked for a rebuild; ``tick`` 0: always run)."""
        if n:
            # np.uint64 of a negative int wraps modulo 2^64, as the CPU kernel's does
            self._launch("md_langevin", f.dtype, n, f, v, ids, np.int32(n), np.float64(drag),
                         np.float64(noise), np.uint64(int(seed) % 2 ** 64),
                         np.uint64(int(step) % 2 ** 64), self._flags, np.int32(tick))

    def langevin_forces_typed(self, f, v, ids, typ, n: int, drag, noise, seed: int,
                              step: int, tick: int = 0) -> None:
        """:meth:`langevin_forces` with the drag and noise of each row's type (``drag`` and
        ``noise``: device tables of float64 per type)."""
        if n:
            self._launch("md_langevin_typed", f.dtype, n, f, v, ids, typ, np.int32(n), drag,
                         noise, np.uint64(int(seed) % 2 ** 64), np.uint64(int(step) % 2 ** 64),
                         self._flags, np.int32(tick))

    def lj_forces(self, x, n_own: int, nl, cnt, box: np.ndarray, rcsq: float, eps4: float,
                  eps24: float, sigsq: float, eshift: float, f, pe, vir, tick: int = 0,
                  row0: int = 0, unless_moved: bool = False) -> None:
        """Queue the pair forces of owned rows ``[row0, n_own)`` for batch step ``tick``:
        skipped if this step or an earlier one of the batch asked for a rebuild (the host
        recomputes them on the new list); ``tick`` 0: always run. ``unless_moved``: skipped
        if this step's advance asked for a rebuild, as the last :meth:`rank_pack` of the step
        kept its flag (a rank slab's interior rows, queued before the rebuild is agreed:
        their forces would be recomputed on the new list)."""
        if n_own > row0:
            self._launch("md_lj_forces", x.dtype, n_own - row0,
                         *self.force_args(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq,
                                          eshift, f, pe, vir, tick, row0, unless_moved))

    def _halt_args(self, tick: int, unless_moved: bool) -> tuple[Any, Any]:
        """The flags and tick a launch halts on: the batch's, or with ``unless_moved`` the
        step's own rebuild flag as the last ghost pack kept it (tick 1: a step's advance
        outside batches writes 1)."""
        if unless_moved:
            return self._flags[2:], np.int32(1)
        return self._flags, np.int32(tick)

    def lj_forces_typed(self, x, typ, n_own: int, nl, cnt, box: np.ndarray, table,
                        ntypes: int, f, pe, vir, tick: int = 0, row0: int = 0,
                        type_shift: int = 0, unless_moved: bool = False) -> None:
        """:meth:`lj_forces` with per-type-pair coefficients (``table``: a device copy of
        :meth:`simsplit.md.pair_table.PairTable.kernel_table`, ``typ`` the rows' types;
        ``type_shift``: what :meth:`pack_types` returned for this list)."""
        if n_own > row0:
            self._launch("md_lj_forces_typed", x.dtype, n_own - row0, x, typ, np.int32(n_own),
                         np.int32(row0), nl,
                         np.int32(nl.shape[1]), cnt, *box_args(box), table, np.int32(ntypes),
                         np.int32(type_shift), f, pe, vir,
                         *self._halt_args(tick, unless_moved))

    def lj_forces_fshift(self, x, typ, n_own: int, nl, cnt, box: np.ndarray, table,
                         ntypes: int, f, pe, vir, tick: int = 0, row0: int = 0,
                         type_shift: int = 0, unless_moved: bool = False) -> None:
        """:meth:`lj_forces_typed` with the force shifted to zero at the cutoff (``table``: a
        device copy of :meth:`simsplit.md.pair_table.PairTable.force_shift_table`)."""
        if n_own > row0:
            self._launch("md_lj_forces_fshift", x.dtype, n_own - row0, x, typ, np.int32(n_own),
                         np.int32(row0), nl,
                         np.int32(nl.shape[1]), cnt, *box_args(box), table, np.int32(ntypes),
                         np.int32(type_shift), f, pe, vir,
                         *self._halt_args(tick, unless_moved))

    def row_types(self, gid, n: int, types_by_id, out=None):
        """The atom type of each of the first ``n`` rows, from their global ids (into ``out``
        when it is large enough)."""
        if out is None or out.shape[0] < n:
            out = self.zeros((max(n + n // 8, 1),), np.int32)
        if n:
            self._launch("md_row_types", None, n, gid, np.int32(n), types_by_id, out)
        return out

    @staticmethod
    def type_bits(ntypes: int, rows: int) -> int:
        """Where the neighbour's type starts in a list entry of ``rows`` local rows (the typed
        force kernels' ``type_shift``): :meth:`build_neighbors` packs it with ``typ``, or
        :meth:`pack_types` afterwards; 0: plain rows."""
        return type_shift(ntypes, rows)

    def pack_types(self, nl, cnt, n_own: int, typ, ntypes: int, rows: int) -> int:
        """Put each neighbour's type into the bits above a list entry's row (after
        :meth:`row_types`, once per list build) and return where they start, the typed force
        kernels' ``type_shift``; 0 (list unchanged) with one type, or when the ``rows`` local
        rows leave no room for the type bits below the sign bit."""
        shift = self.type_bits(ntypes, rows)
        if shift and n_own:
            self._launch("md_pack_types", None, n_own, nl, np.int32(nl.shape[1]), cnt,
                         np.int32(n_own), typ, np.int32(shift))
        return shift

    def force_args(self, x, n_own: int, nl, cnt, box: np.ndarray, rcsq: float, eps4: float,
                   eps24: float, sigsq: float, eshift: float, f, pe, vir,
                   tick: int = 0, row0: int = 0, unless_moved: bool = False
                   ) -> tuple[Any, ...]:
        """The argument list of ``md_lj_forces`` (and of its tuning variants)."""
        return (x, np.int32(n_own), np.int32(row0), nl, np.int32(nl.shape[1]), cnt, *box_args(box),
                np.float64(rcsq), np.float64(eps4), np.float64(eps24), np.float64(sigsq),
                np.float64(eshift), f, pe, vir, *self._halt_args(tick, unless_moved))

    def thermo_sums(self, v, pe, vir, n: int, mass: float, typ: Any = None,
                    masses: Any = None) -> list[int] | None:
        """Exact sums of ``m |v|^2``, ``pe`` and ``vir`` over the first ``n`` rows, as integers
        in units of 2^-1074 (:mod:`simsplit.numerics.exact`; totals of several kernel sets
        add); with ``typ`` and ``masses`` (device arrays) each row's mass is ``masses[typ]``.
        One small read; None if a value is not finite (the caller gathers, so that fsum
        reports it)."""
        width = SUM_QUANTITIES * SUM_LIMBS
        sums = self.__dict__.get("_sums")
        if sums is None or sums["mv2"].shape[0] < n:
            sums = self._sums = {
                "acc": self.zeros((SUM_REPLICAS * width,), np.uint64),
                "out": self.zeros((width + 1,), np.int64),
                "nonfinite": self.zeros((1,), np.int32),
                "mv2": self.zeros((max(n + n // 8, 1),), np.float64)}
        if n:
            if typ is not None:
                self._launch("md_kinetic_typed", v.dtype, n, v, typ, np.int32(n), masses,
                             sums["mv2"])
            else:
                self._launch("md_kinetic", v.dtype, n, v, np.int32(n), np.float64(mass),
                             sums["mv2"])
            for q, arr in enumerate((sums["mv2"], pe, vir)):
                self._launch("md_exact_accumulate", None, n, arr.view(np.int64), np.int32(n),
                             np.int32(q), sums["acc"], sums["nonfinite"])
        self._launch("md_exact_merge", None, width, sums["acc"], sums["nonfinite"],
                     sums["out"])
        got = np.array(self._read_small(sums["out"]), dtype=np.int64)
        if got[width]:
            return None
        return [limbs_total(got[q * SUM_LIMBS: (q + 1) * SUM_LIMBS].tolist())
                for q in range(SUM_QUANTITIES)]

    def scale_rows(self, v, n: int, alpha: float) -> None:
        """``v[:n] *= alpha`` (each product rounded to the storage type)."""
        if n:
            self._launch("md_scale_rows", v.dtype, 3 * n, v, np.int32(n), np.float64(alpha))

    def all_finite(self, x, v, n: int) -> bool:
        """Whether every position and velocity of the first ``n`` rows is finite (one launch,
        one integer read)."""
        flag = self.__dict__.get("_nonfinite_flag")
        if flag is None:
            flag = self._nonfinite_flag = self.zeros((1,), np.int32)
        if not n:
            return True
        self._launch("md_nonfinite", x.dtype, n, x, v, np.int32(n), flag)
        bad = bool(self._read_small(flag)[0])
        if bad:
            self._zero(flag)
        return not bad

    def kinetic_per_atom(self, v, n: int, mass: float) -> np.ndarray:
        """``m |v|^2`` per owned atom, on the host (thermo steps only): the CPU kernel's bits."""
        from simsplit.backends.cpu import md as cpu

        return cpu.kinetic_per_atom(self.to_host(v[:n]), n, mass)

    # --- displacement check -----------------------------------------------------------------
    def queue_flags(self) -> None:
        """Start reading the flags of the :meth:`advance` just queued, so that the next
        :meth:`displacement_flags` waits for that read alone, not for work queued after it
        (a backend without asynchronous reads reads them then)."""

    def _queued_flags(self) -> np.ndarray | None:
        """The flags a :meth:`queue_flags` read, once it is done (None if none is queued)."""
        return None

    def displacement_flags(self) -> tuple[int, bool]:
        """The ``tick`` of the first :meth:`advance` since the last call that moved an atom
        beyond its rebuild limit (0 if none), and whether one moved beyond its jump limit.
        Waits for the device (8 bytes); resets the flags."""
        got = self._queued_flags()
        if got is None:
            got = self._read_small(self._flags)
        moved, jumped = int(got[0]), bool(got[1])
        if moved or jumped:
            self._zero(self._flags)
        return moved, jumped

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

    # --- ghost rows between devices and processes -------------------------------------------
    def send_rows(self, src, idx, buf, dst_set: DeviceMDKernels, dst, row0: int,
                  staging: np.ndarray | None) -> None:
        """Ghost refresh across devices: gather ``src[idx]`` into this device's send buffer
        ``buf`` and copy it into rows ``row0 ..`` of ``dst`` on ``dst_set``'s device, device to
        device, or through the pinned buffer ``staging`` when given. Work queued on
        ``dst_set`` afterwards sees the rows. This version waits on the host (the simple,
        always-correct path; the CuPy kernel set overrides it with queued copies)."""
        m = int(idx.shape[0])
        if not m:
            return
        self.gather_rows(src, idx, buf, 0)
        out = staging
        if out is None:  # no peer copy in this version: stage through a buffer of our own
            scratch = self.__dict__.setdefault("_scratch", {})
            out = scratch.get(id(buf))
            if out is None or out.shape != buf.shape or out.dtype != buf.dtype:
                out = scratch[id(buf)] = self.host_buffer(buf.shape, buf.dtype)
        dst_set.upload_rows(self.download_rows(buf, m, out), dst, row0)

    def pack_rows(self, src, idx, buf, host: np.ndarray) -> np.ndarray:
        """``src[idx]`` gathered into the device buffer ``buf`` and downloaded into the pinned
        ``host`` (waits): the rows a ghost message to another process carries."""
        m = int(idx.shape[0])
        if not m:
            return host[:0]
        self.gather_rows(src, idx, buf, 0)
        return self.download_rows(buf, m, host)

    # --- memory and events shared with the other processes of the node (device links) -----
    #: whether :meth:`shared_buffer` and :meth:`shared_event` work (CUDA IPC); a rank slab
    #: then lands its neighbours' ghost positions straight from their device memory
    shares_memory = False

    def shared_buffer(self, shape: tuple[int, ...], dtype: Any) -> tuple[Any, bytes]:
        """A device array of its own allocation and the handle another process of the node
        opens it with (:meth:`open_shared`)."""
        raise NotImplementedError

    def open_shared(self, handle: bytes, shape: tuple[int, ...], dtype: Any) -> Any:
        """The array another process's :meth:`shared_buffer` made (read in place)."""
        raise NotImplementedError

    def close_shared(self, arr: Any) -> None:
        """Let go of an array :meth:`open_shared` returned."""
        raise NotImplementedError

    def shared_event(self) -> tuple[Any, bytes]:
        """An event and the handle another process opens it with (:meth:`open_event`)."""
        raise NotImplementedError

    def open_event(self, handle: bytes) -> Any:
        """Another process's :meth:`shared_event`, to record or wait for here."""
        raise NotImplementedError

    def record_event(self, event: Any) -> None:
        """Record ``event`` (own or opened) after the work queued so far."""
        raise NotImplementedError

    def wait_event(self, event: Any) -> None:
        """Make the queue's next work wait for the last record of ``event`` (own or opened,
        whichever process recorded it)."""
        raise NotImplementedError

    def download_async(self, src, m: int, out: np.ndarray) -> Any:
        """Queue the copy of rows ``src[:m]`` into the pinned ``out``; :meth:`wait_download`
        waits for it and returns ``out[:m]`` (this version copies at once)."""
        return self.download_rows(src, m, out)

    def wait_download(self, handle: Any) -> np.ndarray:
        return handle

    def upload_pinned(self, host: np.ndarray, dst) -> None:
        """Queue ``dst[:len(host)] = host`` from pinned memory (:meth:`host_buffer`) that
        stays unchanged until the queue passes the copy (this version copies at once)."""
        self.upload_rows(host, dst, 0)

    def scatter_rows(self, src, idx, dst) -> None:
        """Queue ``dst[idx[r]] = src[r]`` for every row index in ``idx`` (received ghosts)."""
        m = int(idx.shape[0])
        if m:
            self._launch("md_scatter_rows", src.dtype, m, src, idx, np.int32(m), dst)

    def land_rows(self, host: np.ndarray, buf, idx, dst) -> None:
        """Queue ``dst[idx[r]] = host[r]`` through the device buffer ``buf`` (received ghost
        positions: ``host`` pinned and unchanged until the queue passes the copy)."""
        self.upload_pinned(host, buf)
        self.scatter_rows(buf, idx, dst)


__all__ = ["ARENA_FLOAT_KERNELS", "ARENA_INDEX_KERNELS", "BLOCK", "COMMON_HEADER",
           "FLOAT_KERNELS", "INDEX_KERNELS", "KERNEL_FILE", "MAX_NEIGHBORS",
           "RANK_FLOAT_KERNELS", "RANK_INDEX_KERNELS", "SCAN_CHUNK", "SCAN_SERIAL", "SUM_LIMBS",
           "SUM_QUANTITIES", "SUM_REPLICAS", "ArenaScratch", "DeviceCells", "DeviceMDKernels",
           "kernel_name", "md_constants", "name_expressions", "scan_levels", "scan_scratch",
           "stencil_ranges", "type_shift"]
