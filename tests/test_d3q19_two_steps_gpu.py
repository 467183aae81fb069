"""Two steps per sweep on a real GPU (kernels/d3q19.cu d3q19_stream_collide_two_steps).

The kernel against two launches of the one-step kernel, bit for bit: random populations,
obstacles, periodic x and y, several runs along z, a partial plane range. Whole runs with
run.temporal_blocking on against off and against the CPU backend, bit for bit, CUDA graphs
included. The host emulation (test_kernels_compile.py) checks the index math without a GPU but
runs a block's threads one phase after another: only a GPU tests the barriers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.test_gpu import _gpu_param

pytestmark = pytest.mark.gpu
CUPY = _gpu_param("cupy")


def _random_fields(precision: str, storage: str, periodic: bool, forced: bool,
                   shape: tuple[int, int, int]) -> tuple[Any, np.ndarray, np.ndarray]:
    """(params, populations, flags) of a cavity block with random populations and 3 % solid
    cells inside, on the host."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz = shape
    force = (3e-5, -2e-5, 1e-5) if forced else (0.0, 0.0, 0.0)
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, *force, periodic, periodic)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, precision,
                       storage)
    rng = np.random.default_rng(11)
    block.set_populations(D3Q19.w[:, None, None, None]
                          * (1 + 0.05 * rng.standard_normal((19, nz, ny, nx))))
    flags = block.flags.copy()
    inner = (slice(1, -1),) * 3
    flags[inner][rng.random((nz, ny, nx)) < 0.03] = fl.WALL
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    return params, block.f_src, flags


@pytest.mark.parametrize("backend", [CUPY])
@pytest.mark.parametrize("precision, storage", [("float32", "float32")])
@pytest.mark.parametrize("periodic", [False, True])
def test_two_step_kernel_matches_two_launches(backend: str, precision: str, storage: str,
                                              periodic: bool) -> None:
    """The pairs the kernel is built for (source.D3Q19_FUSED_PAIRS; the host emulation checks
    every storage pair). fp16 and double were checked here too before they were left out of
    the build (H200, 2026-12-03 09:48 UTC,
    benchmarks/logs/gpu_tests_d3q19_h200_2026-12-03_two_steps.log)."""
    import cupy

    from simsplit.backends.cuda_c import source
    from simsplit.backends.cuda_c.d3q19 import D3Q19Kernels
    from simsplit.backends.layout import padded_empty

    nx, ny, nz = 45, 21, 2 * source.D3Q19_FUSED_RUN_PLANES + 30  # three runs along z
    params, f_host, flags_host = _random_fields(precision, storage, periodic, not periodic,
                                                (nx, ny, nz))

    def dev(a: np.ndarray) -> Any:
        out = padded_empty(cupy, a.shape, a.dtype)
        out[...] = cupy.asarray(a)
        return out

    kernels = D3Q19Kernels(0)
    f0, flags = dev(f_host), dev(flags_host)
    f1, f2, two, part = (dev(f_host) for _ in range(4))
    one_macro = [cupy.zeros((nz, ny, nx), precision) for _ in range(4)]
    two_macro = [cupy.zeros((nz, ny, nx), precision) for _ in range(4)]
    part_macro = [cupy.zeros((nz, ny, nx), precision) for _ in range(4)]
    kernels.stream_collide(f0, f1, flags, *one_macro, (1, nz + 1), params, False)
    kernels.stream_collide(f1, f2, flags, *one_macro, (1, nz + 1), params, True)
    kernels.stream_collide_two_steps(f0, two, flags, *two_macro, (1, nz + 1), params, True)
    k0, k1 = 5, nz - 3  # a partial range: its first step also updates planes k0 - 1 and k1
    kernels.stream_collide_two_steps(f0, part, flags, *part_macro, (k0, k1), params, True)
    want = cupy.asnumpy(f2)
    assert want.tobytes() != f_host.tobytes()
    assert cupy.asnumpy(two).tobytes() == want.tobytes()
    planes = (slice(None), slice(k0, k1))
    assert cupy.asnumpy(part)[planes].tobytes() == want[planes].tobytes()
    for got, got_part, ref in zip(two_macro, part_macro, one_macro, strict=True):
        ref_host = cupy.asnumpy(ref)
        np.testing.assert_array_equal(cupy.asnumpy(got), ref_host)
        np.testing.assert_array_equal(cupy.asnumpy(got_part)[k0 - 1:k1 - 1],
                                      ref_host[k0 - 1:k1 - 1])


def _solver(backend: str, storage: str, flow: str, blocking: bool) -> Any:
    """A 40 x 24 x 30 cavity (or a forced channel periodic in x and y between z walls: one
    slab without halo faces) on one slab, float32 arithmetic."""
    from tests.test_d3q19_storage_gpu import _solver as storage_solver

    channel = flow == "channel"
    bounds = {"x": "periodic", "y": "periodic", "z": "wall", "lid": False} if channel else None
    return storage_solver(backend, 1, channel, storage, bounds=bounds, force=(1e-6, 2e-7, 0.0),
                          temporal_blocking=blocking)


def _gpu_pairs(storage: str) -> bool:
    """Whether the solver steps (float32 arithmetic, ``storage``) two per sweep on GPU 0."""
    import cupy

    from simsplit.backends.cuda_c import source

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return (np.dtype(np.float32), np.dtype(storage)) in source.d3q19_fused_pairs(name)


@pytest.mark.parametrize("backend", [CUPY])
@pytest.mark.parametrize("flow", ["cavity", "channel"])
@pytest.mark.parametrize("storage", ["float32", "float16"])
def test_temporal_blocking_bitwise(backend: str, flow: str, storage: str) -> None:
    """Paired steps (1, 2, 7 and 70 steps: odd counts, CUDA graphs) end where one-step sweeps
    on the GPU and the CPU do: float32 storage (paired on every GPU) and fp16 (paired where
    source.d3q19_fused_pairs says so for this GPU; else both runs step singly)."""
    from simsplit.fluid.state import raw_populations

    on, off = _solver(backend, storage, flow, True), _solver(backend, storage, flow, False)
    cpu = _solver("cpu", storage, flow, True)
    pairs = _gpu_pairs(storage)
    assert all(b.fuses_two_steps() == pairs for b in on.blocks.values())
    assert on._pairs_allowed() == pairs and not off._pairs_allowed()
    for steps in (1, 2, 7, 70):
        runs = []
        for solver in (on, off, cpu):
            solver.step(steps)
            runs.append((raw_populations(solver), solver.velocity(), solver.density()))
        for other in runs[1:]:
            for a, b in zip(runs[0], other, strict=True):
                np.testing.assert_array_equal(a, b)
    assert np.abs(runs[0][1]).max() > (1e-3 if flow == "cavity" else 1e-5)


@pytest.mark.parametrize("backend", [CUPY])
def test_fp16_storage_pairs_where_measured_faster(backend: str) -> None:
    """fp16 storage: two steps per sweep only on the GPUs where they measured faster than its
    one-step kernel (source.d3q19_fused_pairs: an H100, not an H200)."""
    solver = _solver(backend, "float16", "cavity", True)
    assert solver._pairs_allowed() == _gpu_pairs("float16")


_Z_CHANNEL = {"x": "periodic", "y": "wall", "z": "periodic", "lid": False}


@pytest.mark.parametrize("backend", [CUPY])
@pytest.mark.parametrize("subdomains", [2, 3, 4])
@pytest.mark.parametrize("flow", ["cavity", "z-channel"])
@pytest.mark.parametrize("storage", ["float32", "float16"])
def test_pairs_across_halo_faces_bitwise(backend: str, subdomains: int, flow: str,
                                         storage: str) -> None:
    """Slabs on one GPU sweep two steps at a time across their halo faces (two ghost planes,
    each slab on a stream of its own, copying its boundary planes into its neighbours' ghost
    planes): the same bits as one slab stepping singly on the GPU and on the CPU, 1, 2, 7 and
    70 steps (CUDA graphs of the forked streams). fp16 storage where this GPU pairs it."""
    from simsplit.fluid.state import raw_populations
    from tests.test_d3q19_storage_gpu import _solver as storage_solver

    if not _gpu_pairs(storage):
        pytest.skip(f"this GPU steps {storage} storage singly (source.d3q19_fused_pairs)")
    channel = flow == "z-channel"
    kw = {"bounds": _Z_CHANNEL, "force": (1e-6, 0.0, 2e-6)} if channel else {}
    split = storage_solver(backend, subdomains, channel, storage, **kw)
    one = storage_solver(backend, 1, channel, storage, temporal_blocking=False, **kw)
    cpu = storage_solver("cpu", 1, channel, storage, **kw)
    assert split.steps_per_sweep == 2
    assert all(b.depth == 2 for b in split.blocks.values())
    for steps in (1, 2, 7, 70):
        runs = []
        for solver in (split, one, cpu):
            solver.step(steps)
            runs.append((raw_populations(solver), solver.velocity(), solver.density()))
        for other in runs[1:]:
            for a, b in zip(runs[0], other, strict=True):
                np.testing.assert_array_equal(a, b)
    assert np.abs(runs[0][1]).max() > 1e-5


@pytest.mark.parametrize("backend", [CUPY])
@pytest.mark.parametrize("subdomains", [2, 3])
@pytest.mark.parametrize("flow", ["cavity", "z-channel"])
@pytest.mark.parametrize("storage", ["float32", "float16"])
def test_pairs_through_the_transport_bitwise(monkeypatch, backend: str, subdomains: int,
                                             flow: str, storage: str) -> None:
    """The buffered path of slabs on several GPUs or ranks (each halo face's boundary planes
    packed on the device, moved by the transport, unpacked; edges swept first), forced here on
    one GPU: the same bits as one slab stepping singly on the GPU. fp16 storage where this GPU
    pairs it."""
    from simsplit.fluid.solver import FluidSolver
    from simsplit.fluid.state import raw_populations
    from tests.test_d3q19_storage_gpu import _solver as storage_solver

    if not _gpu_pairs(storage):
        pytest.skip(f"this GPU steps {storage} storage singly (source.d3q19_fused_pairs)")
    monkeypatch.setattr(FluidSolver, "_halos_stay_on_one_device", lambda self: False)
    channel = flow == "z-channel"
    kw = {"bounds": _Z_CHANNEL, "force": (1e-6, 0.0, 2e-6)} if channel else {}
    split = storage_solver(backend, subdomains, channel, storage, **kw)
    one = storage_solver(backend, 1, channel, storage, temporal_blocking=False, **kw)
    assert split.steps_per_sweep == 2 and not split._pairs.direct
    for steps in (1, 2, 7, 40):
        runs = []
        for solver in (split, one):
            solver.step(steps)
            runs.append((raw_populations(solver), solver.velocity(), solver.density()))
        for a, b in zip(*runs, strict=True):
            np.testing.assert_array_equal(a, b)
    assert np.abs(runs[0][1]).max() > 1e-5
