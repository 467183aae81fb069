"""Host cost of a kernel launch on this machine (issue 20): CuPy's call of a kernel of 21
arguments against cuLaunchKernel with a prebuilt parameter block and against
:class:`simsplit.backends.cuda_c.raw_launch.RawLauncher` (the block repacked every call); event
record and stream wait, memset, fill, and entering a device context (every kernel-set call
does). Tiny grids: the GPU keeps up, the host sets the pace.

    python3 scripts/probe_launch_overhead.py
"""

from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path
from typing import Any, Callable

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from simsplit.backends.cuda_c.raw_launch import RawLauncher  # noqa: E402

SRC = r"""
extern "C" __global__ void k20(const double* x, int n, int r0, const int* nl, int w,
    const int* cnt, double bx, double by, double bz, double ix, double iy, double iz, double a,
    double b, double c, double d, double* f, double* pe, double* vir, const int* flags, int tick)
{ if (n < 0 && threadIdx.x == 0) f[0] = a + b + c + d + bx + by + bz + ix + iy + iz + tick; }
"""
LAUNCHES = 20000


def _args() -> tuple:
    x, nl = cp.zeros(100), cp.zeros(100, np.int32)
    return (x, np.int32(1), np.int32(0), nl, np.int32(4), nl,
            *(np.float64(1.0) for _ in range(10)), x, x, x, nl, np.int32(0))


def _prebuilt(args: tuple) -> tuple[list, Any]:
    vals = [ctypes.c_void_p(a.data.ptr) if isinstance(a, cp.ndarray) else
            ctypes.c_int32(int(a)) if a.dtype == np.int32 else ctypes.c_double(float(a))
            for a in args]
    return vals, (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])


def timed(label: str, run: Callable[[int], None]) -> None:
    run(200)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    run(LAUNCHES)
    t1 = time.perf_counter()
    cp.cuda.Device().synchronize()
    t2 = time.perf_counter()
    print(f"{label:40s} host {1e6 * (t1 - t0) / LAUNCHES:6.2f} us a call, "
          f"with the drain {1e6 * (t2 - t0) / LAUNCHES:6.2f}", flush=True)


def main() -> None:
    fn = cp.RawModule(code=SRC).get_function("k20")
    dev = cp.cuda.Device(0)
    args = _args()
    vals, ptrs = _prebuilt(args)
    launch = cp.cuda.driver.launchKernel
    raw = RawLauncher(cp)
    side = cp.cuda.Stream(non_blocking=True)
    event = cp.cuda.Event(disable_timing=True)

    def cupy_call(m: int) -> None:
        for _ in range(m):
            with dev:
                fn((1,), (32,), args)

    def prebuilt(m: int) -> None:
        params, handle = ctypes.addressof(ptrs), fn.kernel.ptr
        for _ in range(m):
            vals[1].value = 1
            launch(handle, 1, 1, 1, 32, 1, 1, 0, cp.cuda.get_current_stream().ptr, params, 0)

    def raw_launcher(m: int) -> None:
        for _ in range(m):
            with dev:
                raw(("k20", None), fn, 1, 32, args)

    def device_context(m: int) -> None:
        for _ in range(m):
            with dev:
                pass

    def events(m: int) -> None:
        main_stream = cp.cuda.get_current_stream()
        for _ in range(m):
            event.record(main_stream)
            side.wait_event(event)

    def memset(m: int) -> None:
        rt, stream = cp.cuda.runtime, cp.cuda.get_current_stream().ptr
        for _ in range(m):
            rt.memsetAsync(args[3].data.ptr, 0, 400, stream)

    def fill(m: int) -> None:
        for _ in range(m):
            args[3].fill(0)

    timed("CuPy call (in with device)", cupy_call)
    timed("cuLaunchKernel, prebuilt block", prebuilt)
    timed("RawLauncher (in with device)", raw_launcher)
    timed("with device (entered and left)", device_context)
    timed("event record + stream wait", events)
    timed("memsetAsync", memset)
    timed("ndarray.fill(0)", fill)


if __name__ == "__main__":
    main()
