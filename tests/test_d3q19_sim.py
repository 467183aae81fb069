"""Numba CUDA D3Q19 kernels on the CUDA simulator against the CPU backend (no GPU needed).

As in test_numba_cuda_sim.py, the simulator must be on before numba.cuda is imported, so the
checks run in a child pytest with NUMBA_ENABLE_CUDASIM=1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import IN_SIMULATOR, OUTLETS, outlet_params, run_in_cuda_simulator

ROOT = Path(__file__).resolve().parents[1]
in_child = pytest.mark.skipif(not IN_SIMULATOR, reason="runs in the simulator child")
TOL = {np.float64: 1e-13, np.float32: 1e-6}  #: max |difference| / max |cpu value|


@pytest.mark.skipif(IN_SIMULATOR, reason="this is the child process")
def test_simulator_suite() -> None:
    run_in_cuda_simulator(__file__, timeout=600)


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    scale = float(np.max(np.abs(b))) or 1.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) / scale


@in_child
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("collision", ["bgk", "trt"])
@pytest.mark.parametrize("periodic", [(False, False), (True, False), (True, True)])
def test_stream_collide_and_halos_match_cpu(dtype, collision, periodic) -> None:
    from simsplit.backends import get_backend
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    om_p = 1.0 / 0.8
    om_m = om_p if collision == "bgk" else 1.0 / (0.1875 / (0.8 - 0.5) + 0.5)
    params = D3Q19Params(om_p, om_m, 0.08, 2e-5, -1e-5, 3e-6, *periodic)
    cpu, gpu = get_backend("cpu"), get_backend("numba-cuda")
    # low face: a halo looped back onto itself, so pack/unpack run every step
    blocks = [D3Q19Block(be, 5, 4, 4, 0, (Face.HALO, Face.LID), params, dtype)
              for be in (cpu, gpu)]
    rng = np.random.default_rng(7)
    f0 = D3Q19.w[:, None, None, None] * (1.0 + 0.05 * rng.standard_normal((19, 4, 4, 5)))
    for blk in blocks:
        blk.set_populations(f0)
        for step in range(3):
            blk.stream_collide((1, 2))  # a partial plane range, as the overlapped loop uses
            blk.stream_collide((2, 5), store_macro=step == 2)
            blk.swap()
            blk.pack(0)
            blk.backend.copy(blk.recv[0], blk.send[0])
            blk.unpack(0)
    ref, out = blocks
    assert _rel_err(out.populations(), ref.populations()) <= TOL[dtype]
    for a, b in zip((out.rho, *out.u), (ref.rho, *ref.u), strict=True):
        assert _rel_err(gpu.to_host(a), cpu.to_host(b)) <= TOL[dtype]


@in_child
def test_solver_split_identity_on_simulator() -> None:
    from simsplit.case import validate_case
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    def run(backend: str, n: int) -> np.ndarray:
        case = validate_case({
            "physics": "fluid", "fluid": {"reynolds": 100, "lid_velocity": 0.1},
            "domain": {"shape": [4, 3, 6]}, "decomposition": {"subdomains": n},
            "run": {"backend": backend, "precision": "float64", "transport": "local"},
            "output": {"dir": None},
        })
        solver = FluidSolver(case, ParallelContext(backend, None, "local"))
        solver.step(3)
        return solver.populations()

    ref = run("cpu", 1)
    for n in (1, 2):
        assert _rel_err(run("numba-cuda", n), ref) <= TOL[np.float64]


@in_child
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("faces", [("inlet", "outlet"), ("outlet", "inlet")])
@pytest.mark.parametrize("outlet", OUTLETS)
def test_stream_collide_with_bodies_matches_cpu(dtype, faces, outlet) -> None:
    """Inlet, outlet (each kind) and an interpolated (Bouzidi) sphere in 3D (issue #21): the
    Numba CUDA kernel bit for bit against the CPU kernel, a convective outlet's previous
    values too, on a middle slab (ghost planes of halo faces painted), ramped inflow, body
    force."""
    from simsplit.backends import get_backend
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.fluid.geometry import build_bodies
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.fluid.geometry.links import link_weights
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz_all, k0, nz = 9, 5, 8, 3, 3
    (body,) = build_bodies({"shape": [nx, ny, nz_all], "bodies": [
        {"name": "s", "shape": "sphere", "centre": [4.2, 2.4, 4.1], "radius": 1.7}]}, faces)
    links = link_weights([body], body.cells, D3Q19, (False, False, False))
    assert (links != -1).any()
    sign = 1.0 if faces[0] == "inlet" else -1.0
    inflow = sign * 0.07 * np.linspace(0.3, 1.0, nz_all * ny).reshape(nz_all, ny)
    geometry = GridGeometry(body.cells, faces, inflow, False, links)
    params = D3Q19Params(1 / 0.8, 1 / 1.2, 0.0, 1e-5, 2e-5, -1e-5, False, False,
                         inlet_scale=0.41, outlet_density=0.991, **outlet_params(*outlet))
    cpu, gpu = get_backend("cpu"), get_backend("numba-cuda")
    blocks = [D3Q19Block(be, nx, ny, nz, k0, (Face.HALO, Face.HALO), params, dtype,
                         geometry=geometry) for be in (cpu, gpu)]
    rng = np.random.default_rng(3)
    f0 = D3Q19.w[:, None, None, None] * (1 + 0.05 * rng.standard_normal((19, nz, ny, nx)))
    for blk in blocks:
        blk.set_populations(f0)
        for step in range(2):
            blk.stream_collide(store_macro=step == 1)
            blk.swap()
    ref, out = blocks
    np.testing.assert_array_equal(out.populations(), ref.populations())
    if outlet[0] == "convective":
        np.testing.assert_array_equal(out.outlet_values(), ref.outlet_values())
    for a, b in zip((out.rho, *out.u), (ref.rho, *ref.u), strict=True):
        np.testing.assert_array_equal(gpu.to_host(a), cpu.to_host(b))


@in_child
@pytest.mark.parametrize("outlet, bounce", [("pressure", "linear"), ("zero_gradient", "linear"),
                                            ("convective", "linear"),
                                            ("pressure", "quadratic")])
def test_bodies_split_identity_and_cpu_agreement(outlet, bounce) -> None:
    """A duct with an inlet, an outlet (each kind) and a sphere across slab faces: numba-cuda
    on 1 and 2 slabs and the CPU backend give the same bits (and the same forces and probe
    readings); linear or quadratic links (halos two planes deep)."""
    from simsplit.case import validate_case
    from simsplit.fluid.forces import body_links, measure_forces
    from simsplit.fluid.probes import probes_of, read_probes
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext
    from tests.conftest import body_case_3d

    runs = {}
    for backend, subdomains in (("numba-cuda", 1), ("numba-cuda", 2), ("cpu", 2)):
        raw = body_case_3d(10, 5, 6, subdomains, bodies=[
            {"name": "s", "shape": "sphere", "centre": [4.2, 2.4, 3.1], "radius": 1.6}],
            run__backend=backend, run__transport="local",
            output__probes=[{"name": "a", "point": [6.5, 2.5, 2.9]},
                            {"name": "b", "point": [1.2, 4.0, 3.2]}])
        raw["domain"]["inlet"]["ramp_steps"] = 3
        raw["domain"]["bounce_back"] = bounce
        raw["domain"]["outlet"] = {"kind": outlet}
        case = validate_case(raw)
        solver = FluidSolver(case, ParallelContext(backend, transport="local"))
        solver.step(4)
        runs[(backend, subdomains)] = (solver.populations(), solver.velocity(),
                                       measure_forces(solver, body_links(solver.setup)),
                                       read_probes(solver, probes_of(case)))
    one = runs[("numba-cuda", 1)]
    u = one[1]  # the probes read their cells' values: (i, j, k) = (6, 2, 2) and (1, 4, 3)
    np.testing.assert_array_equal(one[3][:, 2:], [u[2, 2, 6], u[3, 4, 1]])
    assert np.abs(one[1]).max() > 0.005 and np.abs(one[2]).max() > 0
    for key, got in runs.items():
        for a, b in zip(got, one, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=str(key))


# --- populations stored narrower than the arithmetic (run.storage, issue #25) ---------------
def _narrow_case(backend: str, subdomains: int, storage: str,
                 boundaries: dict | None = None) -> dict:
    """A 4 x 3 x 6 box, walls, the lid and a body force (or other ``boundaries``), float32
    arithmetic on ``storage``."""
    from simsplit.case import validate_case

    return validate_case({
        "physics": "fluid",
        "fluid": {"reynolds": None, "viscosity": 0.05, "lid_velocity": 0.1,
                  "body_force": [2e-5, -1e-5, 3e-6]},
        "domain": {"shape": [4, 3, 6], **({"boundaries": boundaries} if boundaries else {})},
        "decomposition": {"subdomains": subdomains},
        "run": {"backend": backend, "precision": "float32", "storage": storage,
                "transport": "local"},
        "output": {"dir": None}})


@in_child
@pytest.mark.parametrize("storage", ["float16", "e4m11", "neq16", "neq16s"])
def test_narrow_storage_box_matches_cpu(storage) -> None:
    """16-bit populations (neq16, neq16s: cell records) with walls, the lid and a body force:
    numba-cuda on 1 and 2 slabs (halos of stored bits) equals the CPU bit for bit, stored
    populations, velocity and density; a 2-slab checkpoint (stored bits) resumes on 1 slab
    with the same bits."""
    from simsplit.fluid.solver import FluidSolver
    from simsplit.fluid.state import load_state, raw_populations, save_state
    from simsplit.numerics.storage import storage_dtype
    from simsplit.parallel.context import ParallelContext

    def solver(backend: str, n: int) -> FluidSolver:
        return FluidSolver(_narrow_case(backend, n, storage),
                           ParallelContext(backend, None, "local"))

    def state(s: FluidSolver) -> tuple[np.ndarray, ...]:
        return raw_populations(s), s.velocity(), s.density()

    runs = {}
    for backend, n in (("cpu", 1), ("numba-cuda", 1), ("numba-cuda", 2)):
        s = solver(backend, n)
        s.step(3)
        runs[backend, n] = state(s)
    ref = runs["cpu", 1]
    assert ref[0].dtype == storage_dtype(storage) and np.abs(ref[1]).max() > 0.01
    for key, got in runs.items():
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=str(key))
    first = solver("numba-cuda", 2)
    first.step(2)
    saved = save_state(first)
    assert saved["populations"].dtype == storage_dtype(storage)
    resumed = solver("numba-cuda", 1)
    load_state(resumed, saved, 2)
    resumed.step(1)
    for a, b in zip(state(resumed), ref, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@in_child
def test_neq16_periodic_channel_matches_cpu() -> None:
    """neq16 records in a channel forced along x and z, periodic in both (z is the slab axis:
    the record halos wrap round): numba-cuda on 1 and 2 slabs equals the CPU bit for bit."""
    from simsplit.fluid.solver import FluidSolver
    from simsplit.fluid.state import raw_populations
    from simsplit.parallel.context import ParallelContext

    bounds = {"x": "periodic", "y": "wall", "z": "periodic", "lid": False}
    runs = {}
    for backend, n in (("cpu", 1), ("numba-cuda", 1), ("numba-cuda", 2)):
        s = FluidSolver(_narrow_case(backend, n, "neq16", bounds),
                        ParallelContext(backend, None, "local"))
        s.step(3)
        runs[backend, n] = (raw_populations(s), s.velocity(), s.density())
    ref = runs["cpu", 1]
    assert ref[0].shape == (27, 6, 3, 4) and np.abs(ref[1]).max() > 1e-5
    for key, got in runs.items():
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=str(key))


@in_child
@pytest.mark.parametrize("storage, outlet, bounce", [("float16", "convective", "quadratic"),
                                                      ("e4m11", "pressure", "linear")])
def test_narrow_storage_bodies_match_cpu(storage, outlet, bounce) -> None:
    """A duct with an inlet, an outlet and a sphere across the slab face, quadratic links
    (halos two planes deep) or linear ones, 16-bit populations under float32 arithmetic:
    numba-cuda on 1 and 2 slabs and the CPU give the same stored bits, velocity and forces on
    the body (the host's sum and the device reduction, which decodes the stored populations).
    The CPU kernels' types are those of other tests (fp16 quadratic: test_bodies_quadratic.py;
    e4m11 linear: the box above), so that a warm Numba cache serves them: a CPU kernel of new
    types costs about 30 s of compilation."""
    from simsplit.numerics.storage import storage_dtype
    from tests.conftest import body_case_3d, run_bodies

    runs = {}
    for backend, subdomains in (("cpu", 2), ("numba-cuda", 1), ("numba-cuda", 2)):
        raw = body_case_3d(8, 5, 6, subdomains, bodies=[
            {"name": "s", "shape": "sphere", "centre": [3.6, 2.4, 3.1], "radius": 1.6}],
            run__backend=backend, run__transport="local", run__precision="float32",
            run__storage=storage)
        raw["domain"]["inlet"]["ramp_steps"] = 2
        raw["domain"]["bounce_back"] = bounce
        raw["domain"]["outlet"] = {"kind": outlet}
        runs[(backend, subdomains)] = run_bodies(raw, 3)
    ref = runs[("cpu", 2)]
    assert ref[0].dtype == storage_dtype(storage)
    assert np.abs(ref[1]).max() > 0.005 and np.abs(ref[2]).max() > 0
    for key, got in runs.items():
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=str(key))
