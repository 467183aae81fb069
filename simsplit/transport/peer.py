"""Peer transport: one process, several GPUs; halos move device to device without the host.

Each link's copy runs on the receiving device's communication stream: a same-device copy, a
``memcpyPeerAsync`` where peer access is on, or a download to pinned memory and an upload where
it is not. Events order everything on the GPUs; the host never waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from simsplit.transport.base import BufferPlans, Key, Link, NonBlockingTransport


@dataclass
class _Copy:
    src: Any
    dst: Any
    src_dev: int
    dst_dev: int
    nbytes: int
    mode: str  # "same", "peer" or "staged"
    host: np.ndarray | None = None


class PeerTransport(NonBlockingTransport):
    """Every slab in this process; buffers may sit on any mix of devices."""

    name = "peer"

    def __init__(self, links: Sequence[Link], local_slabs: Sequence[int], n_slabs: int) -> None:
        super().__init__(links, local_slabs, n_slabs)
        from simsplit.gpu import devices as dv

        self._streams = dv.DeviceStreams()
        self._cp = self._streams.cp
        self._peer: dict[tuple[int, int], bool] = {}
        #: copy plans (copies, devices) of the last buffer sets used
        self._plans: BufferPlans[tuple[list[_Copy], list[int]]] = BufferPlans()

    def describe(self) -> str:
        plan = self._plans.latest()
        if plan is None:
            return "peer"
        modes = sorted({c.mode for c in plan[0]})
        return f"peer ({len(plan[1])} devices; {', '.join(modes) or 'no'} copies)"

    def _can_peer(self, a: int, b: int) -> bool:
        """Enable access from device ``a`` to ``b`` (and back) once; False where impossible."""
        key = (min(a, b), max(a, b))
        if key not in self._peer:
            rt = self._cp.cuda.runtime
            ok = bool(rt.deviceCanAccessPeer(a, b)) and bool(rt.deviceCanAccessPeer(b, a))
            if ok:
                for x, y in ((a, b), (b, a)):
                    with self._cp.cuda.Device(x):
                        try:
                            rt.deviceEnablePeerAccess(y)
                        except rt.CUDARuntimeError as exc:
                            if "AlreadyEnabled" not in str(exc):
                                ok = False
            self._peer[key] = ok
        return self._peer[key]

    def _plan_for(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]
                  ) -> tuple[list[_Copy], list[int]]:
        from simsplit.gpu import devices as dv

        bufs = [x for s, sf, d, df in self.links for x in (send[(s, sf)], recv[(d, df)])]
        plan = self._plans.find(bufs)
        if plan is not None:
            return plan
        copies, devs = [], []
        for s, sf, d, df in self.links:
            src, dst = send[(s, sf)], recv[(d, df)]
            if not (dv.is_device_array(src) and dv.is_device_array(dst)):
                raise TypeError("the peer transport moves device arrays only; "
                                "use run.transport: local for the cpu backend")
            a, b = dv.device_of_array(src), dv.device_of_array(dst)
            nbytes = int(np.prod(src.shape)) * np.dtype(src.dtype).itemsize
            if a == b:
                mode, host = "same", None
            elif self._can_peer(a, b):
                mode, host = "peer", None
            else:
                mode, host = "staged", dv.pinned_like(src)
            copies.append(_Copy(src, dst, a, b, nbytes, mode, host))
            for x in (a, b):
                if x not in devs:
                    devs.append(x)
        self._plans.add(bufs, (copies, devs))
        return copies, devs

    def start(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> Any:
        from simsplit.gpu import devices as dv

        copies, devs = self._plan_for(send, recv)
        st, rt = self._streams, self._cp.cuda.runtime
        # every device's packed halos (and its last unpack, which frees its receive buffers)
        packed = [st.record(st.current(d), d) for d in devs]
        for d in devs:
            with st.device(d):
                for ev in packed:
                    st.comm(d).wait_event(ev)
        for c in copies:
            src_ptr, dst_ptr = dv.device_pointer(c.src), dv.device_pointer(c.dst)
            stream = st.comm(c.dst_dev)
            if c.mode == "same":
                with st.device(c.dst_dev):
                    dv.copy_async(dst_ptr, src_ptr, c.nbytes, stream)
            elif c.mode == "peer":
                with st.device(c.dst_dev):
                    rt.memcpyPeerAsync(dst_ptr, c.dst_dev, src_ptr, c.src_dev, c.nbytes,
                                       stream.ptr)
            else:
                assert c.host is not None
                up = st.comm(c.src_dev)
                with st.device(c.src_dev):
                    dv.copy_async(dv.host_pointer(c.host), src_ptr, c.nbytes, up)
                downloaded = st.record(up, c.src_dev)
                with st.device(c.dst_dev):
                    stream.wait_event(downloaded)
                    dv.copy_async(dst_ptr, dv.host_pointer(c.host), c.nbytes, stream)
        return [st.record(st.comm(d), d) for d in devs], devs

    def finish(self, handle: Any) -> None:
        done, devs = handle
        st = self._streams
        # each device waits for all copies: its receive buffers are filled and its send buffers
        # (read by other devices' streams) are free to be packed again
        for d in devs:
            with st.device(d):
                cur = st.current(d)
                for ev in done:
                    cur.wait_event(ev)
