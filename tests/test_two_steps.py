"""The solver's two-steps-per-sweep path (run.temporal_blocking), with the CPU kernel set.

The D3Q19 two-step kernel itself exists on cupy only (kernels/d3q19.cu; checked bit for bit
against two CPU steps in tests/test_kernels_compile.py, and on a GPU in tests/test_d3q19_gpu.py;
the D2Q9 one on the CPU is checked in tests/test_cpu_rows.py). Here
a stand-in on the CPU kernels (two CPU steps through a scratch array) checks what the solver
does around it: which runs pair their steps, the buffer swaps, rho/u stored on the last step
only, odd step counts, and that a paired run ends bit for bit where a one-step run does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.backends.cpu.d3q19 import D3Q19Kernels
from tests.conftest import fluid_case


class _Calls:
    sweeps = 0
    stored = 0


def _install_stand_in(monkeypatch) -> _Calls:
    """Give the CPU D3Q19 kernel set a two-step entry point: two CPU steps, counted."""
    calls = _Calls()

    def stream_collide_two_steps(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p,
                                 store_macro) -> None:
        # as the CUDA kernel: step t + 1 on planes k0 - 1 .. k1 that exist (on depth-2 arrays
        # that includes the inner ghost planes), then step t + 2 on [k0, k1)
        calls.sweeps += 1
        calls.stored += bool(store_macro)
        nz = f_src.shape[1] - 2
        first = (max(1, layers[0] - 1), min(nz, layers[1]) + 1)
        mid = np.empty_like(f_src)
        scratch = [np.empty_like(a) for a in (rho, ux, uy, uz)]
        self.stream_collide(f_src, mid, flags, *scratch, first, p, False)
        self.stream_collide(mid, f_dst, flags, rho, ux, uy, uz, layers, p, store_macro)

    monkeypatch.setattr(D3Q19Kernels, "stream_collide_two_steps", stream_collide_two_steps,
                        raising=False)
    monkeypatch.setattr(D3Q19Kernels, "two_steps_fit", lambda self, f, dtype: True,
                        raising=False)
    monkeypatch.setattr(D3Q19Kernels, "two_steps_fit_shape",
                        lambda self, shape, storage, dtype: True, raising=False)
    return calls


@pytest.fixture
def two_step_cpu(monkeypatch) -> _Calls:
    return _install_stand_in(monkeypatch)


def _cavity(subdomains: int = 1, **over: Any) -> dict[str, Any]:
    return fluid_case(9, 7, subdomains, **{"domain__shape": [9, 7, 8],
                                           "run__precision": "float32", **over})


def _fields(sim: Simulation) -> tuple[np.ndarray, ...]:
    return sim.solver.populations(), sim.velocity(), sim.density()


@pytest.mark.parametrize("chunks", [[1], [2], [5], [3, 4, 1], [40, 3]])
def test_paired_steps_match_single_steps(two_step_cpu, chunks: list[int]) -> None:
    """Steps taken two per sweep end where one-step sweeps do, bit for bit, for odd and even
    step counts and across step() calls (40 steps: a CUDA graph's worth on a GPU)."""
    paired, single = Simulation(_cavity()), Simulation(_cavity(run__temporal_blocking=False))
    for n in chunks:
        paired.step(n)
        single.step(n)
        for a, b in zip(_fields(paired), _fields(single), strict=True):
            np.testing.assert_array_equal(a, b)
    assert two_step_cpu.sweeps == sum(n // 2 for n in chunks)
    # rho/u come from the last step of each call: by the two-step sweep when the count is even
    assert two_step_cpu.stored == sum(1 for n in chunks if n % 2 == 0)
    assert np.abs(single.velocity()).max() > 1e-3


@pytest.mark.parametrize("over", [{"run__temporal_blocking": False}, {"run__streaming": "aa"},
                                  {"run__temporal_blocking": False,
                                   "decomposition__subdomains": 2}])
def test_no_pairs_where_not_allowed(two_step_cpu, over: dict[str, Any]) -> None:
    """Off by the case (one slab or several: no second ghost plane then); in-place
    streaming."""
    Simulation(_cavity(**over)).step(6)
    assert two_step_cpu.sweeps == 0


_CHANNEL = {"domain__boundaries": {"x": "wall", "y": "periodic", "z": "periodic", "lid": False},
            "fluid__reynolds": None, "fluid__viscosity": 0.05,
            "fluid__body_force": [0.0, 1e-5, 2e-5]}


@pytest.mark.parametrize("over", [{}, _CHANNEL], ids=["cavity", "periodic-z-channel"])
@pytest.mark.parametrize("split", [(1, None), (2, None), (3, None), (4, None), (2, [1, 3]),
                                   (4, [1, 1, 2, 4])])
@pytest.mark.parametrize("chunks", [[2], [5], [3, 4, 1], [40, 3]])
def test_pairs_across_slabs_bitwise(two_step_cpu, over, split, chunks) -> None:
    """Slabs on one device cross their halo faces two steps per sweep (two ghost planes,
    filled by the neighbours' sweeps) and end bit for bit where one slab stepping singly does,
    whatever the split, the weights and the step counts; one slab periodic in z too (its
    ghost planes are its own far planes)."""
    n, weights = split
    paired = Simulation(_cavity(n, decomposition__weights=weights, **over))
    assert all(b.depth == (2 if b.halo_faces() else 1) for b in paired.solver.blocks.values())
    single = Simulation(_cavity(1, run__temporal_blocking=False, **over))
    for steps in chunks:
        paired.step(steps)
        single.step(steps)
        for a, b in zip(_fields(paired), _fields(single), strict=True):
            np.testing.assert_array_equal(a, b)
    assert two_step_cpu.sweeps == n * sum(c // 2 for c in chunks)
    assert paired.solver.steps_per_sweep == 2


@pytest.mark.parametrize("over", [{}, _CHANNEL, {"domain__shape": [9, 7, 24]}],
                         ids=["cavity", "periodic-z-channel", "tall-cavity"])
@pytest.mark.parametrize("split", [(2, None), (3, [1, 3, 2]), (4, [1, 1, 2, 4])])
def test_pairs_through_the_transport_bitwise(two_step_cpu, monkeypatch, over, split) -> None:
    """Slabs that do not share one device of one process (several GPUs or ranks) cross their
    halo faces two steps per sweep too: each face's two boundary planes travel through the
    transport as one buffer after each sweep (the buffered path of simsplit/fluid/pairs.py,
    forced here in one process), and the run ends bit for bit where one slab stepping singly
    does, across odd chunks and a switch to single steps without overlap."""
    from simsplit.fluid.solver import FluidSolver

    monkeypatch.setattr(FluidSolver, "_halos_stay_on_one_device", lambda self: False)
    n, weights = split
    paired = Simulation(_cavity(n, decomposition__weights=weights, **over))
    single = Simulation(_cavity(1, run__temporal_blocking=False, **over))
    assert not paired.solver._pairs.direct and paired.solver.steps_per_sweep == 2
    for steps, overlap in ((3, True), (4, True), (3, False), (6, True)):
        for sim in (paired, single):
            sim.solver.case["run"]["overlap"] = overlap
            sim.step(steps)
        for a, b in zip(_fields(paired), _fields(single), strict=True):
            np.testing.assert_array_equal(a, b)
    # seven pairs a slab: one launch each, or edges and interior apart where they do not meet
    assert two_step_cpu.sweeps >= n * (1 + 2 + 1 + 3)
    assert np.abs(single.velocity()).max() > 1e-4  # the flow moved


def test_pairs_across_slabs_then_single_steps(two_step_cpu) -> None:
    """Pairs, single steps with and without overlap, a restart of the populations on another
    split: the ghost planes are refilled wherever they went stale."""
    paired = Simulation(_cavity(3))
    single = Simulation(_cavity(1, run__temporal_blocking=False))
    for sim in (paired, single):
        sim.step(4)
        sim.solver.case["run"]["overlap"] = False
        sim.step(3)
        sim.solver.case["run"]["overlap"] = True
        sim.step(1)
        sim.step(6)
    for a, b in zip(_fields(paired), _fields(single), strict=True):
        np.testing.assert_array_equal(a, b)
    from simsplit.run.state import capture_state, restore_state

    state = capture_state(paired)
    other = Simulation(_cavity(2))
    restore_state(other, state, paired.steps_done)
    for sim in (other, single):
        sim.step(6)
    for a, b in zip(_fields(other), _fields(single), strict=True):
        np.testing.assert_array_equal(a, b)


def test_depth_two_keeps_the_usual_views(two_step_cpu) -> None:
    """Depth-2 blocks show f, flags, rho and u in the shapes of depth 1; the extra ghost plane
    of a halo face is fluid with the side walls, that of a wall face is wall."""
    from simsplit.numerics import flags as fl

    deep = Simulation(_cavity(2)).solver.blocks
    flat = Simulation(_cavity(2, run__temporal_blocking=False)).solver.blocks
    for k in deep:
        a, b = deep[k], flat[k]
        assert (a.depth, b.depth) == (2, 1)
        for x, y in ((a.f_src, b.f_src), (a.flags, b.flags), (a.rho, b.rho), (a.u[0], b.u[0])):
            assert x.shape == y.shape
        inner = (slice(1, -1),) * 3  # NEAR_WALL marks on the real planes are unchanged
        np.testing.assert_array_equal(a.flags[inner], b.flags[inner])
        outer = a._deep["flags"][0 if k == 1 else -1]
        assert outer[1:-1, 1:-1].max() == fl.FLUID and outer[0, 0] == fl.WALL
        wall = a._deep["flags"][-1 if k == 1 else 0]
        assert (wall & fl.SOLID).all()


def test_cpu_kernels_have_no_two_step_path() -> None:
    """Without the stand-in the CPU backend steps D3Q19 one at a time (its kernel set has
    none)."""
    sim = Simulation(_cavity())
    assert not any(b.fuses_two_steps() for b in sim.solver.blocks.values())


@pytest.mark.parametrize("paired", [True, False])
def test_run_summary_names_the_sweep(monkeypatch, paired: bool) -> None:
    """The end-of-run summary says when steps went two per sweep."""
    from simsplit.run.report import summary_lines

    if paired:
        _install_stand_in(monkeypatch)
    sim = Simulation(_cavity(run__steps=4))
    lines = summary_lines(sim, sim.run(output=False))
    assert any(line.startswith("sweeps") for line in lines) == paired


def _bodies_cavity(subdomains: int, bounce: str, **over: Any) -> dict[str, Any]:
    """A lid-driven cavity around a sphere and a box (no inlet or outlet)."""
    case = fluid_case(14, 9, subdomains, domain__shape=[14, 9, 10], run__precision="float32",
                      **over)
    case["domain"]["bodies"] = [
        {"name": "ball", "shape": "sphere", "centre": [4.3, 4.2, 5.1], "radius": 2.2},
        {"name": "brick", "shape": "box", "lower": [9, 2, 3], "upper": [11, 5, 7]}]
    case["domain"]["bounce_back"] = bounce
    return case


@pytest.mark.parametrize("subdomains, bounce, paired", [(1, "halfway", True),
                                                        (2, "halfway", False),
                                                        (1, "linear", False)])
def test_bodies_pair_steps_where_no_cell_takes_an_open_rule(two_step_cpu, subdomains: int,
                                                             bounce: str, paired: bool) -> None:
    """Halfway bodies in a cavity on one slab take two steps per sweep (the box kernels' walls)
    and end where one-step sweeps do, bit for bit; curved links (open rules) and several slabs
    (no bodies painted on a second ghost plane) keep one step per sweep."""
    runs = [Simulation(_bodies_cavity(subdomains, bounce, run__temporal_blocking=fused))
            for fused in (True, False)]
    assert runs[0].solver.steps_per_sweep == (2 if paired else 1)
    for sim in runs:
        sim.step(7)
    for a, b in zip(*(_fields(sim) for sim in runs), strict=True):
        np.testing.assert_array_equal(a, b)
    assert two_step_cpu.sweeps == (3 if paired else 0)
    assert np.abs(runs[1].velocity()).max() > 1e-3


@pytest.mark.parametrize("gpu, fp16_pairs", [
    ("NVIDIA H100 80GB HBM3", True), ("NVIDIA H100 PCIe", True), ("NVIDIA H200", False),
    ("NVIDIA A100-SXM4-80GB", False)])
def test_d3q19_steps_per_sweep_by_gpu(gpu: str, fp16_pairs: bool) -> None:
    """The cupy kernels take two steps per sweep for float32 storage on every GPU and for fp16
    storage only where that measured faster (an H100, not an H200); the fp16 module holds the
    two-step kernel for those GPUs, double's holds none."""
    from simsplit.backends.cuda_c import kernel_names, source

    f32, f16, f64 = (np.dtype(t) for t in (np.float32, np.float16, np.float64))
    pairs = source.d3q19_fused_pairs(gpu)
    assert (f32, f32) in pairs
    assert ((f32, f16) in pairs) == fp16_pairs
    assert (f64, f64) not in pairs
    two_step = {kernel_names.d3q19_two_steps_name(f32, f16, s, forced)
                for s in (False, True) for forced in (False, True)}
    assert two_step <= set(kernel_names.d3q19_pair_expressions(f32, f16))
    assert not any("two_steps" in n for n in kernel_names.d3q19_pair_expressions(f64, f64))
