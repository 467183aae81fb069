"""D2Q9 16-bit population storage on a real GPU: cupy against the CPU bit for bit (cavity,
forced channel, inlet/outlet/curved body and its forces), the same bits on 1, 2 and 3 slabs,
2 bytes per population in device memory; numba-cuda the same bits on every split and close
to the CPU. The host emulation (test_kernels_compile.py) says cupy must agree exactly, the
simulator (test_numba_cuda_sim.py) that numba-cuda's arithmetic is the CPU's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit.backends.cuda_c import neq_tiles
from tests.conftest import body_case, fluid_case
from tests.test_gpu import _gpu_param, _needs, _rel_err

pytestmark = pytest.mark.gpu


def _solver(backend: str, flow: str, storage: str, subdomains: int) -> Any:
    from simsplit.case import validate_case
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    run = {"run__backend": backend, "run__precision": "float32", "run__storage": storage,
           "run__transport": "auto", "run__devices": None if backend == "cpu" else [0]}
    if flow == "cavity":
        raw = fluid_case(200, 61, subdomains, **run)
    elif flow == "channel":
        raw = fluid_case(96, 61, subdomains, fluid__reynolds=None, fluid__viscosity=0.05,
                         fluid__collision="bgk", fluid__body_force=[1e-6, 2e-7],
                         domain__boundaries={"x": "periodic", "y": "wall", "lid": False}, **run)
    else:
        bodies = [{"name": "cyl", "shape": "circle", "centre": [100.3, 20.6], "radius": 6.2}]
        raw = body_case(200, 41, subdomains, bodies=bodies, domain__bounce_back="linear", **run)
    case = validate_case(raw)
    r = case["run"]
    return FluidSolver(case, ParallelContext(r["backend"], r["devices"], r["transport"]))


def _run(backend: str, flow: str, storage: str, subdomains: int,
         steps: int = 150) -> list[np.ndarray]:
    from simsplit.fluid.state import raw_populations

    solver = _solver(backend, flow, storage, subdomains)
    solver.step(steps)  # > 32 steps: CUDA graphs on cupy
    out = [raw_populations(solver), solver.velocity(), solver.density()]
    if flow == "bodies":
        from simsplit.fluid.forces import DeviceForces, body_links

        out.append(DeviceForces(body_links(solver.setup)).measure(solver))
    return out


CASES = [("cavity", "float16"), ("cavity", "e4m11"), ("channel", "float16"),
         ("bodies", "float16"), ("bodies", "e4m11")]


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("flow, storage", CASES)
def test_d2q9_16_bit_cupy_equals_cpu_and_splits(backend: str, flow: str, storage: str) -> None:
    want = _run("cpu", flow, storage, 2)
    runs = [_run(backend, flow, storage, n) for n in (1, 2, 3)]
    assert runs[0][0].dtype.itemsize == 2
    for run in runs:
        for a, b in zip(run, want, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("storage", ["float16", "e4m11"])
def test_d2q9_16_bit_takes_2_bytes_per_population(backend: str, storage: str) -> None:
    """Both population arrays and the halo buffers hold 2-byte elements on the device."""
    from simsplit.backends.layout import padded_pitch

    solver = _solver(backend, "cavity", storage, 2)
    for blk in solver.blocks.values():
        h, w = blk.layers + 2, blk.nx + 2
        for f in (blk.f_src, blk.f_dst):
            assert f.dtype.itemsize == 2 and f.shape == (9, h, w)
            assert f.data.mem.size <= 2 * (9 * h * padded_pitch(w) + 64) + 512  # pool granule
        assert all(b.dtype.itemsize == 2 for b in blk.send.values())
        assert blk.nbytes_per_cell_update() == 37


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
def test_bench_d2q9_storage(backend: str) -> None:
    from simsplit.cli import bench

    rows = bench.run_bench([backend], [(512, 512)], 1, 50, "float32", repeats=1,
                           storage="e4m11")
    assert rows[0].get("error") is None and rows[0]["storage"] == "e4m11"
    assert rows[0]["bytes_per_cell_update"] == 37 and rows[0]["mlups"] > 0


@pytest.mark.parametrize("backend", [_gpu_param("numba-cuda")])
@pytest.mark.parametrize("flow, storage", [("cavity", "float16"), ("bodies", "e4m11")])
def test_d2q9_16_bit_numba_cuda_splits_and_cpu(backend: str, flow: str, storage: str) -> None:
    """Bitwise across splits; against the CPU within float32 round-off carried through the
    16-bit rounding (libdevice's operations are IEEE's, so bitwise is expected: printed)."""
    want = _run("cpu", flow, storage, 2)
    runs = [_run(backend, flow, storage, n) for n in (1, 2, 3)]
    assert runs[0][0].dtype.itemsize == 2
    for run in runs[1:]:
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)
    same = all(np.array_equal(a, b) for a, b in zip(runs[0], want, strict=True))
    err = _rel_err(runs[0][1], want[1])
    print(f"numba-cuda D2Q9 {flow} {storage}: velocity against the CPU {err:.2e}, bitwise {same}")
    assert err <= 1e-3


@pytest.mark.parametrize(("backend", "flow"), [  # numba-cuda refuses neq16 with bodies
    pytest.param(b, flow, marks=_needs(b), id=f"{b}-{flow}")
    for b, flows in (("cupy", ("cavity", "channel", "bodies")),
                     ("numba-cuda", ("cavity", "channel")))
    for flow in flows])
@pytest.mark.parametrize("storage", ["neq16", "neq16s"])
def test_neq16_gpu_equals_cpu_and_splits(backend: str, flow: str, storage: str) -> None:
    """run.storage neq16 and neq16s in 2D (cupy: d2q9_stream_collide_neq; bodies: an inlet, a
    pressure outlet and a circle with linear links, d2q9_stream_collide on records, and the
    forces reduced on the device from records; numba-cuda: the CPU's codec compiled for the
    device, boxes only): each GPU backend writes the CPU's records bit for bit, on 1, 2 and 3
    slabs (record halos, CUDA graphs past 32 steps on cupy)."""
    want = _run("cpu", flow, storage, 2)
    runs = [_run(backend, flow, storage, n) for n in (1, 2, 3)]
    assert runs[0][0].dtype == np.uint16
    assert runs[0][0].shape[0] == (15 if storage == "neq16" else 18)
    for run in (*runs[1:], want):
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("flow, storage", [("cavity", "neq16s"), ("bodies", "neq16")])
def test_neq16_wide_offsets_equal_cpu(backend: str, flow: str, storage: str,
                                      monkeypatch) -> None:
    """The records' box kernel with 64-bit element offsets (taken beyond 2^32 elements; here
    the limit is lowered to none): the CPU's records bit for bit on 1 and 2 slabs (the bodies'
    slabs run it on their column spans)."""
    from simsplit.backends.cuda_c import source

    monkeypatch.setattr(source, "FLAT_LIMIT", 0)
    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "production")  # plain records' whole rows too
    want = _run("cpu", flow, storage, 2)
    for n in (1, 2):
        for a, b in zip(_run(backend, flow, storage, n), want, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("tile", sorted(neq_tiles.D2Q9_NEQ_TILES))
def test_neq16_tile_candidates_equal_production(backend: str, tile: str, monkeypatch) -> None:
    """The tiled candidates of the D2Q9 neq16 box kernel (kernels/d2q9_neq_tile.cuh, taken
    where neq_tiles.NEQ_TILE_ENV names one) write the production kernel's records and rho/u bit
    for bit: the cavity (200 columns: partial strips) and the forced periodic channel, 1, 2
    and 3 slabs, 150 steps (CUDA graphs)."""
    from simsplit.fluid.state import raw_populations

    def run(flow: str, subdomains: int, candidate: str | None) -> list[np.ndarray]:
        monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, candidate or "production")
        solver = _solver(backend, flow, "neq16", subdomains)
        assert {b.kernels.tile for b in solver.blocks.values()} == {candidate}
        solver.step(150)
        return [raw_populations(solver), solver.velocity(), solver.density()]

    for flow in ("cavity", "channel"):
        want = run(flow, 1, None)
        for n in (1, 2, 3):
            for a, b in zip(run(flow, n, tile), want, strict=True):
                np.testing.assert_array_equal(a, b)
