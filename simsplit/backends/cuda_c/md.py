"""Lennard-Jones MD kernel sets for GPUs: the launch sequence shared by both GPU backends, and
its CuPy + NVRTC flavour running ``kernels/md_lj.cu``.

:class:`DeviceMDKernels` holds everything but the launches: argument order and types, grids,
the cell-list pipeline (count, scan, scatter, per-cell sort), neighbour-list storage
(``nl[k, i]``: neighbour ``k`` of all atoms contiguous) and the host reads the solver needs
(two ``int32`` flags per batch of steps, one ``int32`` per list build).
:class:`CupyMDKernels` and :class:`simsplit.backends.numba_cuda.md.NumbaMDKernels` only say how
a kernel is launched and how memory is allocated. Block size, list capacity limit and the
least scan chunk come from ``kernels/md_common.cuh``. This module imports CuPy only inside
:class:`CupyMDKernels`.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass, field
from typing import Any, ContextManager, Sequence

import numpy as np

from simsplit.backends.cuda_c import source
from simsplit.numerics.exact import limbs_total

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
                      "md_rank_select", "md_rank_keys",
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
    #: whether cell_atoms is the identity (rows in cell order: :meth:`reorder_by_cell`)
    in_order: bool = False
    #: the other half of each double buffer of :meth:`DeviceMDKernels.reorder_by_cell`
    spare: dict[str, Any] = field(default_factory=dict)


class DeviceMDKernels:
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
        # [0]: moved beyond the rebuild limit, [1]: beyond the jump limit
        self._flags = self.zeros((2,), np.int32)
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
                         *_box(box), x0, np.float64(limit2), np.float64(jump2),
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
                  row0: int = 0) -> None:
        """Queue the pair forces of owned rows ``[row0, n_own)`` for batch step ``tick``:
        skipped if this step or an earlier one of the batch asked for a rebuild (the host
        recomputes them on the new list); ``tick`` 0: always run."""
        if n_own > row0:
            self._launch("md_lj_forces", x.dtype, n_own - row0,
                         *self.force_args(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq,
                                          eshift, f, pe, vir, tick, row0))

    def lj_forces_typed(self, x, typ, n_own: int, nl, cnt, box: np.ndarray, table,
                        ntypes: int, f, pe, vir, tick: int = 0, row0: int = 0,
                        type_shift: int = 0) -> None:
        """:meth:`lj_forces` with per-type-pair coefficients (``table``: a device copy of
        :meth:`simsplit.md.pair_table.PairTable.kernel_table`, ``typ`` the rows' types;
        ``type_shift``: what :meth:`pack_types` returned for this list)."""
        if n_own > row0:
            self._launch("md_lj_forces_typed", x.dtype, n_own - row0, x, typ, np.int32(n_own),
                         np.int32(row0), nl,
                         np.int32(nl.shape[1]), cnt, *_box(box), table, np.int32(ntypes),
                         np.int32(type_shift), f, pe, vir, self._flags, np.int32(tick))

    def lj_forces_fshift(self, x, typ, n_own: int, nl, cnt, box: np.ndarray, table,
                         ntypes: int, f, pe, vir, tick: int = 0, row0: int = 0,
                         type_shift: int = 0) -> None:
        """:meth:`lj_forces_typed` with the force shifted to zero at the cutoff (``table``: a
        device copy of :meth:`simsplit.md.pair_table.PairTable.force_shift_table`)."""
        if n_own > row0:
            self._launch("md_lj_forces_fshift", x.dtype, n_own - row0, x, typ, np.int32(n_own),
                         np.int32(row0), nl,
                         np.int32(nl.shape[1]), cnt, *_box(box), table, np.int32(ntypes),
                         np.int32(type_shift), f, pe, vir, self._flags, np.int32(tick))

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
                   tick: int = 0, row0: int = 0) -> tuple[Any, ...]:
        """The argument list of ``md_lj_forces`` (and of its tuning variants)."""
        return (x, np.int32(n_own), np.int32(row0), nl, np.int32(nl.shape[1]), cnt, *_box(box),
                np.float64(rcsq), np.float64(eps4), np.float64(eps24), np.float64(sigsq),
                np.float64(eshift), f, pe, vir, self._flags, np.int32(tick))

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

    def bin_atoms(self, x, gid, n: int, box: np.ndarray, ncell: np.ndarray,
                  cells: DeviceCells | None = None) -> DeviceCells:
        """Counting sort of the first ``n`` rows into cells; ascending global id ``gid``
        within a cell (the canonical order)."""
        nc = int(np.prod(ncell))
        if cells is None or cells.atoms < n or cells.ncells != nc:
            atoms = n + n // 8 + 16
            # counts start at zero and md_cell_sort leaves them so
            cells = DeviceCells(
                atoms, nc, self.zeros((atoms,), np.int32), self.zeros((nc,), np.int32),
                self.zeros((nc + 1,), np.int32), self.zeros((nc,), np.int32),
                self.zeros((atoms,), np.int32), self.zeros((scan_scratch(nc),), np.int32))
        nx, ny, nz = (np.int32(c) for c in ncell)
        n32, nc32 = np.int32(n), np.int32(nc)
        if n:
            self._launch("md_cell_count", x.dtype, n, x, n32, *_box(box), nx, ny, nz,
                         cells.cell_of, cells.counts)
        cells.in_order = False
        self._exclusive_scan(cells.counts, nc, cells.chunk_sums, cells.cell_start, cells.fill)
        if n:
            self._launch("md_cell_scatter", None, n, cells.cell_of, n32, cells.fill,
                         cells.cell_atoms)
        self._launch("md_cell_sort", None, nc, cells.cell_start, nc32, gid, cells.cell_atoms,
                     cells.counts)
        return cells

    def _exclusive_scan(self, counts, nc: int, sums, cell_start, fill) -> None:
        """``cell_start`` (and ``fill``) = exclusive prefix sums of ``counts`` (the cell sort
        zeroes them after); ``sums`` holds the levels (:func:`scan_scratch` values)."""
        levels = scan_levels(nc)
        views, off = [], 0
        for m in levels:
            views.append(sums[off: off + m + 1])
            off += m + 1
        chunk = np.int32(SCAN_CHUNK)
        src, n = counts, nc
        for view, m in zip(views, levels, strict=True):
            self._launch("md_scan_chunks", None, m, src, np.int32(n), chunk, view)
            src, n = view, m
        self._launch("md_scan_serial", None, 1, views[-1], np.int32(levels[-1]))
        for i in range(len(levels) - 2, -1, -1):
            self._launch("md_scan_inplace", None, levels[i + 1], views[i],
                         np.int32(levels[i]), chunk, views[i + 1])
        self._launch("md_scan_write", None, nc, counts, np.int32(nc), chunk, views[0],
                     cell_start, fill)

    def reorder_by_cell(self, cells: DeviceCells, n: int, x, v, img, gid
                        ) -> tuple[Any, Any, Any, Any]:
        """Rows of ``x, v, img, gid`` (all ``n`` rows owned: one slab) in the cell order of
        :meth:`bin_atoms`; returns the new arrays (the old ones become the spare buffers) and
        updates ``cells`` to match. No result depends on the row order."""
        sp = cells.spare
        old = {"x": x, "v": v, "img": img, "gid": gid, "cell_of": cells.cell_of}
        for key, arr in old.items():
            have = sp.get(key)
            if have is None or have.shape != arr.shape or have.dtype != arr.dtype:
                sp[key] = self.zeros(arr.shape, arr.dtype)
        new = {key: sp[key] for key in old}
        if n:
            self._launch("md_permute", x.dtype, n, np.int32(n), cells.cell_atoms, cells.cell_of,
                         x, v, img, gid, new["cell_of"], new["x"], new["v"], new["img"],
                         new["gid"])
        cells.spare = old
        cells.cell_of = new["cell_of"]
        cells.in_order = True
        return new["x"], new["v"], new["img"], new["gid"]

    def build_neighbors(self, x, n_own: int, box: np.ndarray, ncell: np.ndarray,
                        cells: DeviceCells, offsets: Sequence[np.ndarray], cutsq: float, nl,
                        cnt, typ=None, type_shift: int = 0, list_cutsq=None) -> int:
        """Full lists of the owned atoms in canonical order. Waits for the device; returns
        the largest row count if some row overflowed the capacity ``nl.shape[0]``, else 0.
        ``type_shift`` > 0: each entry carries its row's type from ``typ`` (see
        :meth:`type_bits`), and ``list_cutsq`` (device, ``ntypes**2`` float64, each at most
        ``cutsq``) is every type pair's own squared list cutoff."""
        if n_own == 0:
            return 0
        typed = typ is not None and type_shift > 0
        if typed:
            ntypes = int(round(float(np.sqrt(list_cutsq.shape[0]))))
        else:
            list_cutsq, ntypes = self._no_cutsq, 0
        self._launch("md_build_neighbors", x.dtype, n_own, x, np.int32(n_own), *_box(box),
                     *(np.int32(c) for c in ncell),
                     *(np.float64(float(b) / float(c)) for b, c in zip(box, ncell, strict=True)),
                     *(np.int32(v) for v in stencil_ranges(offsets)),
                     cells.cell_of, cells.cell_start, cells.cell_atoms,
                     np.int32(cells.in_order), np.float64(cutsq), nl,
                     np.int32(nl.shape[1]), np.int32(nl.shape[0]), cnt, self._worst,
                     typ if typed else cnt, np.int32(type_shift if typed else 0), list_cutsq,
                     np.int32(ntypes))
        worst = int(self._read_small(self._worst)[0])
        if worst:
            self._zero(self._worst)
        return worst


    # --- several slabs in one arena (kernels/md_arena.cuh, simsplit.md.arena) ---------------
    #: whether this kernel set has the arena kernels
    arenas = True

    def arena_sort(self, x, n: int, box: np.ndarray, ncell: np.ndarray, edges: np.ndarray,
                   cut: float, old_key, gid, scratch: ArenaScratch | None) -> ArenaScratch:
        """Queue the arena's counting sort: owner, cell and ghost destinations of the ``n``
        owned rows (``md_arena_classify``), bucket starts, and the bucket-sorted entries
        (``entry_row``: owned rows of each slab, then ghost rows of each slab, by gid within a
        cell). ``old_key`` None: the first arrangement (nothing to check or count)."""
        nslab = int(edges.shape[0]) - 1
        nc = int(np.prod(ncell))
        nb = 2 * nslab * nc
        if scratch is None or scratch.rows != n or scratch.nbuckets != nb:
            scratch = self._arena_scratch(n, nslab, nc, edges)
        check = old_key is not None
        self._launch("md_arena_classify", x.dtype, n, x, np.int32(n), *_box(box),
                     *(np.int32(c) for c in ncell), scratch.edges, np.int32(nslab),
                     np.float64(cut), old_key if check else scratch.new_of_old,
                     np.int32(check), scratch.keys, scratch.counts, scratch.err)
        self._bucket_sort(scratch, n, gid)
        return scratch

    def _arena_scratch(self, rows: int, nslab: int, ncells: int, edges: Any) -> ArenaScratch:
        """Sort scratch for ``rows`` rows (every row at most three entries: one owned, two
        ghosts) over 2 ``nslab`` ``ncells`` buckets."""
        nb = 2 * nslab * ncells
        return ArenaScratch(
            rows=rows, nbuckets=nb, nslab=nslab, ncells=ncells,
            keys=self.zeros((3 * rows,), np.int32), counts=self.zeros((nb,), np.int32),
            cell_start=self.zeros((nb + 1,), np.int32), fill=self.zeros((nb,), np.int32),
            chunk_sums=self.zeros((scan_scratch(nb),), np.int32),
            edges=self.to_device(np.asarray(edges, np.float64)),
            err=self.zeros((3,), np.int32), bounds=self.zeros((2 * nslab + 5,), np.int32),
            new_of_old=self.zeros((rows,), np.int32),
            entry_row=self.zeros((3 * rows,), np.int32))

    def _bucket_sort(self, scratch: ArenaScratch, rows: int, gid) -> None:
        """Queue bucket starts from the counts, the entries of ``rows`` rows scattered into
        their buckets, and each bucket sorted by gid."""
        nb = scratch.nbuckets
        self._exclusive_scan(scratch.counts, nb, scratch.chunk_sums, scratch.cell_start,
                             scratch.fill)
        if rows:
            self._launch("md_arena_scatter", None, 3 * rows, scratch.keys, np.int32(3 * rows),
                         scratch.fill, scratch.entry_row)
        self._launch("md_cell_sort", None, nb, scratch.cell_start, np.int32(nb), gid,
                     scratch.entry_row, scratch.counts)

    def arena_place(self, scratch: ArenaScratch, n: int, g_cap: int, old: dict[str, Any],
                    new: dict[str, Any]) -> None:
        """Queue the copies into bucket order: ``new`` x, v, img, gid, key (owned rows
        [0, n), ghost rows after them in x and gid, at most ``g_cap``) from ``old`` x, v, img,
        gid; ``new["ghost_of"]``, the (at most two) ghost rows of each owned row."""
        dtype = old["x"].dtype
        self._launch("md_arena_owned", dtype, n, np.int32(n), scratch.entry_row, scratch.keys,
                     old["x"], old["v"], old["img"], old["gid"], new["key"], new["x"],
                     new["v"], new["img"], new["gid"], scratch.new_of_old, new["ghost_of"])
        if g_cap:
            self._launch("md_arena_ghosts", dtype, g_cap, np.int32(n), np.int32(g_cap),
                         scratch.cell_start, np.int32(scratch.nbuckets), scratch.entry_row,
                         scratch.new_of_old, scratch.keys, old["x"], old["gid"], new["x"],
                         new["gid"], new["ghost_of"])

    def arena_build_neighbors(self, x, n_own: int, rows: int, box: np.ndarray,
                              ncell: np.ndarray, offsets: Sequence[np.ndarray],
                              scratch: ArenaScratch, key, gid, cutsq: float, nl, cnt,
                              x0) -> None:
        """Queue :meth:`build_neighbors` for every owned row of an arena (lists index arena
        rows; rows at or past ``rows`` are never read), and the snapshot ``x0`` of the owned
        positions. :meth:`arena_counts` reads the longest row."""
        self._launch("md_arena_build_neighbors", x.dtype, n_own, x, np.int32(n_own),
                     np.int32(rows), *_box(box), *(np.int32(c) for c in ncell),
                     *(np.float64(float(b) / float(c)) for b, c in zip(box, ncell, strict=True)),
                     *(np.int32(v) for v in stencil_ranges(offsets)), np.int32(scratch.nslab),
                     key, scratch.cell_start, gid, np.float64(cutsq), nl,
                     np.int32(nl.shape[1]), np.int32(nl.shape[0]), cnt, self._worst, x0)

    def arena_counts(self, scratch: ArenaScratch) -> np.ndarray:
        """Wait for the device; return the ``2 P + 1`` region boundaries of the sorted arena
        (owned rows of each slab, then ghost rows of each slab), the stray flag, a stray
        row, the migrant count and the longest list row if one overflowed (else 0); clears
        the flags for the next rebuild."""
        nbounds = 2 * scratch.nslab + 1
        self._launch("md_arena_bounds", None, nbounds, scratch.cell_start, np.int32(nbounds),
                     np.int32(scratch.ncells), scratch.err, self._worst, scratch.bounds)
        return np.array(self._read_small(scratch.bounds), dtype=np.int64)


    # --- one slab per process (kernels/md_ranks.cuh, simsplit.md.rank_slab) ---------------
    #: whether this kernel set has the per-process slab kernels
    rank_slabs = True

    def rank_classify(self, x, n: int, edges, nslab: int, me: int, lo: int, hi: int,
                      room: int, counts, kept, to_lo, to_hi) -> None:
        """Queue the owner test of ``n`` owned rows: ``counts`` = [kept, to lo, to hi, stray
        flag, stray row]; the row lists ``kept`` and (at most ``room`` each) ``to_lo``,
        ``to_hi``, zero past their counts (a gather of the whole room reads row 0 there)."""
        for arr in (counts, to_lo, to_hi):
            self._zero(arr)
        if n:
            self._launch("md_rank_classify", x.dtype, n, x, np.int32(n), edges,
                         np.int32(nslab), np.int32(me), np.int32(lo), np.int32(hi),
                         np.int32(room), counts, kept, to_lo, to_hi, counts[3:])

    def rank_select(self, x, n: int, edges, lo: int, hi: int, lz: float, cut: float,
                    room: int, counts, to_lo, to_hi) -> None:
        """Queue the ghost test of ``n`` owned rows: ``counts`` = [near lo, near hi] and the
        row lists (at most ``room`` each, zero past their counts)."""
        for arr in (counts, to_lo, to_hi):
            self._zero(arr)
        if n:
            self._launch("md_rank_select", x.dtype, n, x, np.int32(n), edges, np.int32(lo),
                         np.int32(hi), np.float64(lz), np.float64(cut), np.int32(room), counts,
                         to_lo, to_hi)

    def rank_route(self, x, n: int, edges, nslab: int, me: int, lo: int, hi: int, lz: float,
                   cut: float, rooms: tuple[int, int], counts, kept, lists) -> None:
        """Queue the one-round test of ``n`` owned rows (``md_rank_route``): ``counts`` =
        [kept, to lo, to hi, own ghosts, near lo, near hi, stray flag, stray row, ghost beyond
        reach of one round, relayed ghosts]; ``kept`` and the five lists in ``lists`` (three
        of at most ``rooms[0]`` rows, then two of at most ``rooms[1]``; zero past their
        counts)."""
        for arr in (counts, lists):
            self._zero(arr)
        if n:
            self._launch("md_rank_route", x.dtype, n, x, np.int32(n), edges, np.int32(nslab),
                         np.int32(me), np.int32(lo), np.int32(hi), np.float64(lz),
                         np.float64(cut), np.int32(rooms[0]), np.int32(rooms[1]), counts, kept,
                         lists, counts[6:])

    def rank_refresh_lists(self, x, n_own: int, rows: int, edges, nslab: int,
                           links: tuple[int, ...], lz: float, cut: float,
                           scratch: dict[str, Any], out, bounds) -> None:
        """Queue the ghost refresh lists of every link (one or two) on the sorted rows
        ``x[:rows]`` (``n_own`` owned): in ``out``, each link's owned rows near its slab, then
        the ghost rows it owns, in row order, from the offsets ``bounds`` (2 links + 1
        entries; ``md_rank_mark`` and ``md_rank_compact``). ``scratch``: reused flag and scan
        arrays (grown here); ``out`` holds at least ``len(links) * rows`` entries."""
        self._zero(bounds)
        m = len(links) * rows
        if not m:
            return
        if scratch.get("rows", -1) < m:
            room = m + m // 8 + 16
            scratch.update(rows=room, flags=self.zeros((room,), np.int32),
                           start=self.zeros((room + 1,), np.int32),
                           fill=self.zeros((room,), np.int32),
                           sums=self.zeros((scan_scratch(room),), np.int32))
        flags, start = scratch["flags"], scratch["start"]
        self._launch("md_rank_mark", x.dtype, m, x, np.int32(n_own), np.int32(rows), edges,
                     np.int32(nslab), np.int32(links[0]), np.int32(links[-1]),
                     np.int32(len(links)), np.float64(lz), np.float64(cut), flags)
        self._exclusive_scan(flags, m, scratch["sums"], start, scratch["fill"])
        self._launch("md_rank_compact", None, max(m, 2 * len(links) + 1), flags, start,
                     np.int32(n_own), np.int32(rows), np.int32(len(links)), out, bounds)

    def rank_gather(self, idx, m: int, src: dict[str, Any], out: dict[str, Any],
                    motion: bool) -> None:
        """Queue ``out[name][r] = src[name][idx[r]]`` for r < ``m``: x and gid, and with
        ``motion`` v and img too."""
        if not m:
            return
        x, gid = src["x"], src["gid"]
        v, img = (src["v"], src["img"]) if motion else (x, gid)
        v_out, img_out = (out["v"], out["img"]) if motion else (out["x"], out["gid"])
        self._launch("md_rank_gather", x.dtype, m, idx, np.int32(m), x, v, img, gid,
                     np.int32(motion), out["x"], v_out, img_out, out["gid"])

    def rank_sort(self, x, n_own: int, rows: int, box: np.ndarray, ncell: np.ndarray, gid,
                  scratch: ArenaScratch | None) -> ArenaScratch:
        """Queue the counting sort of ``rows`` rows as a one-slab arena (owned rows
        ``[0, n_own)``, then ghost rows): bucket starts and the bucket-sorted ``entry_row``,
        by gid within a cell."""
        nc = int(np.prod(ncell))
        if scratch is None or scratch.rows < rows or scratch.nbuckets != 2 * nc:
            scratch = self._arena_scratch(rows + rows // 8 + 16, 1, nc, np.zeros(2))
        if rows:
            self._launch("md_rank_keys", x.dtype, rows, x, np.int32(n_own), np.int32(rows),
                         *_box(box), *(np.int32(c) for c in ncell), scratch.keys,
                         scratch.counts)
        self._bucket_sort(scratch, rows, gid)
        return scratch

    def rank_place(self, scratch: ArenaScratch, n_own: int, g: int, old: dict[str, Any],
                   new: dict[str, Any]) -> None:
        """Queue the copies into bucket order (owned rows with v, img and their cell key;
        ``g`` ghost rows after them), and ``scratch.new_of_old``."""
        dtype = old["x"].dtype
        if n_own:
            self._launch("md_arena_owned", dtype, n_own, np.int32(n_own), scratch.entry_row,
                         scratch.keys, old["x"], old["v"], old["img"], old["gid"], new["key"],
                         new["x"], new["v"], new["img"], new["gid"], scratch.new_of_old,
                         new["ghost_of"])
        if g:
            self._launch("md_rank_ghost_rows", dtype, g, np.int32(n_own), np.int32(g),
                         scratch.entry_row, old["x"], old["gid"], new["x"], new["gid"],
                         scratch.new_of_old)

    def rank_compose(self, idx, base: int, m: int, mapping, out) -> None:
        """Queue ``out[j] = mapping[idx[j]]`` (``idx`` None: ``mapping[base + j]``), j < m."""
        if m:
            self._launch("md_rank_compose", None, m, mapping if idx is None else idx,
                         np.int32(idx is not None), np.int32(base), np.int32(m), mapping, out)

    def rank_pack(self, x, rows, trailer: int, buf) -> None:
        """Queue ``buf[:m] = x[rows]`` (m rows) and this step's displacement flags as two
        int32 in row ``m`` (``trailer`` 1; 2: and clear the flags)."""
        m = int(rows.shape[0])
        self._launch("md_rank_pack", x.dtype, m + 1, x, rows, np.int32(m), self._flags,
                     np.int32(trailer), buf)

    def rank_land(self, src, idx, dst) -> None:
        """Queue ``dst[idx[r]] = src[r]`` for the rows of ``idx`` and merge the rebuild tick
        of ``src``'s trailer row into this kernel set's flags (``md_rank_land``: a device
        link's landing, ``src`` in the neighbour's memory)."""
        m = int(idx.shape[0])
        self._launch("md_rank_land", src.dtype, m + 1, src, idx, np.int32(m), self._flags, dst)

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


@dataclass
class ArenaScratch:
    """Rebuild scratch of a slab arena, reused while the atom count and grid stay: classify
    keys (3 per owned row), bucket counts and starts (2 P ncells buckets), the slab edges on
    the device, the error/migration counters and the small read, old row -> new row, and the
    bucket-sorted entries (owned then ghost rows)."""

    rows: int
    nbuckets: int
    nslab: int
    ncells: int
    keys: Any
    counts: Any
    cell_start: Any
    fill: Any
    chunk_sums: Any
    edges: Any
    err: Any
    bounds: Any
    new_of_old: Any
    entry_row: Any


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
        self._pinned: dict[tuple[int, str], np.ndarray] = {}
        self._by_key: dict[tuple[str, Any], Any] = {}
        #: per send buffer (by id): ready event on this device, done event on the receiving
        #: device and that device, of its last copy (see :meth:`send_rows`)
        self._events: dict[int, tuple[Any, Any, int]] = {}
        #: per staging buffer of :meth:`upload_rows` (by id): its last upload's done event
        self._uploads: dict[int, Any] = {}
        self._peers: dict[int, bool] = {}
        #: the stream of the host copies of rank slabs (:meth:`download_async`,
        #: :meth:`land_rows`), so they overlap the kernels; per landing buffer (by pointer) the
        #: event after the last scatter out of it
        self._copy_stream: Any = None
        self._scattered: dict[int, Any] = {}
        #: the high-priority stream of :meth:`side_queue` (a rank slab's rebuild)
        self._side_stream: Any = None
        self._shared_events: list[Any] = []
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
        # a memset costs the host a few microseconds less than a fill kernel, and a rebuild's
        # rounds are launch-bound (all zero bytes are 0 and +0.0)
        with self._dev:
            if arr.flags.c_contiguous:
                rt = self._cp.cuda.runtime
                rt.memsetAsync(arr.data.ptr, 0, arr.nbytes, self._stream().ptr)
            else:
                arr.fill(0)

    def synchronize(self) -> None:
        self._dev.synchronize()

    def _pinned_for(self, arr: Any) -> np.ndarray:
        key = (arr.size, arr.dtype.str)
        buf = self._pinned.get(key)
        if buf is None:
            import cupyx

            buf = self._pinned[key] = cupyx.empty_pinned(arr.shape, arr.dtype)
        return buf

    def _read_small(self, arr: Any) -> np.ndarray:
        buf = self._pinned_for(arr)
        with self._dev:
            stream = self._cp.cuda.get_current_stream()
            arr.get(stream=stream, out=buf)
            stream.synchronize()
        self.host_waits += 1
        return buf

    @contextlib.contextmanager
    def side_queue(self) -> Any:
        if self._side_stream is None:
            rt = self._cp.cuda.runtime
            with self._dev:  # the highest priority (lowest number) the device offers
                highest = rt.deviceGetStreamPriorityRange()[1] \
                    if hasattr(rt, "deviceGetStreamPriorityRange") else None
                self._side_stream = self._cp.cuda.Stream(non_blocking=True, priority=highest)
        with self._dev, self._side_stream:
            yield self._side_stream

    def mark(self, reuse: Any = None) -> Any:
        with self._dev:
            event = reuse if reuse is not None else self._cp.cuda.Event(disable_timing=True)
            event.record(self._stream())
        return event

    def wait_mark(self, mark: Any) -> None:
        if mark is not None:
            with self._dev:
                self._stream().wait_event(mark)

    def queue_read(self, arr: Any) -> Any:
        # pinned buffers per size and type, each reused once its read is taken: reads of
        # one size may be in flight together (a rank slab's interior bounds and refresh
        # list lengths)
        rt = self._cp.cuda.runtime
        key = ("queued", arr.size, arr.dtype.str)
        free = self._pinned.setdefault(key, [])  # type: ignore[call-overload]
        buf = free.pop() if free else self.host_buffer(arr.shape, arr.dtype)
        with self._dev:
            rt.memcpyAsync(buf.ctypes.data, arr.data.ptr, arr.nbytes, rt.memcpyDeviceToHost,
                           self._stream().ptr)
            done = self.mark()
        return buf, done, arr, free

    def queued_read(self, handle: Any) -> np.ndarray:
        buf, done, _, free = handle
        if not done.done:
            done.synchronize()
            self.host_waits += 1
        out = np.array(buf, dtype=np.int64)
        free.append(buf)
        return out

    def queue_flags(self) -> None:
        buf = self._pinned_for(self._flags)
        with self._dev:
            stream = self._cp.cuda.get_current_stream()
            self._cp.cuda.runtime.memcpyAsync(buf.ctypes.data, self._flags.data.ptr,
                                              self._flags.nbytes,
                                              self._cp.cuda.runtime.memcpyDeviceToHost,
                                              stream.ptr)
            done = self._cp.cuda.Event(block=False, disable_timing=True)
            done.record(stream)
        self._flag_read = (buf, done)

    def _queued_flags(self) -> np.ndarray | None:
        queued, self._flag_read = getattr(self, "_flag_read", None), None
        if queued is None:
            return None
        queued[1].synchronize()
        self.host_waits += 1
        return queued[0]

    # --- ghost rows between devices and processes -------------------------------------------
    def host_buffer(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        import cupyx

        with self._dev:
            return cupyx.empty_pinned(shape, dtype)

    def upload_rows_queued(self, host: np.ndarray, dst, row0: int) -> None:
        # asynchronous from pinned memory; from pageable memory CUDA copies to its own
        # staging before returning, so that case is safe too
        rt = self._cp.cuda.runtime
        m = int(host.shape[0])
        if m:
            src = np.ascontiguousarray(host, dtype=dst.dtype)
            with self._dev:
                rt.memcpyAsync(dst.data.ptr + row0 * dst.shape[1] * dst.itemsize,
                               src.ctypes.data, m * dst.shape[1] * dst.itemsize,
                               rt.memcpyHostToDevice, self._stream().ptr)

    def pin_host(self, buf: np.ndarray) -> Any:
        if not buf.nbytes:
            return None
        with self._dev:
            self._cp.cuda.runtime.hostRegister(buf.ctypes.data, buf.nbytes, 0)
        return buf.ctypes.data

    def unpin_host(self, handle: Any) -> None:
        if handle is not None:
            with self._dev:
                self._cp.cuda.runtime.hostUnregister(handle)

    def _stream(self) -> Any:
        with self._dev:
            return self._cp.cuda.get_current_stream()

    def download_rows(self, src, m: int, out: np.ndarray) -> np.ndarray:
        rt = self._cp.cuda.runtime
        nbytes = m * src.shape[1] * src.itemsize
        stream = self._stream()
        with self._dev:
            if nbytes:
                rt.memcpyAsync(out.ctypes.data, src.data.ptr, nbytes, rt.memcpyDeviceToHost,
                               stream.ptr)
            stream.synchronize()
        self.host_waits += 1
        return out[:m]

    def _copies(self) -> Any:
        if self._copy_stream is None:
            with self._dev:
                self._copy_stream = self._cp.cuda.Stream(non_blocking=True)
        return self._copy_stream

    def _after_main(self, copies: Any) -> None:
        """Make ``copies`` wait for the work queued so far on the main stream."""
        ready = self._cp.cuda.Event(disable_timing=True)
        ready.record(self._stream())
        copies.wait_event(ready)

    def download_async(self, src, m: int, out: np.ndarray) -> Any:
        # on the copy stream: the kernels queued next (a step's interior forces) need not
        # wait for the copy; the done event covers it
        rt = self._cp.cuda.runtime
        nbytes = m * src.shape[1] * src.itemsize
        copies = self._copies()
        with self._dev:
            self._after_main(copies)
            if nbytes:
                rt.memcpyAsync(out.ctypes.data, src.data.ptr, nbytes, rt.memcpyDeviceToHost,
                               copies.ptr)
            done = self._cp.cuda.Event(block=False, disable_timing=True)
            done.record(copies)
        return done, out[:m]

    def land_rows(self, host: np.ndarray, buf, idx, dst) -> None:
        # the upload on the copy stream, after the last scatter out of ``buf`` (callers make
        # buffers before the kernels they overlap: a buffer first seen waits for them all);
        # the scatter on the main stream after the upload
        rt = self._cp.cuda.runtime
        copies, main = self._copies(), self._stream()
        with self._dev:
            last = self._scattered.get(buf.data.ptr)
            if last is None:  # a new buffer: its allocation (a fill) may still be queued
                self._after_main(copies)
            else:
                copies.wait_event(last)
            if host.nbytes:
                rt.memcpyAsync(buf.data.ptr, host.ctypes.data, host.nbytes,
                               rt.memcpyHostToDevice, copies.ptr)
            landed = self._cp.cuda.Event(disable_timing=True)
            landed.record(copies)
            main.wait_event(landed)
        self.scatter_rows(buf, idx, dst)
        with self._dev:
            done = self._scattered[buf.data.ptr] = self._cp.cuda.Event(disable_timing=True)
            done.record(main)

    def wait_download(self, handle: Any) -> np.ndarray:
        if not handle[0].done:  # counted only where the host waits
            handle[0].synchronize()
            self.host_waits += 1
        return handle[1]

    def upload_rows(self, host: np.ndarray, dst, row0: int, staging: Any = None) -> None:
        rt = self._cp.cuda.runtime
        m = int(host.shape[0])
        nbytes = m * dst.shape[1] * dst.itemsize
        if not nbytes:
            return
        dst_ptr = dst.data.ptr + row0 * dst.shape[1] * dst.itemsize
        stream = self._stream()
        with self._dev:
            if staging is None:
                src = np.ascontiguousarray(host, dtype=dst.dtype)
                rt.memcpyAsync(dst_ptr, src.ctypes.data, nbytes, rt.memcpyHostToDevice,
                               stream.ptr)
                stream.synchronize()  # pageable memory: return only when it may change
                return
            done = self._uploads.get(id(staging))
            if done is None:
                done = self._uploads[id(staging)] = self._cp.cuda.Event(disable_timing=True)
            else:
                done.synchronize()  # the last upload out of the staging buffer has ended
            staging[:m] = host
            rt.memcpyAsync(dst_ptr, staging.ctypes.data, nbytes, rt.memcpyHostToDevice,
                           stream.ptr)
            done.record(stream)

    # --- CUDA IPC (device links of rank slabs) -------------------------------------------
    shares_memory = True

    def shared_buffer(self, shape: tuple[int, ...], dtype: Any) -> tuple[Any, bytes]:
        # an allocation of its own: an IPC handle names a whole cudaMalloc block, and the
        # memory pool's arrays are pieces of shared blocks
        cp = self._cp
        nbytes = max(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize, 1)
        with self._dev:
            mem = cp.cuda.memory.Memory(nbytes)
            arr = cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0))
            return arr, bytes(cp.cuda.runtime.ipcGetMemHandle(mem.ptr))

    def open_shared(self, handle: bytes, shape: tuple[int, ...], dtype: Any) -> Any:
        cp = self._cp
        nbytes = max(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize, 1)
        with self._dev:
            ptr = cp.cuda.runtime.ipcOpenMemHandle(handle)
            mem = cp.cuda.UnownedMemory(ptr, nbytes, None, self.device)
            return cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0))

    def close_shared(self, arr: Any) -> None:
        with self._dev:
            self._cp.cuda.runtime.ipcCloseMemHandle(arr.data.mem.ptr)

    def shared_event(self) -> tuple[Any, bytes]:
        with self._dev:
            event = self._cp.cuda.Event(block=False, disable_timing=True, interprocess=True)
        self._shared_events.append(event)  # events are raw pointers here: keep them alive
        return event.ptr, bytes(self._cp.cuda.runtime.ipcGetEventHandle(event.ptr))

    def open_event(self, handle: bytes) -> Any:
        with self._dev:
            return self._cp.cuda.runtime.ipcOpenEventHandle(handle)

    def record_event(self, event: Any) -> None:
        with self._dev:
            self._cp.cuda.runtime.eventRecord(event, self._stream().ptr)

    def wait_event(self, event: Any) -> None:
        with self._dev:
            self._cp.cuda.runtime.streamWaitEvent(self._stream().ptr, event, 0)

    def peer_capable(self, other: DeviceMDKernels) -> bool:
        dev = getattr(other, "device", None)
        if not isinstance(other, CupyMDKernels) or dev is None:
            return False
        if dev == self.device:
            return True
        if dev not in self._peers:
            rt = self._cp.cuda.runtime
            ok = bool(rt.deviceCanAccessPeer(self.device, dev)) \
                and bool(rt.deviceCanAccessPeer(dev, self.device))
            if ok:
                for a, b in ((self.device, dev), (dev, self.device)):
                    with self._cp.cuda.Device(a):
                        try:
                            rt.deviceEnablePeerAccess(b)
                        except rt.CUDARuntimeError as exc:  # the fluid's transport may have
                            if "AlreadyEnabled" not in str(exc):  # enabled it already
                                raise
            self._peers[dev] = ok
        return self._peers[dev]

    def send_rows(self, src, idx, buf, dst_set: DeviceMDKernels, dst, row0: int,
                  staging: np.ndarray | None) -> None:
        """Queued, the host never waits: on this device's stream the gather (after the last
        copy out of ``buf`` finished) and, when staging, the download into pinned memory; on
        the receiving device's stream, after an event, ``memcpyPeerAsync`` or the upload
        from pinned memory, so its next launches (the forces) see the rows."""
        m = int(idx.shape[0])
        if not m:
            return
        assert isinstance(dst_set, CupyMDKernels)
        cp, rt = self._cp, self._cp.cuda.runtime
        mine, theirs = self._stream(), dst_set._stream()
        key = id(buf)
        events = self._events.get(key)
        if events is None or events[2] != dst_set.device:
            with self._dev:
                ready = cp.cuda.Event(disable_timing=True)
            with dst_set._dev:
                done = cp.cuda.Event(disable_timing=True)
            first = True
        else:
            ready, done, _ = events
            first = False
        with self._dev:
            if not first:  # buf (and staging) are free once the last copy out of them ended
                mine.wait_event(done)
            self.gather_rows(src, idx, buf, 0)
            nbytes = m * buf.shape[1] * buf.itemsize
            if staging is not None:
                rt.memcpyAsync(staging.ctypes.data, buf.data.ptr, nbytes,
                               rt.memcpyDeviceToHost, mine.ptr)
            ready.record(mine)
        dst_ptr = dst.data.ptr + row0 * dst.shape[1] * dst.itemsize
        with dst_set._dev:
            theirs.wait_event(ready)
            if staging is None:
                rt.memcpyPeerAsync(dst_ptr, dst_set.device, buf.data.ptr, self.device, nbytes,
                                   theirs.ptr)
            else:
                rt.memcpyAsync(dst_ptr, staging.ctypes.data, nbytes, rt.memcpyHostToDevice,
                               theirs.ptr)
            done.record(theirs)
        self._events[key] = (ready, done, dst_set.device)

    def _launch(self, name: str, dtype: Any, threads: int, *args: Any) -> None:
        # a few microseconds of Python per launch matter at 64k atoms (~0.1 ms per step):
        # the kernel lookup by (name, dtype) is cached
        fn = self._by_key.get((name, dtype))
        if fn is None:
            fn = self._by_key[(name, dtype)] = self._kernels[kernel_name(name, dtype)]
        with self._dev:
            fn(((threads + self.block - 1) // self.block,), (self.block,), args)
