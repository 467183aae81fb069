"""GPUs, their links and the communication libraries of this machine; CUDA helpers for transports.

``python -m simsplit devices`` prints :func:`device_report`. The helpers below (streams, events,
pinned buffers, raw async copies) are what the GPU transports share; they import CuPy lazily so
CPU-only runs never load it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from typing import Any, Mapping

import numpy as np

from simsplit.errors import GPU_INSTALL_HINT, BackendUnavailable


# --- CUDA helpers for transports ------------------------------------------------------------------
def cupy_module() -> Any:
    """CuPy, or a clear error: every GPU transport needs it for streams, events and copies."""
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - GPU machines only
        raise BackendUnavailable(
            f"GPU transports need CuPy ({GPU_INSTALL_HINT}): {exc}") from None
    return cupy


def nccl_module() -> Any | None:
    """``cupy.cuda.nccl`` when CuPy can load libnccl, else None (without CuPy's warning)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from cupy.cuda import nccl
    except ImportError:
        return None
    return nccl if getattr(nccl, "available", False) else None


def is_device_array(arr: Any) -> bool:
    return hasattr(arr, "__cuda_array_interface__")


def device_pointer(arr: Any) -> int:
    return int(arr.__cuda_array_interface__["data"][0])


def device_of_array(arr: Any) -> int:
    """The CUDA device that holds ``arr`` (CuPy or Numba device array alike)."""
    dev = getattr(arr, "device", None)
    if dev is not None and hasattr(dev, "id"):
        return int(dev.id)
    cp = cupy_module()
    return int(cp.cuda.runtime.pointerGetAttributes(device_pointer(arr)).device)


def pinned_like(arr: Any) -> np.ndarray:
    """A page-locked host array shaped like ``arr``: async copies and MPI both read it."""
    cp = cupy_module()
    dtype = np.dtype(arr.dtype)
    count = int(np.prod(arr.shape))
    mem = cp.cuda.alloc_pinned_memory(max(1, count * dtype.itemsize))
    return np.frombuffer(mem, dtype, count).reshape(arr.shape)


def copy_async(dst_ptr: int, src_ptr: int, nbytes: int, stream: Any) -> None:
    """Copy ``nbytes`` between any two addresses (UVA infers the direction) on ``stream``."""
    cp = cupy_module()
    cp.cuda.runtime.memcpyAsync(dst_ptr, src_ptr, nbytes, cp.cuda.runtime.memcpyDefault,
                                stream.ptr)


def host_pointer(arr: np.ndarray) -> int:
    return int(arr.ctypes.data)


class DeviceStreams:
    """One non-blocking communication stream per device, and event helpers.

    Non-blocking matters: a stream created plainly would serialise with the legacy default
    stream the kernels run on and so undo any overlap.
    """

    def __init__(self) -> None:
        self.cp = cupy_module()
        self._streams: dict[int, Any] = {}

    def comm(self, device: int) -> Any:
        if device not in self._streams:
            with self.cp.cuda.Device(device):
                self._streams[device] = self.cp.cuda.Stream(non_blocking=True)
        return self._streams[device]

    def current(self, device: int) -> Any:
        """The stream the backend's kernels on ``device`` go to (CuPy's current stream)."""
        return self.cp.cuda.get_current_stream(device)

    def device(self, device: int) -> Any:
        return self.cp.cuda.Device(device)

    def record(self, stream: Any, device: int) -> Any:
        with self.cp.cuda.Device(device):
            ev = self.cp.cuda.Event(block=False, disable_timing=True, interprocess=False)
            ev.record(stream)
        return ev


def pci_bus_id(device: int) -> str | None:
    """The PCI bus id of this process's CUDA device ``device`` (the same physical GPU under any
    ``CUDA_VISIBLE_DEVICES``), or None without CuPy or a usable GPU."""
    try:
        import cupy

        return str(cupy.cuda.runtime.deviceGetPCIBusId(device))
    except Exception:  # no CuPy, no driver or no such device
        return None


def visible_entry(device: int, env: Mapping[str, str] | None = None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` entry (a machine-wide index or a UUID) that this process's
    CUDA device ``device`` is, or None where the variable is unset or lists fewer devices."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" not in env:
        return None
    visible = [v.strip() for v in env["CUDA_VISIBLE_DEVICES"].split(",") if v.strip()]
    return visible[device] if device < len(visible) else None


def gpu_identity(device: int) -> str:
    """What tells the node's physical GPUs apart, for this process's device ``device``: its
    PCI bus id, else the ``CUDA_VISIBLE_DEVICES`` entry it maps to (the index where unset)."""
    bus = pci_bus_id(device)
    if bus is not None:
        return bus
    entry = visible_entry(device)
    return f"visible {entry}" if entry is not None else f"index {device}"


# --- inventory ------------------------------------------------------------------------------------
def _gpus() -> tuple[list[dict[str, Any]], list[list[bool]], str]:
    """(GPU list, peer-access matrix, reason when empty)."""
    try:
        import cupy
    except ImportError:
        return [], [], f"no GPU support here: CuPy is not installed ({GPU_INSTALL_HINT})"
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # no driver or no device: the message says which
        return [], [], f"no usable CUDA GPU: {str(exc).splitlines()[0]}"
    if n == 0:
        return [], [], "no CUDA GPU found"
    rt = cupy.cuda.runtime
    gpus = []
    for d in range(n):
        p = rt.getDeviceProperties(d)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        gpus.append({"id": d, "name": name, "memory_gib": p["totalGlobalMem"] / 2**30,
                     "compute_capability": f"{p['major']}.{p['minor']}",
                     "multiprocessors": p["multiProcessorCount"]})
    peer = [[a == b or bool(rt.deviceCanAccessPeer(a, b)) for b in range(n)] for a in range(n)]
    return gpus, peer, ""


def _nvlink(n: int) -> list[str]:
    try:
        import pynvml
    except ImportError:
        return ["NVLink: unknown (install nvidia-ml-py to read it)"]
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return [f"NVLink: unknown (NVML: {exc})"]
    lines = []
    try:
        for d in range(n):
            h = pynvml.nvmlDeviceGetHandleByIndex(d)
            active = 0
            for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    state = pynvml.nvmlDeviceGetNvLinkState(h, link)
                except pynvml.NVMLError:
                    break
                active += state == pynvml.NVML_FEATURE_ENABLED
            lines.append(f"NVLink: GPU {d}: {active} active links")
        if n > 1:
            row = []
            for a in range(n):
                ha = pynvml.nvmlDeviceGetHandleByIndex(a)
                for b in range(a + 1, n):
                    hb = pynvml.nvmlDeviceGetHandleByIndex(b)
                    level = pynvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb)
                    row.append(f"{a}-{b}:{_TOPO.get(level, level)}")
            lines.append("topology: " + " ".join(row))
    except Exception as exc:
        lines.append(f"NVLink: partly unknown (NVML: {exc})")
    finally:
        pynvml.nvmlShutdown()
    return lines


_TOPO = {0: "same-board", 10: "single-switch", 20: "multi-switch", 30: "host-bridge",
         40: "numa-node", 50: "system"}


def _nccl_version() -> str:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "unavailable (no CuPy)"
    nccl = nccl_module()
    if nccl is None:
        return "unavailable (CuPy finds no libnccl; pip install nvidia-nccl-cu13)"
    v = int(nccl.get_version())
    # NCCL >= 2.9 encodes major*10000 + minor*100 + patch, older major*1000 + minor*100 + patch
    major, rest = (v // 10000, v % 10000) if v >= 20900 else (v // 1000, v % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _libmpi_path() -> str | None:
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1]
                if "/libmpi" in path and ".so" in path:
                    return path
    except OSError:
        pass
    return None


def mpi_cuda_awareness() -> str:
    """'yes', 'no' or 'unknown' (with how it was decided) for the loaded MPI library."""
    path = _libmpi_path()
    lib = None
    if path:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            lib = None
    if lib is not None and hasattr(lib, "MPIX_Query_cuda_support"):  # Open MPI
        return "yes" if lib.MPIX_Query_cuda_support() else "no (MPIX_Query_cuda_support)"
    if lib is not None and hasattr(lib, "MPIX_GPU_query_support"):  # MPICH >= 4
        flag = ctypes.c_int(0)
        mpix_gpu_support_cuda = 1
        if lib.MPIX_GPU_query_support(mpix_gpu_support_cuda, ctypes.byref(flag)) == 0:
            return "yes" if flag.value else "no (MPIX_GPU_query_support)"
    if shutil.which("ompi_info"):
        try:
            out = subprocess.run(["ompi_info", "--parsable", "--all"], capture_output=True,
                                 text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        if "mpi_built_with_cuda_support:value:true" in out:
            return "yes (ompi_info)"
        if "mpi_built_with_cuda_support:value:false" in out:
            return "no (ompi_info)"
    return "unknown (treat as no)"


def _mpi_lines() -> list[str]:
    try:
        from mpi4py import MPI
    except ImportError:
        return ["MPI: unavailable (pip install mpi4py mpich)"]
    version = MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
    return [f"MPI: {version} (mpi4py, MPI standard {'.'.join(map(str, MPI.Get_version()))})",
            f"MPI CUDA-aware: {mpi_cuda_awareness()}"]


def device_report() -> str:
    """Human-readable inventory: GPUs, peer access, NVLink, NCCL, MPI."""
    gpus, peer, reason = _gpus()
    lines = []
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        lines.append("Numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1): --backend numba-cuda "
                     "runs the GPU kernels on the host, one thread at a time")
    if not gpus:
        lines.append(f"GPUs: none ({reason}); runs use the cpu backend")
    else:
        lines.append(f"GPUs: {len(gpus)}")
        for g in gpus:
            lines.append(f"  [{g['id']}] {g['name']}, {g['memory_gib']:.1f} GiB, compute "
                         f"capability {g['compute_capability']}, {g['multiprocessors']} SMs")
        if len(gpus) > 1:
            lines.append("peer access (row can read column):")
            lines.append("      " + " ".join(f"{b:>3}" for b in range(len(gpus))))
            for a, row in enumerate(peer):
                lines.append(f"  {a:>3} " + " ".join(f"{'yes' if x else 'no':>3}" for x in row))
        lines += _nvlink(len(gpus))
    lines.append(f"NCCL: {_nccl_version()}")
    lines += _mpi_lines()
    return "\n".join(lines)
