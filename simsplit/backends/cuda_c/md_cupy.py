"""The CuPy + NVRTC flavour of the GPU MD kernel set: ``kernels/md_lj.cu`` compiled once per
device and launched on CuPy arrays, with the streams, pinned staging, peer copies and CUDA IPC
of :class:`~simsplit.backends.cuda_c.md.DeviceMDKernels`' backend hooks. CuPy is imported
only when a kernel set is made."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np

from simsplit.backends.cuda_c import source
from simsplit.backends.cuda_c.md import DeviceMDKernels
from simsplit.backends.cuda_c.md_names import KERNEL_FILE, kernel_name, name_expressions
from simsplit.backends.cuda_c.raw_launch import RawLauncher


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
        self._raw_launch = RawLauncher(cupy)
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
        #: events recorded and waited for at once (a stream wait takes the record it sees when
        #: queued, so the next record may reuse them), and the download events the host has
        #: seen complete: a step's copies create no events
        self._handover: dict[str, Any] = {}
        self._downloaded: list[Any] = []
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

    def _handover_event(self, which: str) -> Any:
        """A reused event that is recorded and at once waited for (``which`` names its use)."""
        event = self._handover.get(which)
        if event is None:
            event = self._handover[which] = self._cp.cuda.Event(disable_timing=True)
        return event

    def _after_main(self, copies: Any) -> None:
        """Make ``copies`` wait for the work queued so far on the main stream."""
        ready = self._handover_event("ready")
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
            done = self._downloaded.pop() if self._downloaded else \
                self._cp.cuda.Event(block=False, disable_timing=True)
            done.record(copies)
        return [done, out[:m]]

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
            landed = self._handover_event("landed")
            landed.record(copies)
            main.wait_event(landed)
        self.scatter_rows(buf, idx, dst)
        with self._dev:
            # re-recorded: the copy stream's wait for its last record is already queued
            if last is None:
                last = self._scattered[buf.data.ptr] = self._cp.cuda.Event(disable_timing=True)
            last.record(main)

    def wait_download(self, handle: Any) -> np.ndarray:
        done = handle[0]
        if done is not None:
            if not done.done:  # counted only where the host waits
                done.synchronize()
                self.host_waits += 1
            handle[0] = None  # seen complete: the next download may record it again
            self._downloaded.append(done)
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
        # a few microseconds of Python per launch matter at 64k atoms (~0.1 ms per step) and
        # in a rank slab's rebuild: the kernel lookup by (name, dtype) is cached and the
        # launch goes through the driver with a reused parameter block (raw_launch)
        key = (name, dtype)
        fn = self._by_key.get(key)
        if fn is None:
            fn = self._by_key[key] = self._kernels[kernel_name(name, dtype)]
        with self._dev:
            self._raw_launch(key, fn, (threads + self.block - 1) // self.block, self.block,
                             args)
