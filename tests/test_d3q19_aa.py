"""In-place (AA) streaming for D3Q19 (run.streaming: aa) against the two-lattice scheme.

Same collision in the same order, so every comparison is bit for bit: after even and odd step
counts (the standard layout is recovered from either parity), on 1, 2, 3 slabs, with walls, the
lid, periodic x, y and z, overlap on and off, fp16 storage, and through a checkpoint taken at an
odd step. The CUDA C kernel is compared with the CPU one in test_kernels_compile.py.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import pytest

from simsplit import Simulation
from simsplit.case import CaseError, validate_case
from tests.conftest import fluid_case

FLOWS: dict[str, dict[str, Any]] = {
    "cavity": {},
    # periodic x and z (across the slabs), walls in y, force along x and z
    "channel": {"fluid__reynolds": None, "fluid__viscosity": 0.05,
                "fluid__body_force": [2e-5, 0.0, 4e-6],
                "domain__boundaries": {"x": "periodic", "y": "wall", "z": "periodic",
                                       "lid": False}},
    # periodic y with the lid: wrap in-slab next to the moving wall
    "wide": {"domain__boundaries": {"x": "wall", "y": "periodic", "z": "wall", "lid": True}},
}


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny grids: one Numba thread (no per-step parallel sync); results do not depend on it."""
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


def _sim(streaming: str, subdomains: int, flow: str, **over: Any) -> Simulation:
    over = {"run__precision": "float32", "run__streaming": streaming, **FLOWS[flow], **over}
    return Simulation(fluid_case(8, 6, subdomains, domain__shape=[8, 6, 9], **over))


def _state(sim: Simulation) -> tuple[np.ndarray, ...]:
    from simsplit.fluid.state import raw_populations

    return raw_populations(sim.solver), sim.velocity(), sim.density()


def _assert_same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("flow", list(FLOWS))
@pytest.mark.parametrize("subdomains", [1, 2, 3])
def test_aa_equals_two_lattice(flow: str, subdomains: int) -> None:
    """After an odd and then an even number of steps (standard layout from either parity)."""
    ref, aa = _sim("two-lattice", 1, flow), _sim("aa", subdomains, flow)
    for steps in (37, 36):  # 37 then 73: odd, then odd again; then 36 more: even total
        ref.step(steps)
        aa.step(steps)
        _assert_same(_state(aa), _state(ref))
    ref.step(1)
    aa.step(1)  # 74 steps: even
    _assert_same(_state(aa), _state(ref))
    assert np.abs(ref.velocity()).max() > (0.05 if flow != "channel" else 1e-5)


def test_aa_one_array_and_parity_views() -> None:
    sim = _sim("aa", 2, "cavity")
    blk = next(iter(sim.solver.blocks.values()))
    assert blk.f_src is not blk.f_dst
    assert np.shares_memory(blk.f_src, blk.f_dst)  # half the population memory
    first = blk.f_src
    sim.step(1)
    assert blk.f_src is not first  # the parity shows in the identity of f_src
    sim.step(1)
    assert blk.f_src is first


@pytest.mark.parametrize("overlap", [True, False])
def test_aa_overlap_and_fp16(overlap: bool) -> None:
    over = {"run__overlap": overlap, "run__storage": "float16"}
    ref = _sim("two-lattice", 1, "channel", run__storage="float16")
    aa = _sim("aa", 3, "channel", **over)
    ref.step(41)
    aa.step(41)
    _assert_same(_state(aa), _state(ref))
    assert _state(aa)[0].dtype == np.float16


def test_aa_checkpoint_at_odd_step_restarts_bitwise(tmp_path) -> None:
    from simsplit.fluid.state import load_state, save_state
    from simsplit.run.checkpoint import read_checkpoint, write_checkpoint

    whole = _sim("two-lattice", 1, "cavity")
    whole.step(50)
    first = _sim("aa", 2, "cavity")
    first.step(31)  # odd: the array is in the after-odd layout
    path = write_checkpoint(tmp_path, 31, first.case, save_state(first.solver))
    _, arrays = read_checkpoint(path)
    resumed = _sim("aa", 3, "cavity")
    load_state(resumed.solver, arrays, 31)
    resumed.step(19)
    _assert_same(_state(resumed), _state(whole))
    # the two-lattice scheme restarts from the same (standard-layout) checkpoint too
    other = _sim("two-lattice", 2, "cavity")
    load_state(other.solver, arrays, 31)
    other.step(19)
    _assert_same(_state(other), _state(whole))


def test_set_fields_then_aa() -> None:
    rng = np.random.default_rng(2)
    u = 0.01 * rng.standard_normal((9, 6, 8, 3))
    rho = 1 + 0.01 * rng.standard_normal((9, 6, 8))
    runs = []
    for streaming in ("two-lattice", "aa"):
        sim = _sim(streaming, 2, "channel")
        sim.solver.set_fields(rho, u)
        sim.step(5)
        runs.append(_state(sim))
    _assert_same(runs[1], runs[0])


def test_aa_refused_for_2d_and_numba_cuda() -> None:
    with pytest.raises(CaseError, match="run.streaming") as info:
        validate_case(fluid_case(8, 8, run__streaming="aa"))
    assert "\n" not in str(info.value)
    from simsplit.backends.cpu import CPUBackend
    from simsplit.backends.numba_cuda.d3q19 import D3Q19Kernels
    from simsplit.errors import BackendUnavailable
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics.lbm_params import D3Q19Params

    assert not hasattr(D3Q19Kernels, "stream_collide_aa")
    backend = CPUBackend()
    backend.d3q19 = D3Q19Kernels(lambda: None)  # a kernel set without AA, as numba-cuda's
    params = D3Q19Params(1.5, 1.5, 0.05, 0.0, 0.0, 0.0, False, False)
    with pytest.raises(BackendUnavailable, match="run.streaming: aa is not allowed") as info:
        D3Q19Block(backend, 4, 4, 4, 0, (Face.WALL, Face.LID), params, "float32", None, "aa")
    assert "\n" not in str(info.value)
