"""16-bit population storage on a real GPU: cupy against the CPU bit for bit, split identity;
numba-cuda the same bits on every split and close to the CPU. The host emulation
(test_kernels_compile.py) says cupy must agree exactly, the simulator (test_d3q19_sim.py) that
numba-cuda's arithmetic is the CPU's."""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.backends.cuda_c import neq_tiles
from tests.test_gpu import _gpu_param, _rel_err

pytestmark = pytest.mark.gpu


#: the forced channel: periodic along x and z, walls in y
CHANNEL = {"x": "periodic", "y": "wall", "z": "periodic", "lid": False}


def _solver(backend: str, subdomains: int, channel: bool, storage: str = "float16",
            streaming: str = "two-lattice", *, bounds: dict | None = None,
            force: tuple[float, float, float] = (1e-6, 0.0, 2e-7),
            shape: tuple[int, int, int] = (40, 24, 30), **run: object) -> object:
    """A 40x24x30 (``shape``) D3Q19 lid-driven cavity (or a forced channel, ``CHANNEL``
    unless ``bounds`` says otherwise), float32 arithmetic; ``run``: further run keys."""
    from simsplit.case import validate_case
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    fluid = {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"}
    if channel:
        fluid = {"reynolds": None, "viscosity": 0.05, "collision": "bgk",
                 "body_force": list(force)}
    cavity = {"x": "wall", "y": "wall", "z": "wall", "lid": True}
    case = validate_case({
        "physics": "fluid", "fluid": fluid,
        "domain": {"shape": list(shape),
                   "boundaries": bounds or (CHANNEL if channel else cavity)},
        "decomposition": {"subdomains": subdomains},
        "run": {"backend": backend, "precision": "float32", "storage": storage,
                "streaming": streaming, "transport": "auto",
                "devices": None if backend == "cpu" else [0], **run},
        "output": {"dir": None},
    })
    run = case["run"]
    return FluidSolver(case, ParallelContext(run["backend"], run["devices"], run["transport"]))


def _run(backend: str, subdomains: int, channel: bool, steps: int,
         storage: str = "float16") -> tuple[np.ndarray, ...]:
    from simsplit.fluid.state import raw_populations

    solver = _solver(backend, subdomains, channel, storage)
    solver.step(steps)  # > 32 steps: CUDA graphs on cupy
    return raw_populations(solver), solver.velocity(), solver.density()


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("channel", [False, True], ids=["cavity-trt", "channel-bgk-force"])
def test_fp16_cupy_equals_cpu_bitwise(backend: str, channel: bool) -> None:
    want = _run("cpu", 2, channel, 100)
    got = _run(backend, 2, channel, 100)
    assert got[0].dtype == np.float16
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
def test_fp16_cupy_bitwise_identical_across_splits(backend: str) -> None:
    runs = [_run(backend, n, False, 100) for n in (1, 2, 3)]
    for run in runs[1:]:
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("numba-cuda")])
@pytest.mark.parametrize("channel, storage", [(False, "float16"), (True, "e4m11")],
                         ids=["cavity-float16", "channel-e4m11"])
def test_16_bit_numba_cuda_splits_and_cpu(backend: str, channel: bool, storage: str) -> None:
    """Bitwise across splits; against the CPU within float32 round-off carried through the
    16-bit rounding (libdevice's operations are IEEE's, so bitwise is expected: printed)."""
    from simsplit.numerics.storage import storage_dtype

    want = _run("cpu", 2, channel, 100, storage)
    runs = [_run(backend, n, channel, 100, storage) for n in (1, 2, 3)]
    assert runs[0][0].dtype == storage_dtype(storage)
    for run in runs[1:]:
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)
    same = all(np.array_equal(a, b) for a, b in zip(runs[0], want, strict=True))
    err = _rel_err(runs[0][1], want[1])
    print(f"numba-cuda D3Q19 {'channel' if channel else 'cavity'} {storage}: velocity against "
          f"the CPU {err:.2e}, bitwise {same}")
    assert err <= 1e-3


@pytest.mark.parametrize("backend", [_gpu_param("cupy"), _gpu_param("numba-cuda")])
@pytest.mark.parametrize("channel", [False, True], ids=["cavity-trt", "channel-bgk-force"])
@pytest.mark.parametrize("storage", ["neq16", "neq16s"])
def test_neq16_gpu_equals_cpu_and_splits(backend: str, channel: bool, storage: str) -> None:
    """run.storage neq16 and neq16s (cell records, plain and stress-kept; cupy:
    kernels/d3q19_neq.cuh, numba-cuda: the CPU's codec compiled for the device): each GPU
    backend writes the CPU's records bit for bit (the host emulation and the simulator say it
    must), and the same on 1, 2 and 3 slabs (halos of records, CUDA graphs past 32 steps on
    cupy)."""
    want = _run("cpu", 2, channel, 100, storage)
    runs = [_run(backend, n, channel, 100, storage) for n in (1, 2, 3)]
    assert runs[0][0].dtype == np.uint16
    assert runs[0][0].shape[0] == (27 if storage == "neq16" else 33)
    for run in (*runs[1:], want):
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("storage", ["neq16", "neq16s"])
def test_neq16_offsets_of_large_slabs_equal_cpu(backend: str, storage: str,
                                                monkeypatch) -> None:
    """The records kernel's index types for slabs beyond 32-bit offsets, taken on the small
    cavity by lowering the limit of 32-bit offsets: 32-bit offsets from two bases (the upper
    slots from slot NEQ_HALVES_SPLIT of each array, neq::halves) and 64-bit ones write the
    CPU's records bit for bit on 1 and 2 slabs, 100 steps (CUDA graphs)."""
    from simsplit.backends.cuda_c import source
    from simsplit.backends.layout import element_strides
    from simsplit.fluid.state import raw_populations

    want = _run("cpu", 2, False, 100, storage)
    for index in ("halves", "wide"):
        for subdomains in (1, 2):
            solver = _solver(backend, subdomains, False, storage)
            fields = [b.f_src for b in solver.blocks.values()]
            slots, plane = fields[0].shape[0], max(element_strides(f)[0] for f in fields)
            upper = max(source.NEQ_HALVES_SPLIT, slots - source.NEQ_HALVES_SPLIT) * plane
            with monkeypatch.context() as m:
                m.setattr(source, "FLAT_LIMIT", upper if index == "halves" else upper - 1)
                assert {source.d3q19_records_index(slots, element_strides(f)[0])
                        for f in fields} == {index}
                solver.step(100)
            got = raw_populations(solver), solver.velocity(), solver.density()
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)


#: boundaries of the tiled neq16 candidates' runs: the cavity, the forced channel (periodic
#: x and z: slabs exchange halos both ways), periodic x and y over walls in z
TILE_BOUNDS = [{"x": "wall", "y": "wall", "z": "wall", "lid": True}, CHANNEL,
               {"x": "periodic", "y": "periodic", "z": "wall", "lid": False}]


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("tile", sorted(neq_tiles.D3Q19_NEQ_TILES))
def test_neq16_tile_candidates_equal_production(backend: str, tile: str, monkeypatch) -> None:
    """The tiled candidates of the neq16 box kernel (kernels/d3q19_neq_tile.cuh, taken where
    neq_tiles.NEQ_TILE_ENV names one) write the production kernel's records and rho/u bit
    for bit: the cavity with walls and the lid, a forced channel, periodic x and y, on 1, 2
    and 3 slabs of a 40x24x30 grid (partial 32-cell columns), 100 steps (CUDA graphs)."""
    from simsplit.fluid.state import raw_populations

    def run(subdomains: int, bounds: dict, candidate: str | None) -> tuple[np.ndarray, ...]:
        monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, candidate or "production")
        solver = _solver(backend, subdomains, not bounds.get("lid"), "neq16", bounds=bounds)
        tiles = {b.kernels.tile for b in solver.blocks.values()}
        solver.step(100)
        assert tiles == {candidate}
        return raw_populations(solver), solver.velocity(), solver.density()

    for bounds in TILE_BOUNDS:
        want = run(1, bounds, None)
        for n in (1, 2, 3):
            got = run(n, bounds, tile)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("nx, channel", [(40, True), (41, False)],
                         ids=["even-channel", "odd-cavity"])
def test_two_cell_kernel_equals_one_cell(backend: str, nx: int, channel: bool,
                                         monkeypatch) -> None:
    """fp16 storage steps through d3q19_stream_collide_x2 (source.D3Q19_X2_16BIT) on
    the solver's padded rows, with the bits of the one-cell kernel (the switch off), on 1 and
    2 slabs: an odd nx (a lone last cell) and a periodic x (scalar pairs at the row ends)."""
    from simsplit.backends.cuda_c import d3q19 as launcher
    from simsplit.backends.cuda_c import source
    from simsplit.fluid.state import raw_populations

    taken: list[int] = []
    pick = launcher.D3Q19Kernels._pull_launch

    def spy(self, variant, f_src, f_dst):
        got = pick(self, variant, f_src, f_dst)
        taken.append(got[2])
        return got

    monkeypatch.setattr(launcher.D3Q19Kernels, "_pull_launch", spy)

    def run(subdomains: int) -> list[np.ndarray]:
        # one step per sweep: the GPUs that pair fp16 steps sweep them in the two-step kernel
        solver = _solver(backend, subdomains, channel, "float16", shape=(nx, 24, 30),
                         temporal_blocking=False)
        solver.step(40)
        return [raw_populations(solver), solver.velocity(), solver.density()]

    assert source.d3q19_takes_x2(np.float32, np.float16)
    two = [run(n) for n in (1, 2)]
    assert taken and set(taken) == {2}
    taken.clear()
    monkeypatch.setattr(source, "D3Q19_X2_16BIT", None)
    one = run(1)
    assert set(taken) == {1}
    for got in two:
        for a, b in zip(got, one, strict=True):
            np.testing.assert_array_equal(a, b)
