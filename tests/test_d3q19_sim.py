"""Numba CUDA D3Q19 kernels on the CUDA simulator against the CPU backend (no GPU needed).

As in test_numba_cuda_sim.py, the simulator must be on before numba.cuda is imported, so the
checks run in a child pytest with NUMBA_ENABLE_CUDASIM=1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import IN_SIMULATOR, run_in_cuda_simulator

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
