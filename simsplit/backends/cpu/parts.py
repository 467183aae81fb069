"""Threaded CPU kernels as a loop over shares of one serial body, and their serial twins.

A kernel is written as ``body(*args, part, parts)``: without threads, it does the ``part``-th
of ``parts`` shares of its rows. :func:`over_threads` makes from it two Numba dispatchers that
take ``(*args, parts)``: the threaded kernel, a parallel loop of ``parts`` calls of the body
(one share per thread), and its serial twin, the same calls in order on the calling thread.
Shares write disjoint cells, so every count gives the same bits. (The count is an argument:
Numba cannot cache code that asks for its thread count itself.)

Both call one compiled body, so Numba's parallel passes walk a loop of calls, not the body.
That pays where those passes cost more than the body's own compile: the D3Q19 records' encode
(:mod:`.neq_lines`) compiled in 14 s as body and loop against 33 s as one parallel kernel, at
the same speed. It does not pay for the row kernels: their parallel build took no longer than
the body, and the loop added 2-3 s each (a cold ``simsplit warmup --precision float64`` took
107-115 s with them built so against 94-102 s, 2026-12-07, BENCHMARKS.md).

A parallel loop's body gets Numba's promise that its arrays do not overlap, which lets LLVM
vectorise straight-line code across x without run-time overlap checks (one argument per
population plane); a body keeps it when compiled with :class:`NoAliasCompiler`
(``numba.njit(pipeline_class=NoAliasCompiler)``): without it the records' encode ran 5x slower.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numba
from numba.core.compiler import Compiler


class NoAliasCompiler(Compiler):
    """Numba's compiler with the no-alias promise on pointer arguments, the promise Numba gives
    the body of a parallel loop whose arrays it finds unaliased: for kernels whose array
    arguments never overlap where one is written."""

    def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
        flags = flags.copy()
        flags.noalias = True
        super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)


def over_threads(body: Any) -> tuple[Any, Any]:
    """(threaded kernel, serial twin) of the dispatcher ``body(*args, part, parts)``, both
    taking ``(*args, parts)``.

    Named after the body less its ``_part`` suffix (the twin with ``_serial``), they are set in
    the body's module, the body too (Numba's cache and :mod:`.jit_cache` go by the module's file
    and globals)."""
    py = body.py_func
    names = list(inspect.signature(py).parameters)
    if names[-2:] != ["part", "parts"]:
        raise ValueError(f"{py.__name__}: the last two parameters must be part, parts")
    args = ", ".join(names[:-2])
    stem = py.__name__.removesuffix("_part")
    source = "\n".join(
        f"def {stem}{suffix}({args}, parts):\n"
        f"    for part in {loop}(parts):\n"
        f"        {py.__name__}({args}, part, parts)\n"
        for suffix, loop in (("", "numba.prange"), ("_serial", "range")))
    module = sys.modules[py.__module__]
    env = {"numba": numba, py.__name__: body, "__name__": py.__module__}
    exec(compile(source, module.__file__, "exec"), env)  # noqa: S102 - our own source
    threaded = numba.njit(parallel=True, cache=True)(env[stem])
    twin = numba.njit(cache=True)(env[stem + "_serial"])
    for name, kernel in ((py.__name__, body), (stem, threaded), (stem + "_serial", twin)):
        setattr(module, name, kernel)
    return threaded, twin
