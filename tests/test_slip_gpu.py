"""Free-slip walls on a real GPU (issue #21): cupy (CUDA C) and numba-cuda against the CPU
backend, the same bits on 1-4 slabs, and the plug flow, for 2D x faces and 3D y and z faces."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.test_gpu import GPU_BACKENDS, TOL, _gpu_param, _rel_err

pytestmark = pytest.mark.gpu

CASES = {
    "2d_x": ((40, 36), {"x": "slip", "y": "periodic"}, [2e-5, 3e-5],
             {"name": "b", "shape": "box", "lower": [0, 10], "upper": [6, 16]}),
    "3d_yz": ((24, 14, 20), {"x": "periodic", "y": "slip", "z": "slip"}, [3e-5, 1e-5, 2e-5],
              {"name": "s", "shape": "sphere", "centre": [8.1, 3.3, 4.3], "radius": 3.1}),
    "3d_xz": ((24, 14, 20), {"x": "slip", "y": "wall", "z": "slip"}, [3e-5, 1e-5, -2e-5],
              {"name": "s", "shape": "sphere", "centre": [3.3, 7.4, 15.3], "radius": 3.1}),
}


def _run(which: str, backend: str, precision: str, subdomains: int, storage: str | None = None,
         steps: int = 120, bounce: str = "halfway") -> tuple[np.ndarray, np.ndarray]:
    from simsplit import Simulation
    from tests.conftest import fluid_case

    shape, bounds, force, body = CASES[which]
    case: dict[str, Any] = fluid_case(shape[0], shape[1], subdomains, fluid__reynolds=None,
                                      fluid__viscosity=0.05, fluid__body_force=force,
                                      run__backend=backend, run__precision=precision,
                                      run__devices=None if backend == "cpu" else [0])
    case["domain"] = {"shape": list(shape), "boundaries": {"lid": False, **bounds},
                      "bodies": [body], "bounce_back": bounce}
    if storage:
        case["run"]["storage"] = storage
    sim = Simulation(case)
    sim.step(steps)
    return sim.velocity(), sim.density()


def _check_against_cpu_and_splits(which: str, backend: str, precision: str,
                                  storage: str | None = None, bounce: str = "halfway") -> None:
    """``backend`` against the CPU backend to the precision's tolerance, the same bits on 1-4
    slabs."""
    ref = _run(which, "cpu", precision, 2, storage, bounce=bounce)
    runs = [_run(which, backend, precision, n, storage, bounce=bounce) for n in (1, 2, 3, 4)]
    errs = [_rel_err(a, b) for a, b in zip(runs[1], ref, strict=True)]
    same = all(np.array_equal(a, b) for a, b in zip(runs[1], ref, strict=True))
    print(f"slip {which} {backend} {precision}/{storage} {bounce}: velocity {errs[0]:.2e}, "
          f"density {errs[1]:.2e}; bitwise against the CPU {same}")
    assert max(errs) <= TOL[precision]
    for n, got in enumerate(runs[1:], start=2):
        for a, b in zip(got, runs[0], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"{n} slabs")


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("which", list(CASES))
def test_slip_matches_cpu_and_splits(backend: str, precision: str, which: str) -> None:
    _check_against_cpu_and_splits(which, backend, precision)


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision, storage", [("float64", None), ("float32", None),
                                                ("float32", "float16")])
@pytest.mark.parametrize("which", ["3d_yz", "3d_xz"])
def test_slip_quadratic_matches_cpu_and_splits(backend: str, precision: str,
                                               storage: str | None, which: str) -> None:
    """Free-slip faces and quadratic links in 3D (the CUDA C variant BODIES_SLIP_QUADRATIC)."""
    _check_against_cpu_and_splits(which, backend, precision, storage, "quadratic")


@pytest.mark.parametrize("which", ["3d_yz", "3d_xz"])
def test_slip_fp16_storage_matches_cpu(which: str) -> None:
    """fp16 populations under float32 arithmetic: the CUDA C bodies kernel's slip rule against
    the CPU kernel, to the tolerance of float32, and the same bits on 1 and 3 slabs."""
    pytest.importorskip("cupy")
    ref = _run(which, "cpu", "float32", 2, storage="float16")
    got = [_run(which, "cupy", "float32", n, storage="float16") for n in (1, 3)]
    errs = [_rel_err(a, b) for a, b in zip(got[0], ref, strict=True)]
    print(f"slip {which} cupy fp16 storage: velocity {errs[0]:.2e}, density {errs[1]:.2e}")
    assert max(errs) <= TOL["float32"]
    for a, b in zip(got[1], got[0], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
def test_slip_plug_flow_on_gpu(backend: str) -> None:
    """Free-slip y and z faces, a force along a periodic x, 3 slabs: the plug (n - 1/2) F."""
    from simsplit import Simulation
    from tests.conftest import fluid_case

    case = fluid_case(16, 12, 3, fluid__reynolds=None, fluid__viscosity=0.05,
                      fluid__body_force=[1e-5, 0.0, 0.0], run__backend=backend,
                      run__devices=[0])
    case["domain"] = {"shape": [16, 12, 18], "boundaries": {
        "x": "periodic", "y": "slip", "z": "slip", "lid": False}}
    sim = Simulation(case)
    sim.step(200)
    u = sim.velocity()
    err = np.abs(u[..., 0] / (1e-5 * 199.5) - 1).max()
    print(f"slip plug {backend}: max relative error {err:.2e}")
    assert err < 1e-9 and np.abs(u[..., 1:]).max() < 1e-15
