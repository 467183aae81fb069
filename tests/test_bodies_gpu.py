"""D2Q9 bodies, inlets and outlets (each domain.outlet.kind) on a real GPU (issue #21): cupy
(CUDA C, the kernel without open rules on the column spans that need none) and numba-cuda
against the CPU backend, the same bits on 1, 2 and 3 slabs, and forces reduced on the device
equal to the host reduction's bits."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import body_case
from tests.test_gpu import GPU_BACKENDS, TOL, _gpu_param, _rel_err

pytestmark = pytest.mark.gpu


def _run(backend: str, precision: str, subdomains: int, bounce: str, steps: int = 300,
         outlet: str = "pressure", bodies: list | None = None):
    from simsplit.case import validate_case
    from simsplit.fluid.forces import DeviceForces, body_links, measure_forces
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    bodies = bodies or [{"name": "cyl", "shape": "circle", "centre": [100.3, 20.6],
                         "radius": 6.2}]
    raw = body_case(200, 41, subdomains, bodies=bodies, run__backend=backend,
                    run__precision=precision, run__transport="auto",
                    run__devices=None if backend == "cpu" else [0])
    raw["domain"]["bounce_back"] = bounce
    raw["domain"]["outlet"] = {"kind": outlet}
    case = validate_case(raw)
    run = case["run"]
    solver = FluidSolver(case, ParallelContext(run["backend"], run["devices"], run["transport"]))
    if backend == "cupy" and subdomains == 1:  # inlet, body, outlet columns open; box between
        spans = next(iter(solver.blocks.values())).column_spans
        assert [s[2] for s in spans] == ([True, False, True, False, True] if bounce != "halfway"
                                         else [True, False, True])
    solver.step(steps)
    links = body_links(solver.setup)
    forces = measure_forces(solver, links)
    np.testing.assert_array_equal(DeviceForces(links).measure(solver), forces)
    return solver.populations(), solver.velocity(), forces


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("bounce", ["halfway", "linear", "quadratic"])
@pytest.mark.parametrize("outlet", ["pressure", "zero_gradient", "convective"])
def test_bodies2d_match_cpu_and_splits(backend: str, precision: str, bounce: str,
                                       outlet: str) -> None:
    ref = _run("cpu", precision, 2, bounce, outlet=outlet)
    runs = [_run(backend, precision, n, bounce, outlet=outlet) for n in (1, 2, 3)]
    errs = [_rel_err(a, b) for a, b in zip(runs[1], ref, strict=True)]
    same = all(np.array_equal(a, b) for a, b in zip(runs[1], ref, strict=True))
    print(f"bodies2d {backend} {precision} {bounce} {outlet} outlet: populations "
          f"{errs[0]:.2e}, velocity {errs[1]:.2e}, forces {errs[2]:.2e}; bitwise {same}")
    assert max(errs) <= TOL[precision]
    for got in runs[1:]:
        for a, b in zip(got, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("transport", ["peer", "nccl"])
def test_quadratic_bodies_across_two_gpus(transport: str) -> None:
    """Quadratic links across slabs on two GPUs: the two-plane halos travel through the peer
    and NCCL transports as any buffer; the same bits as one GPU (and the CPU)."""
    from simsplit.backends import gpu_count
    from simsplit.case import validate_case
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    if gpu_count() < 2:
        pytest.skip("needs two GPUs")
    runs = []
    for backend, devices, trans in (("cupy", [0], "auto"), ("cupy", [0, 1], transport),
                                    ("cpu", None, "auto")):
        raw = body_case(200, 41, 2, bodies=[{"name": "cyl", "shape": "circle",
                                               "centre": [100.3, 20.6], "radius": 6.2}],
                        run__backend=backend, run__transport=trans, run__devices=devices)
        raw["domain"]["bounce_back"] = "quadratic"
        case = validate_case(raw)
        run = case["run"]
        solver = FluidSolver(case, ParallelContext(run["backend"], run["devices"],
                                                   run["transport"]))
        solver.step(200)
        runs.append((solver.populations(), solver.velocity()))
    for got in runs[1:]:
        for a, b in zip(got, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("bounce", ["linear", "quadratic"])
def test_sdf_mask_matches_cpu_and_splits(tmp_path, backend: str, bounce: str) -> None:
    """The cylinder as a mask of its signed distance (values: sdf, docs/bodies.md): the GPU
    matches the CPU and gives the same bits on 1, 2 and 3 slabs (the mask across the faces)."""
    x, y = np.meshgrid(np.arange(40) + 80.5, np.arange(30) + 5.5)
    np.save(tmp_path / "cyl.npy", np.hypot(x - 100.3, y - 20.6) - 6.2)
    bodies = [{"name": "cyl", "shape": "mask", "file": str(tmp_path / "cyl.npy"),
               "values": "sdf", "origin": [80, 5]}]
    ref = _run("cpu", "float32", 2, bounce, bodies=bodies)
    runs = [_run(backend, "float32", n, bounce, bodies=bodies) for n in (1, 2, 3)]
    errs = [_rel_err(a, b) for a, b in zip(runs[1], ref, strict=True)]
    print(f"sdf mask {backend} {bounce}: populations {errs[0]:.2e}, velocity {errs[1]:.2e}, "
          f"forces {errs[2]:.2e}")
    assert max(errs) <= TOL["float32"]
    for got in runs[1:]:
        for a, b in zip(got, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)
