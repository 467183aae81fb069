"""D3Q19 on a real GPU (cupy and numba-cuda): agreement with the CPU backend, split identity."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_gpu import GPU_BACKENDS, TOL, _gpu_param, _rel_err

pytestmark = pytest.mark.gpu


def _run(backend: str, precision: str, subdomains: int, channel: bool,
         steps: int = 300) -> tuple[np.ndarray, np.ndarray]:
    from simsplit.case import validate_case
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    fluid = {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"}
    bounds = {"x": "wall", "y": "wall", "z": "wall", "lid": True}
    if channel:
        fluid = {"reynolds": None, "viscosity": 0.05, "collision": "bgk",
                 "body_force": [1e-6, 0.0, 2e-7]}
        bounds = {"x": "periodic", "y": "wall", "z": "periodic", "lid": False}
    case = validate_case({
        "physics": "fluid", "fluid": fluid,
        "domain": {"shape": [40, 24, 30], "boundaries": bounds},
        "decomposition": {"subdomains": subdomains},
        "run": {"backend": backend, "precision": precision, "transport": "auto",
                "devices": None if backend == "cpu" else [0]},
        "output": {"dir": None},
    })
    run = case["run"]
    solver = FluidSolver(case, ParallelContext(run["backend"], run["devices"], run["transport"]))
    solver.step(steps)
    return solver.populations(), solver.velocity()


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("channel", [False, True], ids=["cavity-trt", "channel-bgk-force"])
def test_d3q19_matches_cpu(backend: str, precision: str, channel: bool) -> None:
    ref_f, ref_u = _run("cpu", precision, 2, channel)
    f, u = _run(backend, precision, 2, channel)
    err_f, err_u = _rel_err(f, ref_f), _rel_err(u, ref_u)
    print(f"D3Q19 {backend} {precision}: populations {err_f:.2e}, velocity {err_u:.2e}")
    assert err_f <= TOL[precision] and err_u <= TOL[precision]


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_d3q19_bitwise_identical_across_splits(backend: str, precision: str) -> None:
    runs = [_run(backend, precision, n, False, steps=100) for n in (1, 2, 3)]
    for f, u in runs[1:]:
        np.testing.assert_array_equal(f, runs[0][0])
        np.testing.assert_array_equal(u, runs[0][1])
