"""Row kernels written out from the lattice tables: every plain cell of a row in one loop over x.

A plain cell is fluid with no boundary pull source (no ``SOLID`` or ``NEAR_WALL`` bit). Its
update is the same for every cell: pull the q populations from x - c_q, collide, store. The
generator here writes that update as straight-line source, one scalar per population, inside a
loop over a run of plain cells of one row, so LLVM vectorises it across x (no per-cell branch,
no small array). Each lattice module supplies its collision as source lines that repeat its
scalar ``_collide`` expression for expression, in the same order and the same type, so a plain
cell gets the same bits from either; the scalar kernels then update only the cells left over
(walls, bodies, open faces, the wrapped ends of a periodic x). Both passes read ``f_src`` and
write disjoint cells of ``f_dst``, so their order does not matter.

The generated function is compiled like the handwritten kernels (``cache=True``) under a name
that carries a hash of its source: a changed generator or collision can never load a stale
cache entry. ``error_model="numpy"`` drops the divide-by-zero branch of ``1 / rho`` (the IEEE
result is the same); no fast-math flags, so LLVM neither reassociates nor fuses multiply-adds.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any, Callable

import numba
import numpy as np

from simsplit.numerics.flags import NEAR_WALL, SOLID
from simsplit.numerics.lattice import Lattice

#: flag bits that send a cell to the scalar (cell by cell) pass
SPECIAL = SOLID | NEAR_WALL

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
def in_cell_pass(own, i, nx, periodic_x):
    """Whether the scalar pass updates the cell at x index ``i`` with flags ``own`` (when the
    row kernel has taken the plain cells): not solid, and next to a wall or, on a periodic x,
    at an end (its pulls wrap)."""
    if own & SOLID:
        return False
    return (own & NEAR_WALL) != 0 or (periodic_x and (i == 1 or i == nx))


_planes: dict[int, tuple[Any, tuple[Any, ...]]] = {}


def planes(f: Any) -> tuple[Any, ...]:
    """``f[q]`` for every q: the row kernel writes each population through an argument of its
    own. The planes do not overlap, so the no-alias promise Numba gives its parallel loops holds,
    and LLVM vectorises without run-time overlap checks between the stores (one array would
    need a check per pair of the q stores, far past LLVM's limit for D3Q19)."""
    hit = _planes.get(id(f))
    if hit is None or hit[0] is not f:
        if len(_planes) > 16:  # a few population arrays per block; drop stale entries
            _planes.clear()
        hit = _planes[id(f)] = (f, tuple(f))
    return hit[1]


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
    """Source and compiled dispatcher of one lattice's plain-cell row kernel.

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
        self.source = self._source("NAME")
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:12]
        self.name = f"_rows_{lattice.name.lower()}_{digest}"
        self.source = self.source.replace("NAME", self.name)

    # --- index math: axes in array order (k, j, i) or (j, i); the split axis first -------------
    @property
    def _axes(self) -> tuple[str, ...]:
        return ("k", "j", "i")[3 - self.lattice.dim:]

    @property
    def _macro(self) -> tuple[str, ...]:
        return ("rho_out", *(f"u{a}_out" for a in "xyz"[:self.lattice.dim]))

    def _pull(self, q: int) -> str:
        """Source of the stored element cell ``(.., c)`` pulls for direction ``q``: x - c_q."""
        c = [int(v) for v in self.lattice.c[q][::-1]]  # array axis order: split axis first
        split, *cross, cx = c
        idx = [shifted(self._axes[0], -split)]
        idx += [f"y{1 - cy}" for cy in cross]  # the row's wrapped source rows (3D only)
        idx.append(shifted("c", -cx, "step"))
        return f"f_src[{q}, {', '.join(idx)}]"

    def _weight(self, q: int) -> str:
        return f"wq{q}"

    def _loop(self, macro: bool, forced: bool, indent: str) -> list[str]:
        lat = self.lattice
        here = ", ".join(self._axes[:-1])
        # x runs unsigned: Numba wraps negative signed indices (a select per load), which
        # stops LLVM from vectorising; c - 1 >= 0 holds, as every run starts at 1 or later
        out = [f"{indent}for c in range(np.uint64(a), np.uint64(b)):"]
        body = indent + "    "
        for q in range(lat.q):
            v = self.decode.format(v=self._pull(q), w=self._weight(q))
            out.append(f"{body}f{q} = {v}")
        out += [body + line for line in self.collide(macro, forced)]
        if macro:
            inner = ", ".join(f"{a} - 1" for a in self._axes[:-1])
            names = ("r", *(f"u{a}" for a in "xyz"[:lat.dim]))
            out += [f"{body}{m}[{inner}, c - step] = {n}"
                    for m, n in zip(self._macro, names, strict=True)]
        for q in range(lat.q):
            v = self.encode.format(v=f"p{q}", w=self._weight(q))
            out.append(f"{body}out{q}[{here}, c] = {v}")
        return out

    def _source(self, name: str) -> str:
        lat, axes = self.lattice, self._axes
        periodic = [f"periodic_{a}" for a in "xy"[:lat.dim - 1]]
        params = ["f_src", *(f"out{q}" for q in range(lat.q)), "flags", *self._macro,
                  f"{axes[0]}0", f"{axes[0]}1", *self.scalars, *periodic, "store_macro"]
        params += ["forced"] if self.forced else []
        lines = [f"def {name}({', '.join(params)}):",
                 f"    dt = {self.arith}",
                 "    nx = f_src.shape[-1] - 2",
                 "    lo = 2 if periodic_x else 1  # the ends of a periodic x wrap: scalar pass",
                 "    hi = nx if periodic_x else nx + 1",
                 "    step = np.uint64(1)"]
        lines += [f"    wq{q} = {const(w)}" for q, w in enumerate(lat.w)]
        lines += ["    " + line for line in self.prelude]
        if lat.dim == 2:
            lines.append("    for j in numba.prange(j0, j1):")
        else:
            lines += ["    ny = f_src.shape[2] - 2",
                      "    for row in numba.prange((k1 - k0) * ny):  # rows (k, j)",
                      "        k = k0 + row // ny",
                      "        j = 1 + row % ny"]
            lines += [f"        y{s} = wrap({shifted('j', s - 1)}, ny, periodic_y)"
                      for s in range(3)]
        flag = f"flags[{', '.join(axes[:-1])}, "
        lines += ["        a = lo",
                  "        while a < hi:  # runs [a, b) of plain cells",
                  f"            if {flag}a] & SPECIAL:",
                  "                a += 1",
                  "                continue",
                  "            b = a + 1",
                  f"            while b < hi and not {flag}b] & SPECIAL:",
                  "                b += 1"]
        variants = [(m, f) for m in (True, False) for f in ((True, False) if self.forced
                                                             else (False,))]
        for n, (macro, forced) in enumerate(variants):
            cond = " and ".join((["store_macro"] if macro else ["not store_macro"])
                                + ((["forced"] if forced else ["not forced"])
                                   if self.forced else []))
            lines.append(f"            {'if' if n == 0 else 'elif'} {cond}:")
            lines += self._loop(macro, forced, "                ")
        lines.append("            a = b")
        return "\n".join(lines) + "\n"

    def compile(self) -> Any:
        """The ``@njit(parallel=True, cache=True)`` dispatcher, as a function of ``module``
        (whose file and name Numba's cache and :mod:`.jit_cache` go by)."""
        env = {"numba": numba, "np": np, "wrap": wrap, "SPECIAL": SPECIAL, "__name__": self.module,
               **self.env}
        filename = sys.modules[self.module].__file__
        exec(compile(self.source, filename, "exec"), env)  # noqa: S102 - our own source
        fn = env[self.name]
        return numba.njit(parallel=True, cache=True, error_model="numpy",
                          boundscheck=False)(fn)
