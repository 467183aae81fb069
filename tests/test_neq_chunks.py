"""neq16 records stepped a chunk of planes at a time through the float32 path
(simsplit/backends/cpu/neq_chunks.py): its decode is the records kernel's pull and its encode
the records kernel's store, bit for bit (edge exponents, subnormal and huge deviations, solid
cells kept), and whole runs equal the records kernel cell by cell (bodies, inlets, outlets,
free-slip, periodic axes; 1 and 3 slabs; chunks of one plane or several)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numba
import numpy as np
import pytest

from simsplit import Simulation
from simsplit.backends.cpu import fast16, neq_codec
from simsplit.backends.cpu import neq_chunks as nc
from simsplit.backends.cpu import neq_lines as nl
from simsplit.backends.cpu.cells import _CX2, _CX3, _CY2, _CY3, _CZ3, _CZ_2D, _W2, _W3
from simsplit.backends.cpu.neq_codec import pull_cpu, store_cpu
from simsplit.backends.cpu.storage_codec import round_even
from simsplit.fluid.forces import body_links, measure_forces
from simsplit.fluid.state import raw_populations
from simsplit.numerics import neq_storage
from simsplit.numerics.flags import SOLID
from simsplit.numerics.lattice import D2Q9, D3Q19
from tests.conftest import body_case, body_case_3d, fluid_case

_TABLES = {19: (_CX3, _CY3, _CZ3, _W3), 9: (_CX2, _CY2, _CZ_2D, _W2)}
_EDGE_K = [-32768, -1100, -1023, -1022, -300, -276, -275, -200, -175, -150, -149, -141, -127,
           -126, -125, -40, -20, -1, 0, 1, 100, 113, 127, 128, 200, 1023, 1024, 32767]


@numba.njit(cache=False)
def _pulls(rec, cx, cy, cz, w):
    out = np.empty((len(w),) + rec.shape[1:], np.float32)
    for k in range(rec.shape[1]):
        for j in range(rec.shape[2]):
            for i in range(rec.shape[3]):
                for q in range(len(w)):
                    out[q, k, j, i] = pull_cpu(rec, q, k, j, i, cx, cy, cz, w)
    return out


@numba.njit(cache=False)
def _stores(post, rec, flags, j0, j1, cx, cy, cz, w):
    feq = np.empty(len(w), np.float32)
    for k in range(rec.shape[1]):
        for j in range(j0, j1):
            for i in range(1, rec.shape[3] - 1):
                if not flags[k, j, i] & SOLID:
                    store_cpu(rec, post[:, k, j, i].copy(), feq, k, j, i, cx, cy, cz, w)


def _shape(q: int) -> tuple[int, int, int]:
    return (3, 6, 37) if q == 19 else (40, 1, 53)


def _records(q: int, rng: np.random.Generator, stress: bool) -> np.ndarray:
    """Records: half encoded from near-equilibrium populations, half random bits with edge
    exponents (NaN and inf moments and stresses included)."""
    shape = _shape(q)
    w = np.array(_TABLES[q][3], np.float32)[:, None, None, None]
    f = w * (1 + 0.02 * rng.standard_normal((q, *shape))).astype(np.float32)
    rec = neq_storage.encode(f, stress=stress)
    wild = rng.integers(0, 1 << 16, rec.shape, dtype=np.uint16)
    exps = np.array(_EDGE_K, np.int16).view(np.uint16)
    wild[q] = np.where(rng.random(shape) < 0.7, rng.choice(exps, shape), wild[q])
    wild[:q, ..., :3] = np.array([0, 1, 0x8000, 0x7FFF, 0xFFFF], np.uint16)[
        rng.integers(0, 5, (q, *shape[:2], 3))]
    half = rng.random(shape) < 0.5
    return np.where(half, wild, rec)


#: (q, serial, stress) of the unit checks: D2Q9's threaded decode and encode run in the
#: whole-run test with row kernels below (their compile was 17 s of CI), D3Q19's only here;
#: stress-kept records (neq16s) serial (their threaded kernels: the whole-run tests)
UNIT_VARIANTS = pytest.mark.parametrize(
    "q, serial, stress", [(9, True, False), (19, True, False), (19, False, False),
                          (9, True, True), (19, True, True)],
    ids=["d2q9-serial", "d3q19-serial", "d3q19-threaded", "d2q9s-serial", "d3q19s-serial"])


@UNIT_VARIANTS
def test_decode_is_pull(q: int, serial: bool, stress: bool) -> None:
    rng = np.random.default_rng(5)
    rec = _records(q, rng, stress)
    want = _pulls(rec, *_TABLES[q])
    got = np.full_like(want, np.nan)
    kernel, args = nl.decode(rec, got, 0, rec.shape[1], 0, serial)
    kernel(*args)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def _posts(q: int, rng: np.random.Generator) -> np.ndarray:
    """Post-collision populations whose deviations from equilibrium span 1e-45 .. 1e30 (and
    exact equilibria, inf and NaN)."""
    shape = _shape(q)
    w = np.array(_TABLES[q][3], np.float32)[:, None, None, None]
    scale = 10.0 ** rng.uniform(-46, -1, shape)
    post = (w * (1 + 0.05 * rng.standard_normal((q, *shape)) * scale)).astype(np.float32)
    rest = rng.random(shape) < 0.1
    post = np.where(rest, np.broadcast_to(w, post.shape), post)
    row = post[:, 0, 1 if q == 19 else 0]  # special cells, in an interior row
    row[3, 1] = 1e30
    row[5, 2] = -3e38
    row[2, 3] = np.inf
    row[1, 4] = np.nan
    for c, tiny in enumerate([1e-44, 3e-42, 1e-40, 2e-38, 1e-36, 1e-34]):  # rho rounds to 0
        row[:, 5 + c] = np.float32(tiny) * np.arange(1, q + 1, dtype=np.float32)
    return post


@UNIT_VARIANTS
def test_encode_is_store(q: int, serial: bool, stress: bool) -> None:
    """Serial, and threaded (vectorised across x: the run's kernels)."""
    rng = np.random.default_rng(7)
    post = _posts(q, rng)
    slots = neq_storage.record_slots(q, stress)
    before = rng.integers(0, 1 << 16, (slots, *_shape(q)), dtype=np.uint16)
    flags = np.where(rng.random(_shape(q)) < 0.2, SOLID, 0).astype(np.uint8)
    flags[0, 1 if q == 19 else 0, :12] = 0  # the special cells
    j0, j1 = (1, _shape(q)[1] - 1) if q == 19 else (0, 1)
    want = before.copy()
    _stores(post, want, flags, j0, j1, *_TABLES[q])
    got = before.copy()
    kernel, args = nl.encode(post, got, flags, 0, post.shape[1], 0, (j0, j1), serial)
    kernel(*args)
    assert (want != before).any() and (want[slots - 1] != before[slots - 1]).any()
    np.testing.assert_array_equal(got, want)


@numba.njit(cache=False)
def _scaled(n, k):
    out = np.empty((2, n.size, k.size), np.float32)
    for a in range(n.size):
        for b in range(k.size):
            out[0, a, b] = np.float32(fast16.ldexp(float(n[a]), int(k[b])))
            e1, e2 = nl._split(k[b])
            out[1, a, b] = (np.float32(n[a]) * nl._pow2_32(e1)) * nl._pow2_32(e2)
    return out


def test_split_scaling_is_ldexp_rounded_once() -> None:
    """Every int16 exponent and significands at the ends: pull's float32(ldexp(n, k)) equals
    the chunk decode's two float32 products."""
    n = np.array([0, 1, -1, 3, -5, 12345, 32767, -32767, -32768], np.int64)
    k = np.arange(-32768, 32768, dtype=np.int64)
    out = _scaled(n, k)
    np.testing.assert_array_equal(out[1].view(np.uint32), out[0].view(np.uint32))


@numba.njit(cache=False)
def _exponents(top):
    out = np.empty((2, top.size), np.int64)
    for a in range(top.size):
        t = float(top[a])
        e = 0
        if t > 0.0:
            e = math.frexp(t)[1] - 15
            r = abs(math.ldexp(t, -e))
            if (r + 2.0**52) - 2.0**52 >= 2.0**15:
                e += 1
        out[0, a] = e
        out[1, a] = nl._exponent(top[a])
    return out


def test_exponent_is_store_s() -> None:
    """The block exponent from the bits equals store's frexp and rounding test, for every
    float32 exponent at and around the rounding boundary, random values, 0 and inf."""
    rng = np.random.default_rng(3)
    edge = np.array([32767.0, 32767.5, 32767.75, 32768.0, 16384.0], np.float32)
    tops = [np.nextafter(edge, np.float32(0)), edge, np.nextafter(edge, np.float32(np.inf))]
    tops = np.concatenate(tops)[:, None] * np.float32(2.0) ** np.arange(-140, 100)[None, :]
    rand = rng.integers(0, 0x7F800001, 200000, dtype=np.uint32).view(np.float32)
    top = np.concatenate([tops.ravel().astype(np.float32), rand,
                          np.array([0.0, np.inf, 1e-45, 3e-45], np.float32)])
    out = _exponents(top)
    np.testing.assert_array_equal(out[1], out[0])


@numba.njit(cache=False)
def _significands(top, d):
    out = np.empty((2, top.size), np.int64)
    for a in range(top.size):
        e = nl._exponent(top[a])
        out[0, a] = np.int64(round_even(fast16.ldexp(float(d[a]), -e)))
        m1, m2 = nl._scales(e)
        out[1, a] = np.int64(np.int32(nl._round_even32((d[a] * m1) * m2)))
    return out


@numba.njit(cache=False)
def _velocity_bits(x):
    out = np.empty((2, x.size), np.int64)
    for a in range(x.size):
        out[0, a] = fast16.f32_bits(x[a])
        out[1, a] = np.int64(nl._bits(x[a]))
    return out


def test_significands_and_velocity_bits_are_store_s() -> None:
    """Deviations of every magnitude under their cell's largest (itself, its negative, a
    random fraction, subnormals): the float32 scaling and rounding give store's float64
    significand; u's bits are fast16's (NaN canonical)."""
    rng = np.random.default_rng(9)
    top = rng.integers(1, 0x7F800000, 300000, dtype=np.uint32).view(np.float32)
    frac = rng.uniform(-1, 1, top.size).astype(np.float32)
    frac[::7] = 1.0
    frac[1::7] = -1.0
    frac[2::7] = np.float32(2.0**-60) * rng.uniform(-1, 1, top[2::7].size).astype(np.float32)
    d = (top * frac).astype(np.float32)
    d[3::7] = np.float32(1e-45) * rng.integers(-3, 4, top[3::7].size)
    out = _significands(top, d)
    np.testing.assert_array_equal(out[1], out[0])
    x = rng.integers(0, 1 << 32, 100000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = _velocity_bits(x)
    np.testing.assert_array_equal(bits[1], bits[0])


# --- whole runs: chunks against the records kernel cell by cell --------------------------------
def _runs(case: Any, monkeypatch, planes: str, steps: int) -> tuple[np.ndarray, ...]:
    monkeypatch.setenv(nc.PLANES_ENV, planes)
    sim = Simulation(case)
    sim.step(steps)
    out = [raw_populations(sim.solver), sim.velocity(), sim.density()]
    if sim.solver.setup.bodies:
        out.append(measure_forces(sim.solver, body_links(sim.solver.setup)))
    return tuple(out)


def _open_2d(n: int, storage: str = "neq16") -> dict[str, Any]:
    return body_case(30, 16, n, run__precision="float32", run__storage=storage,
                     domain__bounce_back="linear",
                     domain__outlet={"kind": "convective", "pressure_weight": 0.25})


def _open_3d(n: int, storage: str = "neq16") -> dict[str, Any]:
    case = body_case_3d(14, 7, 12, n, run__precision="float32", run__storage=storage)
    case["domain"].update(bounce_back="quadratic", outlet={"kind": "zero_gradient"})
    case["domain"]["boundaries"]["y"] = "slip"
    return case


def _channel_3d(n: int) -> dict[str, Any]:
    return fluid_case(10, 9, n, **{"domain__shape": [10, 9, 12], "run__precision": "float32",
                                   "run__storage": "neq16", "fluid__reynolds": None,
                                   "fluid__viscosity": 0.05,
                                   "fluid__body_force": [2e-5, 1e-6, 0.0],
                                   "domain__boundaries": {"x": "periodic", "y": "periodic",
                                                          "z": "periodic", "lid": False}})


@pytest.mark.parametrize("make, steps", [(_open_2d, 30), (_open_3d, 16), (_channel_3d, 20),
                                         (partial(_open_2d, storage="neq16s"), 30),
                                         (partial(_open_3d, storage="neq16s"), 16)],
                         ids=["open2d", "open3d", "channel3d", "open2d-neq16s", "open3d-neq16s"])
def test_chunks_equal_the_records_kernel(make, steps: int, monkeypatch, one_thread) -> None:
    """Bodies (linear 2D, quadratic 3D), inlet, outlets (convective with pressure, zero
    gradient), free-slip walls, periodic x and y, plain and stress-kept records: records,
    velocity, density and forces of the chunk path (one plane and two planes a chunk, 1 and 3
    slabs) equal the records kernel's cell by cell."""
    want = _runs(make(1), monkeypatch, "0", steps)
    for n, planes in ((1, "2"), (3, "1"), (3, "")):
        got = _runs(make(n), monkeypatch, planes, steps)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.cpu_rows
@pytest.mark.cpu_threads
@pytest.mark.parametrize("make, steps", [(lambda n: _open_2d(n), 12),
                                         (lambda n: fluid_case(24, 18, n, **{
                                             "run__precision": "float32",
                                             "run__storage": "neq16"}), 12)],
                         ids=["open2d", "cavity2d"])
def test_chunks_with_row_kernels_equal_the_records_kernel(make, steps: int,
                                                          monkeypatch) -> None:
    """The chunk path as runs take it outside the test suite: the vectorised row kernel on the
    decoded planes (most cells of a cavity; the bodies' and open faces' neighbours go to the
    scalar pass), threaded decode and encode: records, velocity and density equal the records
    kernel's cell by cell on 1 and 3 slabs."""
    want = _runs(make(1), monkeypatch, "0", steps)
    for n in (1, 3):
        got = _runs(make(n), monkeypatch, "", steps)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


@numba.njit(cache=False)
def _store_cells(post, rec, cx, cy, cz, w, originals):
    feq = np.empty(len(w), np.float32)
    for i in range(rec.shape[3]):
        if originals:
            neq_codec.store(rec, post[:, i].copy(), feq, 0, 0, i, cx, cy, cz, w)
        else:
            store_cpu(rec, post[:, i].copy(), feq, 0, 0, i, cx, cy, cz, w)


@numba.njit(cache=False)
def _pull_cells(rec, cx, cy, cz, w, originals):
    out = np.empty((len(w), rec.shape[3]), np.float32)
    for i in range(rec.shape[3]):
        for q in range(len(w)):
            out[q, i] = neq_codec.pull(rec, q, 0, 0, i, cx, cy, cz, w) if originals else \
                pull_cpu(rec, q, 0, 0, i, cx, cy, cz, w)
    return out


@pytest.mark.parametrize("originals", [False, True], ids=["cpu", "originals"])
@pytest.mark.parametrize("stress", [False, True], ids=["plain", "stress"])
@pytest.mark.parametrize("lattice", [D2Q9, D3Q19], ids=["d2q9", "d3q19"])
def test_scalar_codec_is_the_reference(study, lattice, stress, originals) -> None:
    """The CPU's scalar store and pull (and the originals Numba CUDA compiles) write
    ``neq_storage.encode``'s records and rebuild ``decode``'s populations bit for bit, plain
    and stress-kept (the record's slot count tells them apart)."""
    f, _ = study.neq_check_input(lattice, 3000, seed=31)
    tables = _TABLES[lattice.q]
    expected = neq_storage.encode(f, stress=stress)
    rec = np.zeros((expected.shape[0], 1, 1, f.shape[1]), np.uint16)
    _store_cells(np.ascontiguousarray(f), rec, *tables, originals)
    np.testing.assert_array_equal(rec[:, 0, 0], expected)
    got = _pull_cells(expected.reshape(expected.shape[0], 1, 1, -1).copy(), *tables, originals)
    np.testing.assert_array_equal(got.view(np.uint32),
                                  neq_storage.decode(expected).view(np.uint32))
