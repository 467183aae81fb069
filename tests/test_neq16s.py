"""run.storage neq16s: the neq16 records with each cell's stress kept too (the reference codec:
``neq_storage.encode(f, stress=True)``), on the CPU's records kernel cell by cell (numba-cuda's
against the CPU: the simulator suites).

The native runs reproduce the emulation whose accuracy docs/storage.md gives
(scripts/fp16_study.py ``f32/neq-bfp-rho16-reg``) bit for bit, boxes and bodies; records split,
halo like neq16's (its checkpoints: tests/test_neq16.py); backends without its kernels refuse
in one line.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.case import CaseError, validate_case
from simsplit.errors import BackendUnavailable
from simsplit.fluid.state import raw_populations
from simsplit.numerics import neq_storage
from simsplit.numerics.lattice import D2Q9, D3Q19
from simsplit.numerics.storage import bytes_per_update, population_storage
from tests.conftest import fluid_case
from tests.test_neq16 import _in_lockstep, _open_2d, _open_3d

STRESS = {"run__precision": "float32", "run__storage": "neq16s"}


def _case3d(shape: tuple[int, int, int], subdomains: int = 1, **over: Any) -> dict[str, Any]:
    return fluid_case(shape[0], shape[1], subdomains,
                      **{"domain__shape": list(shape), **STRESS, **over})


@pytest.mark.parametrize("dim", [2, 3])
def test_native_kernel_is_the_emulation(study, one_thread, dim: int) -> None:
    """A forced lid cavity on stress-kept records (33 slots a cell in 3D, 18 in 2D) equals
    float32 populations round-tripped through the emulation of -reg after every step."""
    shape, force, steps = ([9, 8, 10], [1e-5, 0.0, -2e-6], 60) if dim == 3 else \
        ([14, 11], [1e-5, -3e-6], 80)
    native = study._solver(study._case(shape, "float32", "neq16s", body_force=force))
    storage = study.Storage("f32/neq-bfp-rho16-reg")
    emulated = study._solver(storage.case(shape, body_force=force))
    _in_lockstep(native, emulated, storage.hook(emulated), steps, 0.02)
    blk = next(iter(native.blocks.values()))
    lattice = D3Q19 if dim == 3 else D2Q9
    assert blk.f_src.dtype == np.uint16
    assert blk.f_src.shape[0] == neq_storage.record_slots(lattice.q, True) == \
        (33 if dim == 3 else 18)


@pytest.mark.parametrize("dim", [2, 3])
def test_bodies_and_open_faces_are_the_emulation(study, one_thread, dim: int) -> None:
    """A body (2D linear, 3D quadratic links), an inlet, an outlet and free-slip walls (3D) on
    stress-kept records: every rule reads rebuilt populations, so the run equals -reg's
    emulation bit for bit."""
    make, steps = ((lambda st: _open_2d(1, st)), 50) if dim == 2 else \
        ((lambda st: _open_3d(1, st)), 25)
    native = study._solver(make("neq16s"))
    emulated = study._solver(make("float32"))
    hook = study.NeqStorage("neq-bfp-rho16-reg", np.dtype(np.float32)).hook(emulated)
    _in_lockstep(native, emulated, hook, steps, 0.03)


@pytest.mark.parametrize("dim", [2, 3])
def test_bitwise_identical_across_splits(one_thread, dim: int) -> None:
    """1, 2 and 3 slabs: the same records (their stress slots crossing the halos), velocity,
    density, and with a body the same forces."""
    from simsplit.fluid.forces import body_links, measure_forces

    runs = []
    for n in (1, 2, 3):
        sim = Simulation(_case3d((9, 7, 12), n) if dim == 3 else _open_2d(n, "neq16s"))
        sim.step(60 if dim == 3 else 40)
        forces = measure_forces(sim.solver, body_links(sim.solver.setup)) if dim == 2 \
            else np.zeros(1)
        runs.append((raw_populations(sim.solver), sim.velocity(), sim.density(), forces))
    assert runs[0][0].shape[0] == (33 if dim == 3 else 18)
    assert (runs[0][0][-1] != 0).any()  # a stress slot
    for run in runs[1:]:
        for a, b in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(a, b)


def test_bytes_slots_and_rest() -> None:
    from simsplit.cli import bench

    assert bytes_per_update(19, "neq16s") == 2 * 33 * 2 + 1 == 133
    assert bytes_per_update(9, "neq16s") == 2 * 18 * 2 + 1 == 73
    assert bench.bytes_per_cell_update("float32", 19, "neq16s") == 133
    st = population_storage("neq16s", "float32")
    assert st.records and st.stress and st.name == "neq16s"
    assert st.slots(19) == 33 and st.slots(9) == 18
    assert list(st.halo_slots(19, D3Q19.up)) == [*D3Q19.up, *range(19, 33)]
    assert st.bytes_per_update(19) == 133
    assert not population_storage("neq16", "float32").stress
    rest = st.decode(st.rest(D3Q19.w, (2, 3)), D3Q19.w)
    np.testing.assert_array_equal(rest[:, 0, 0], neq_storage.decode(
        neq_storage.encode(D3Q19.w.reshape(19, 1), stress=True))[:, 0])


@pytest.mark.parametrize("over, key", [
    ({"run__streaming": "aa"}, "run.storage: neq16s is not allowed with run.streaming: aa"),
    ({"run__precision": "float64"}, "run.storage: 'neq16s' is not allowed with run.precision"),
])
def test_refused_in_one_line(over: dict[str, Any], key: str) -> None:
    with pytest.raises(CaseError) as info:
        validate_case(_case3d((8, 8, 8), **over))
    text = str(info.value)
    assert key in text and "\n" not in text


@pytest.mark.parametrize("dim", [2, 3])
def test_backend_without_stress_kernels_refused(monkeypatch, dim: int) -> None:
    """A kernel set without the stress-kept records (none ships one now) refuses before it loads
    anything, in one line naming the storage, the backend and the choices."""
    from simsplit.backends.cpu import d2q9, d3q19

    kernels = d2q9.D2Q9Kernels if dim == 2 else d3q19.D3Q19Kernels
    monkeypatch.setattr(kernels, "stress_records", False)
    prepared = []
    monkeypatch.setattr(kernels, "prepare", lambda self, st: prepared.append(st), raising=False)
    with pytest.raises(BackendUnavailable) as info:
        Simulation(fluid_case(12, 10, 1, **STRESS) if dim == 2 else _case3d((8, 8, 8)))
    text = str(info.value)
    assert text.startswith("run.storage: neq16s is not allowed on backend cpu")
    assert "allowed: float16, e4m11, neq16, float32" in text and "\n" not in text
    assert not prepared


def test_numba_cuda_kernel_sets_take_it() -> None:
    """numba-cuda's kernel sets take neq16s (their records kernels run the CPU's codec, which
    tells the records apart by their slot count; on the simulator the same bits as the CPU,
    tests/test_d3q19_sim.py and test_numba_cuda_sim.py), in boxes as neq16."""
    from simsplit.backends.numba_cuda import d2q9, d3q19

    for kernels in (d2q9.D2Q9Kernels, d3q19.D3Q19Kernels):
        assert kernels.records and kernels.stress_records
        assert not getattr(kernels, "records_boundaries", False)
