"""CUDA errors with context: which kernel, subdomain, device and step, and how to dig deeper.

Kernel launchers call :func:`guarded_launch`, which records the launch (kernel, device, slab,
step) in :data:`TRACKER` and turns a CUDA failure into a :class:`CudaKernelError`. Errors raised
later, at some synchronisation point (CUDA reports most kernel faults asynchronously), are
wrapped by :func:`as_cuda_error` with the last launch recorded. ``run.debug: true`` synchronises
after every launch so the fault is pinned on the kernel that caused it. The command line reports
a :class:`CudaKernelError` as one line and exit code :data:`EXIT_CUDA`.

``SIMSPLIT_TEST_BAD_LAUNCH=KERNEL:STEP`` makes the CUDA C backend launch the kernel whose name
contains ``KERNEL`` with an invalid address at step ``STEP``, to see the report on a real GPU.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

EXIT_CUDA = 4
BAD_LAUNCH_ENV = "SIMSPLIT_TEST_BAD_LAUNCH"

#: message fragments -> short kind, checked in order
_KINDS = (
    (re.compile(r"out of memory|OutOfMemory|CUDA_ERROR_OUT_OF_MEMORY|MemoryAllocation", re.I),
     "out of memory"),
    (re.compile(r"illegal (memory )?access|IllegalAddress|ILLEGAL_ADDRESS|misaligned", re.I),
     "illegal address"),
    (re.compile(r"launch fail|LaunchFailure|LAUNCH_FAILED|unspecified launch", re.I),
     "launch failure"),
    (re.compile(r"too many resources|LaunchOutOfResources|OUT_OF_RESOURCES", re.I),
     "launch out of resources"),
    (re.compile(r"nccl", re.I), "NCCL failure"),
)
_CUDA_TEXT = re.compile(r"cudaError|CUDA_ERROR_|CUDA error|NCCL|out of memory", re.I)


class CudaKernelError(RuntimeError):
    """A CUDA failure attributed to a kernel launch or a halo transfer (exit code 4)."""

    def __init__(self, kind: str, cause: str, *, kernel: str | None, slab: int | None,
                 device: int | None, step: int | None, asynchronous: bool = False,
                 device_name: str | None = None, argv: Sequence[str] | None = None) -> None:
        self.kind, self.cause, self.kernel, self.slab = kind, cause, kernel, slab
        self.device, self.step, self.asynchronous = device, step, asynchronous
        self.device_name = device_name
        super().__init__(format_cuda_error(self, argv))


def _where(exc: CudaKernelError) -> str:
    kernel = exc.kernel or "an unknown kernel"
    slab = "subdomain ?" if exc.slab is None else f"subdomain {exc.slab}"
    dev = "GPU ?" if exc.device is None else f"GPU {exc.device}"
    if exc.device_name:
        dev += f" ({exc.device_name})"
    step = "step ?" if exc.step is None else f"step {exc.step}"
    verb = "after" if exc.asynchronous else "in"
    return f"{verb} {kernel} on {slab}, {dev}, {step}"


#: arguments of the running ``simsplit`` command (set by the command line; else sys.argv)
COMMAND_ARGS: list[str] | None = None


def sanitizer_command(argv: Sequence[str] | None = None) -> str:
    """The ``compute-sanitizer`` command line that reruns this very command."""
    if argv is None:
        argv = COMMAND_ARGS if COMMAND_ARGS is not None else sys.argv[1:]
    args = list(argv)
    if not args:
        args = ["run", "CASE"]
    return "compute-sanitizer --tool memcheck python -m simsplit " + shlex.join(args)


def format_cuda_error(exc: CudaKernelError, argv: Sequence[str] | None = None) -> str:
    """One line: what failed where, the CUDA message, and how to find the culprit."""
    cause = " ".join(exc.cause.split())  # CUDA messages may span lines: keep one
    late = (" (reported late: CUDA errors surface at the next synchronisation; run.debug: true "
            "pins them on the kernel)" if exc.asynchronous else "")
    return (f"CUDA {exc.kind} {_where(exc)}: {cause}{late}; to locate it rerun with "
            f"CUDA_LAUNCH_BLOCKING=1 (and --set run.debug=true) or under "
            f"'{sanitizer_command(argv)}'")


def classify(exc: BaseException) -> str | None:
    """Kind of CUDA failure ``exc`` is ('illegal address', ...), or None if it is none."""
    mod = type(exc).__module__ or ""
    text = f"{type(exc).__name__}: {exc}"
    is_cuda = (mod.startswith(("cupy", "cupy_backends", "numba.cuda", "cuda."))
               or bool(_CUDA_TEXT.search(text)))
    if not is_cuda or isinstance(exc, CudaKernelError):
        return None
    for pattern, kind in _KINDS:
        if pattern.search(text):
            return kind
    return "error"


@dataclass
class LaunchTracker:
    """What the process is doing on the GPU: the step, the last launch, slabs by array address."""

    step: int | None = None
    kernel: str | None = None
    device: int | None = None
    arrays: Sequence[Any] = ()
    debug: bool = False
    slabs_by_address: dict[int, int] = field(default_factory=dict)
    device_names: dict[int, str] = field(default_factory=dict)

    def register_slab(self, slab: int, arrays: Sequence[Any]) -> None:
        """Remember that these device arrays belong to ``slab`` (looked up at launch)."""
        for arr in arrays:
            addr = array_address(arr)
            if addr:
                self.slabs_by_address[addr] = slab

    def slab_of(self, arrays: Sequence[Any]) -> int | None:
        for arr in arrays:
            slab = self.slabs_by_address.get(array_address(arr))
            if slab is not None:
                return slab
        return None

    def reset(self) -> None:
        self.step = self.kernel = self.device = None
        self.arrays = ()
        self.debug = False
        self.slabs_by_address.clear()


def array_address(arr: Any) -> int:
    """Device (or host) address of an array's data; 0 when it has none."""
    iface = getattr(arr, "__cuda_array_interface__", None) or getattr(
        arr, "__array_interface__", None)
    try:
        return int(iface["data"][0]) if iface else 0
    except (TypeError, KeyError, IndexError):
        return 0


TRACKER = LaunchTracker()


def guarded_launch(kernel: str, device: int, arrays: Sequence[Any], launch: Callable[[], Any],
                   synchronize: Callable[[], Any] | None = None) -> None:
    """Run ``launch()`` (one kernel launch), recording it; CUDA failures gain their context.

    ``arrays`` are the launch's array arguments, used to find the subdomain. With
    ``TRACKER.debug`` the device is synchronised afterwards, so asynchronous faults are caught
    here rather than at some later call.
    """
    t = TRACKER
    t.kernel, t.device, t.arrays = kernel, device, arrays  # the slab is looked up on failure
    try:
        launch()
        if t.debug and synchronize is not None:
            synchronize()
    except Exception as exc:
        kind = classify(exc)
        if kind is None:
            raise
        raise CudaKernelError(kind, f"{type(exc).__name__}: {exc}", kernel=kernel,
                              slab=t.slab_of(arrays), device=device, step=t.step,
                              device_name=t.device_names.get(device)) from exc


def as_cuda_error(exc: BaseException, where: str | None = None) -> CudaKernelError | None:
    """``exc`` as a :class:`CudaKernelError` naming the last recorded launch, or None.

    For errors raised outside :func:`guarded_launch`: a fault reported at a later
    synchronisation, an allocation, a copy or a transport (``where`` names that call).
    """
    if isinstance(exc, CudaKernelError):
        return exc
    kind = classify(exc)
    if kind is None:
        return None
    t = TRACKER
    kernel = t.kernel
    if where:
        kernel = f"{where} (last kernel: {kernel})" if kernel else where
    name = t.device_names.get(t.device) if t.device is not None else None
    return CudaKernelError(kind, f"{type(exc).__name__}: {exc}", kernel=kernel,
                           slab=t.slab_of(t.arrays), device=t.device, step=t.step,
                           asynchronous=True, device_name=name)


def bad_launch_target(env: Mapping[str, str] | None = None) -> tuple[str, int] | None:
    """``SIMSPLIT_TEST_BAD_LAUNCH=KERNEL:STEP`` -> (kernel substring, step), else None."""
    spec = (os.environ if env is None else env).get(BAD_LAUNCH_ENV, "").strip()
    if not spec:
        return None
    name, _, step = spec.rpartition(":")
    try:
        return (name or "stream_collide"), int(step)
    except ValueError:
        raise ValueError(f"{BAD_LAUNCH_ENV}={spec!r}: expected KERNEL:STEP, "
                         "e.g. stream_collide:10") from None


def wants_bad_launch(kernel: str, target: tuple[str, int] | None) -> bool:
    """True when the test mode asks to break this launch of ``kernel`` (at the current step)."""
    return target is not None and TRACKER.step == target[1] and target[0] in kernel


# --- debug mode: halos checked after each exchange ---------------------------------------------
class HaloCheck:
    """Wraps a transport's exchange so every received halo is checked for NaN/Inf (run.debug).

    Raises :class:`simsplit.fluid.solver.DivergenceError` naming the step, the receiving
    subdomain and face, before the bad values spread into the slab.
    """

    def __init__(self, transport: Any, finite: Callable[[Any, Any], bool]) -> None:
        self.transport, self._finite = transport, finite
        self._pending: list[Mapping[Any, Any]] = []
        if hasattr(transport, "start") and hasattr(transport, "finish"):
            start, finish = transport.start, transport.finish

            def start_checked(send: Mapping[Any, Any], recv: Mapping[Any, Any]) -> Any:
                self._pending.append(recv)
                return start(send, recv)

            def finish_checked(handle: Any) -> None:
                finish(handle)
                self.check(self._pending.pop(0) if self._pending else {})

            transport.start, transport.finish = start_checked, finish_checked
        exchange = transport.exchange

        def exchange_checked(send: Mapping[Any, Any], recv: Mapping[Any, Any]) -> None:
            exchange(send, recv)
            self.check(recv)

        # a split transport's exchange calls start/finish (checked there) through the class
        if not hasattr(transport, "finish"):
            transport.exchange = exchange_checked

    def check(self, recv: Mapping[Any, Any]) -> None:
        for key, buf in recv.items():
            if not self._finite(key, buf):
                from simsplit.errors import DivergenceError

                slab, face = key if isinstance(key, tuple) else (key, None)
                step = TRACKER.step if TRACKER.step is not None else -1
                raise DivergenceError(step, int(slab), f"non-finite value in the halo received "
                                      f"by face {face} (run.debug halo check)")


def attach_error_context(sim: Any) -> None:
    """Prepare a Simulation's launches for error reports, and ``run.debug`` if it is on.

    Registers each slab's arrays (so a failing launch names its subdomain) and follows the step
    the solver is computing. Debug mode, or the bad-launch test mode, turns CUDA graphs off: a
    replayed graph runs many steps without Python seeing them, and cannot synchronise inside.
    """
    t = TRACKER
    t.reset()
    t.debug = bool(sim.case["run"].get("debug", False))
    solver = sim.solver
    for k, blk in getattr(solver, "blocks", {}).items():
        arrays = [getattr(blk, a, None) for a in ("f_src", "f_dst", "rho", "ux", "uy")]
        arrays += list(getattr(blk, "u", None) or ())
        t.register_slab(k, [a for a in arrays if a is not None])
    ctx = sim.context
    check_fault = ctx.check_fault

    def follow(step: int) -> None:  # the solver calls this before each directly run step
        t.step = step
        check_fault(step)

    ctx.check_fault = follow
    if not (t.debug or bad_launch_target() is not None):
        return
    for blk in getattr(solver, "blocks", {}).values():
        blk.backend.has_graphs = False  # instance attribute: this run's backends only
    transport = getattr(solver, "transport", None)
    blocks = getattr(solver, "blocks", None)
    if t.debug and transport is not None and blocks:
        HaloCheck(transport, lambda key, buf: bool(blocks[key[0]].backend.all_finite(buf)))
