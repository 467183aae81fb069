"""MPI transport (mpi4py): persistent non-blocking halo messages between ranks.

Host buffers (CPU backend) go to MPI as they are. Device buffers are staged through pinned host
memory by default, since an MPI that is not CUDA-aware crashes on device pointers; with
``run.transport: mpi-cuda-aware`` they are handed to MPI directly.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from simsplit.transport.base import BufferPlans, Key, Link, NonBlockingTransport, link_tag


class MPICollectives:
    """Reductions, gathers and abort over an mpi4py communicator (shared with NCCL)."""

    comm: Any

    @property
    def rank(self) -> int:
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        return int(self.comm.Get_size())

    def allreduce_max(self, value: float) -> float:
        from mpi4py import MPI

        return float(self.comm.allreduce(float(value), op=MPI.MAX))

    def allreduce_sum(self, value: float) -> float:
        from mpi4py import MPI

        return float(self.comm.allreduce(float(value), op=MPI.SUM))

    def gather(self, pieces: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for part in self.comm.allgather({k: np.asarray(v) for k, v in pieces.items()}):
            out.update(part)
        return out

    def bcast(self, obj: Any) -> Any:
        return self.comm.bcast(obj, root=0)

    def barrier(self) -> None:
        self.comm.Barrier()

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)


@dataclass
class _Plan:
    """Persistent requests for one set of buffers (kept by their identity: BufferPlans)."""

    recv_reqs: list[Any]
    send_reqs: list[Any]
    send_staged: list[tuple[Any, np.ndarray, int]] = field(default_factory=list)  # dev, host, dev#
    recv_staged: list[tuple[Any, np.ndarray, int]] = field(default_factory=list)
    defer_sends: bool = False  # device data: sends wait until the packed halos are ready
    devices: list[int] = field(default_factory=list)


@dataclass
class _Pending:
    plan: _Plan
    ready: dict[int, Any]  # device -> event after which the send data can be read


class MPITransport(MPICollectives, NonBlockingTransport):
    """One slab per rank (or any owner map): Irecv/Isend per link, tag from (slab, face)."""

    name = "mpi"

    def __init__(self, links: Sequence[Link], local_slabs: Sequence[int], n_slabs: int,
                 comm: Any, owner: Sequence[int], cuda_aware: bool = False) -> None:
        super().__init__(links, local_slabs, n_slabs)
        self.comm = comm
        self.owner = list(owner)
        self.cuda_aware = cuda_aware
        me = self.rank
        self._recv_links = [ln for ln in self.links if self.owner[ln[2]] == me]
        self._send_links = [ln for ln in self.links if self.owner[ln[0]] == me]
        #: persistent requests and staging of the last buffer sets used
        self._plans: BufferPlans[_Plan] = BufferPlans()
        self._streams: Any = None
        self._h2d_done: list[Any] = []
        # persistent requests must be freed before mpi4py finalises MPI (an earlier atexit)
        atexit.register(self.close)

    def describe(self) -> str:
        kind = "cuda-aware" if self.cuda_aware else "host-staged for GPUs"
        return f"mpi ({self.size} ranks, {kind})"

    # --- plan -----------------------------------------------------------------------------------
    def _plan_for(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> _Plan:
        bufs = [send[(s, sf)] for s, sf, _, _ in self._send_links]
        bufs += [recv[(d, df)] for _, _, d, df in self._recv_links]
        plan = self._plans.find(bufs)
        if plan is None:
            plan = self._build(bufs)
            gone = self._plans.add(bufs, plan)
            if gone is not None:
                self._free(gone)
        return plan

    def close(self) -> None:
        """Free the persistent requests (idle between exchanges)."""
        for plan in self._plans.clear():
            self._free(plan)

    @staticmethod
    def _free(plan: _Plan) -> None:
        from mpi4py import MPI

        if not MPI.Is_finalized():
            for req in plan.recv_reqs + plan.send_reqs:
                req.Free()

    def _build(self, bufs: list[Any]) -> _Plan:
        from mpi4py.util.dtlib import from_numpy_dtype

        from simsplit.gpu import devices as dv

        n_send = len(self._send_links)
        plan = _Plan([], [])
        on_device = any(dv.is_device_array(b) for b in bufs)
        if on_device and self._streams is None:
            self._streams = dv.DeviceStreams()
        plan.defer_sends = on_device
        for idx, buf in enumerate(bufs):
            is_send = idx < n_send
            target = buf
            if dv.is_device_array(buf):
                dev = dv.device_of_array(buf)
                if dev not in plan.devices:
                    plan.devices.append(dev)
                if not self.cuda_aware:
                    target = dv.pinned_like(buf)
                    (plan.send_staged if is_send else plan.recv_staged).append((buf, target, dev))
            elif not isinstance(buf, np.ndarray) or not buf.flags.c_contiguous:
                raise TypeError("MPI halo buffers must be C-contiguous host or device arrays")
            msg = [target, from_numpy_dtype(np.dtype(buf.dtype))]
            if is_send:
                s, sf, d, df = self._send_links[idx]
                plan.send_reqs.append(self.comm.Send_init(msg, self.owner[d], link_tag(d, df)))
            else:
                s, sf, d, df = self._recv_links[idx - n_send]
                plan.recv_reqs.append(self.comm.Recv_init(msg, self.owner[s], link_tag(d, df)))
        return plan

    # --- exchange -------------------------------------------------------------------------------
    def start(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> _Pending:
        from mpi4py import MPI

        plan = self._plan_for(send, recv)
        # a staged receive buffer is reused: the last step's upload from it must be done
        for ev in self._h2d_done:
            ev.synchronize()
        self._h2d_done = []
        if plan.recv_reqs:
            MPI.Prequest.Startall(plan.recv_reqs)
        ready: dict[int, Any] = {}
        if plan.defer_sends:
            st = self._streams
            for dev in plan.devices:
                ready[dev] = st.record(st.current(dev), dev)
            for dbuf, host, dev in plan.send_staged:
                stream = st.comm(dev)
                with st.device(dev):
                    stream.wait_event(ready[dev])
                    self._download(dbuf, host, stream)
            for dev in plan.devices:
                if plan.send_staged:
                    ready[dev] = st.record(st.comm(dev), dev)
        elif plan.send_reqs:
            MPI.Prequest.Startall(plan.send_reqs)
        return _Pending(plan, ready)

    def finish(self, handle: _Pending) -> None:
        from mpi4py import MPI

        plan = handle.plan
        if plan.defer_sends:
            # kernels and downloads were queued asynchronously; MPI reads memory only now
            for ev in handle.ready.values():
                ev.synchronize()
            if plan.send_reqs:
                MPI.Prequest.Startall(plan.send_reqs)
        MPI.Request.Waitall(plan.recv_reqs + plan.send_reqs)
        if plan.recv_staged:
            st = self._streams
            for dbuf, host, dev in plan.recv_staged:
                with st.device(dev):
                    self._upload(host, dbuf, st.comm(dev))
            for dev in plan.devices:
                ev = st.record(st.comm(dev), dev)
                with st.device(dev):
                    st.current(dev).wait_event(ev)
                self._h2d_done.append(ev)

    @staticmethod
    def _download(dbuf: Any, host: np.ndarray, stream: Any) -> None:
        from simsplit.gpu import devices as dv

        dv.copy_async(dv.host_pointer(host), dv.device_pointer(dbuf), host.nbytes, stream)

    @staticmethod
    def _upload(host: np.ndarray, dbuf: Any, stream: Any) -> None:
        from simsplit.gpu import devices as dv

        dv.copy_async(dv.device_pointer(dbuf), dv.host_pointer(host), host.nbytes, stream)
