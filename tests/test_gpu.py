"""GPU backends on a real GPU: agreement with the CPU backend, split identity, graphs, Ghia.

Every test is marked ``gpu`` and skipped where its backend finds no GPU (``pytest -m gpu``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit.backends import get_backend

pytestmark = pytest.mark.gpu

TOL = {"float64": 1e-13, "float32": 1e-6}  #: max |gpu - cpu| / max |cpu|
GPU_BACKENDS = ("cupy", "numba-cuda")


def _unavailable(name: str) -> str | None:
    """Why ``name`` cannot run here, decided without compiling anything at collection."""
    if name == "cupy":
        from simsplit.backends import gpu_count

        if gpu_count() == 0:
            return "cupy: no CuPy or no CUDA GPU"
        return None
    try:
        from numba import cuda
    except ImportError as exc:
        return f"numba-cuda: {exc}"
    return None if cuda.is_available() else "numba-cuda: no usable CUDA GPU"


def _needs(name: str) -> Any:
    reason = _unavailable(name)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def _gpu_param(name: str) -> Any:
    return pytest.param(name, marks=_needs(name), id=name)


def _case(backend: str, precision: str, subdomains: int = 1, shape=(64, 48), channel=False,
          transport: str = "auto") -> dict:
    from simsplit.case import validate_case

    fluid: dict[str, Any] = {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"}
    bounds = {"x": "wall", "y": "wall", "lid": True}
    if channel:
        fluid = {"reynolds": None, "viscosity": 0.05, "collision": "bgk",
                 "body_force": [1e-6, 0.0]}
        bounds = {"x": "periodic", "y": "wall", "lid": False}
    return validate_case({
        "physics": "fluid", "fluid": fluid,
        "domain": {"shape": list(shape), "boundaries": bounds},
        "decomposition": {"subdomains": subdomains},
        "run": {"backend": backend, "precision": precision, "transport": transport,
                "devices": None if backend == "cpu" else [0]},
        "output": {"dir": None},
    })


def _solver(case: dict) -> Any:
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    run = case["run"]
    return FluidSolver(case, ParallelContext(run["backend"], run["devices"], run["transport"]))


def _run(case: dict, steps: int) -> tuple[np.ndarray, np.ndarray]:
    solver = _solver(case)
    solver.step(steps)
    return solver.populations(), solver.velocity()


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b))) / float(np.max(np.abs(b)))


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("channel", [False, True], ids=["cavity-trt", "channel-bgk-force"])
def test_matches_cpu_after_1000_steps(backend: str, precision: str, channel: bool) -> None:
    ref_f, ref_u = _run(_case("cpu", precision, 2, channel=channel), 1000)
    f, u = _run(_case(backend, precision, 2, channel=channel), 1000)
    err_f, err_u = _rel_err(f, ref_f), _rel_err(u, ref_u)
    print(f"{backend} {precision}: populations {err_f:.2e}, velocity {err_u:.2e}")
    assert err_f <= TOL[precision] and err_u <= TOL[precision]


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_bitwise_identical_across_splits(backend: str, precision: str) -> None:
    runs = [_run(_case(backend, precision, n, shape=(96, 60)), 300) for n in (1, 2, 3)]
    for f, u in runs[1:]:
        np.testing.assert_array_equal(f, runs[0][0])
        np.testing.assert_array_equal(u, runs[0][1])


@_needs("cupy")
@pytest.mark.parametrize("transport", ["local", "peer"])
def test_graph_replay_equals_direct_steps(transport: str) -> None:
    direct = _solver(_case("cupy", "float32", 2, shape=(128, 128), transport=transport))
    direct.step(40)
    graphed = _solver(_case("cupy", "float32", 2, shape=(128, 128), transport=transport))
    backend = graphed.blocks[0].backend
    four_steps = backend.capture(lambda: graphed.step(4))  # even: buffers end where they began
    for _ in range(10):
        four_steps.replay()
    np.testing.assert_array_equal(graphed.populations(), direct.populations())
    np.testing.assert_array_equal(graphed.velocity(), direct.velocity())


@_needs("cupy")
def test_capture_refuses_nesting() -> None:
    backend = get_backend("cupy", 0)
    with pytest.raises(RuntimeError, match="nest"):
        backend.capture(lambda: backend.capture(lambda: None))
