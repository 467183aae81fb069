"""Whether a CPU kernel is about to be compiled, and a hook that lets the command line say so.

The CPU kernels are ``@njit(cache=True)``: the first run on a machine compiles them (seconds
to tens of seconds with nothing else happening), later runs load them from Numba's on-disk
cache. A launcher calls :func:`announce_compile` before calling its kernel; when a listener is
set (:func:`on_first_compile`) and Numba has neither an overload for these argument types in
this process nor an entry in its cache, the listener is called once, before the compile.
"""

from __future__ import annotations

from typing import Any, Callable

_listener: Callable[[], None] | None = None


def on_first_compile(listener: Callable[[], None] | None) -> None:
    """Call ``listener()`` once, before the first kernel compile of this process (None: off)."""
    global _listener
    _listener = listener


def announce_compile(kernel: Any, args: tuple[Any, ...]) -> None:
    """Before ``kernel(*args)``: tell the listener when that call is going to compile."""
    global _listener
    listener = _listener
    if listener is None or kernel.overloads:  # compiled or loaded already in this process
        return
    if will_compile(kernel, args):
        _listener = None
        listener()


def will_compile(kernel: Any, args: tuple[Any, ...]) -> bool:
    """True when calling the Numba dispatcher ``kernel`` with ``args`` compiles it: no overload
    for these argument types in this process and none in Numba's cache.

    Asks the cache the way the dispatcher does (its index key for the signature), through
    Numba internals; where they have changed, says False: a missing notice costs less than a
    notice on every run.
    """
    try:
        signature = tuple(kernel.typeof_pyval(a) for a in args)
        if signature in kernel.overloads:
            return False
        cache = kernel._cache
        if not hasattr(cache, "_cache_file"):  # cache=False: every process compiles
            return True
        key = cache._index_key(signature, kernel.targetctx.codegen())
        return key not in cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - an internal API moved: stay quiet rather than fail
        return False
