"""MD slabs on several GPUs (or forced through the cross-device path on one), and GPU MD under
mpiexec: bitwise identical to one slab.

Every test is marked ``gpu`` (skipped without a CUDA GPU); the mpiexec ones are marked ``mpi``
too and need mpiexec. On a one-GPU machine ``SIMSPLIT_MD_TRANSFER=peer|staged`` makes slabs
that share GPU 0 copy their ghosts as slabs on different GPUs do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simsplit.md import MDSolver, host_kernels
from simsplit.md.reference import lj_case
from tests.conftest import mpirun, needs_mpiexec
from tests.test_md_gpu import BACKENDS, CELLS, _solver, _unavailable
from tests.test_md_mpi import DRIVER, TALL

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "cases" / "lj_tiny.yaml"
STEPS = 500


def _same(a: Any, b: Any) -> None:
    for name in ("positions", "velocities", "images", "forces"):
        assert np.array_equal(getattr(a, name)(), getattr(b, name)()), name
    assert a.thermo() == b.thermo()


def _placed(backend: str, subdomains: int, devices: list[int]) -> MDSolver:
    from simsplit.parallel.context import ParallelContext

    case = lj_case(cells=CELLS, subdomains=subdomains)
    case["run"].update(backend=backend, devices=devices)
    return MDSolver(case, ParallelContext(backend, devices=devices))


@pytest.fixture(scope="module")
def one_slab() -> dict[str, Any]:
    """One-slab runs per backend, made on first use (see :func:`_reference`)."""
    return {}


def _reference(cache: dict[str, Any], backend: str) -> MDSolver:
    if backend not in cache:
        cache[backend] = _solver(backend, 1)
        cache[backend].step(STEPS)
    return cache[backend]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode, links", [("auto", "arena"), ("peer", "peer"),
                                         ("staged", "staged")])
@pytest.mark.parametrize("subdomains", [2, 3])
def test_one_gpu_cross_device_path_bitwise(backend, mode, links, subdomains, one_slab,
                                           monkeypatch) -> None:
    monkeypatch.setenv(host_kernels.TRANSFER_ENV, mode)
    s = _placed(backend, subdomains, [0] * subdomains)
    assert s.kernels.is_device and len(s.kernel_sets) == 1
    assert s.stats()["ghost_transfer"] == [links]
    s.step(STEPS)
    st = s.stats()
    assert st["rebuilds"] > 10 and st["migrations"] > 0 and st["ghosts"] > 0
    _same(s, _reference(one_slab, backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_slabs_on_two_gpus_bitwise(backend, one_slab, monkeypatch) -> None:
    from simsplit.backends import gpu_count

    if gpu_count() < 2:
        pytest.skip("needs two GPUs")
    monkeypatch.delenv(host_kernels.TRANSFER_ENV, raising=False)
    s = _placed(backend, 3, [0, 1])
    assert len(s.kernel_sets) == 2
    print(backend, s.stats()["ghost_transfer"])
    s.step(STEPS)
    _same(s, _reference(one_slab, backend))


# --- mpiexec: one slab per rank, both ranks on GPU 0 -----------------------------------------
def _gpu_overrides(cells: str | None = None) -> list[str]:
    drop = ("run.backend=",) + (("md.lattice.cells=",) if cells else ())
    return [o for o in TALL if not o.startswith(drop)] + ["run.backend=cupy"] + \
        ([f"md.lattice.cells={cells}"] if cells else [])


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("ranks, cells, rounds", [(2, None, 1), (3, None, 1),
                                                  (2, "[6,6,24]", 1), (4, "[4,4,7]", 2)])
def test_cupy_under_mpiexec_bitwise_identical_to_one_process(tmp_path, ranks, cells,
                                                             rounds) -> None:
    """Also a box tall enough for interior rows, whose forces a rebuild step queues before the
    rebuild (which runs beside them on a second stream). Rebuilds take one message round,
    two on four slabs of 2.94 (thinner than the ghost cut plus 1.5 skins). Up to three ranks
    with device links (the other tests here take the default host path)."""
    from simsplit.case import load_case
    from simsplit.run.simulation import Simulation

    if _unavailable("cupy"):
        pytest.skip(_unavailable("cupy") or "")
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "md.npz"
    overrides = _gpu_overrides(cells)
    proc = mpirun(ranks, [str(script), str(CASE), json.dumps(overrides), str(out)],
                  timeout=300, SIMSPLIT_DEVICE_LINKS="1")
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    ref = Simulation(load_case(CASE, overrides + ["decomposition.subdomains=1"]))
    ref.solver.step(ref.case["run"]["steps"])
    md = ref.solver
    assert md.kernels.is_device
    assert np.array_equal(got["positions"], md.positions())
    assert np.array_equal(got["velocities"], md.velocities())
    assert np.array_equal(got["forces"], md.forces())
    assert np.array_equal(got["images"], md.images())
    assert json.loads(str(got["thermo"])) == md.thermo()
    stats = json.loads(str(got["stats"]))
    # rebuilds on the device (simsplit.md.rank_slab), messages between the processes
    assert stats["ghost_transfer"] == ["remote-device"] and stats["migrations"] > 100
    assert stats["rebuilds"] == md.stats()["rebuilds"]
    assert (stats["interior_rows"] > 0) == (cells == "[6,6,24]"), stats["interior_rows"]
    assert stats["message_rounds"] == rounds
    # up to three ranks the per-step ghosts go device to device (CUDA IPC), steps in batches
    assert stats["device_links"] == (ranks <= 3) and (stats["batches"] > 0) == (ranks <= 3)


SHRINKING_DRIVER = DRIVER.replace(
    'md.step(sim.case["run"]["steps"])',
    'half = sim.case["run"]["steps"] // 2\n'
    'md.step(half)\n'
    '# lists of 4 entries a row at the next rebuild: it overflows mid-run and regrows\n'
    'md.capacity = 4\n'
    'md.step(sim.case["run"]["steps"] - half)')


@needs_mpiexec
@pytest.mark.mpi
def test_cupy_under_mpiexec_list_overflow_mid_run(tmp_path) -> None:
    """A rank slab's rebuild queues the step's forces behind the new lists before the host
    reads whether a row overflowed; when one did (capacity cut to 4 mid-run), the lists are
    built again and the forces queued again: positions, velocities, forces and thermo still
    equal one slab's bit for bit."""
    from simsplit.case import load_case
    from simsplit.run.simulation import Simulation

    if _unavailable("cupy"):
        pytest.skip(_unavailable("cupy") or "")
    assert SHRINKING_DRIVER != DRIVER
    script = tmp_path / "driver.py"
    script.write_text(SHRINKING_DRIVER)
    out = tmp_path / "md.npz"
    overrides = _gpu_overrides("[6,6,24]")
    proc = mpirun(2, [str(script), str(CASE), json.dumps(overrides), str(out)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    ref = Simulation(load_case(CASE, overrides + ["decomposition.subdomains=1"]))
    ref.solver.step(ref.case["run"]["steps"])
    md = ref.solver
    for name in ("positions", "velocities", "forces", "images"):
        assert np.array_equal(got[name], getattr(md, name)()), name
    assert json.loads(str(got["thermo"])) == md.thermo()
    stats = json.loads(str(got["stats"]))
    assert stats["ghost_transfer"] == ["remote-device"]
    assert stats["capacity_growths"] > md.stats()["capacity_growths"]


@needs_mpiexec
@pytest.mark.mpi
def test_cupy_cli_under_mpiexec(tmp_path) -> None:
    """``mpiexec -n 2 python -m simsplit run cases/lj_tiny.yaml --backend cupy``: one report,
    and the checkpoint equals one process on the GPU."""
    from simsplit.case import load_case
    from simsplit.run.checkpoint import load_latest
    from simsplit.run.output import CHECKPOINT_DIR
    from simsplit.run.simulation import Simulation

    if _unavailable("cupy"):
        pytest.skip(_unavailable("cupy") or "")
    out = tmp_path / "two"
    proc = mpirun(2, ["-m", "simsplit", "run", str(CASE), "--backend", "cupy", "--steps", "200",
                      "--output", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("physics") == 1 and "2 MPI ranks" in proc.stdout
    one = Simulation(load_case(CASE, ["decomposition.subdomains=1", "run.backend=cupy",
                                      "output.dir=null"]))
    one.solver.step(200)
    _, attrs, arrays = load_latest(out / CHECKPOINT_DIR, one.case)
    assert int(attrs["step"]) == 200
    assert np.array_equal(arrays["positions"], one.positions())
    assert np.array_equal(arrays["velocities"], one.velocities())


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("node_memory", ["1", "0"])
def test_cupy_failing_rank_ends_the_job(tmp_path, node_memory) -> None:
    """One cupy rank raising mid-run (on purpose, at step 40 of a long run) ends both ranks of
    the GPU within seconds of the error, with the rank's one line and a nonzero status."""
    import time

    if _unavailable("cupy"):
        pytest.skip(_unavailable("cupy") or "")
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    overrides = [o for o in _gpu_overrides() if not o.startswith("run.steps=")] + \
        ["run.steps=1000000"]
    t0 = time.monotonic()
    proc = mpirun(2, [str(script), str(CASE), json.dumps(overrides), str(tmp_path / "md.npz")],
                  timeout=240, SIMSPLIT_TEST_FAIL_RANK="1:40", SIMSPLIT_NODE_MEMORY=node_memory)
    assert time.monotonic() - t0 < 180, proc.stderr  # mostly kernel compiles at start
    assert proc.returncode != 0
    assert "simsplit: error: rank 1: InjectedFailure" in proc.stderr, proc.stderr
    assert "rank 0:" not in proc.stderr and "Traceback" not in proc.stderr
