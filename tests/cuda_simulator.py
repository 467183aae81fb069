"""Numba's CUDA simulator made faster for the simulator children of the test suite.

The simulator runs each CUDA thread as a Python thread; four of its habits cost more than the
kernels' own arithmetic, and :func:`install` replaces them with code that keeps its rules:

- **Threads that never wait for each other.** A kernel that mentions no barrier (in its code,
  its nested functions or the device functions it names: :func:`waits_for_others`) has each
  thread's function run to its end in turn on the launching thread, which carries that CUDA
  thread's indices meanwhile; no Python thread is started. CUDA promises no order between such
  threads, and the children compare every result with the CPU's bits whatever the order.
- **The block barrier.** The block manager finds out that every live thread has reached
  ``syncthreads()`` by polling them all in a loop that never sleeps, so it holds the
  interpreter lock about as often as the threads doing the work (the D3Q19 storage tests: 24.6 s
  against 11.1 s without it, 2026-12-07). Here the threads count themselves in and out under one
  condition variable (kernels with a barrier keep a Python thread per CUDA thread). Same rules:
  a barrier opens when every thread still running has reached it (threads that returned no
  longer count); a thread that raises aborts the others at their next barrier, and the launch
  raises that thread's exception.
- **Device-function calls.** Each call swapped the ``cuda`` global of the function's module for
  the launch's fake module and back, under two locks (an MD test: 12 of its threads' 17 s).
  Here a module is swapped at its first call in a launch and put back when the launch ends.
- **Array arguments.** Kernels got each array wrapped twice (for record-array semantics), every
  index through two Python calls; numeric arrays now come as the NumPy array the simulator
  copied them into, which indexes, slices and takes atomics alike.

:func:`install` patches only the simulator it knows (the names below); elsewhere the simulator
stays as it is, which gives the same results, slower.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np


def install() -> bool:
    """Use the code below in ``numba.cuda.simulator`` (imported under NUMBA_ENABLE_CUDASIM);
    True when installed, False when the simulator is not shaped as expected (then unchanged)."""
    try:
        from numba.cuda.simulator import kernel, kernelapi
    except ImportError:
        return False
    names = {kernel: ("BlockThread", "BlockManager", "FakeCUDAKernel", "FakeWithinKernelCUDAArray",
                      "_push_kernel_context", "_get_kernel_context"),
             kernelapi: ("swapped_cuda_module", "Dim3")}
    if not all(hasattr(module, name) for module, names_of in names.items()
               for name in names_of):
        return False
    thread, manager = kernel.BlockThread, kernel.BlockManager
    thread.syncthreads = _syncthreads
    thread.run = _thread_run
    manager.run = _make_block_run(thread, kernel.FakeCUDAKernel, kernelapi.Dim3)
    _hold_swaps_per_launch(kernel, kernelapi.swapped_cuda_module)
    wrap = kernel.FakeWithinKernelCUDAArray
    kernel.FakeWithinKernelCUDAArray = lambda fake: (fake._ary if fake._ary.dtype.names is None
                                                     else wrap(fake))
    return True


def _hold_swaps_per_launch(kernel: Any, swapped_cuda_module: Any) -> None:
    """Device functions called in a launch: their module's ``cuda`` swapped at the first call
    and put back after the launch (the simulator's reference counts do the swapping)."""
    held: dict[int, Any] = {}
    lock = threading.Lock()
    push, plain_call = kernel._push_kernel_context, kernel.FakeCUDAKernel.__call__

    @contextmanager
    def launch(module: Any) -> Iterator[None]:
        with push(module):
            try:
                yield
            finally:
                with lock:
                    swaps = list(held.values())
                    held.clear()
                for swap in reversed(swaps):
                    swap.__exit__(None, None, None)

    def call(self: Any, *args: Any) -> Any:
        context = kernel._get_kernel_context()
        if context is None:  # a launch, or a device function called outside one
            return plain_call(self, *args)
        key = id(self.fn.__globals__)
        if key not in held:
            with lock:
                if key not in held:
                    swap = swapped_cuda_module(self.fn, context)
                    swap.__enter__()
                    held[key] = swap
        return self.fn(*args)

    kernel._push_kernel_context = launch
    kernel.FakeCUDAKernel.__call__ = call


def _syncthreads(self: Any) -> None:
    block = self._manager
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads call")
    with block._barrier:
        generation = block._generation
        block._waiting += 1
        if block._waiting == block._alive:
            _open(block)
        else:
            while block._generation == generation and not self.abort:
                block._barrier.wait()
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads clear")


def _named(exc: Exception, thread_idx: Any, block_idx: Any) -> Exception:
    """``exc`` again, its message led by the CUDA thread and block it came from."""
    where = f"tid={list(thread_idx)} ctaid={list(block_idx)}"
    return type(exc)(f"{where}: {exc}" if str(exc) else where)


def _open(block: Any) -> None:
    """Release every thread waiting at the barrier (called with the condition held)."""
    block._waiting = 0
    block._generation += 1
    block._barrier.notify_all()


def _thread_run(self: Any) -> None:
    try:
        threading.Thread.run(self)
    except Exception as exc:  # noqa: BLE001 - handed to the launch, as the simulator does
        self.exception = (_named(exc, self.threadIdx, self.blockIdx), sys.exc_info()[2])
    finally:
        block = self._manager
        with block._barrier:
            block._alive -= 1
            if self.exception is not None and block._first_error is None:
                block._first_error = self.exception
                for other in block._threads:
                    other.abort = True
            if block._first_error is not None or (block._alive
                                                  and block._waiting == block._alive):
                _open(block)
            if not block._alive:
                block._done.set()


#: what a kernel calls to wait for the other threads of its block (or its grid group)
BARRIERS = frozenset({"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or",
                      "syncwarp", "this_grid", "sync"})


def waits_for_others(fn: Any, device_function: type, seen: set[int] | None = None) -> bool:
    """Whether the kernel ``fn`` (a Python function), or a device function it names, mentions a
    barrier: its code's names, those of the functions nested in it, then the device functions
    (``device_function`` objects) among its globals and closure cells."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    codes, names = [fn.__code__], set()
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    if names & BARRIERS:
        return True
    called = [fn.__globals__.get(name) for name in names]
    called += [cell.cell_contents for cell in fn.__closure__ or ()]
    return any(waits_for_others(f.fn, device_function, seen) for f in called
               if isinstance(f, device_function))


def _make_block_run(thread_class: type, device_function: type, dim3: type) -> Any:
    barriers: dict[Any, bool] = {}

    def run(self: Any, grid_point: tuple[int, ...], *args: Any) -> None:
        if self._f not in barriers:
            barriers[self._f] = waits_for_others(self._f, device_function)
        if not (barriers[self._f] or self._debug):
            _run_in_turn(self, dim3, grid_point, args)
            return

        def target() -> None:
            self._f(*args)

        self._barrier = threading.Condition()
        self._waiting = self._generation = 0
        self._first_error = None  # what the launch raises: not an abort it caused elsewhere
        self._threads = [thread_class(target, self, grid_point, block_point, self._debug)
                         for block_point in np.ndindex(*self._block_dim)]
        self._alive = len(self._threads)
        self._done = threading.Event()
        for t in self._threads:
            t.start()
        self._done.wait()
        for t in self._threads:
            t.join()
        if self._first_error is not None:
            raise self._first_error[0].with_traceback(self._first_error[1])

    return run


def _run_in_turn(block: Any, dim3: type, grid_point: tuple[int, ...], args: tuple) -> None:
    """A block whose kernel never waits for its other threads: each thread's function runs to
    its end in turn, on this thread, which carries the CUDA thread's indices meanwhile."""
    here = threading.current_thread()
    saved = {k: here.__dict__[k] for k in ("blockIdx", "threadIdx", "thread_id")
             if k in here.__dict__}
    nx, ny, _ = dim3(*block._block_dim)
    here.blockIdx = dim3(*grid_point)
    try:
        for point in np.ndindex(*block._block_dim):
            here.threadIdx = index = dim3(*point)
            here.thread_id = index.x + nx * (index.y + ny * index.z)
            try:
                block._f(*args)
            except Exception as exc:
                raise _named(exc, index, here.blockIdx).with_traceback(
                    sys.exc_info()[2]) from None
    finally:
        for k in ("blockIdx", "threadIdx", "thread_id"):
            here.__dict__.pop(k, None)
        here.__dict__.update(saved)
