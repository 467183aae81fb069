"""Numba's CUDA simulator made faster for the simulator children of the test suite.

The simulator runs each CUDA thread as a Python thread; three of its habits cost more than the
kernels' own arithmetic, and :func:`install` replaces them with code that keeps its rules:

- **The block barrier.** The block manager finds out that every live thread has reached
  ``syncthreads()`` by polling them all in a loop that never sleeps, so it holds the
  interpreter lock about as often as the threads doing the work (the D3Q19 storage tests: 24.6 s
  against 11.1 s without it, 2026-12-07). Here the threads count themselves in and out under one
  condition variable. Same rules: a barrier opens when every thread still running has reached
  it (threads that returned no longer count); a thread that raises aborts the others at their
  next barrier, and the launch raises that thread's exception.
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
             kernelapi: ("swapped_cuda_module",)}
    if not all(hasattr(module, name) for module, names_of in names.items()
               for name in names_of):
        return False
    thread, manager = kernel.BlockThread, kernel.BlockManager
    thread.syncthreads = _syncthreads
    thread.run = _thread_run
    manager.run = _make_block_run(thread)
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


def _open(block: Any) -> None:
    """Release every thread waiting at the barrier (called with the condition held)."""
    block._waiting = 0
    block._generation += 1
    block._barrier.notify_all()


def _thread_run(self: Any) -> None:
    try:
        threading.Thread.run(self)
    except Exception as exc:  # noqa: BLE001 - handed to the launch, as the simulator does
        where = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
        self.exception = (type(exc)(f"{where}: {exc}" if str(exc) else where),
                          sys.exc_info()[2])
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


def _make_block_run(thread_class: type) -> Any:
    def run(self: Any, grid_point: tuple[int, ...], *args: Any) -> None:
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
