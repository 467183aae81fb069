"""The CPU row kernels (simsplit/backends/cpu/rowgen.py) give the bits of the cell-by-cell kernel.

The launchers run the generated, vectorised row kernel and then the scalar pass on the cells it
leaves; ``_stream_collide(..., every_cell=True)`` is the scalar kernel on every fluid cell, the
arithmetic the other backends match. Random populations, walls, the lid, a body, periodic axes;
in 3D also a velocity inlet and a pressure outlet on the x faces and interpolated (Bouzidi) links
on cells next to the body, the rules only the scalar pass knows.
"""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.backends.cpu import d2q9, d3q19
from simsplit.backends.cpu.rowgen import serial
from simsplit.numerics import flags as fl
from simsplit.numerics.lattice import D2Q9, D3Q19, Lattice
from simsplit.numerics.lbm_params import OUTLET_CONVECTIVE, D2Q9Params, D3Q19Params
from simsplit.numerics.storage import population_storage

pytestmark = pytest.mark.cpu_rows


def _threaded(*values):
    """A parameter set run on the threaded builds (``cpu_threads``: the ones users run); the
    others run the serial twins, the same source and bits in a third of the compile time."""
    return pytest.param(*values, marks=pytest.mark.cpu_threads)


def _flags(lattice: Lattice, shape: tuple[int, ...], periodic: tuple[bool, ...]) -> np.ndarray:
    """Walls round the non-periodic in-slab axes, a wall below and the lid above the split
    axis, a small body, NEAR_WALL where a pull source is a boundary (periodic axes wrap)."""
    flags = np.zeros(shape, np.uint8)
    flags[0], flags[-1] = fl.WALL, fl.LID
    for ax, per in enumerate(periodic[::-1], start=1):  # array axes after the split axis
        if not per:
            idx: list = [slice(None)] * len(shape)
            for end in (0, -1):
                idx[ax] = end
                flags[tuple(idx)] = fl.WALL
    flags[(slice(3, 5),) * len(shape)] = fl.WALL
    solid = (flags & fl.BOUNDARY) != 0
    for ax, per in enumerate(periodic[::-1], start=1):
        if per:
            solid = np.moveaxis(solid, ax, 0)
            solid[0], solid[-1] = solid[-2], solid[1]
            solid = np.moveaxis(solid, 0, ax)
    near = np.zeros_like(solid)
    inner = tuple(slice(1, n - 1) for n in shape)
    for c in lattice.c:
        off = tuple(int(v) for v in c[::-1])
        near[inner] |= solid[tuple(slice(1 - d, n - 1 - d) for d, n in zip(off, shape,
                                                                            strict=True))]
    flags[near & ~solid] |= fl.NEAR_WALL
    return flags


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x.view(np.uint8), y.view(np.uint8)) for x, y in zip(a, b,
                                                                               strict=True))


_FORCED, _FREE = (1e-4, -2e-5), (0.0, 0.0)


def _d2q9_state(rng: np.random.Generator, nx: int, ny: int, storage, dtype,
                periodic_x: bool) -> tuple[np.ndarray, np.ndarray]:
    """Random populations near rest in ``storage`` and the flags of :func:`_flags`."""
    st = population_storage(storage, dtype)
    f = st.encode(D2Q9.w[:, None, None] * (1 + 0.1 * rng.standard_normal((9, ny + 2, nx + 2))),
                  D2Q9.w)
    return f, _flags(D2Q9, (ny + 2, nx + 2), (periodic_x,))


@pytest.mark.parametrize(("dtype", "storage", "periodic_x", "force"), [
    _threaded(np.float32, np.float32, False, _FORCED),
    *((dt, dt, per, force) for dt in (np.float32, np.float64) for per in (False, True)
      for force in (_FORCED, _FREE) if (dt, per, force) != (np.float32, False, _FORCED)),
    (np.float32, np.float16, True, _FORCED),
    (np.float32, "e4m11", False, _FREE),
])
def test_d2q9_rows_match_the_scalar_kernel(dtype, storage, periodic_x, force) -> None:
    """Without a force the row kernel leaves the Guo terms and zero products out; the scalar
    kernel (every backend's arithmetic) still computes them: the same bits, populations
    stored in the arithmetic type or 16 bits (run.storage). Where x is not periodic its faces
    are an inlet and a convective outlet (its previous values updated alike)."""
    rng = np.random.default_rng(7)
    nx, ny = 29, 17
    f, flags = _d2q9_state(rng, nx, ny, storage, dtype, periodic_x)
    if not periodic_x:
        flags[1:-1, 0], flags[1:-1, -1] = fl.INLET, fl.OUTLET
        flags[1:-1, [1, -2]] |= fl.NEAR_WALL
    p = D2Q9Params(omega_plus=1.3, omega_minus=1.1, lid_velocity=0.1, force_x=force[0],
                   force_y=force[1], periodic_x=periodic_x, outlet_kind=OUTLET_CONVECTIVE,
                   outlet_courant=0.05, outlet_pressure_weight=0.25)
    inlet = (0.05 * rng.random(ny + 2)).astype(dtype)
    slots0 = (D2Q9.w[:, None] * (1 + 0.1 * rng.standard_normal((9, ny + 2)))).astype(dtype)
    out = []
    for new in (True, False):
        g = np.zeros_like(f)
        m = [np.full((ny, nx), 5.0, dtype) for _ in range(3)]
        slots = slots0.copy()
        if new:
            d2q9.D2Q9Kernels().stream_collide(f, g, flags, *m, (1, ny + 1), p, True,
                                              inlet=inlet, outlet_slots=slots)
        else:
            raw, scalar = d2q9.raw_view, serial(d2q9._stream_collide)
            scalar(raw(f), raw(g), flags, *m, 1, ny + 1, 1.3, 1.1, 0.1, *force, periodic_x,
                   True, inlet, 1.0, 1.0, np.full((9, 1, 1), -1.0, dtype), OUTLET_CONVECTIVE,
                   *p.convective_weights, 0.25, slots, raw(f), 0, True)
        out.append([g, *m, slots])
    assert _same(*out)
    assert periodic_x or not np.array_equal(out[0][-1], slots0)


@pytest.mark.parametrize(("dtype", "storage", "force", "threads"), [
    *((*case, threads) for case in ((np.float32, np.float32, _FREE),
                                    (np.float64, np.float64, _FORCED),
                                    (np.float32, np.float16, _FORCED)) for threads in (1, 2)),
    _threaded(np.float32, np.float32, _FREE, 2),
])
def test_d2q9_two_steps_match_two_scalar_steps(dtype, storage, force, threads,
                                               monkeypatch) -> None:
    """Two steps per sweep (the ring of step t + 1 rows, each chunk's first and last rows
    computed by both chunks next to them) give the scalar kernel's bits of two steps, walls,
    lid and a body included, rho/u of the second step. The kernel cuts the rows into one
    chunk per thread; where the process has fewer threads (a pytest-xdist worker gets one per
    core) the chunks of ``threads`` threads run on the threads there are: the same bits."""
    import numba

    nx, ny = 23, 19
    f, flags = _d2q9_state(np.random.default_rng(9), nx, ny, storage, dtype, False)
    p = D2Q9Params(omega_plus=1.3, omega_minus=1.1, lid_velocity=0.1, force_x=force[0],
                   force_y=force[1], periodic_x=False)
    kernels = d2q9.D2Q9Kernels()
    assert kernels.two_steps_cover(flags, p)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    monkeypatch.setattr(numba, "get_num_threads", lambda: threads)
    try:
        out = []
        for fused in (True, False):
            g = np.zeros_like(f)
            m = [np.full((ny, nx), 5.0, dtype) for _ in range(3)]
            if fused:
                kernels.stream_collide_two_steps(f, g, flags, *m, (1, ny + 1), p, True)
            else:
                raw, h, scalar = d2q9.raw_view, f.copy(), serial(d2q9._stream_collide)
                for src, dst in ((f, h), (h, g)):
                    scalar(raw(src), raw(dst), flags, *m, 1, ny + 1, 1.3, 1.1, 0.1, *force,
                           False, True, np.zeros(ny + 2, dtype), 1.0, 1.0,
                           np.full((9, 1, 1), -1.0, dtype), 0, 1.0, 0.0, 0.0,
                           np.zeros((9, 1), dtype), raw(src), 0, True)
            out.append([g, *m])
    finally:
        monkeypatch.undo()
        numba.set_num_threads(before)
    assert _same(*out)
    assert not np.array_equal(out[0][0][:, 1:-1, 1:-1], f[:, 1:-1, 1:-1])


def test_d2q9_two_steps_only_where_the_rows_take_every_cell() -> None:
    """Cells the row kernel leaves to the scalar pass (an open face, the ends of a periodic
    x) keep a block on one step per sweep; the two-step launcher refuses them."""
    ny, nx = 9, 12
    p = D2Q9Params(omega_plus=1.2, omega_minus=1.2, lid_velocity=0.0, force_x=0.0,
                   force_y=0.0, periodic_x=False)
    kernels = d2q9.D2Q9Kernels()
    walled = _flags(D2Q9, (ny + 2, nx + 2), (False,))
    assert kernels.two_steps_cover(walled, p)
    periodic = _flags(D2Q9, (ny + 2, nx + 2), (True,))
    assert not kernels.two_steps_cover(periodic, D2Q9Params(
        omega_plus=1.2, omega_minus=1.2, lid_velocity=0.0, force_x=0.0, force_y=0.0,
        periodic_x=True))
    opened = walled.copy()
    opened[1:-1, -1] = fl.OUTLET
    assert not kernels.two_steps_cover(opened, p)
    f = np.tile(D2Q9.w[:, None, None], (1, ny + 2, nx + 2))
    m = [np.zeros((ny, nx)) for _ in range(3)]
    with pytest.raises(ValueError, match="two_steps_cover"):
        kernels.stream_collide_two_steps(f, f.copy(), opened, *m, (1, ny + 1), p, False)


def _cavity(shape: tuple[int, ...], temporal_blocking: bool, x: str = "wall",
            slabs: int = 1) -> object:
    from simsplit.case import validate_case
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    case = validate_case({
        "physics": "fluid",
        "fluid": {"viscosity": 0.05, "lid_velocity": 0.1, "collision": "trt"},
        "domain": {"shape": list(shape), "boundaries": {"x": x, "y": "wall", "lid": True}},
        "decomposition": {"subdomains": slabs},
        "run": {"backend": "cpu", "precision": "float32",
                "temporal_blocking": temporal_blocking},
        "output": {"dir": None},
    }, source="test")
    run = case["run"]
    return FluidSolver(case, ParallelContext("cpu", run["devices"], run["transport"]))


@pytest.mark.parametrize("slabs", [1, 2, 3])
def test_d2q9_cavity_two_steps_per_sweep_keeps_the_bits(slabs: int) -> None:
    """A cavity on 1-3 slabs goes two steps per sweep (run.temporal_blocking; the slabs'
    second ghost planes filled from each other) and gets the bits of one step per sweep on
    one slab, after odd and even step counts; a periodic x stays on one step per sweep."""
    fused, single = _cavity((21, 17), True, slabs=slabs), _cavity((21, 17), False)
    assert (fused.steps_per_sweep, single.steps_per_sweep) == (2, 1)
    for n in (3, 8):
        fused.step(n)
        single.step(n)
        assert _same([fused.populations(), fused.density(), fused.velocity()],
                     [single.populations(), single.density(), single.velocity()])
    assert _cavity((21, 17), True, x="periodic", slabs=slabs).steps_per_sweep == 1


def test_d2q9_pairs_through_the_transport(monkeypatch) -> None:
    """Slabs not on one device of one process (ranks, several devices) pair their steps
    too: the halo faces' two boundary planes go through the transport after each sweep
    (simsplit/fluid/pairs.py, forced here in one process); the bits of one slab stepping
    singly."""
    from simsplit.fluid.solver import FluidSolver

    monkeypatch.setattr(FluidSolver, "_halos_stay_on_one_device", lambda self: False)
    fused, single = _cavity((21, 17), True, slabs=3), _cavity((21, 17), False)
    assert fused.steps_per_sweep == 2 and not fused._pairs.direct
    for n in (3, 8):
        fused.step(n)
        single.step(n)
        assert _same([fused.populations(), fused.density(), fused.velocity()],
                     [single.populations(), single.density(), single.velocity()])


def _open_x_faces(flags: np.ndarray) -> None:
    """A velocity inlet on the low x face, a pressure outlet on the high one (their ghost cells
    between the walls), NEAR_WALL on the fluid cells pulling from them."""
    inner = (slice(1, -1), slice(1, -1))
    for end, kind, side in ((0, fl.INLET, 1), (-1, fl.OUTLET, -2)):
        face = flags[(*inner, end)]
        face[:] = kind
        cells = flags[(*inner, side)]
        cells[(cells & fl.SOLID) == 0] |= fl.NEAR_WALL


def _curved_links(flags: np.ndarray, rng: np.random.Generator, dtype) -> np.ndarray:
    """Bouzidi weights on half the cells next to the body (CURVED), both forms (k >= 0: the
    neighbour x + c_q; k < 0: the own cell's q); halfway (-1) elsewhere."""
    links = np.full((19, *flags.shape), -1.0)
    near_body = np.zeros(flags.shape, bool)
    near_body[(slice(2, 6),) * 3] = True
    curved = near_body & ((flags & fl.NEAR_WALL) != 0) & (rng.random(flags.shape) < 0.5)
    flags[curved] |= fl.CURVED
    links[:, curved] = rng.uniform(-1.0, 1.0, (19, int(curved.sum())))
    return links.astype(dtype)


@pytest.mark.parametrize(("dtype", "storage", "periodic", "forced"), [
    _threaded(np.float32, np.float32, (False, False), False),
    (np.float32, np.float32, (True, True), True),
    (np.float32, np.float16, (True, False), False),
    (np.float64, np.float64, (False, True), True),
])
def test_d3q19_rows_match_the_scalar_kernel(dtype, storage, periodic, forced) -> None:
    """Where x is not periodic its faces are an inlet and a convective outlet (its previous
    values updated alike); every case has curved links next to the body."""
    rng = np.random.default_rng(8)
    nx, ny, nz = 13, 11, 7
    st = population_storage(storage, dtype)
    values = (D3Q19.w[:, None, None, None]
              * (1 + 0.1 * rng.standard_normal((19, nz + 2, ny + 2, nx + 2)))).astype(dtype)
    f = st.encode(values, D3Q19.w) if st.shifted else values
    flags = _flags(D3Q19, (nz + 2, ny + 2, nx + 2), periodic)
    if not periodic[0]:
        _open_x_faces(flags)
    links = _curved_links(flags, rng, dtype)
    inlet = (0.05 * rng.random((nz + 2, ny + 2))).astype(dtype)
    force = (1e-4, -2e-5, 3e-5) if forced else (0.0, 0.0, 0.0)
    p = D3Q19Params(omega_plus=1.3, omega_minus=1.1, lid_velocity=0.1, force_x=force[0],
                    force_y=force[1], force_z=force[2], periodic_x=periodic[0],
                    periodic_y=periodic[1], inlet_scale=0.75, outlet_density=1.02,
                    outlet_kind=OUTLET_CONVECTIVE, outlet_courant=0.05,
                    outlet_pressure_weight=0.25)
    assert p.forced == forced
    slots0 = (D3Q19.w[:, None, None] * (1 + 0.1 * rng.standard_normal((19, nz + 2, ny + 2)))
              ).astype(dtype)
    out = []
    for new in (True, False):
        g = np.zeros_like(f)
        m = [np.full((nz, ny, nx), 5.0, dtype) for _ in range(4)]
        slots = slots0.copy()
        if new:
            d3q19.D3Q19Kernels().stream_collide(f, g, flags, *m, (1, nz + 1), p, True,
                                                inlet=inlet, links=links, outlet_slots=slots)
        else:
            raw, scalar = d3q19.raw_view, serial(d3q19._stream_collide)
            scalar(raw(f), raw(g), flags, *m, 1, nz + 1, 1.3, 1.1, 0.1, *force, *periodic, True,
                   forced, inlet, 0.75, 1.02, links, OUTLET_CONVECTIVE, *p.convective_weights,
                   0.25, slots, raw(f), 0, True)
        out.append([g, *m, slots])
    assert _same(*out)
    assert periodic[0] or not np.array_equal(out[0][-1], slots0)


def test_rows_off_runs_the_scalar_kernel_only(monkeypatch) -> None:
    """``SIMSPLIT_CPU_ROWS=0`` (the test suite's default): the launcher compiles no row kernel
    and gives the scalar kernel's bits on every cell."""
    from simsplit.backends.cpu.rowgen import ROWS_ENV

    monkeypatch.setenv(ROWS_ENV, "0")
    nx, ny, nz = 6, 5, 4
    f = np.random.default_rng(3).uniform(0.01, 0.1, (19, nz + 2, ny + 2, nx + 2))
    flags = _flags(D3Q19, (nz + 2, ny + 2, nx + 2), (False, False))
    p = D3Q19Params(omega_plus=1.3, omega_minus=1.1, lid_velocity=0.1, force_x=0.0,
                    force_y=0.0, force_z=0.0, periodic_x=False, periodic_y=False)
    kernels = [*d3q19._rows.values(), *map(serial, d3q19._rows.values())]
    compiled = [len(k.overloads) for k in kernels]
    out = []
    for launcher in (True, False):
        g = np.zeros_like(f)
        m = [np.zeros((nz, ny, nx)) for _ in range(4)]
        if launcher:
            d3q19.D3Q19Kernels().stream_collide(f, g, flags, *m, (1, nz + 1), p, False)
        else:
            serial(d3q19._stream_collide)(f, g, flags, *m, 1, nz + 1, 1.3, 1.1, 0.1, 0.0, 0.0,
                                          0.0, False, False, False, False, np.zeros((1, 1)),
                                          1.0, 1.0, np.full((19, 1, 1, 1), -1.0), 0, 1.0, 0.0,
                                          0.0, np.zeros((19, 1, 1)), f, 0, True)
        out.append([g, *m])
    assert _same(*out)
    assert [len(k.overloads) for k in kernels] == compiled
