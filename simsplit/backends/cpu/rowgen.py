"""Row kernels written out from the lattice tables: a row's cells in straight loops over x.

Most fluid cells update alike: pull the q populations from x - c_q, collide, store. The
generator writes that update as straight-line source, one scalar per population, inside a loop
over a run of cells of one row, so LLVM vectorises it across x (no per-cell branch, no small
array). A second loop takes runs of cells next to plain walls or the lid: each pull becomes a
select between the neighbour's population and the halfway bounce-back (plus the lid's momentum),
still vectorised. Each lattice module supplies its collision as source lines that repeat its
scalar ``_collide`` expression for expression, in the same order and type, so every cell gets
the bits the scalar kernel gives it. The scalar kernels keep the other rules (open faces,
interpolated bounce-back, the wrapped ends of a periodic x) in a separate pass over the cells
the row kernel leaves (:meth:`RowKernel._takes`); both passes read ``f_src`` and write disjoint
cells of ``f_dst``, so their order does not matter.

In 2D a third kind of kernel takes two time steps in one sweep (temporal blocking, where the
row kernel takes every fluid cell): each thread walks down its rows, updating row j + 1 to step
t + 1 into a ring of three rows and then row j to step t + 2 from the ring, with the loops above,
so both steps keep their bits while the populations cross memory once per two steps. Its rows'
runs of cells come listed once per flags array (``row_runs``), not scanned again each step.

The generated functions are compiled like the handwritten kernels (``cache=True``), one per
(store_macro, forced), under names that carry a hash of their source: a changed generator or
collision never loads a stale cache entry. ``error_model="numpy"`` drops the divide-by-zero
branch of ``1 / rho`` (the IEEE result is the same); no fast-math flags, so LLVM neither
reassociates nor contracts multiply-adds into FMAs.

``SIMSPLIT_CPU_ROWS=0`` in the environment turns the row kernels off: the scalar kernel then
updates every fluid cell (same bits, slower; nothing generated is compiled). The test suite runs
so by default, as each row kernel takes 10-25 s to compile and most tests run tiny grids; the
tests that compare or run the row kernels ask for them (tests/conftest.py). It also sets
``SIMSPLIT_CPU_SERIAL=1``: the scalar, row and two-step kernels then run as their serial twins
(:func:`serial`), compiled in about a third of the time of the threaded builds (8.7 s against
28.5 s for one D3Q19 fp16 signature of the scalar kernel, 2026-12-04; tests/test_cpu_rows.py
cold on two cores 185 s against 370 s, 2026-12-06); the tests marked ``cpu_threads`` run the
threaded builds.
"""

from __future__ import annotations

import hashlib
import os
import sys
import types
from typing import Any, Callable

import numba
import numpy as np

from simsplit.backends.cpu.jit_cache import announce_compile
from simsplit.numerics.flags import BOUNDARY, CURVED, LID, NEAR_WALL, SOLID
from simsplit.numerics.lattice import Lattice

#: boundary kinds with a rule other than halfway bounce-back (a cell pulling from one of them
#: goes to the scalar pass)
OPEN = BOUNDARY & ~SOLID

#: environment variable: "0" runs the scalar kernel on every cell instead of the row kernels
ROWS_ENV = "SIMSPLIT_CPU_ROWS"


#: environment variable: "1" runs the scalar kernels without threads (:func:`serial`)
SERIAL_ENV = "SIMSPLIT_CPU_SERIAL"


def rows_enabled() -> bool:
    """Whether the launchers run the row kernels (``$SIMSPLIT_CPU_ROWS`` is not "0")."""
    return os.environ.get(ROWS_ENV, "1").strip() != "0"


def serial_requested() -> bool:
    """Whether ``$SIMSPLIT_CPU_SERIAL`` is "1": the kernels run without threads (:func:`serial`;
    the records' chunks, :mod:`.neq_chunks`, likewise)."""
    return os.environ.get(SERIAL_ENV, "0").strip() == "1"


_twins: dict[Any, Any] = {}


def serial(kernel: Any) -> Any:
    """``kernel`` (a threaded Numba dispatcher, ``parallel=True`` over independent rows or
    chunks of rows: the scalar kernels, the row kernels, the two-step kernels) or, where
    ``$SIMSPLIT_CPU_SERIAL`` is "1", its serial twin: the same source and options compiled
    without threads (``prange`` runs as ``range``; the rows write disjoint cells, so the same
    bits), under a name of its own so that the two builds keep separate cache entries."""
    if not serial_requested():
        return kernel
    twin = _twins.get(kernel)
    if twin is None:
        py = kernel.py_func
        fn = types.FunctionType(py.__code__, py.__globals__, py.__name__ + "_serial",
                                py.__defaults__, py.__closure__)
        fn.__qualname__ = py.__qualname__ + "_serial"
        fn.__doc__ = py.__doc__
        options = {k: v for k, v in kernel.targetoptions.items()
                   if k not in ("parallel", "nopython")}
        twin = _twins[kernel] = numba.njit(cache=True, **options)(fn)
    return twin


def launch(rows_kernel: Any, plain: tuple, scalar: Any, args: tuple, key: Any,
           launched: set) -> None:
    """One two-lattice step: ``rows_kernel(*plain)``, then ``scalar(*args)`` (``args`` ending
    in ``every_cell=False``) where the row kernel left cells (open faces, curved links,
    periodic ends) and on the first launch for ``key`` (recorded in ``launched``), so that a
    warm-up run compiles and caches it too. Row kernels off: the scalar kernel on every cell."""
    if not rows_enabled():
        scalar_only(scalar, args)
        return
    rows_kernel, scalar = serial(rows_kernel), serial(scalar)
    announce_compile(rows_kernel, plain)
    if rows_kernel(*plain) or key not in launched:
        launched.add(key)
        announce_compile(scalar, args)
        scalar(*args)


def scalar_only(scalar: Any, args: tuple, arith: Any = None) -> None:
    """One two-lattice step of every fluid cell by ``scalar(*args)`` (``args`` ending in
    ``every_cell``, set true here). ``arith`` given: the populations are neq16 records, whose
    kernels compute in float32 only."""
    if arith is not None and np.dtype(arith) != np.float32:
        raise ValueError("run.storage neq16: float32 arithmetic only")
    args = (*args[:-1], True)
    scalar = serial(scalar)
    announce_compile(scalar, args)
    scalar(*args)


#: ``collide(macro, forced)`` -> source lines reading ``f{q}`` and setting ``p{q}`` (the
#: post-collision populations) and, where ``macro``, the names in the row kernel's ``macro``
Collide = Callable[[bool, bool], list[str]]


@numba.njit(inline="always")
def wrap(s, n, periodic):
    """Index ``s`` of an axis with ``n`` interior cells, wrapped onto the interior if periodic."""
    if periodic:
        return n if s == 0 else (1 if s == n + 1 else s)
    return s


@numba.njit(inline="always")
def wrap_far(s, n, periodic):
    """:func:`wrap` for an index up to two cells beyond an end (quadratic bounce-back)."""
    if periodic:
        if s < 1:
            return s + n
        if s > n:
            return s - n
    return s


def planes(f: Any) -> tuple[Any, ...]:
    """``f[q]`` for every q: the row kernel writes each population through an argument of its
    own. The planes do not overlap, so the no-alias promise Numba gives its parallel loops holds,
    and LLVM vectorises without run-time overlap checks between the stores (one array would
    need a check per pair of the q stores, far past LLVM's limit for D3Q19). Made afresh each
    launch (a few microseconds): a cache of views would keep old population arrays alive."""
    return tuple(f)


def const(x: float) -> str:
    """Source for ``x`` in the arithmetic type ``dt`` (exact: repr round-trips a float64)."""
    return f"dt({float(x)!r})"


def sum_terms(terms: list[str]) -> str:
    """Left-to-right sum of source terms, as a loop of ``+=`` adds them."""
    return " + ".join(terms)


def shifted(name: str, d: int, one: str = "1") -> str:
    """Source of index ``name + d`` (``|d|`` at most 1 times ``one``, the unit of its type)."""
    if d == 0:
        return name
    if abs(d) != 1 and one != "1":
        raise ValueError(f"offset {d}: lattice velocities are -1, 0 or 1")
    return f"{name} {'+' if d > 0 else '-'} {one if one != '1' else abs(d)}"


def dot_c(c: tuple[int, ...], names: tuple[str, ...]) -> str:
    """``c . v`` over the nonzero components of ``c`` only, in axis order (the D3Q19 order)."""
    return sum_terms([f"{const(ci)} * {v}" for ci, v in zip(c, names, strict=True) if ci != 0])


class RowKernel:
    """Source and compiled dispatchers of one lattice's row kernels.

    ``scalars``: the kernel's parameters after the arrays and the layer range, up to the
    ``periodic_*`` flags; ``prelude``: lines run once per launch (casts to ``dt``, derived
    rates); ``decode``/``encode``: wrappers around a stored element (``{v}``, ``{w}`` the
    population's weight as source), for narrow storage; ``forced``: whether the kernel takes a
    ``forced`` flag (else ``collide`` is asked with ``forced`` False only).
    """

    def __init__(self, lattice: Lattice, module: str, collide: Collide, scalars: tuple[str, ...],
                 prelude: list[str], arith: str = "f_src.dtype.type",
                 decode: str = "{v}", encode: str = "{v}", forced: bool = False,
                 env: dict[str, Any] | None = None) -> None:
        self.lattice, self.module, self.collide = lattice, module, collide
        self.scalars, self.prelude, self.arith = scalars, prelude, arith
        self.decode, self.encode, self.forced = decode, encode, forced
        self.env = env or {}
        #: (store_macro, forced) of each kernel: one function each, so that a run compiles only
        #: the ones it calls (a D3Q19 kernel takes a minute or more to compile)
        self.variants = [(m, f) for m in (False, True)
                         for f in ((False, True) if forced else (False,))]
        parts = self._takes_source()
        if lattice.dim == 2:
            parts += ["", "", "@numba.njit(cache=True)", *self._row_runs_source()]
        for macro, forced_ in self.variants:
            parts += ["", ""] + self._source(self._tag(macro, forced_), macro, forced_)
            if lattice.dim == 2:
                parts += ["", ""] + self._two_steps_source("two_" + self._tag(macro, forced_),
                                                           macro, forced_)
        self.source = "\n".join(parts) + "\n"
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:12]
        #: the run lister's name (2D), hashed like the kernels' (it is cached alike)
        self.runs_name = f"_row_runs_{lattice.name.lower()}_{digest}"
        self.source = self.source.replace("def row_runs(", f"def {self.runs_name}(")
        #: the kernels' names: the source's hash in them keeps a changed generator or collision
        #: from loading a stale cache entry (Numba keys its cache on the bytecode, not constants)
        self.names = {v: f"_rows_{lattice.name.lower()}_{self._tag(*v)}_{digest}"
                      for v in self.variants}
        #: the two-step kernels (2D), by (store_macro, forced) as :attr:`names`
        self.two_step_names = {v: f"_two_{lattice.name.lower()}_{self._tag(*v)}_{digest}"
                               for v in self.variants} if lattice.dim == 2 else {}
        for v, name in self.two_step_names.items():
            self.source = self.source.replace(f"def two_{self._tag(*v)}(", f"def {name}(")
        for v, name in self.names.items():
            self.source = self.source.replace(f"def {self._tag(*v)}(", f"def {name}(")

    @staticmethod
    def _tag(macro: bool, forced: bool) -> str:
        return f"{'macro' if macro else 'nomacro'}_{'forced' if forced else 'free'}"

    # --- index math: axes in array order (k, j, i) or (j, i); the split axis first -------------
    @property
    def _axes(self) -> tuple[str, ...]:
        return ("k", "j", "i")[3 - self.lattice.dim:]

    @property
    def _macro(self) -> tuple[str, ...]:
        return ("rho_out", *(f"u{a}_out" for a in "xyz"[:self.lattice.dim]))

    def _pull(self, q: int, ring: bool = False) -> str:
        """Source of the stored element cell ``(.., c)`` pulls for direction ``q``: x - c_q,
        from ``f_src`` or (``ring``, 2D) from the step-(t + 1) rows of the two-step kernel."""
        c = [int(v) for v in self.lattice.c[q][::-1]]  # array axis order: split axis first
        split, *cross, cx = c
        if ring:
            return f"t{q}[ch, s{1 - split}, {shifted('c', -cx, 'step')}]"
        idx = [shifted(self._axes[0], -split)]
        idx += [f"y{1 - cy}" for cy in cross]  # the row's wrapped source rows (3D only)
        idx.append(shifted("c", -cx, "step"))
        return f"f_src[{q}, {', '.join(idx)}]"

    def _weight(self, q: int) -> str:
        return f"wq{q}"

    def _here(self, q: int, ring: bool = False) -> str:
        """Source of the stored element ``q`` of the cell ``(.., c)`` itself."""
        if ring:
            return f"t{q}[ch, s1, c]"
        return f"f_src[{q}, {', '.join(self._axes[:-1])}, c]"

    def _loop(self, macro: bool, forced: bool, wall: bool, indent: str,
              src_ring: bool = False, dst_ring: bool = False) -> list[str]:
        """The loop over a run ``[a, b)`` of one row: pull (from ``f_src``, or from the ring
        rows if ``src_ring``), collide, store (to ``out{q}``, or ring slot ``sw``)."""
        lat = self.lattice
        here = ", ".join(self._axes[:-1])
        # x runs unsigned: Numba wraps negative signed indices (a select per load), which
        # stops LLVM from vectorising; c - 1 >= 0 holds, as every run starts at 1 or later
        out = [f"{indent}for c in range(np.uint64(a), np.uint64(b)):"]
        body = indent + "    "
        for q in range(lat.q):
            v = self.decode.format(v=self._pull(q, src_ring), w=self._weight(q))
            if wall and q:  # halfway bounce-back from a solid source, moving if the lid
                o = int(lat.opp[q])
                back = self.decode.format(v=self._here(o, src_ring), w=self._weight(o))
                lid = const(6.0 * lat.w[q] * lat.c[q][0])
                src = self._pull(q).replace("f_src", "flags").replace(f"[{q}, ", "[")
                out += [f"{body}n{q} = {src}",
                        f"{body}o{q} = {back}",
                        f"{body}f{q} = ((o{q} + {lid} * lid_u) if n{q} == LID else o{q}) "
                        f"if n{q} & SOLID else {v}"]
            else:
                out.append(f"{body}f{q} = {v}")
        out += [body + line for line in self.collide(macro, forced)]
        if macro:
            inner = ", ".join(f"{a} - 1" for a in self._axes[:-1])
            names = ("r", *(f"u{a}" for a in "xyz"[:lat.dim]))
            out += [f"{body}{m}[{inner}, c - step] = {n}"
                    for m, n in zip(self._macro, names, strict=True)]
        for q in range(lat.q):
            v = self.encode.format(v=f"p{q}", w=self._weight(q))
            dst = f"t{q}[ch, sw, c]" if dst_ring else f"out{q}[{here}, c]"
            out.append(f"{body}{dst} = {v}")
        return out

    def _takes(self, i: str) -> str:
        """Source of whether the row kernel updates the cell at x index ``i`` of the row (the
        scalar pass updates the other fluid cells): not solid, not an end of a periodic x
        (its pulls wrap) and, next to a wall, no curved link and no open face among its
        sources (halfway bounce-back only). Needs ``y0``..``y2`` in 3D."""
        axes = self._axes
        own = f"flags[{', '.join(axes[:-1])}, {i}]"
        pulls = [self._pull(q).replace("f_src", "flags").replace(f"[{q}, ", "[")
                 .replace("c - step", f"{i} - 1").replace("c + step", f"{i} + 1")
                 .replace(", c]", f", {i}]") for q in range(1, self.lattice.q)]
        return (f"(not {own} & SOLID and not (periodic_x and ({i} == 1 or {i} == nx))"
                f" and (not {own} & NEAR_WALL or (not {own} & CURVED"
                f" and not ({' | '.join(pulls)}) & OPEN)))")

    def _takes_source(self) -> list[str]:
        """``takes(flags, <row>, i, nx, periodic_x[, ny, periodic_y])`` for the scalar pass."""
        lat, axes = self.lattice, self._axes
        wraps = ["ny", "periodic_y"] if lat.dim == 3 else []
        lines = ['@numba.njit(inline="always")',
                 f"def takes({', '.join(['flags', *axes, 'nx', 'periodic_x', *wraps])}):"]
        if lat.dim == 3:
            lines += [f"    y{s} = wrap({shifted('j', s - 1)}, ny, periodic_y)" for s in range(3)]
        return lines + [f"    return {self._takes('i')}"]

    def _head(self, name: str, extra: tuple[str, ...] = ()) -> list[str]:
        """The ``def`` line and the per-launch set-up of a kernel (``store_macro`` and
        ``forced`` stay parameters, so that every variant is called alike)."""
        lat, axes = self.lattice, self._axes
        periodic = [f"periodic_{a}" for a in "xy"[:lat.dim - 1]]
        params = ["f_src", *(f"out{q}" for q in range(lat.q)), "flags", *self._macro,
                  f"{axes[0]}0", f"{axes[0]}1", *self.scalars, *periodic, "store_macro"]
        params += ["forced"] if self.forced else []
        lines = [f"def {name}({', '.join([*params, *extra])}):",
                 f"    dt = {self.arith}",
                 "    nx = f_src.shape[-1] - 2",
                 "    lo = 2 if periodic_x else 1  # the ends of a periodic x wrap: scalar pass",
                 "    hi = nx if periodic_x else nx + 1",
                 "    step = np.uint64(1)"]
        lines += ["    " + line for line in self.prelude]
        lines.append("    left = 1 if periodic_x else 0  # fluid cells for the scalar pass")
        return lines

    def _weights(self, indent: str) -> list[str]:
        """The weights ``wq{q}``, set inside the parallel loop: set before it, Numba passes
        them to the loop body as arguments, and LLVM, not seeing them constant or equal, keeps
        a product ``w_q * r`` for each q where one per distinct weight does."""
        return [f"{indent}wq{q} = {const(w)}" for q, w in enumerate(self.lattice.w)]

    def _scan(self, indent: str, body: list[str]) -> list[str]:
        """One row's runs ``[a, b)`` of cells taken, all plain or all walled (``wall``), each
        handed to ``body``; ``left`` counts the fluid cells not taken."""
        row = ", ".join(self._axes[:-1])
        # the test is written out, not called: an array passed to a call counts as aliased for
        # Numba's parfors, which then drop the no-alias promise the vectoriser relies on
        lines = ["a = lo",
                 "while a < hi:  # runs [a, b) of cells taken, all plain or all walled",
                 f"    if not {self._takes('a')}:",
                 f"        if not flags[{row}, a] & SOLID:",
                 "            left += 1",
                 "        a += 1",
                 "        continue",
                 f"    wall = flags[{row}, a] & NEAR_WALL",
                 "    b = a + 1",
                 "    if wall:",
                 f"        while b < hi and flags[{row}, b] & NEAR_WALL and {self._takes('b')}:",
                 "            b += 1",
                 "    else:  # the common case, one flag byte a cell: plain fluid",
                 f"        while b < hi and not flags[{row}, b] & (SOLID | NEAR_WALL):",
                 "            b += 1",
                 *("    " + line for line in body),
                 "    a = b"]
        return [indent + line for line in lines]

    def _runs(self, macro: bool, forced: bool, indent: str) -> list[str]:
        """One row's runs of cells taken, found as it goes (:meth:`_scan`), each in its loop."""
        return self._scan(indent, [
            "if wall:", *self._loop(macro, forced, True, "    "),
            "else:", *self._loop(macro, forced, False, "    ")])

    def _spans(self, macro: bool, forced: bool, indent: str, src_ring: bool = False,
               dst_ring: bool = False) -> list[str]:
        """Row ``j``'s runs of cells taken as :func:`row_runs` listed them (``ptr``,
        ``spans``), each in its loop (:meth:`_loop`)."""
        lines = ["for run in range(ptr[j], ptr[j + 1]):",
                 "    a = spans[run, 0]",
                 "    b = spans[run, 1]",
                 "    if spans[run, 2]:"]
        lines = [indent + line for line in lines]
        lines += self._loop(macro, forced, True, indent + "        ", src_ring, dst_ring)
        lines.append(indent + "    else:")
        return lines + self._loop(macro, forced, False, indent + "        ", src_ring, dst_ring)

    def _row_runs_source(self) -> list[str]:
        """``row_runs(flags, periodic_x, ptr, spans, fill)`` (2D): the runs :meth:`_scan`
        finds in each row ``j``, as ``spans[run] = (a, b, wall)`` for ``run`` in ``ptr[j]``
        .. ``ptr[j + 1]``. ``fill`` false: counts them instead (row ``j``'s count into
        ``ptr[j + 1]``, ``spans`` unused). Returns how many fluid cells no run takes."""
        return ["def row_runs(flags, periodic_x, ptr, spans, fill):",
                "    nx = flags.shape[-1] - 2",
                "    lo = 2 if periodic_x else 1",
                "    hi = nx if periodic_x else nx + 1",
                "    left = 0",
                "    for j in range(1, flags.shape[0] - 1):",
                "        n = ptr[j] if fill else 0",
                *self._scan("        ", ["if fill:",
                                         "    spans[n, 0] = a",
                                         "    spans[n, 1] = b",
                                         "    spans[n, 2] = 1 if wall else 0",
                                         "n += 1"]),
                "        if not fill:",
                "            ptr[j + 1] = n",
                "    return left"]

    def _source(self, name: str, macro: bool, forced: bool) -> list[str]:
        """One kernel: every row's runs of cells taken, plain or walled."""
        lat = self.lattice
        lines = self._head(name)
        if lat.dim == 2:
            lines.append("    for j in numba.prange(j0, j1):")
        else:
            lines += ["    ny = f_src.shape[2] - 2",
                      "    for row in numba.prange((k1 - k0) * ny):  # rows (k, j)",
                      "        k = k0 + row // ny",
                      "        j = 1 + row % ny"]
            lines += [f"        y{s} = wrap({shifted('j', s - 1)}, ny, periodic_y)"
                      for s in range(3)]
        lines += self._weights("        ")
        return lines + self._runs(macro, forced, "        ") + ["    return left"]

    def _two_steps_source(self, name: str, macro: bool, forced: bool) -> list[str]:
        """Steps t + 1 and t + 2 of rows ``[j0, j1)`` in one sweep (2D): each of the chunks
        ``ch`` of rows (one per ring, ``t{q}.shape[0]``) walks down its rows, computing step
        t + 1 of row ``j + 1`` from ``f_src`` into the ring (three rows a chunk, slot ``row %
        3``), then step t + 2 of row ``j`` from the ring into ``out{q}``. Every cell updates
        by the loops of :meth:`_source`, so both steps keep their bits. The runs of each row
        come listed (:meth:`_row_runs_source`: ``ptr``, ``spans``), not scanned for each
        step, and must take every fluid cell (no scalar pass). Step t + 1 runs on rows
        1..ny only: a pull from a ghost row is a bounce-back there."""
        if self.lattice.dim != 2:
            raise ValueError("two steps per sweep: 2D lattices only")
        extra = (*(f"t{q}" for q in range(self.lattice.q)), "ptr", "spans")
        lines = self._head(name, extra)
        lines += ["    ny = f_src.shape[1] - 2",
                  "    chunks = t0.shape[0]",
                  "    for ch in numba.prange(chunks):",
                  *self._weights("        "),
                  "        r0 = j0 + (j1 - j0) * ch // chunks",
                  "        r1 = j0 + (j1 - j0) * (ch + 1) // chunks",
                  "        for jr in range(r0 - 1, r1 + 1):",
                  "            if jr >= 1 and jr <= ny:",
                  "                j = jr  # step t + 1 of row jr into the ring",
                  "                sw = j % 3"]
        lines += self._spans(False, forced, "                ", dst_ring=True)
        lines += ["            j = jr - 1  # step t + 2 of the row above it, from the ring",
                  "            if j >= r0:",
                  "                s0 = (j + 2) % 3",
                  "                s1 = j % 3",
                  "                s2 = (j + 1) % 3"]
        return lines + self._spans(macro, forced, "                ", src_ring=True)

    def compile(self) -> dict[tuple[bool, bool], Any]:
        """``@njit(parallel=True, cache=True)`` dispatchers by (store_macro, forced), functions
        of ``module`` (whose file and name Numba's cache and :mod:`.jit_cache` go by; the
        module keeps them as globals under :attr:`names`). Each returns how many fluid cells
        it left to the scalar pass (0: that pass can be skipped; at least 1 with a periodic x,
        whose ends it never takes)."""
        env = {"numba": numba, "np": np, "wrap": wrap, "SOLID": SOLID, "LID": LID,
               "NEAR_WALL": NEAR_WALL, "CURVED": CURVED, "OPEN": OPEN, "__name__": self.module,
               **self.env}
        filename = sys.modules[self.module].__file__
        exec(compile(self.source, filename, "exec"), env)  # noqa: S102 - our own source
        self.takes = env["takes"]
        self.row_runs = env.get(self.runs_name)
        jit = numba.njit(parallel=True, cache=True, error_model="numpy", boundscheck=False)
        self.two_steps = {v: jit(env[name]) for v, name in self.two_step_names.items()}
        return {v: jit(env[name]) for v, name in self.names.items()}
