"""Placement of slabs on processes and devices, and the transport that links them.

Physics asks a :class:`ParallelContext` which slabs are its own, which backend each one
runs on and how halos travel; it never looks at ranks, devices or MPI itself.
:func:`make_context` picks one process (every slab here) or MPI (one slab per rank, launched by
mpiexec or srun); MPI is only initialised in the second case.
"""

from __future__ import annotations

import copy
import os
import signal
import sys
import time
import warnings
from typing import Any, Mapping, Sequence

from simsplit.backends import (
    Backend,
    BackendUnavailable,
    get_backend,
    gpu_count,
    resolve_backend_name,
)
from simsplit.errors import CaseError
from simsplit.gpu.cuda_errors import EXIT_CUDA, CudaKernelError, as_cuda_error
from simsplit.gpu.devices import cupy_module, gpu_identity, nccl_module
from simsplit.transport.base import Link, Transport
from simsplit.transport.local import LocalTransport

#: environment variables launchers set to the world size (Open MPI, MPICH/Intel MPI/PMI2, MVAPICH)
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE")
#: variables that only say "started by an MPI launcher"; the size then comes from Slurm
_LAUNCHED_VARS = ("PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS")
FAIL_ENV = "SIMSPLIT_TEST_FAIL_RANK"


class InjectedFailure(RuntimeError):
    """Raised on purpose by the ``SIMSPLIT_TEST_FAIL_RANK`` test mode."""


def abort_job(comm: Any, code: int, text: str) -> None:
    """Print ``simsplit: error: rank R: text`` and end every rank of ``comm`` with ``code``.

    Without the abort the other ranks would wait forever in their next exchange.
    """
    print(f"simsplit: error: rank {comm.Get_rank()}: {text}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    # MPI_Abort tears the launcher's I/O forwarding down at once; give it a moment to pass
    # the line on (under load it was lost now and then)
    time.sleep(0.5)
    comm.Abort(code)


def _abort_on_uncaught(comm: Any) -> None:
    """Make an exception no one catches on this rank end the whole job (a program that
    drives solvers itself, such as a benchmark or a test script, rather than the command
    line, which installs its own hook with its exit codes first)."""
    if comm.Get_size() < 2 or sys.excepthook is not sys.__excepthook__:
        return
    sys.excepthook = lambda typ, exc, tb: abort_job(comm, *failure_exit(exc))


def failure_exit(exc: BaseException) -> tuple[int, str]:
    """Exit code and one-line text of a rank's failure: a CUDA error (``EXIT_CUDA``), an
    interrupt (130), anything else (1). The command line tells its own kinds apart first."""
    if isinstance(exc, CudaKernelError):
        return EXIT_CUDA, str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted"
    if (cuda := as_cuda_error(exc)) is not None:
        return EXIT_CUDA, str(cuda)
    return 1, f"{type(exc).__name__}: {exc}"


def launched_world_size(env: Mapping[str, str] | None = None) -> int:
    """World size an MPI launcher announced in the environment (1 for a plain start).

    Read before mpi4py is imported, so a plain ``python -m simsplit run`` never starts MPI.
    """
    env = os.environ if env is None else env
    for var in _SIZE_VARS:
        if env.get(var, "").strip().isdigit():
            return int(env[var])
    if any(v in env for v in _LAUNCHED_VARS):
        for var in ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
            if env.get(var, "").strip().isdigit():
                return int(env[var])
    return 1


def _parse_fault(rank: int) -> tuple[int, bool] | None:
    """``SIMSPLIT_TEST_FAIL_RANK=RANK:STEP[:kill]`` -> (step, kill) on that rank."""
    spec = os.environ.get(FAIL_ENV, "").strip()
    if not spec:
        return None
    parts = spec.split(":")
    try:
        who, step = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise ValueError(f"{FAIL_ENV}={spec!r}: expected RANK:STEP or RANK:STEP:kill") from None
    return (step, parts[2:] == ["kill"]) if who == rank else None


class ParallelContext:
    """One process holding every slab (slab i on device i mod the number of devices)."""

    def __init__(self, backend: str = "auto", devices: Sequence[int] | None = None,
                 transport: str = "auto") -> None:
        self.backend_name = resolve_backend_name(backend)
        if devices is None:
            devices = list(range(max(1, gpu_count()))) if self.backend_name != "cpu" else [0]
        if not devices:
            raise BackendUnavailable("run.devices: the list of GPU ids is empty")
        self.devices = list(devices)
        self.transport_kind = transport
        self._backends: dict[int, Backend] = {}
        self._fault: tuple[int, bool] | None = _parse_fault(self.rank)

    @property
    def rank(self) -> int:
        return 0

    @property
    def size(self) -> int:
        return 1

    @property
    def on_gpu(self) -> bool:
        return self.backend_name != "cpu"

    def prepare_case(self, case: dict[str, Any]) -> dict[str, Any]:
        """The case as this context runs it (one process: unchanged; a changed case is a new
        dict, which the caller validates again)."""
        return case

    def local_slabs(self, n_slabs: int) -> list[int]:
        return list(range(n_slabs))

    def device_of(self, slab: int) -> int:
        return self.devices[slab % len(self.devices)]

    def backend_for(self, slab: int) -> Backend:
        dev = self.device_of(slab)
        if dev not in self._backends:
            self._backends[dev] = get_backend(self.backend_name, dev)
        return self._backends[dev]

    def resolved_transport(self) -> str:
        kind = self.transport_kind
        if kind == "auto":  # same-device copies need no peer machinery (and graph-capture simply)
            return "peer" if self.on_gpu and len(self.devices) > 1 else "local"
        if kind in ("peer", "nccl", "mpi-cuda-aware") and not self.on_gpu:
            raise BackendUnavailable(f"run.transport: {kind} needs a GPU backend "
                                     f"(run.backend is {self.backend_name})")
        return kind

    def transport(self, links: Sequence[Link], n_slabs: int) -> Transport:
        kind = self.resolved_transport()
        local = self.local_slabs(n_slabs)
        if kind == "local":
            return LocalTransport(links, local, n_slabs, self.backend_for(0).copy)
        if kind == "peer":
            from simsplit.transport.peer import PeerTransport

            return PeerTransport(links, local, n_slabs)
        if kind == "nccl":
            used = {self.device_of(k) for k in local}
            if len(used) > 1:
                raise BackendUnavailable(
                    "run.transport: nccl uses one GPU per process; in one process with several "
                    "GPUs use transport: peer (or auto), or list one GPU in run.devices")
            from simsplit.transport.nccl import NcclTransport

            return NcclTransport(links, local, n_slabs, None, [0] * n_slabs, used.pop())
        from mpi4py import MPI

        from simsplit.transport.mpi import MPITransport

        return MPITransport(links, local, n_slabs, MPI.COMM_SELF, [0] * n_slabs,
                            cuda_aware=kind == "mpi-cuda-aware")

    @property
    def has_fault(self) -> bool:
        """True when a test asked this rank to fail on purpose at some step."""
        return self._fault is not None

    def check_fault(self, step: int) -> None:
        """Test mode: fail on purpose at ``step`` if ``SIMSPLIT_TEST_FAIL_RANK`` names this rank."""
        if self._fault is None or self._fault[0] != step:
            return
        if self._fault[1]:
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFailure(f"failure injected by {FAIL_ENV} at step {step}")

    def abort(self, code: int = 1) -> None:
        """End every process of the run (one process: nothing else to end)."""

    def describe(self) -> str:
        return (f"1 process, backend {self.backend_for(0).describe()}, "
                f"transport {self.resolved_transport()}")


class MPIContext(ParallelContext):
    """One slab per MPI rank; GPU = node-local rank mod GPUs per node (or ``run.devices``)."""

    def __init__(self, backend: str = "auto", devices: Sequence[int] | None = None,
                 transport: str = "auto", comm: Any = None) -> None:
        from mpi4py import MPI

        self.comm = comm if comm is not None else MPI.COMM_WORLD
        _abort_on_uncaught(self.comm)
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.comm.Get_rank())
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()
        node.Free()
        super().__init__(backend, devices, transport)
        self.device = self.devices[self.local_rank % len(self.devices)]
        # the physical GPU of each rank (a bus id: under --gpus-per-task every rank's GPU is 0)
        gpu = (MPI.Get_processor_name(), gpu_identity(self.device)) if self.on_gpu else None
        gpus = self.comm.allgather(gpu)
        #: whether two ranks of some node drive one GPU (NCCL cannot link them; agreed by all)
        self.shares_gpus = self.on_gpu and len(set(gpus)) < len(gpus)
        if self.shares_gpus and self.rank == 0:
            warnings.warn(f"{len(gpus)} ranks share {len(set(gpus))} GPU(s); one rank per GPU "
                          "is fastest", stacklevel=2)

    @property
    def rank(self) -> int:
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        return int(self.comm.Get_size())

    def prepare_case(self, case: dict[str, Any]) -> dict[str, Any]:
        """One slab per rank: ``decomposition.subdomains`` becomes the world size (a changed
        copy, which the caller validates again)."""
        dec = case["decomposition"]
        weights = dec.get("weights")
        if weights is not None and len(weights) != self.size:
            raise CaseError(f"decomposition.weights: {len(weights)} weights given, but this MPI "
                            f"job has {self.size} ranks and runs one slab per rank; give "
                            f"{self.size} weights or start {len(weights)} ranks")
        if dec["subdomains"] == self.size:
            return case
        case = copy.deepcopy(case)
        case["decomposition"]["subdomains"] = self.size
        return case

    def local_slabs(self, n_slabs: int) -> list[int]:
        if n_slabs != self.size:
            raise ValueError(f"{n_slabs} slabs on {self.size} ranks: expected one slab per rank")
        return [self.rank]

    def device_of(self, slab: int) -> int:
        return self.device

    def resolved_transport(self) -> str:
        kind = self.transport_kind
        if kind == "auto":
            if not self.on_gpu:
                return "mpi"
            if self.shares_gpus:
                return "mpi"
            cupy_module()
            if nccl_module() is not None:
                return "nccl"
            if self.rank == 0:
                warnings.warn("NCCL not found: GPU halos go through MPI with host staging",
                              stacklevel=2)
            return "mpi"
        if kind in ("local", "peer") and self.size > 1:
            raise BackendUnavailable(f"run.transport: {kind} works within one process; under "
                                     "mpiexec use auto, nccl, mpi or mpi-cuda-aware")
        if kind == "nccl" and self.shares_gpus:
            raise BackendUnavailable("run.transport: nccl links one GPU per rank, but ranks of "
                                     "this job share a GPU; use auto or mpi, or start one "
                                     "rank per GPU")
        return super().resolved_transport()

    def transport(self, links: Sequence[Link], n_slabs: int) -> Transport:
        kind = self.resolved_transport()
        local = self.local_slabs(n_slabs)
        owner = list(range(n_slabs))
        if kind == "nccl":
            from simsplit.transport.nccl import NcclTransport

            return NcclTransport(links, local, n_slabs, self.comm, owner, self.device)
        if kind in ("mpi", "mpi-cuda-aware"):
            from simsplit.transport.mpi import MPITransport

            return MPITransport(links, local, n_slabs, self.comm, owner,
                                cuda_aware=kind == "mpi-cuda-aware")
        return super().transport(links, n_slabs)

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)

    def describe(self) -> str:
        where = f"GPU {self.device} per rank" if self.on_gpu else "cpu"
        return (f"{self.size} MPI ranks ({where}), transport {self.resolved_transport()}, "
                f"backend {self.backend_for(self.rank).describe()}")


def make_context(case: Mapping[str, Any]) -> ParallelContext:
    """MPI with one slab per rank when a launcher started several ranks, else one process."""
    run = case["run"]
    args = (run["backend"], run.get("devices"), run.get("transport", "auto"))
    if launched_world_size() > 1:
        return MPIContext(*args)
    return ParallelContext(*args)
