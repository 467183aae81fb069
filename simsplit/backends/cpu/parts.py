"""Threaded CPU kernels as a loop over shares of one serial kernel, and their serial twins.

A kernel is written as ``body(*args, part, parts)``: without threads, it does the ``part``-th
of ``parts`` shares of its rows (or chunks of rows). :func:`over_threads` makes from it two
Numba dispatchers that take ``(*args, parts)``: the threaded kernel, a parallel loop of
``parts`` calls of the body (:func:`share_count`: one share per thread), and its serial twin,
the same calls in order on the calling thread. Shares write disjoint cells, so every count
gives the same bits. (The count is an argument: Numba cannot cache code that asks for its
thread count itself.)

Both call one compiled body. Numba's parallel passes then walk a loop of calls instead of the
body: walking the body had taken two to three times its own compile time (the D3Q19 records'
encode: 33 s threaded, 14 s as body and loop, on two cores), and a process that has built one
of the pair has built most of the other. A parallel loop's body also had Numba's promise that
its arrays do not overlap, which lets LLVM vectorise straight-line code across x without
run-time overlap checks (one argument per population plane, :mod:`.rowgen`); bodies that need it
keep it (``no_alias=True``: :class:`NoAliasCompiler`). Without it the records' encode ran 5x
slower.

``SIMSPLIT_CPU_SERIAL=1`` in the environment makes :func:`serial` hand out the serial twins: the
test suite runs so (tests/conftest.py) unless a test asks for threads.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

import numba
from numba.core.compiler import Compiler

#: environment variable: "1" runs the kernels without threads (:func:`serial`)
SERIAL_ENV = "SIMSPLIT_CPU_SERIAL"

_twins: dict[Any, Any] = {}


class NoAliasCompiler(Compiler):
    """Numba's compiler with the no-alias promise on pointer arguments, the promise Numba gives
    the body of a parallel loop whose arrays it finds unaliased: for kernels whose array
    arguments never overlap where one is written."""

    def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
        flags = flags.copy()
        flags.noalias = True
        super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)


def body_jit(no_alias: bool = False, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)`` for a body of :func:`over_threads` (with
    :class:`NoAliasCompiler` where ``no_alias``)."""
    if no_alias:
        options["pipeline_class"] = NoAliasCompiler
    return numba.njit(cache=True, **options)


def over_threads(body: Any, total: bool = False) -> tuple[Any, Any]:
    """(threaded kernel, serial twin) of the dispatcher ``body(*args, part, parts)``: both
    take ``(*args, parts)``; where ``total``, they return the sum of the shares' results.

    Named after the body less its ``_part`` suffix (the twin with ``_serial``), they are set in
    the body's module, the body too (Numba's cache and :mod:`.jit_cache` go by the module's file
    and globals)."""
    py = body.py_func
    names = list(inspect.signature(py).parameters)
    if names[-2:] != ["part", "parts"]:
        raise ValueError(f"{py.__name__}: the last two parameters must be part, parts")
    args = ", ".join(names[:-2])
    stem = py.__name__.removesuffix("_part")
    call = f"{py.__name__}({args}, part, parts)"
    head, add, tail = ("    total = 0\n", f"total += {call}", "    return total\n") if total \
        else ("", call, "")
    source = "\n".join(
        f"def {stem}{suffix}({args}, parts):\n{head}"
        f"    for part in {loop}(parts):\n"
        f"        {add}\n{tail}"
        for suffix, loop in (("", "numba.prange"), ("_serial", "range")))
    module = sys.modules[py.__module__]
    env = {"numba": numba, py.__name__: body, "__name__": py.__module__}
    exec(compile(source, module.__file__, "exec"), env)  # noqa: S102 - our own source
    threaded = numba.njit(parallel=True, cache=True)(env[stem])
    twin = numba.njit(cache=True)(env[stem + "_serial"])
    for name, kernel in ((py.__name__, body), (stem, threaded), (stem + "_serial", twin)):
        setattr(module, name, kernel)
    _twins[threaded] = twin
    return threaded, twin


def serial(kernel: Any) -> Any:
    """``kernel`` (a threaded kernel of :func:`over_threads`) or, where ``$SIMSPLIT_CPU_SERIAL``
    is "1", its serial twin."""
    return _twins[kernel] if serial_requested() else kernel


def share_count() -> int:
    """Shares for a kernel :func:`serial` handed out: Numba's thread count, 1 for a twin."""
    return 1 if serial_requested() else numba.get_num_threads()


def serial_requested() -> bool:
    """Whether ``$SIMSPLIT_CPU_SERIAL`` asks for the serial twins."""
    return os.environ.get(SERIAL_ENV, "0").strip() == "1"
