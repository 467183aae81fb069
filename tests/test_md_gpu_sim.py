"""Numba CUDA MD kernels on Numba's CUDA simulator against the CPU kernels, bit for bit.

Like ``test_numba_cuda_sim.py``: the simulator must be on before ``numba.cuda`` is imported, so
the tests run in a child pytest started with NUMBA_ENABLE_CUDASIM=1; in this process only the
launcher runs. Systems are tiny (256 atoms, a few steps): the simulator runs a Python thread
per CUDA thread.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from tests.conftest import IN_SIMULATOR, run_in_cuda_simulator
from tests.numba_launches import as_json, fits_signatures, record_launches

ROOT = Path(__file__).resolve().parents[1]
in_child = pytest.mark.skipif(not IN_SIMULATOR,
                              reason="runs in the simulator child of test_md_simulator_suite")
# the simulator hashes with NumPy uint64 scalars, which warn on the intended wrap-around
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
#: a short cutoff makes 6 cells per axis, so the pruned 5-cell stencil runs too
SHORT = {"style": "lj/cut", "epsilon": 1.0, "sigma": 1.0, "cutoff": 2.0}
#: steps of the simulator runs whose steps launch the most kernels (NPT, per-type masses): a
#: minute each on CI's cores at 10 steps
STEPS_SLOW = 6
#: two types whose cross pair is not the mixing rule's, with a shorter cutoff of its own (the
#: device lists keep each pair within its own list cutoff)
CROSS_PAIR = [{"types": [1, 2], "epsilon": 1.5, "sigma": 0.9, "cutoff": 2.0}]


#: where the child writes the Numba MD launches it made (tests/numba_launches.py)
LAUNCH_LOG = "SIMSPLIT_TEST_LAUNCH_LOG"


@pytest.mark.skipif(IN_SIMULATOR, reason="this is the child process")
def test_md_simulator_suite(tmp_path) -> None:
    """The child's tests pass, and every launch they made passes the arguments the kernels
    compile for on a GPU (the simulator itself types nothing)."""
    log = tmp_path / "launches.json"
    run_in_cuda_simulator(__file__, timeout=900, **{LAUNCH_LOG: str(log)})
    launched = json.loads(log.read_text())
    assert len(launched) >= 20, sorted(launched)
    fits_signatures(launched)


@pytest.fixture(autouse=True, scope="module")
def _record_launches() -> Iterator[None]:
    """In the child: record the Numba MD launches of this module's tests for the parent."""
    path = os.environ.get(LAUNCH_LOG)
    if not (IN_SIMULATOR and path):
        yield
        return
    from simsplit.backends.numba_cuda.md import NumbaMDKernels

    plain = NumbaMDKernels._launch
    launched = record_launches(NumbaMDKernels)
    yield
    NumbaMDKernels._launch = plain
    Path(path).write_text(as_json(launched))


# --- everything below runs in the child -----------------------------------------------------
def _solver(backend: str, subdomains: int = 1, precision: str = "float64", **md: Any) -> Any:
    from simsplit.md import MDSolver
    from simsplit.md.reference import lj_case

    case = lj_case(cells=(4, 4, 4), subdomains=subdomains, **md)
    case["run"].update(backend=backend, precision=precision)
    return MDSolver(case, backend)


def _same(a: Any, b: Any) -> None:
    for name in ("positions", "velocities", "images", "forces", "per_atom_energy",
                 "per_atom_virial"):
        assert np.array_equal(getattr(a, name)(), getattr(b, name)()), name
    assert a.thermo() == b.thermo()


@in_child
def test_kernels_are_the_numba_cuda_set() -> None:
    from simsplit.backends.numba_cuda.md import NumbaMDKernels

    s = _solver("numba-cuda")
    assert isinstance(s.kernels, NumbaMDKernels) and s.kernels.is_device


def _canonical_rows(x: np.ndarray, box: np.ndarray, ncell: np.ndarray, reach: float,
                    stencil: list[np.ndarray]) -> list[list[int]]:
    """Canonical neighbour rows by brute force: for atom i (id order), the atoms within reach
    (minimum image), ordered by (position of their cell in i's stencil walk, global id)."""
    cell = np.minimum((x * (ncell / box)).astype(np.int64), ncell - 1)
    d = x[:, None, :] - x[None, :, :]
    d -= box * np.round(d / box)
    near = (d * d).sum(axis=2) < reach * reach
    rows = []
    for i in range(x.shape[0]):
        walk = {}
        for oz in stencil[2]:
            for oy in stencil[1]:
                for ox in stencil[0]:
                    q = tuple(int(c) for c in (cell[i] + (ox, oy, oz)) % ncell)
                    walk.setdefault(q, len(walk))
        js = [j for j in np.flatnonzero(near[i]) if j != i]
        rows.append(sorted(js, key=lambda j: (walk[tuple(int(c) for c in cell[j])], j)))
    return rows


@in_child
@pytest.mark.parametrize("potential", [None, SHORT], ids=["rc2.5", "rc2.0"])
def test_step0_forces_and_lists_match_cpu(potential) -> None:
    kw = {} if potential is None else {"potential": potential}
    gpu, cpu = _solver("numba-cuda", **kw), _solver("cpu", **kw)
    _same(gpu, cpu)
    g = gpu.slabs[0]
    nl, cnt = gpu.kernels.to_host(g.nl), gpu.kernels.to_host(g.cnt)
    want = _canonical_rows(cpu.positions(), cpu.box, cpu.ncell, cpu.reach, cpu._offsets)
    # rows may differ (the device puts one slab in cell order by id, the CPU sorts by cell
    # stably, and the lists hold row indices): compare by global id
    ids = gpu.slab_ids(g)
    for r in range(g.n_own):
        assert list(ids[nl[: cnt[r], r]]) == want[int(ids[r])]
    c = cpu.slabs[0]
    for i in range(c.n_own):
        assert list(c.ids[c.nl[i, : c.cnt[i]]]) == want[int(c.ids[i])]


@in_child
@pytest.mark.parametrize("md, slabs", [
    ({"potential": {"cutoff": 2.5, "shift": "force"}}, 1),
    ({"ensemble": "npt", "temperature": 1.0, "barostat": {"pressure": 5.0, "damping": 0.5}}, 2),
], ids=["force-shift", "npt"])
def test_force_shift_and_npt_match_cpu(md, slabs: int) -> None:
    """The force-shift kernel (one slab: the kernel does not see the split), and NPT's box
    scaling, exact virial sums and moving grid on two slabs (the slab edges move with the
    box). Splits of the plain kernels: test_nve_one_and_two_slabs_match_cpu."""
    cpu = _solver("cpu", **md)
    runs = [_solver("numba-cuda", slabs, **md)]
    for s in (cpu, *runs):
        s.step(STEPS_SLOW)
    for s in runs:
        _same(s, cpu)


@in_child
@pytest.mark.parametrize("ensemble, slabs", [("nose-hoover", 2), ("langevin", 1)])
def test_two_masses_match_cpu(ensemble: str, slabs: int) -> None:
    """Per-type masses: the per-type kick kernel, kinetic sums per atom, under Nose-Hoover
    (two slabs: types and masses travel with migrating atoms and ghosts); under Langevin also
    drag and noise per type, in batches (one slab). A 1-2 pair of its own: the typed force
    kernel on lists that carry each neighbour's type (a wrong type changes the bits; milder
    than Kob-Andersen, whose lattice start rebuilds twice as often here)."""
    from simsplit.md import MDSolver
    from simsplit.md.reference import lj_case

    def solver(backend: str, n: int) -> Any:
        case = lj_case(cells=(4, 4, 4), subdomains=n, masses=[1.0, 0.5], temperature=1.0,
                       ensemble=ensemble, pair_coeffs=CROSS_PAIR)
        case["md"]["lattice"]["fractions"] = [0.8, 0.2]
        case["run"]["backend"] = backend
        return MDSolver(case, backend)

    cpu = solver("cpu", 1)
    gpu = solver("numba-cuda", slabs)
    for s in (cpu, gpu):
        assert s.multi_mass
        s.step(STEPS_SLOW)
    _same(gpu, cpu)
    assert gpu.slabs[0].type_shift == 30
    assert (gpu.stats()["batches"] > 0) == (ensemble == "langevin")
    if slabs > 1:
        assert gpu.stats()["ghosts"] > 0


@in_child
def test_nve_one_and_two_slabs_match_cpu() -> None:
    """Skin 0.1 rebuilds every few steps; two slabs migrate atoms and refresh ghosts."""
    kw = {"potential": SHORT, "neighbor": {"skin": 0.1}}
    cpu = _solver("cpu", **kw)
    runs = [_solver("numba-cuda", n, **kw) for n in (1, 2)]
    for s in (cpu, *runs):
        s.step(10)
    assert cpu.stats()["rebuilds"] >= 3
    assert runs[1].stats()["migrations"] > 0 and runs[1].stats()["ghosts"] > 0
    for s in runs:
        _same(s, cpu)


@in_child
def test_langevin_and_capacity_growth_match_cpu() -> None:
    kw = {"ensemble": "langevin", "langevin": {"temperature": 2.0, "damping": 0.2},
          "neighbor": {"skin": 0.2, "capacity": 16}}
    gpu, cpu = _solver("numba-cuda", 2, **kw), _solver("cpu", **kw)
    assert gpu.stats()["capacity_growths"] > 0
    gpu.step(4)
    cpu.step(4)
    _same(gpu, cpu)


@in_child
def test_float32_matches_cpu() -> None:
    gpu, cpu = _solver("numba-cuda", precision="float32"), _solver("cpu", precision="float32")
    gpu.step(4)
    cpu.step(4)
    _same(gpu, cpu)


@in_child
def test_restart_on_device() -> None:
    ref = _solver("cpu")
    ref.step(6)
    half = _solver("numba-cuda", 2)
    half.step(3)
    fresh = _solver("numba-cuda")
    fresh.load_state(half.state())
    fresh.step(3)
    assert np.array_equal(fresh.positions(), ref.positions())
    assert np.array_equal(fresh.velocities(), ref.velocities())


@in_child
@pytest.mark.parametrize("mode", ["auto", "peer"])
def test_two_kernel_sets_copy_ghosts_and_match_cpu(mode, monkeypatch) -> None:
    """Each slab on its own Numba kernel set (as on two GPUs): ghost rows go through the
    kernel sets' host copies (``auto`` stages through pinned buffers; ``peer`` has no
    Numba peer copy and stages through the set's own scratch)."""
    from simsplit.backends import get_backend
    from simsplit.backends.numba_cuda.md import NumbaMDKernels
    from simsplit.md import MDSolver, host_kernels
    from simsplit.md.reference import lj_case

    activate = get_backend("numba-cuda").activate

    class TwoSets:
        backend_name = "numba-cuda"

        def __init__(self) -> None:
            self.sets: dict[int, Any] = {}

        def backend_for(self, slab: int) -> Any:
            if slab not in self.sets:
                self.sets[slab] = type("B", (), {"md": NumbaMDKernels(activate)})()
            return self.sets[slab]

    monkeypatch.setenv(host_kernels.TRANSFER_ENV, mode)
    kw = {"potential": SHORT, "neighbor": {"skin": 0.1}}
    case = lj_case(cells=(4, 4, 4), subdomains=2, **kw)
    case["run"]["backend"] = "numba-cuda"
    gpu = MDSolver(case, TwoSets())
    cpu = _solver("cpu", **kw)
    assert len(gpu.kernel_sets) == 2
    assert gpu.stats()["ghost_transfer"] == ["staged" if mode == "auto" else "peer"]
    gpu.step(6)
    cpu.step(6)
    assert 2 <= gpu.stats()["rebuilds"] <= 6  # steps without a rebuild refreshed ghosts
    _same(gpu, cpu)
