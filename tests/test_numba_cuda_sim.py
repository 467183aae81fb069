"""Numba CUDA kernels on Numba's CUDA simulator against the CPU backend (no GPU needed).

The simulator must be on before ``numba.cuda`` is first imported, and other test modules import
it without. So this module's tests run in a child pytest started with NUMBA_ENABLE_CUDASIM=1;
in the parent process only the launcher test runs, and in the child only the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import IN_SIMULATOR, OUTLETS, outlet_params, run_in_cuda_simulator

ROOT = Path(__file__).resolve().parents[1]
in_child = pytest.mark.skipif(not IN_SIMULATOR,
                              reason="runs in the simulator child of test_simulator_suite")
TOL = {np.float64: 1e-13, np.float32: 1e-6}  #: max |difference| / max |cpu value|


@pytest.mark.skipif(IN_SIMULATOR, reason="this is the child process")
def test_simulator_suite() -> None:
    run_in_cuda_simulator(__file__, timeout=600)


# --- everything below runs in the child -----------------------------------------------------
def _backends() -> tuple[Any, Any]:
    from simsplit.backends import get_backend

    return get_backend("cpu"), get_backend("numba-cuda")


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    scale = float(np.max(np.abs(b))) or 1.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) / scale


def _fluid_case(nx: int, ny: int, subdomains: int, precision: str,
                fluid: dict | None = None, boundaries: dict | None = None) -> dict:
    from simsplit.case import validate_case

    case = {
        "physics": "fluid",
        "fluid": {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt", **(fluid or {})},
        "domain": {"shape": [nx, ny], **({"boundaries": boundaries} if boundaries else {})},
        "decomposition": {"subdomains": subdomains},
        "run": {"backend": "numba-cuda", "precision": precision, "transport": "local"},
        "output": {"dir": None},
    }
    return validate_case(case)


@in_child
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("collision", ["bgk", "trt"])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("top", ["lid", "wall"])
@pytest.mark.parametrize("force", [(0.0, 0.0), (2e-5, -1e-5)])
def test_stream_collide_matches_cpu(dtype, collision, periodic, top, force) -> None:
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.numerics.lbm_params import D2Q9Params

    om_p = 1.0 / 0.8
    om_m = om_p if collision == "bgk" else 1.0 / (0.1875 / (0.8 - 0.5) + 0.5)
    params = D2Q9Params(om_p, om_m, 0.08, force[0], force[1], periodic)
    faces = (Face.WALL, Face.LID if top == "lid" else Face.WALL)
    cpu, gpu = _backends()
    blocks = [D2Q9Block(be, 8, 6, 0, faces, params, dtype) for be in (cpu, gpu)]
    rng = np.random.default_rng(7)
    f0 = (np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
          * (1.0 + 0.05 * rng.standard_normal((9, 6, 8))))
    for blk in blocks:
        blk.set_populations(f0)
    for step in range(4):
        for blk in blocks:
            if step == 2:  # a partial row range, as the overlapped time loop uses
                blk.stream_collide((1, 3))
                blk.stream_collide((3, 7), store_macro=False)
            else:
                blk.stream_collide(store_macro=step == 3)
            blk.swap()
    ref, out = blocks
    assert _rel_err(out.populations(), ref.populations()) <= TOL[dtype]
    for name in ("rho", "ux", "uy"):
        a, b = gpu.to_host(getattr(out, name)), cpu.to_host(getattr(ref, name))
        assert _rel_err(a, b) <= TOL[dtype], name


@in_child
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int16, np.uint16])
@pytest.mark.parametrize("direction", [0, 1])
def test_pack_unpack_match_cpu(dtype, direction) -> None:
    """Every population storage type (int16: e4m11 bits; uint16: neq16 records, 15 slots a
    cell, of which a halo moves the crossing populations' significands and the whole record's
    moments and exponent: 9)."""
    cpu, gpu = _backends()
    rng = np.random.default_rng(3)
    slots, rows = (15, 9) if dtype == np.uint16 else (9, 3)
    f = (rng.random((slots, 7, 10)) * 1000).astype(dtype)
    buf_in = (rng.random((rows, 10)) * 1000).astype(dtype)
    for row in (1, 5):
        want = np.zeros((rows, 10), dtype)
        cpu.d2q9.pack(f, row, direction, want)
        got = gpu.zeros((rows, 10), dtype)
        gpu.d2q9.pack(gpu.asarray(f), row, direction, got)
        np.testing.assert_array_equal(gpu.to_host(got), want)
        assert np.count_nonzero(want) > 0.9 * want.size  # every row of the buffer written
    for row in (0, 6):
        want = f.copy()
        cpu.d2q9.unpack(buf_in, want, row, direction)
        got = gpu.asarray(f)
        gpu.d2q9.unpack(gpu.asarray(buf_in), got, row, direction)
        np.testing.assert_array_equal(gpu.to_host(got), want)


@in_child
@pytest.mark.parametrize("flow, storage", [("cavity", "neq16"), ("channel", "neq16"),
                                           ("channel", "neq16s")])
def test_neq16_records_match_cpu(flow, storage) -> None:
    """run.storage neq16 (and neq16s, stress-kept) in 2D: a forced lid cavity, or a forced
    channel periodic in x, on 1 and 2 slabs (record halos) writes the CPU's records, velocity
    and density bit for bit."""
    from simsplit.fluid.solver import FluidSolver
    from simsplit.fluid.state import raw_populations
    from simsplit.parallel.context import ParallelContext

    fluid = {"reynolds": None, "viscosity": 0.05, "body_force": [2e-5, -1e-5]}
    bounds = {"x": "periodic", "y": "wall", "lid": False} if flow == "channel" else None
    runs = {}
    for backend, subdomains in (("cpu", 1), ("numba-cuda", 1), ("numba-cuda", 2)):
        case = _fluid_case(5, 6, subdomains, "float32", fluid, bounds)
        case["run"].update(backend=backend, storage=storage)
        solver = FluidSolver(case, ParallelContext(backend, transport="local"))
        solver.step(3)
        runs[(backend, subdomains)] = (raw_populations(solver), solver.velocity(),
                                       solver.density())
    ref = runs[("cpu", 1)]
    assert ref[0].dtype == np.uint16 and ref[0].shape == (15 if storage == "neq16" else 18, 6, 5)
    assert np.abs(ref[1]).max() > (0.05 if flow == "cavity" else 1e-5)
    for key, got in runs.items():
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=str(key))


@in_child
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_split_identity_and_cpu_agreement(precision) -> None:
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    runs = {}
    for backend, subdomains in (("numba-cuda", 1), ("numba-cuda", 2), ("numba-cuda", 3),
                                ("cpu", 2)):
        case = _fluid_case(8, 6, subdomains, precision)
        case["run"]["backend"] = backend
        solver = FluidSolver(case, ParallelContext(backend, transport="local"))
        solver.step(3)
        solver.step(2)
        runs[(backend, subdomains)] = (solver.populations(), solver.velocity())
    one = runs[("numba-cuda", 1)]
    for n in (2, 3):  # bitwise: the split changes which launch updates a cell, not its arithmetic
        np.testing.assert_array_equal(runs[("numba-cuda", n)][0], one[0])
        np.testing.assert_array_equal(runs[("numba-cuda", n)][1], one[1])
    cpu = runs[("cpu", 2)]
    tol = TOL[np.dtype(precision).type]
    assert _rel_err(one[0], cpu[0]) <= tol and _rel_err(one[1], cpu[1]) <= tol


@in_child
def test_periodic_channel_with_force() -> None:
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    pops = {}
    for backend in ("numba-cuda", "cpu"):
        fluid = {"reynolds": None, "viscosity": 0.1, "collision": "bgk",
                 "body_force": [1e-5, 0.0]}
        case = _fluid_case(8, 6, 2, "float64", fluid,
                           {"x": "periodic", "y": "wall", "lid": False})
        case["run"]["backend"] = backend
        solver = FluidSolver(case, ParallelContext(backend, transport="local"))
        solver.step(6)
        pops[backend] = solver.populations()
    assert _rel_err(pops["numba-cuda"], pops["cpu"]) <= TOL[np.float64]


@in_child
def test_reductions_and_copy() -> None:
    _, gpu = _backends()
    host = np.array([[1.5, -3.0], [np.nan, 2.0]])
    arr = gpu.asarray(host[:1])
    assert gpu.max_abs(arr) == 3.0
    assert gpu.minmax(arr) == (-3.0, 1.5)
    assert gpu.all_finite(arr) and not gpu.all_finite(gpu.asarray(host))
    other = gpu.zeros((1, 2), np.float64)
    assert gpu.max_abs_diff(arr, other) == 3.0
    gpu.copy(other, arr)
    np.testing.assert_array_equal(gpu.to_host(other), host[:1])
    assert gpu.max_abs(gpu.zeros((0,), np.float64)) == 0.0


@in_child
def test_capture_replays_the_same_steps() -> None:
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    solvers = []
    for _ in range(2):
        case = _fluid_case(8, 6, 2, "float64")
        solvers.append(FluidSolver(case, ParallelContext("numba-cuda", transport="local")))
    direct, replayed = solvers
    direct.step(4)
    backend = replayed.blocks[0].backend
    two_steps = backend.capture(lambda: replayed.step(2))  # even: buffers end where they began
    two_steps.replay()
    two_steps.replay()
    np.testing.assert_array_equal(replayed.populations(), direct.populations())


@in_child
@pytest.mark.parametrize("dim", [2, 3])
def test_neq16_refused_with_bodies(dim: int) -> None:
    """numba-cuda runs neq16 records in boxes only: with bodies, an inlet and an outlet the
    block refuses when it starts, in one line naming the storage, the boundaries, the backend
    and what is allowed."""
    from simsplit.case import validate_case
    from simsplit.errors import BackendUnavailable
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext
    from tests.conftest import body_case, body_case_3d

    raw = (body_case(30, 16, 1) if dim == 2 else body_case_3d(14, 7, 12, 1))
    raw["run"].update(backend="numba-cuda", precision="float32", storage="neq16",
                      transport="local")
    with pytest.raises(BackendUnavailable) as info:
        FluidSolver(validate_case(raw), ParallelContext("numba-cuda", transport="local"))
    text = str(info.value)
    assert text.startswith("run.storage: neq16 with domain.bodies, inlets, outlets or "
                           "free-slip walls is not allowed on backend numba-cuda (allowed: ")
    assert "\n" not in text


#: (arithmetic, run.storage) of the bitwise tests: in the arithmetic type, and narrower
STORAGE = [(np.float64, None), (np.float32, None), (np.float32, "float16"),
           (np.float32, "e4m11"), (np.float64, "float32"), (np.float64, "e4m11")]


#: (arithmetic, run.storage, outlet) of the bodies test: every storage with the pressure
#: outlet, every open outlet with a wide and a 16-bit storage
BODY_RUNS = [(*st, OUTLETS[0]) for st in STORAGE] + [
    (np.float64, None, outlet) for outlet in OUTLETS[1:]] + [
    (np.float32, "e4m11", outlet) for outlet in OUTLETS[1:]]


@in_child
@pytest.mark.parametrize("dtype, storage, outlet", BODY_RUNS)
@pytest.mark.parametrize("faces, bounce", [(("inlet", "outlet"), "linear"),
                                           (("outlet", "inlet"), "halfway")])
def test_stream_collide_with_bodies_matches_cpu(dtype, storage, outlet, faces, bounce) -> None:
    """Inlet, outlet (pressure, zero-gradient, convective) and body cells (issue #21), halfway
    or interpolated (Bouzidi): the Numba CUDA kernel bit for bit against the CPU kernel, a
    convective outlet's previous values too, on a middle slab (ghost rows of halo faces
    painted), ramped inflow; populations stored in every run.storage type."""
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.fluid.geometry import build_bodies
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.fluid.geometry.links import link_weights
    from simsplit.numerics.lattice import D2Q9
    from simsplit.numerics.lbm_params import D2Q9Params

    nx, ny = 12, 5
    (body,) = build_bodies({"shape": [nx, 15], "bodies": [
        {"name": "c", "shape": "circle", "centre": [5.0, 7.5], "radius": 6.0**0.5}]}, faces)
    solid = body.cells
    links = link_weights([body], solid, D2Q9, (False, False)) if bounce == "linear" else None
    sign = 1.0 if faces[0] == "inlet" else -1.0
    geometry = GridGeometry(solid, faces, sign * 0.07 * np.linspace(0.3, 1.0, 15), False,
                            links)
    params = D2Q9Params(1.0 / 0.8, 1.0 / 1.2, 0.0, 1e-5, 2e-5, False, inlet_scale=0.41,
                        outlet_density=0.991, **outlet_params(*outlet))
    cpu, gpu = _backends()
    blocks = [D2Q9Block(be, nx, ny, 5, (Face.HALO, Face.HALO), params, dtype, geometry,
                        storage) for be in (cpu, gpu)]
    rng = np.random.default_rng(2)
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
    f0 = w * (1.0 + 0.05 * rng.standard_normal((9, ny, nx)))
    for blk in blocks:
        blk.set_populations(f0)
    for step in range(3):
        for blk in blocks:
            blk.stream_collide(store_macro=step == 2)
            blk.swap()
    ref, out = blocks
    assert out.raw_populations().dtype == ref.storage.dtype
    np.testing.assert_array_equal(out.raw_populations().view(np.uint8),
                                  ref.raw_populations().view(np.uint8))
    if outlet[0] == "convective":
        np.testing.assert_array_equal(out.outlet_values(), ref.outlet_values())
    for name in ("rho", "ux", "uy"):
        np.testing.assert_array_equal(gpu.to_host(getattr(out, name)),
                                      cpu.to_host(getattr(ref, name)), err_msg=name)


@in_child
@pytest.mark.parametrize("bounce, storage, outlet", [
    ("halfway", None, "pressure"), ("linear", None, "zero_gradient"),
    ("linear", "float16", "pressure"), ("halfway", "e4m11", "convective"),
    ("quadratic", None, "pressure"), ("quadratic", "float16", "convective")])
def test_bodies_split_identity_and_cpu_agreement(bounce, storage, outlet) -> None:
    """A channel with an inlet, an outlet (each kind) and a circle across slab boundaries:
    numba-cuda on 1, 2 and 3 slabs and the CPU backend give the same bits (and the same
    forces, the device reduction decoding 16-bit populations as the host's), float64 or
    float32 arithmetic on 16-bit storage."""
    from tests.conftest import body_case, run_bodies

    runs = {}
    for backend, subdomains in (("numba-cuda", 1), ("numba-cuda", 2), ("numba-cuda", 3),
                                ("cpu", 2)):
        raw = body_case(16, 12, subdomains, run__backend=backend, run__transport="local")
        if storage is not None:
            raw["run"].update(precision="float32", storage=storage)
        raw["domain"]["inlet"]["ramp_steps"] = 4  # steps 1-3 ramped, then full speed
        raw["domain"]["bounce_back"] = bounce
        raw["domain"]["outlet"] = {"kind": outlet}
        runs[(backend, subdomains)] = run_bodies(raw, 7)
    one = runs[("numba-cuda", 1)]
    assert np.abs(one[1]).max() > 0.005 and np.abs(one[2]).max() > 0
    # the device reduction (numba-cuda kernels; NumPy on the cpu) equals the host's
    for key, got in runs.items():
        for a, b in zip(got, one, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=str(key))


@in_child
@pytest.mark.parametrize("periodic", [False, True])
def test_slip_walls_match_cpu(periodic) -> None:
    """Free-slip walls at both y faces with a step on one: Numba CUDA bit for bit against the
    CPU kernel."""
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.numerics.lbm_params import D2Q9Params

    nx, ny = 11, 5
    solid = np.zeros((ny, nx), dtype=bool)
    solid[0:2, 4:6] = True
    kinds = ("periodic", "periodic") if periodic else ("wall", "wall")
    geometry = GridGeometry(solid, kinds, np.zeros(ny), False)
    params = D2Q9Params(1.0 / 0.8, 1.0 / 1.2, 0.0, 1e-5, 0.0, periodic)
    cpu, gpu = _backends()
    blocks = [D2Q9Block(be, nx, ny, 0, (Face.SLIP, Face.SLIP), params, np.float64, geometry)
              for be in (cpu, gpu)]
    rng = np.random.default_rng(4)
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
    f0 = w * (1.0 + 0.05 * rng.standard_normal((9, ny, nx)))
    for blk in blocks:
        blk.set_populations(f0)
    for step in range(3):
        for blk in blocks:
            blk.stream_collide(store_macro=step == 2)
            blk.swap()
    np.testing.assert_array_equal(blocks[1].populations(), blocks[0].populations())


# --- the simulator as the children run it (tests/cuda_simulator.py): barriers, threads in turn --
if IN_SIMULATOR:  # the simulator swaps a kernel's global ``cuda`` for its own, not a local one
    from numba import cuda

    @cuda.jit
    def _partial_sums(out):
        buf = cuda.shared.array(8, dtype=np.int64)
        t = cuda.threadIdx.x
        if t >= 5:
            return
        for rnd in range(3):
            buf[t] = (t + 1) * (rnd + 1)
            cuda.syncthreads()
            if t == 0:
                out[cuda.blockIdx.x, rnd] = buf[0] + buf[1] + buf[2] + buf[3] + buf[4]
            cuda.syncthreads()

    @cuda.jit(device=True)
    def _wait_then_read(buf, t):
        cuda.syncthreads()
        return buf[(t + 1) % 4]

    @cuda.jit
    def _rotate_through_a_device_barrier(out):
        buf = cuda.shared.array(4, dtype=np.int64)
        t = cuda.threadIdx.x
        buf[t] = 10 * (t + 1)
        out[t] = _wait_then_read(buf, t)

    @cuda.jit
    def _indices(out):
        x, y = cuda.threadIdx.x, cuda.threadIdx.y
        out[cuda.blockIdx.x, cuda.blockIdx.y, y, x] = (
            1000 * cuda.blockIdx.x + 100 * cuda.blockIdx.y + 10 * y + x + 0.5 * cuda.laneid)

    @cuda.jit
    def _fails_without_a_barrier(a):
        a[cuda.threadIdx.x + 2 * cuda.threadIdx.x] = 1.0  # out of bounds from thread 3 on

    @cuda.jit
    def _fails_in_thread_5(a):
        t = cuda.threadIdx.x
        if t == 5:
            a[a.size + t] = 1.0  # out of bounds: an IndexError in the simulator
        cuda.syncthreads()
        a[t] = t


@in_child
@pytest.mark.timeout(120)
def test_barrier_counts_only_threads_still_running() -> None:
    """Threads that return early leave the barrier to the others, and a block-wide sum through
    shared memory sees every live thread's write before it reads."""
    out = cuda.to_device(np.zeros((3, 3), np.int64))
    _partial_sums[3, 8](out)
    assert out.copy_to_host().tolist() == [[15, 30, 45]] * 3


@in_child
@pytest.mark.timeout(120)
def test_barrier_raises_a_thread_error_instead_of_hanging() -> None:
    """A thread that fails while the rest of its block waits at a barrier: the launch raises
    that thread's error (not an abort it caused elsewhere), and the next launch runs."""
    a = cuda.to_device(np.zeros(8))
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\]"):
        _fails_in_thread_5[1, 8](a)
    ok = cuda.to_device(np.zeros(8))
    _fails_in_thread_5[1, 5](ok)
    assert ok.copy_to_host()[:5].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@in_child
def test_barrier_found_in_a_device_function() -> None:
    """A kernel whose only barrier is in a device function it calls runs its threads together:
    every thread reads a neighbour's write made before the barrier."""
    from tests.cuda_simulator import waits_for_others

    assert waits_for_others(_rotate_through_a_device_barrier.py_func,
                            type(_rotate_through_a_device_barrier))
    assert not waits_for_others(_indices.py_func, type(_indices))
    out = cuda.to_device(np.zeros(4, np.int64))
    _rotate_through_a_device_barrier[1, 4](out)
    assert out.copy_to_host().tolist() == [20, 30, 40, 10]


@in_child
def test_threads_without_a_barrier_run_in_turn_with_their_indices() -> None:
    """Kernels without a barrier run each thread to its end in turn: the thread and block
    indices and the lane of every thread of a 2D grid of 2D blocks, and a thread's error
    named by its indices."""
    out = cuda.to_device(np.zeros((2, 3, 5, 8)))
    _indices[(2, 3), (8, 5)](out)
    b0, b1, y, x = np.indices((2, 3, 5, 8))
    assert np.array_equal(out.copy_to_host(),
                          1000 * b0 + 100 * b1 + 10 * y + x + 0.5 * ((x + 8 * y) % 32))
    with pytest.raises(IndexError, match=r"tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]"):
        _fails_without_a_barrier[1, 6](cuda.to_device(np.zeros(9)))
