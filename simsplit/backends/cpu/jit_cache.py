"""Whether a CPU kernel is about to be compiled, and a hook that lets the command line say so.

The CPU kernels are ``@njit(cache=True)``: the first run on a machine compiles them (seconds
to tens of seconds with nothing else happening), later runs load them from Numba's on-disk
cache. A launcher calls :func:`announce_compile` before calling its kernel; when a listener is
set (:func:`on_first_compile`) and Numba has neither an overload for these argument types in
this process nor an entry in its cache, the listener is called once, before the compile.
"""

from __future__ import annotations

from dataclasses import dataclass
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


#: the modules that hold the CPU kernels (Numba dispatchers), fluid and MD
KERNEL_MODULES = ("simsplit.backends.cpu.d2q9", "simsplit.backends.cpu.d3q19",
                  "simsplit.backends.cpu.neq_lines", "simsplit.backends.cpu.md",
                  "simsplit.backends.cpu.md_neighbors", "simsplit.backends.cpu.md_forces")


@dataclass(frozen=True)
class CacheCounts:
    """What this process's CPU kernels have done so far, counted per argument-type signature:
    ``loaded`` from Numba's on-disk cache, ``compiled`` (a cache miss, then written to the
    cache), and the cache directories they use."""

    loaded: int
    compiled: int
    directories: tuple[str, ...]

    def __sub__(self, before: CacheCounts) -> CacheCounts:
        return CacheCounts(self.loaded - before.loaded, self.compiled - before.compiled,
                           self.directories)


def kernel_dispatchers() -> list[Any]:
    """Every Numba dispatcher defined in :data:`KERNEL_MODULES` (kernels and their helpers)."""
    import importlib

    from numba.core.dispatcher import Dispatcher

    found = []
    for name in KERNEL_MODULES:
        module = importlib.import_module(name)
        found += [v for v in vars(module).values()
                  if isinstance(v, Dispatcher) and v.__module__ == name]
    return found


def cache_counts() -> CacheCounts:
    """Cache hits and misses of the CPU kernels in this process so far (Numba's own counters),
    and where the cache lives: ``$NUMBA_CACHE_DIR`` when set, else the package's
    ``__pycache__`` when writable, else the user's cache (``~/.cache/numba``)."""
    loaded = compiled = 0
    directories = set()
    for kernel in kernel_dispatchers():
        stats = kernel.stats
        loaded += sum(stats.cache_hits.values())
        compiled += sum(stats.cache_misses.values())
        if stats.cache_path:
            directories.add(str(stats.cache_path))
    return CacheCounts(loaded, compiled, tuple(sorted(directories)))
