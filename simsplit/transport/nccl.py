"""NCCL transport: grouped device-to-device send/recv between GPU ranks on a dedicated stream.

One NCCL rank per process and one GPU per process; the unique id travels by MPI. Nothing is
synchronised on the host: the communication stream waits for the packed halos by event, and the
kernels that read the received halos wait for the communication stream by event.
Reductions and gathers (rare, host data) go through MPI; a single rank needs no MPI at all.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from simsplit.transport.base import Key, Link, NonBlockingTransport, Transport
from simsplit.transport.mpi import MPICollectives


def _nccl_dtype(nccl: Any, dtype: Any) -> int:
    table = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
             np.dtype(np.float16): nccl.NCCL_FLOAT16,  # run.storage: float16 halos
             # e4m11 halos (int16 bits; NCCL has no int16): send/recv moves the bytes as they
             # are, so they travel as 2-byte floats
             np.dtype(np.int16): nccl.NCCL_FLOAT16,
             np.dtype(np.uint8): nccl.NCCL_UINT8, np.dtype(np.int32): nccl.NCCL_INT32,
             np.dtype(np.int64): nccl.NCCL_INT64}
    try:
        return table[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"NCCL transport cannot send {np.dtype(dtype)} buffers") from None


class NcclTransport(MPICollectives, NonBlockingTransport):
    """Halo exchange through ``cupy.cuda.nccl``; ``comm`` is an mpi4py communicator or None."""

    name = "nccl"

    def __init__(self, links: Sequence[Link], local_slabs: Sequence[int], n_slabs: int,
                 comm: Any, owner: Sequence[int], device: int) -> None:
        NonBlockingTransport.__init__(self, links, local_slabs, n_slabs)
        from simsplit.gpu import devices as dv

        cp = dv.cupy_module()
        nccl = dv.nccl_module()
        if nccl is None:
            from simsplit.errors import BackendUnavailable

            raise BackendUnavailable("run.transport: nccl needs libnccl "
                                     "(pip install nvidia-nccl-cu13), or use transport: mpi")
        self.comm, self.owner, self.device = comm, list(owner), device
        self._nccl = nccl
        self._streams = dv.DeviceStreams()
        me, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
        uid = nccl.get_unique_id() if me == 0 else None
        if comm is not None:
            uid = comm.bcast(uid, root=0)
        with cp.cuda.Device(device):
            self._comm = nccl.NcclCommunicator(size, uid, me)
        self._me = me
        self._stream = self._streams.comm(device)

    @property
    def rank(self) -> int:
        return self._me

    @property
    def size(self) -> int:
        return self.comm.Get_size() if self.comm is not None else 1

    def describe(self) -> str:
        return f"nccl ({self.size} ranks)"

    def start(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> Any:
        from simsplit.gpu import devices as dv

        nccl, st, dev, me = self._nccl, self._streams, self.device, self._me
        packed = st.record(st.current(dev), dev)
        with st.device(dev):
            self._stream.wait_event(packed)
            nccl.groupStart()
            # the k-th send from rank a to rank b meets the k-th receive on b from a: every rank
            # walks the links in the same global order, which keeps the pairs matched
            for s, sf, d, df in self.links:
                if self.owner[s] == me:
                    buf = send[(s, sf)]
                    self._comm.send(dv.device_pointer(buf), buf.size, _nccl_dtype(nccl, buf.dtype),
                                    self.owner[d], self._stream.ptr)
                if self.owner[d] == me:
                    buf = recv[(d, df)]
                    self._comm.recv(dv.device_pointer(buf), buf.size, _nccl_dtype(nccl, buf.dtype),
                                    self.owner[s], self._stream.ptr)
            nccl.groupEnd()
        return st.record(self._stream, dev)

    def finish(self, handle: Any) -> None:
        st = self._streams
        with st.device(self.device):
            st.current(self.device).wait_event(handle)

    # --- collectives: MPI when there is a communicator, identity for one rank ---------------------
    def allreduce_max(self, value: float) -> float:
        return MPICollectives.allreduce_max(self, value) if self.comm is not None else value

    def allreduce_sum(self, value: float) -> float:
        return MPICollectives.allreduce_sum(self, value) if self.comm is not None else value

    def gather(self, pieces: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        return MPICollectives.gather(self, pieces) if self.comm is not None else dict(pieces)

    def bcast(self, obj: Any) -> Any:
        return MPICollectives.bcast(self, obj) if self.comm is not None else obj

    def barrier(self) -> None:
        if self.comm is not None:
            MPICollectives.barrier(self)

    def abort(self, code: int = 1) -> None:
        if self.comm is not None:
            try:
                self._comm.abort()
            finally:
                MPICollectives.abort(self, code)
        Transport.abort(self, code)
