"""MD kernel sets: which one each slab runs on (:func:`md_kernels`), the host (NumPy/Numba)
set behind the CPU backend (:class:`HostMDKernels`), and how ghost rows move between the kernel
sets of different GPUs in one process (:func:`ghost_transfer_mode`)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from simsplit.backends.cpu import md as cpu_md
from simsplit.backends.cpu import md_forces, md_neighbors
from simsplit.backends.cpu.jit_cache import announce_compile
from simsplit.errors import CaseError
from simsplit.md import slabs as sl

#: environment variable choosing how ghost rows move between slabs on different GPU kernel
#: sets in one process: ``auto`` (default), ``peer`` or ``staged`` (see :func:`ghost_transfer_mode`)
TRANSFER_ENV = "SIMSPLIT_MD_TRANSFER"


def ghost_transfer_mode(value: str | None = None) -> str:
    """The ghost transfer mode (``value``, else ``$SIMSPLIT_MD_TRANSFER``, else ``auto``).

    ``auto``: slabs sharing a kernel set (a GPU) refresh ghosts with one gather launch, slabs
    on different GPUs with peer copies where the GPUs allow peer access, else through pinned
    host memory. ``peer`` and ``staged`` force that copy between *every* two slabs, even on
    one GPU: a testing aid that runs the cross-device path on a one-GPU machine.
    """

    mode = (os.environ.get(TRANSFER_ENV, "") if value is None else value).strip() or "auto"
    if mode not in sl.TRANSFER_MODES:
        raise CaseError(f"{TRANSFER_ENV}={mode!r}: expected one of "
                        f"{', '.join(sl.TRANSFER_MODES)}")
    return mode


class HostMDKernels:
    """The CPU MD kernel set: :mod:`simsplit.backends.cpu.md`, ``.md_neighbors`` and
    ``.md_forces`` behind the calls the solver makes of every kernel set (the GPU ones are
    :class:`simsplit.backends.cuda_c.md.DeviceMDKernels`).
    Arrays are NumPy arrays; the neighbour list is ``nl[row, k]``."""

    is_device = False
    #: every step is checked as it ends (nothing is queued on a CPU)
    batches = False

    def __init__(self) -> None:
        self._moved = self._jumped = False
        k = cpu_md
        self.final_integrate = k.final_integrate
        self.kinetic_per_atom = k.kinetic_per_atom
        self.scale_rows = k.scale_rows

    @staticmethod
    def lj_forces(x, n_own: int, nl, cnt, box: np.ndarray, rcsq: float, eps4: float,
                  eps24: float, sigsq: float, eshift: float, f, pe, vir, tick: int = 0) -> None:
        md_forces.lj_forces(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir)

    @staticmethod
    def kick_typed(v, f, typ, n: int, table, tick: int = 0) -> None:
        cpu_md.kick_typed(v, f, typ, n, table)

    # the CPU lists hold plain rows (pack_types below): type_shift is always 0 here
    @staticmethod
    def lj_forces_typed(x, typ, n_own: int, nl, cnt, box: np.ndarray, table, ntypes: int, f,
                        pe, vir, tick: int = 0, type_shift: int = 0) -> None:
        md_forces.lj_forces_typed(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir)

    @staticmethod
    def lj_forces_fshift(x, typ, n_own: int, nl, cnt, box: np.ndarray, table, ntypes: int, f,
                         pe, vir, tick: int = 0, type_shift: int = 0) -> None:
        md_forces.lj_forces_fshift(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir)

    @staticmethod
    def row_types(gid, n: int, types_by_id, out=None) -> np.ndarray:
        return np.ascontiguousarray(types_by_id[np.asarray(gid)[:n]], dtype=np.int32)

    @staticmethod
    def type_bits(ntypes: int, rows: int) -> int:
        """The CPU lists hold plain rows (no type bits; ``typ`` is read per pair)."""
        return 0

    @staticmethod
    def pack_types(nl, cnt, n_own: int, typ, ntypes: int, rows: int) -> int:
        """The CPU kernels read each neighbour's type from ``typ``: lists stay plain (0)."""
        return 0

    @staticmethod
    def langevin_forces(f, v, ids, n: int, drag: float, noise: float, seed: int, step: int,
                        tick: int = 0) -> None:
        cpu_md.langevin_forces(f, v, ids, n, drag, noise, seed, step)

    @staticmethod
    def langevin_forces_typed(f, v, ids, typ, n: int, drag, noise, seed: int, step: int,
                              tick: int = 0) -> None:
        cpu_md.langevin_forces_typed(f, v, ids, typ, n, drag, noise, seed, step)

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(host)

    def to_host(self, arr: np.ndarray) -> np.ndarray:
        return arr

    def synchronize(self) -> None:
        """CPU kernels are synchronous: nothing to wait for."""

    def advance(self, x, v, f, img, n: int, kick: bool, dtf: float, dt: float,
                box: np.ndarray, x0: np.ndarray, limit2: float, jump2: float,
                tick: int = 1) -> None:
        """The previous step's second half kick (if ``kick``), this step's first half kick
        and drift, and the displacement check (read with :meth:`displacement_flags`)."""
        if kick:
            cpu_md.final_integrate(v, f, n, dtf)
        cpu_md.initial_integrate(x, v, f, img, n, dtf, dt, box)
        m = cpu_md.max_displacement2(x, x0, n, box)
        self._moved |= bool(m > limit2)
        self._jumped |= bool(m > jump2)

    def displacement_flags(self) -> tuple[int, bool]:
        out = (int(self._moved), self._jumped)
        self._moved = self._jumped = False
        return out

    def snapshot(self, x: np.ndarray, n: int, out: Any = None) -> np.ndarray:
        return np.array(x[:n], dtype=np.float64)

    def neighbor_list(self, nl: np.ndarray | None, cnt: np.ndarray | None, n_own: int,
                      capacity: int) -> tuple[np.ndarray, np.ndarray]:
        if nl is not None and cnt is not None and nl.shape[0] >= n_own \
                and nl.shape[1] == capacity:
            return nl, cnt
        rows = max(n_own + n_own // 8 + 16, 0 if nl is None else nl.shape[0])
        return np.empty((rows, capacity), np.int32), np.zeros(rows, np.int32)

    def bin_atoms(self, x: np.ndarray, gid: np.ndarray, n: int, box: np.ndarray,
                  ncell: np.ndarray, cells: Any = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out = (np.empty(n, np.int64), np.empty(int(np.prod(ncell)) + 1, np.int64),
               np.empty(n, np.int64))
        args = (x, gid, n, box, ncell, *out)
        announce_compile(md_neighbors.bin_atoms, args)  # the first MD kernel a run calls
        md_neighbors.bin_atoms(*args)
        return out

    def build_neighbors(self, x, n_own: int, box: np.ndarray, ncell: np.ndarray,
                        cells: tuple[np.ndarray, ...], offsets: list[np.ndarray], cutsq: float,
                        nl: np.ndarray, cnt: np.ndarray, typ: Any = None,
                        type_shift: int = 0, list_cutsq: Any = None) -> int:
        return md_neighbors.build_neighbors(x, n_own, box, ncell, *cells, *offsets, cutsq, nl, cnt,
                                            typ, list_cutsq)


def md_kernels(backend_name: str, context: Any = None, slab: int = 0) -> Any:
    """The MD kernel set of a backend for one slab: ``cpu`` (or ``auto``) runs on the host,
    ``cupy`` and ``numba-cuda`` on the GPU of ``context.backend_for(slab)`` (one kernel set per
    device: slabs that share a device share it), or on GPU 0 without a context."""
    if backend_name in ("cpu", "auto"):
        return HostMDKernels()
    if backend_name in ("cupy", "numba-cuda"):
        if context is not None:
            return context.backend_for(slab).md
        from simsplit.backends import get_backend

        return get_backend(backend_name).md
    raise ValueError(f"run.backend: no molecular-dynamics kernels for '{backend_name}' "
                     "(available: cpu, cupy, numba-cuda)")
