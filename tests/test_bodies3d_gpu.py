"""D3Q19 bodies, inlets and outlets on a real GPU (issue #21): cupy (CUDA C) and numba-cuda
against the CPU backend, and the same bits on 1, 2 and 3 slabs."""

from __future__ import annotations

import numpy as np
import pytest

import simsplit.fluid.column_spans as spans_module
from tests.conftest import body_case_3d
from tests.test_gpu import GPU_BACKENDS, TOL, _gpu_param, _rel_err

pytestmark = pytest.mark.gpu

BODIES = [{"name": "ball", "shape": "sphere", "centre": [11.3, 8.2, 9.1], "radius": 3.6},
          {"name": "rod", "shape": "cylinder", "centre": [26.4, 0, 8.7], "axis": "y",
           "diameter": 4.1}]


def _short_spans(monkeypatch) -> None:
    """Column spans of 4 columns (production: 32), so that the 40-column slabs on records
    launch by spans with and without open rules (the ball's, the rod's and the outlet's
    columns open)."""
    monkeypatch.setattr(spans_module, "SPAN_COLUMNS", 4)


def _run(backend: str, precision: str, subdomains: int, bounce: str = "linear",
         storage: str | None = None, steps: int = 200, outlet: str = "pressure"):
    from simsplit.case import validate_case
    from simsplit.fluid.forces import DeviceForces, body_links, measure_forces
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    raw = body_case_3d(40, 16, 18, subdomains, bodies=BODIES, run__backend=backend,
                       run__precision=precision, run__transport="auto",
                       run__devices=None if backend == "cpu" else [0])
    raw["domain"]["bounce_back"] = bounce
    raw["domain"]["inlet"]["ramp_steps"] = 50
    raw["domain"]["outlet"] = {"kind": outlet}
    if storage:
        raw["run"]["storage"] = storage
    case = validate_case(raw)
    run = case["run"]
    solver = FluidSolver(case, ParallelContext(run["backend"], run["devices"], run["transport"]))
    # _short_spans: both kinds in every slab of a kernel set that launches by spans (cupy;
    # cpu and numba-cuda slabs compute none)
    if spans_module.SPAN_COLUMNS == 4 and backend == "cupy":
        for blk in solver.blocks.values():
            assert {s[2] for s in blk.column_spans} == {True, False}, blk.column_spans
    solver.step(steps)
    links = body_links(solver.setup)
    forces = measure_forces(solver, links)
    # reduced on the device: the host path's bits (fp16 storage decoded as stored)
    np.testing.assert_array_equal(DeviceForces(links).measure(solver), forces)
    return solver.populations(), solver.velocity(), forces


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("bounce", ["halfway", "linear", "quadratic"])
@pytest.mark.parametrize("outlet", ["pressure", "zero_gradient", "convective"])
def test_bodies3d_match_cpu(backend: str, precision: str, bounce: str, outlet: str) -> None:
    ref = _run("cpu", precision, 2, bounce, outlet=outlet)
    got = _run(backend, precision, 2, bounce, outlet=outlet)
    errs = [_rel_err(a, b) for a, b in zip(got, ref, strict=True)]
    same = all(np.array_equal(a, b) for a, b in zip(got, ref, strict=True))
    print(f"bodies3d {backend} {precision} {bounce} {outlet} outlet: populations "
          f"{errs[0]:.2e}, velocity {errs[1]:.2e}, forces {errs[2]:.2e}; bitwise {same}")
    assert max(errs) <= TOL[precision]


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("outlet", ["pressure", "zero_gradient", "convective"])
@pytest.mark.parametrize("bounce", ["linear", "quadratic"])
def test_bodies3d_bitwise_identical_across_splits(backend: str, precision: str,
                                                  outlet: str, bounce: str) -> None:
    runs = [_run(backend, precision, n, bounce, steps=100, outlet=outlet) for n in (1, 2, 3)]
    for got in runs[1:]:
        for a, b in zip(got, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("outlet", ["pressure", "convective"])
@pytest.mark.parametrize("bounce", ["linear", "quadratic"])
def test_bodies3d_fp16_storage_matches_cpu(backend: str, outlet: str, bounce: str) -> None:
    """fp16 populations (shifted encoding) under float32 arithmetic: the CUDA C kernel against
    the CPU kernel, to the tolerance of float32."""
    ref = _run("cpu", "float32", 2, bounce, storage="float16", steps=100, outlet=outlet)
    got = _run(backend, "float32", 2, bounce, storage="float16", steps=100, outlet=outlet)
    errs = [_rel_err(a, b) for a, b in zip(got, ref, strict=True)]
    print(f"bodies3d cupy fp16 storage, {outlet} outlet: populations {errs[0]:.2e}, forces "
          f"{errs[2]:.2e}")
    assert max(errs) <= TOL["float32"]


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("storage, outlet, bounce", [
    ("neq16", "pressure", "linear"), ("neq16", "convective", "quadratic"),
    ("neq16s", "convective", "quadratic")])
def test_bodies3d_neq16_cupy_equals_cpu_and_splits(backend: str, storage: str, outlet: str,
                                                   bounce: str, monkeypatch) -> None:
    """run.storage neq16 (and neq16s) records with bodies, an inlet and an outlet (the bodies
    kernel on records, every rule, on the column spans that need it, the records' box kernel
    on the others; forces reduced on the device from records): cupy's records, velocity and
    forces are the CPU's bit for bit, on 1, 2 and 3 slabs."""
    _short_spans(monkeypatch)
    want = _run("cpu", "float32", 2, bounce, storage, outlet=outlet)
    runs = [_run(backend, "float32", n, bounce, storage, outlet=outlet) for n in (1, 2, 3)]
    for run in (*runs[1:], want):
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("numba-cuda")])
@pytest.mark.parametrize("storage, bounce, outlet", [("float16", "quadratic", "convective"),
                                                     ("e4m11", "linear", "pressure")])
def test_bodies3d_16_bit_numba_cuda_splits_and_cpu(backend: str, storage: str, bounce: str,
                                                   outlet: str) -> None:
    """16-bit populations under float32 arithmetic on the Numba CUDA kernels: the same bits
    on 1 and 2 slabs, forces too (reduced on the device from the stored populations: _run);
    against the CPU within float32 round-off carried through the 16-bit rounding (bitwise on
    the simulator, test_d3q19_sim.py, so bitwise is expected here: printed)."""
    ref = _run("cpu", "float32", 2, bounce, storage=storage, steps=100, outlet=outlet)
    runs = [_run(backend, "float32", n, bounce, storage=storage, steps=100, outlet=outlet)
            for n in (1, 2)]
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)
    errs = [_rel_err(a, b) for a, b in zip(runs[0], ref, strict=True)]
    same = all(np.array_equal(a, b) for a, b in zip(runs[0], ref, strict=True))
    print(f"bodies3d numba-cuda {storage} storage, {bounce} links, {outlet} outlet: populations "
          f"{errs[0]:.2e}, velocity {errs[1]:.2e}, forces {errs[2]:.2e}; bitwise {same}")
    assert max(errs) <= 1e-3


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
def test_halfway_bodies_two_steps_per_sweep(backend: str) -> None:
    """Halfway bodies in a lid-driven cavity, float32, one slab: no open rule, so the solver
    takes two steps per sweep (the box's two-step kernel) and gives the bits of one step per
    sweep (the bodies kernel), forces included."""
    from simsplit import Simulation
    from simsplit.fluid.forces import body_links, measure_forces

    results = []
    for fused in (True, False):
        case = body_case_3d(40, 16, 18, 1, bodies=BODIES, run__backend=backend,
                            run__precision="float32", run__temporal_blocking=fused)
        case["domain"]["boundaries"] = {"lid": True}
        del case["domain"]["inlet"]
        sim = Simulation(case)
        assert sim.solver.steps_per_sweep == (2 if fused else 1)
        sim.step(101)
        results.append((sim.solver.populations(), measure_forces(
            sim.solver, body_links(sim.solver.setup))))
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param(b) for b in GPU_BACKENDS])
def test_probes3d_bitwise_across_splits(backend: str) -> None:
    """3D probes on a GPU: each reads its cell's density and velocity, the same bits on 1-4
    slabs."""
    from simsplit import Simulation

    probes = [{"name": "wake", "point": [20.5, 8.5, 9.2]}, {"name": "low", "point": [3, 1, 0.5]},
              {"name": "high", "point": [35.2, 15.1, 17.9]}]
    readings = []
    for n in (1, 2, 3, 4):
        case = body_case_3d(40, 16, 18, n, bodies=BODIES, run__backend=backend,
                            run__devices=[0], run__steps=60, output__probes=probes,
                            output__forces_every=30)
        sim = Simulation(case)
        sim.run(output=False)
        got = sim.probes.values[-1]
        u, rho = sim.velocity(), sim.density()
        for row, p in zip(got, sim.probes.probes, strict=True):
            i, j, k = p.cell
            np.testing.assert_array_equal(row[[0, 2, 3, 4]], [rho[k, j, i], *u[k, j, i]])
        readings.append(np.array(sim.probes.values))
    for r in readings[1:]:
        np.testing.assert_array_equal(r, readings[0])
