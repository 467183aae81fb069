"""Launch-configuration autotuning: the fastest threads-per-block for each kernel and grid.

The CUDA C kernels are compiled with ``__launch_bounds__(SIMSPLIT_BLOCK_X)``, so each block size
is its own compiled module (``variant_source`` of :mod:`simsplit.backends.cuda_c.source`).
:class:`Autotuner` times the candidates (:data:`CANDIDATES`) once, keeps the fastest and caches
the choice in a JSON file keyed by GPU model, kernel name, kernel source hash and grid shape; a
changed kernel source, another GPU or another grid is tuned afresh. Every cell is computed by
one thread independently of the others, so the block size changes speed only, never a result
(``tests/test_autotune.py`` checks this bit for bit). Off by default: ``run.autotune: true`` or
``simsplit bench --autotune``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

#: threads per block along i that are tried
CANDIDATES: tuple[int, ...] = (64, 128, 256, 512)
CACHE_ENV = "SIMSPLIT_CACHE_DIR"
CACHE_FILE = "autotune.json"
#: version of the cache file layout
CACHE_VERSION = 1


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """``$SIMSPLIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/simsplit``, else ``~/.cache/simsplit``."""
    env = dict(os.environ) if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "simsplit"


def source_hash(text: str) -> str:
    """Short hash of a kernel's complete source: the cache's notion of kernel version."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def launch_seconds(launch: Callable[[], None], repeats: int = 3) -> float:
    """Mean device seconds of ``launch`` (CUDA events on the current CuPy stream, after one
    warm-up launch: module load, caches). Call it inside the kernel's device context."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    launch()
    start.record()
    for _ in range(repeats):
        launch()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / (1e3 * repeats)


def tuning_key(gpu: str, kernel: str, src_hash: str, shape: Sequence[int]) -> str:
    return f"{gpu}|{kernel}|{src_hash}|{'x'.join(str(int(n)) for n in shape)}"


class AutotuneCache:
    """Choices on disk: ``{"version": 1, "entries": {key: {"block": N, "seconds": {...}}}}``.

    An unreadable or corrupt file counts as empty (with a warning) and is rewritten on save;
    saves go through a temporary file and a rename, so concurrent ranks never see half a file.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else cache_dir() / CACHE_FILE
        self.entries: dict[str, dict[str, Any]] = self._load()

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            warnings.warn(f"autotune cache {self.path} unreadable ({exc}); tuning afresh",
                          stacklevel=3)
            return {}
        ok = isinstance(data, dict) and data.get("version") == CACHE_VERSION
        entries = data.get("entries") if ok else None
        if not isinstance(entries, dict):
            warnings.warn(f"autotune cache {self.path} has an unknown layout; tuning afresh",
                          stacklevel=3)
            return {}
        return {k: v for k, v in entries.items()
                if isinstance(v, dict) and isinstance(v.get("block"), int)}

    def get(self, key: str) -> int | None:
        entry = self.entries.get(key)
        return None if entry is None else int(entry["block"])

    def put(self, key: str, block: int, seconds: dict[int, float]) -> None:
        self.entries[key] = {"block": int(block),
                             "seconds": {str(b): float(s) for b, s in seconds.items()}}
        self.save()

    def save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".autotune-")
            with os.fdopen(fd, "w") as fh:
                json.dump({"version": CACHE_VERSION, "entries": self.entries}, fh, indent=1,
                          sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:  # read-only home, full disk: tuning still applies to this run
            warnings.warn(f"autotune cache {self.path} not written ({exc})", stacklevel=3)


@dataclass
class TuneResult:
    """One tuned kernel: the choice, whether it came from the cache, and the timings."""

    kernel: str
    shape: tuple[int, ...]
    gpu: str
    block: int
    default: int
    cached: bool
    seconds: dict[int, float] = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        """Default time over tuned time (None when the cache answered without timing)."""
        if self.block in self.seconds and self.default in self.seconds:
            return self.seconds[self.default] / self.seconds[self.block]
        return None


class Autotuner:
    """Chooses a block size per (GPU model, kernel, source hash, grid shape)."""

    def __init__(self, cache: AutotuneCache | None = None,
                 candidates: Iterable[int] = CANDIDATES, repeats: int = 3) -> None:
        self.cache = cache if cache is not None else AutotuneCache()
        self.candidates = tuple(candidates)
        self.repeats = repeats
        self.results: list[TuneResult] = []

    def choose(self, gpu: str, kernel: str, src_hash: str, shape: Sequence[int],
               time_block: Callable[[int], float], default: int) -> int:
        """The block size for this kernel and grid: from the cache, else timed now.

        ``time_block(block)`` runs the kernel with ``block`` threads per block and returns
        seconds; it is called ``repeats`` times per candidate and the median counts. A candidate
        that fails (too many registers for that block size, ...) is skipped.
        """
        key = tuning_key(gpu, kernel, src_hash, shape)
        shape_t = tuple(int(n) for n in shape)
        cached = self.cache.get(key)
        if cached is not None and cached in self.candidates:
            self.results.append(TuneResult(kernel, shape_t, gpu, cached, default, True,
                                           self._cached_seconds(key)))
            return cached
        seconds: dict[int, float] = {}
        for block in self.candidates:
            try:
                seconds[block] = statistics.median(time_block(block)
                                                   for _ in range(self.repeats))
            except Exception as exc:
                from simsplit.gpu.cuda_errors import classify

                if classify(exc) in ("illegal address", "launch failure"):
                    raise  # the context is lost: no later launch could work either
                continue
        if not seconds:
            return default
        best = min(seconds, key=lambda b: (seconds[b], b != default))
        self.cache.put(key, best, seconds)
        self.results.append(TuneResult(kernel, shape_t, gpu, best, default, False, seconds))
        return best

    def _cached_seconds(self, key: str) -> dict[int, float]:
        raw = self.cache.entries.get(key, {}).get("seconds", {})
        try:
            return {int(b): float(s) for b, s in raw.items()}
        except (TypeError, ValueError, AttributeError):
            return {}


def format_table(results: Sequence[TuneResult]) -> str:
    """Default against tuned block size per kernel and grid, with the timings behind it."""
    head = (f"{'kernel':<36} {'grid':>11} {'default':>7} {'tuned':>5} {'speedup':>7}  "
            f"{'source':<6} times per launch [us]")
    lines = [head, "-" * len(head)]
    for r in results:
        grid = "x".join(str(n) for n in r.shape)
        sp = f"{r.speedup:.2f}x" if r.speedup is not None else "-"
        times = " ".join(f"{b}:{s * 1e6:.1f}" for b, s in sorted(r.seconds.items()))
        lines.append(f"{r.kernel:<36} {grid:>11} {r.default:>7} {r.block:>5} {sp:>7}  "
                     f"{'cache' if r.cached else 'timed':<6} {times}")
    if not results:
        lines.append("(nothing tuned: autotuning applies to the cupy backend's D2Q9 and "
                     "two-lattice D3Q19 kernels)")
    return "\n".join(lines)


def tune_solver(solver: Any, tuner: Autotuner | None = None) -> list[TuneResult]:
    """Tune the two-lattice stream-collide kernels of every slab of a fluid solver (cupy backend
    only; D3Q19 in-place blocks keep the default block size).

    Timing launches write only ``f_dst``, which the next step overwrites, and scratch
    macroscopic fields, so the state of the run is untouched.
    """
    tuner = tuner or Autotuner()
    before = len(tuner.results)
    for blk in getattr(solver, "blocks", {}).values():
        kernels = getattr(blk, "kernels", None) or getattr(blk.backend, "d2q9", None)
        if kernels is not None and hasattr(kernels, "autotune"):
            box = not getattr(blk, "open_rules", True) and getattr(kernels, "box_variant", False)
            extra = {"open_rules": False} if box else {}
            kernels.autotune(blk.f_src, blk.f_dst, blk.flags, blk.params, tuner,
                             dtype=blk.dtype, **extra)
    return tuner.results[before:]
