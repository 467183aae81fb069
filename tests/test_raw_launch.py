"""The driver launch path of the CUDA C kernel sets (simsplit.backends.cuda_c.raw_launch): the
bytes each parameter pointer hands the driver, against a stand-in CuPy (no GPU needed)."""

from __future__ import annotations

import ctypes
import types

import numpy as np

from simsplit.backends.cuda_c import raw_launch


class _Array:
    """A stand-in CuPy array: its data pointer only."""

    def __init__(self, ptr: int) -> None:
        self.data = types.SimpleNamespace(ptr=ptr)


def _fake_cupy(launched: list) -> types.SimpleNamespace:
    def launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        launched.append((f, (gx, gy, gz), (bx, by, bz), shared, stream, params, extra))

    stream = types.SimpleNamespace(ptr=77)
    cuda = types.SimpleNamespace(driver=types.SimpleNamespace(launchKernel=launch_kernel),
                                 get_current_stream=lambda: stream)
    return types.SimpleNamespace(ndarray=_Array, cuda=cuda)


def _param(params: int, j: int, ctype: type) -> object:
    """Parameter ``j`` of a launch as the driver reads it: through pointer j of the block."""
    ptr = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[j]
    return ctype.from_address(ptr).value


class _Function:
    """A stand-in RawKernel: its driver handle is on the compiled Function (``.kernel``), as
    in CuPy 14, not on the RawKernel itself."""

    def __init__(self) -> None:
        self.kernel = types.SimpleNamespace(ptr=4242)
        self.calls: list = []

    def __call__(self, grid, block, args) -> None:
        self.calls.append((grid, block, args))


def test_parameters_reach_the_driver_with_their_c_types_and_alignment() -> None:
    launched: list = []
    launcher = raw_launch.RawLauncher(_fake_cupy(launched))
    launcher.enabled = True
    fn = _Function()
    # an int before a pointer and a double: both need padding to 8 bytes under C alignment
    args = (_Array(0x7F00_0000_1000), np.int32(-5), _Array(0x7F00_0000_2008), np.float64(2.5),
            np.int32(7), np.float64(-1e-300), np.uint64(2 ** 63 + 3), np.float32(0.1),
            np.int64(-(2 ** 40)))
    launcher(("k", None), fn, 12, 128, args)
    f, grid, block, shared, stream, params, extra = launched[-1]
    assert (f, grid, block, shared, stream, extra) == (4242, (12, 1, 1), (128, 1, 1), 0, 77, 0)
    ctypes_of = (ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_double,
                 ctypes.c_int32, ctypes.c_double, ctypes.c_uint64, ctypes.c_float,
                 ctypes.c_int64)
    got = [_param(params, j, t) for j, t in enumerate(ctypes_of)]
    assert got[:7] == [0x7F00_0000_1000, -5, 0x7F00_0000_2008, 2.5, 7, -1e-300, 2 ** 63 + 3]
    assert got[7] == float(np.float32(0.1)) and got[8] == -(2 ** 40)
    # C layout: every parameter at an offset aligned to its size
    first = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[0]
    for j, t in enumerate(ctypes_of):
        offset = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[j] - first
        assert offset % ctypes.sizeof(t) == 0
    # the block is reused: new values land in the same place
    launcher(("k", None), fn, 1, 32, (_Array(16), np.int32(9), *args[2:]))
    assert launched[-1][5] == params
    assert _param(params, 0, ctypes.c_void_p) == 16 and _param(params, 1, ctypes.c_int32) == 9
    assert not fn.calls and launcher.fallbacks == 0


def test_other_argument_types_take_cupys_call() -> None:
    launched: list = []
    launcher = raw_launch.RawLauncher(_fake_cupy(launched))
    launcher.enabled = True
    fn = _Function()
    launcher(("k", None), fn, 3, 64, (_Array(8), np.int32(1)))
    # a Python int where the block holds an int32: CuPy converts it (as before)
    launcher(("k", None), fn, 3, 64, (_Array(8), 1))
    launcher(("k", None), fn, 3, 64, (_Array(8), np.bool_(True)))
    assert len(launched) == 1 and launcher.fallbacks == 2
    assert [(c[0], c[1]) for c in fn.calls] == [((3,), (64,))] * 2
    assert [c[2][1] for c in fn.calls] == [1, np.bool_(True)]


def test_switched_off_by_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(raw_launch.RAW_LAUNCH_ENV, "0")
    launched: list = []
    launcher = raw_launch.RawLauncher(_fake_cupy(launched))
    fn = _Function()
    launcher(("k", None), fn, 2, 32, (_Array(8), np.int32(1)))
    assert not launched and [(c[0], c[1]) for c in fn.calls] == [((2,), (32,))]
