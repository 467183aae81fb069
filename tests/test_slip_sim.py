"""Free-slip walls on the Numba CUDA kernels (CUDA simulator, no GPU needed): x faces in 2D,
y and z faces in 3D, bit for bit against the CPU kernels and across splits.

As in test_numba_cuda_sim.py, the simulator must be on before numba.cuda is imported, so the
checks run in a child pytest with NUMBA_ENABLE_CUDASIM=1.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import IN_SIMULATOR, run_in_cuda_simulator

in_child = pytest.mark.skipif(not IN_SIMULATOR, reason="runs in the simulator child")


@pytest.mark.skipif(IN_SIMULATOR, reason="this is the child process")
def test_simulator_suite() -> None:
    run_in_cuda_simulator(__file__, timeout=900)


def _same_steps(blocks: list, w: np.ndarray, steps: int) -> None:
    """From the same perturbed rest state, ``steps`` steps of the CPU block (first) and the
    Numba CUDA one give the same populations (the same stored bits)."""
    rng = np.random.default_rng(4)
    cross = (blocks[0].layers, *blocks[0].cross)
    f0 = w.reshape(-1, *[1] * len(cross)) * (1 + 0.05 * rng.standard_normal((len(w), *cross)))
    for blk in blocks:
        blk.set_populations(f0)
        for step in range(steps):
            blk.stream_collide(store_macro=step == steps - 1)
            blk.swap()
    np.testing.assert_array_equal(blocks[1].raw_populations().view(np.uint8),
                                  blocks[0].raw_populations().view(np.uint8))


@in_child
@pytest.mark.parametrize("kinds, faces", [(("slip", "slip"), ("WALL", "HALO")),
                                          (("inlet", "slip"), ("SLIP", "SLIP"))])
def test_d2q9_x_slip_matches_cpu(kinds, faces) -> None:
    """Free-slip x faces (one beside an inlet), y faces walls, halos or slip, a body touching
    the face x = 0: Numba CUDA bit for bit against the CPU kernel over three steps."""
    from simsplit.backends import get_backend
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.numerics.lattice import D2Q9_W
    from simsplit.numerics.lbm_params import D2Q9Params

    nx, ny = 9, 5
    solid = np.zeros((ny, nx), dtype=bool)
    solid[2:4, 0:2] = True
    inflow = np.full(ny, 0.04) if "inlet" in kinds else np.zeros(ny)
    geometry = GridGeometry(solid, kinds, inflow, False)
    params = D2Q9Params(1.0 / 0.8, 1.0 / 1.2, 0.0, 1e-5, 2e-5, False)
    blocks = [D2Q9Block(get_backend(be), nx, ny, 0, tuple(Face[f] for f in faces), params,
                        np.float64, geometry) for be in ("cpu", "numba-cuda")]
    _same_steps(blocks, D2Q9_W, 3)


_SLIP_3D = [(("wall", "wall"), ("SLIP", "HALO"), False),
            (("periodic", "periodic"), ("HALO", "SLIP"), True),
            (("slip", "outlet"), ("SLIP", "SLIP"), False)]


@in_child
@pytest.mark.parametrize("dtype, storage, x_kinds, faces, periodic_x", [
    (dtype, None, *geo) for dtype in (np.float64, np.float32) for geo in _SLIP_3D] + [
    (np.float32, "e4m11", *_SLIP_3D[2])])
def test_d3q19_slip_matches_cpu(dtype, storage, x_kinds, faces, periodic_x) -> None:
    """D3Q19 free-slip y faces and z faces (ghost planes at the domain's ends), x faces walls,
    periodic, slip or an outlet, a body touching a y slip face: Numba CUDA bit for bit against
    the CPU kernel over two steps; populations in the arithmetic type or 16-bit storage."""
    from simsplit.backends import get_backend
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz = 7, 5, 4
    solid = np.zeros((nz, ny, nx), dtype=bool)
    solid[1:3, 0:2, 3:5] = True
    geometry = GridGeometry(solid, x_kinds, np.zeros((nz, ny)), False, y_slip=True)
    params = D3Q19Params(1 / 0.8, 1 / 1.2, 0.0, 1e-5, 2e-5, -1e-5, periodic_x, False)
    blocks = [D3Q19Block(get_backend(be), nx, ny, nz, 0, tuple(Face[f] for f in faces), params,
                         dtype, storage, geometry=geometry) for be in ("cpu", "numba-cuda")]
    _same_steps(blocks, D3Q19.w, 2)


@in_child
def test_d3q19_slip_split_identity_and_cpu_agreement() -> None:
    """Free-slip y and z faces, a body force along a periodic x: numba-cuda on 1 and 2 slabs
    and the CPU backend on 2 give the same bits, a plug accelerating as (n - 1/2) F."""
    from simsplit import Simulation
    from tests.conftest import fluid_case

    runs = {}
    for backend, n in (("numba-cuda", 1), ("numba-cuda", 2), ("cpu", 2)):
        case = fluid_case(5, 4, n, fluid__reynolds=None, fluid__viscosity=0.05,
                          fluid__body_force=[1e-5, 0.0, 0.0], run__backend=backend,
                          run__transport="local")
        case["domain"] = {"shape": [5, 4, 6], "boundaries": {
            "x": "periodic", "y": "slip", "z": "slip", "lid": False}}
        sim = Simulation(case)
        sim.step(6)
        runs[(backend, n)] = sim.velocity()
    one = runs[("numba-cuda", 1)]
    np.testing.assert_allclose(one[..., 0], 1e-5 * 5.5, rtol=1e-9)
    for key, u in runs.items():
        np.testing.assert_array_equal(u, one, err_msg=str(key))


@in_child
def test_d3q19_slip_quadratic_split_identity_and_cpu_agreement() -> None:
    """Free-slip y faces and quadratic links (issue #21): a duct with an inlet, an outlet and
    a cylinder across y touching both slip faces, across the slab face: numba-cuda on 1 and 2
    slabs and the CPU on 2 give the same stored bits, velocity and forces (host sum and
    device reduction)."""
    from tests.conftest import body_case_3d, run_bodies

    runs = {}
    for backend, subdomains in (("cpu", 2), ("numba-cuda", 1), ("numba-cuda", 2)):
        raw = body_case_3d(10, 4, 6, subdomains, bodies=[
            {"name": "c", "shape": "cylinder", "centre": [4.2, 0, 3.1], "axis": "y",
             "diameter": 3.2}], run__backend=backend, run__transport="local")
        raw["domain"]["boundaries"]["y"] = "slip"
        raw["domain"]["inlet"]["ramp_steps"] = 3
        raw["domain"]["bounce_back"] = "quadratic"
        runs[(backend, subdomains)] = run_bodies(raw, 4)
    ref = runs[("cpu", 2)]
    assert np.abs(ref[1]).max() > 0.005 and np.abs(ref[2]).max() > 0
    for key, got in runs.items():
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=str(key))
