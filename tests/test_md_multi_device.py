"""MD slabs on several devices and GPU MD under MPI, without a GPU.

The CUDA C kernels run as host C++ (:class:`EmulatedMDKernels` of ``test_md_kernels_compile``,
NumPy arrays), one kernel set per fake device, placed by the real :class:`ParallelContext` /
:class:`MPIContext` device mapping (``get_backend`` replaced by a fake backend). The solver
then takes the multi-device code paths a GPU run takes: per-slab kernel sets, every set's
displacement flags, ghost rows copied between sets (staged through host buffers, or the
``peer`` entry point), and under mpiexec ghosts and migrants as messages staged through host
buffers. Everything must equal one slab on the CPU bit for bit.
"""

from __future__ import annotations

import json
import textwrap
import time
from typing import Any

import numpy as np
import pytest

from simsplit.md import MDSolver, host_kernels
from simsplit.md.reference import lj_case
from simsplit.parallel import context as parallel
from tests.conftest import mpirun, needs_mpiexec
from tests.numba_launches import fits_signatures
from tests.test_gpu import _needs
from tests.test_md_kernels_compile import EmulatedMDKernels, emulated_lib  # noqa: F401

CELLS = (6, 6, 9)  # 1296 atoms, three slabs of 5.0 > cutoff + skin
STEPS = 200


class FakeBackend:
    """What :meth:`ParallelContext.backend_for` hands out: one per device, with an ``md``."""

    def __init__(self, lib: Any, device: int) -> None:
        self.device = device
        self.md = EmulatedMDKernels(lib)
        self.md.device = device


@pytest.fixture
def fake_gpus(emulated_lib, monkeypatch) -> list[FakeBackend]:  # noqa: F811
    """``get_backend`` of :mod:`simsplit.parallel.context` returns emulated kernel sets; the list
    records every backend made (one per device a context uses)."""
    made: list[FakeBackend] = []

    def get_backend(name: str, device: int = 0) -> FakeBackend:
        assert name == "cupy"
        made.append(FakeBackend(emulated_lib, device))
        return made[-1]

    monkeypatch.setattr(parallel, "get_backend", get_backend)
    monkeypatch.delenv(host_kernels.TRANSFER_ENV, raising=False)
    return made


@pytest.fixture(scope="module")
def reference() -> MDSolver:
    ref = MDSolver(lj_case(cells=CELLS))
    ref.step(STEPS)
    return ref


def _gpu_run(subdomains: int, devices: list[int], steps: int = STEPS) -> MDSolver:
    case = lj_case(cells=CELLS, subdomains=subdomains)
    case["run"]["backend"] = "cupy"
    s = MDSolver(case, parallel.ParallelContext("cupy", devices=devices))
    s.step(steps)
    return s


def _same(a: MDSolver, b: MDSolver) -> None:
    for name in ("positions", "velocities", "images", "forces"):
        assert np.array_equal(getattr(a, name)(), getattr(b, name)()), name
    assert a.thermo() == b.thermo()


@pytest.mark.parametrize("subdomains, devices, modes", [
    (2, [0, 1], ["staged"]),
    (3, [0, 1, 2], ["staged"]),
    (3, [0, 1], ["same", "staged"]),  # slabs 0 and 2 share device 0, slab 1 is on device 1
    (2, [0, 0], ["arena"]),  # both slabs on one device: one arena, rebuilt on the device
])
def test_slabs_on_several_devices_match_one_slab(fake_gpus, reference, subdomains, devices,
                                                 modes) -> None:
    s = _gpu_run(subdomains, devices)
    used = sorted({b.device for b in fake_gpus})
    assert used == sorted(set(devices))  # one kernel set per device, none for slab 0 only
    for slab in s.slabs:  # each slab on devices[k mod len], on that device's kernel set
        assert slab.kernels.device == devices[slab.index % len(devices)]
    assert len(s.kernel_sets) == len(used)
    st = s.stats()
    assert st["ghost_transfer"] == modes
    assert st["rebuilds"] > 5 and st["migrations"] > 0 and st["ghosts"] > 0
    for b in fake_gpus:  # every device did its slabs' work: advance, forces, ghost gathers
        assert b.md.launches["md_lj_forces<double>"] > STEPS
        # (an arena has no gathers: the drift writes the ghost copies)
        assert (b.md.launches.get("md_gather_rows<double>", 0) > 0) == (modes != ["arena"])
    _same(s, reference)


@pytest.mark.parametrize("mode", ["peer", "staged"])
@pytest.mark.parametrize("subdomains", [2, 3])
def test_forced_cross_device_path_on_one_device(fake_gpus, reference, monkeypatch, mode,
                                                subdomains) -> None:
    """``SIMSPLIT_MD_TRANSFER`` sends slabs that share a device through the copy path (the
    one-GPU check of the multi-GPU code)."""
    monkeypatch.setenv(host_kernels.TRANSFER_ENV, mode)
    s = _gpu_run(subdomains, [0] * subdomains)
    assert len(fake_gpus) == 1 and len(s.kernel_sets) == 1
    assert s.stats()["ghost_transfer"] == [mode]
    _same(s, reference)


def test_restart_onto_another_device_mapping(fake_gpus, reference) -> None:
    half = _gpu_run(3, [0, 1, 2], steps=STEPS // 2)
    case = lj_case(cells=CELLS, subdomains=2)
    case["run"]["backend"] = "cupy"
    fresh = MDSolver(case, parallel.ParallelContext("cupy", devices=[1, 0]))
    fresh.load_state(half.state())
    fresh.step(STEPS - STEPS // 2)
    assert np.array_equal(fresh.positions(), reference.positions())
    assert np.array_equal(fresh.velocities(), reference.velocities())


def test_transfer_mode_is_checked(monkeypatch) -> None:
    assert host_kernels.ghost_transfer_mode("") == "auto"
    monkeypatch.setenv(host_kernels.TRANSFER_ENV, "staged")
    assert host_kernels.ghost_transfer_mode() == "staged"
    monkeypatch.setenv(host_kernels.TRANSFER_ENV, "nvlink")
    with pytest.raises(ValueError, match="SIMSPLIT_MD_TRANSFER='nvlink'"):
        MDSolver(lj_case(cells=(4, 4, 4)))


# --- GPU kernel sets under mpiexec: one (fake) GPU per rank ----------------------------------
DRIVER = textwrap.dedent("""
    import ctypes, json, sys
    import numpy as np
    from simsplit.parallel import context as parallel
    from simsplit.md import MDSolver
    from simsplit.md.reference import lj_case
    from tests.test_md_kernels_compile import EmulatedMDKernels

    lib = ctypes.CDLL(sys.argv[1])
    made = []

    class FakeBackend:
        def __init__(self, device):
            self.md = EmulatedMDKernels(lib)
            self.md.device = device
            made.append(device)

    parallel.get_backend = lambda name, device=0: FakeBackend(device)
    devices = json.loads(sys.argv[5])
    extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    ctx = parallel.MPIContext("cupy", devices=devices)
    case = lj_case(cells=json.loads(sys.argv[2]), subdomains=ctx.size, **extra.get("md", {}))
    case["run"]["backend"] = "cupy"
    case["run"]["precision"] = extra.get("precision", "float64")
    md = MDSolver(case, ctx)
    # one node: GPU = rank mod the visible GPUs (one here), or run.devices[rank mod len]
    assert md.kernels.is_device and made == [(devices or [0])[ctx.rank % len(devices or [0])]]
    steps = int(sys.argv[3])
    if extra.get("restart"):  # half the steps, then a new solver from the state
        md.step(steps // 2)
        state = md.state()
        md = MDSolver(case, ctx)
        md.load_state(state)
        steps -= steps // 2
    md.step(steps)
    x, v, st, stats = md.positions(), md.velocities(), md.state(), md.stats()
    if ctx.rank == 0:
        np.savez(sys.argv[4], positions=x, velocities=v, forces=st["forces"],
                 images=st["images"], thermo=json.dumps(md.thermo()), stats=json.dumps(stats),
                 in_place=md.exchange.posts_in_place, launches=json.dumps(md.kernels.launches),
                 placed=json.dumps(sorted({tag for (_, tag), at in md.exchange._posted.items()
                                           if at >= 0})))
""")


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("ranks, devices", [(2, None), (3, [0, 1]), (4, None)])
def test_gpu_kernels_under_mpi_match_one_process(tmp_path, emulated_lib, reference,  # noqa: F811
                                                 ranks, devices) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "md.npz"
    proc = mpirun(ranks, [str(script), emulated_lib._name, json.dumps(list(CELLS)), str(STEPS),
                          str(out), json.dumps(devices)], timeout=120,
                  SIMSPLIT_DEVICE_LINKS="1")
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    for name in ("positions", "velocities", "forces", "images"):
        want = reference.state()[name] if name in ("forces", "images") else \
            getattr(reference, name)()
        assert np.array_equal(got[name], want), name
    assert json.loads(str(got["thermo"])) == reference.thermo()
    stats = json.loads(str(got["stats"]))
    assert stats["ghost_transfer"] == ["remote-device"]  # rebuilds on the device
    assert len(stats["atoms_per_slab"]) == ranks and stats["migrations"] > 0
    assert stats["rebuilds"] == reference.stats()["rebuilds"]
    assert stats["message_rounds"] == 1  # slabs of 3.78 and more: one round at 4 ranks too
    assert int(got["in_place"]) > 0  # rebuild messages read in place from node memory
    # up to three ranks: per-step ghosts device to device, steps in batches
    assert stats["device_links"] == (ranks <= 3)
    assert (stats["batches"] > 0) == (ranks <= 3)


_FORCE_SHIFT = {"potential": {"style": "lj/cut", "epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5,
                               "shift": "force"}}


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("ranks, cells, more, node_memory", [
    (4, (4, 4, 7), {"density": 0.95}, "1"), (3, (4, 4, 5), {"density": 0.8}, "0"),
    (2, (5, 5, 16), {}, "1"), (2, (5, 5, 16), _FORCE_SHIFT, "0")])
def test_device_rebuilds_under_mpi_hot_float32_langevin_restart(tmp_path, emulated_lib,  # noqa: F811
                                                                ranks, cells, more,
                                                                node_memory) -> None:
    """A hot Langevin melt in float32, restarted half way: every rebuild migrates many
    atoms, and the run equals one process on the CPU bit for bit. Leavers and ghosts travel
    in one message round, leavers near their old slab staying there as ghosts; the thin slabs
    of three ranks (2.85 against a reach of 2.8) relay leavers to one neighbour that are the
    other neighbour's ghosts; four ranks' thin slabs (2.83: a leaver may come from beyond the
    next slab) take two rounds. The tall box's slabs have interior rows, whose forces run
    before the ghost positions arrive (also with the force-shifted kernel). The ghost
    positions go device to device (device links, up to three ranks) with the rebuild messages
    through node memory, or (``SIMSPLIT_NODE_MEMORY=0``, ``SIMSPLIT_DEVICE_LINKS=0``) all as
    messages."""
    md = {"temperature": 3.0, "ensemble": "langevin", "langevin": {"damping": 0.5}, **more}
    case = lj_case(cells=cells, **md)
    case["run"]["precision"] = "float32"
    ref = MDSolver(case)
    ref.step(STEPS)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "md.npz"
    extra = {"md": md, "precision": "float32", "restart": True}
    proc = mpirun(ranks, [str(script), emulated_lib._name, json.dumps(list(cells)), str(STEPS),
                          str(out), "null", json.dumps(extra)], timeout=120,
                  SIMSPLIT_NODE_MEMORY=node_memory, SIMSPLIT_DEVICE_LINKS=node_memory)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    for name in ("positions", "velocities", "forces", "images"):
        assert np.array_equal(got[name], ref.state()[name]), name
    assert (int(got["in_place"]) > 0) == (node_memory == "1")
    after = [r for r in json.loads(str(got["thermo"])) if r["step"] >= STEPS // 2]
    assert after == [r for r in ref.thermo() if r["step"] >= STEPS // 2]
    stats = json.loads(str(got["stats"]))
    assert stats["ghost_transfer"] == ["remote-device"]
    assert stats["migrations"] > 0.05 * ref.n_atoms, stats["migrations"]  # after the restart
    assert (stats["interior_rows"] > 0) == (ranks == 2), stats["interior_rows"]
    assert stats["message_rounds"] == (2 if ranks == 4 else 1)
    # one message per link and round, gathered in one launch; in place with node memory
    launches = {name.split("<")[0]: n for name, n in json.loads(str(got["launches"])).items()}
    lists = sum(launches.get(f"md_rank_{name}", 0) for name in ("route", "classify", "select"))
    assert launches["md_rank_gather_message"] == (1 if ranks == 2 else 2) * lists > 0
    tags = ["rank_migrants", "rank_ghosts"] if ranks == 4 else ["rank_round"]
    assert set(tags) <= set(json.loads(str(got["placed"]))) or node_memory == "0"
    assert (stats["relayed_ghosts"] > 0) == (ranks == 3), stats["relayed_ghosts"]
    assert stats["device_links"] == (node_memory == "1" and ranks <= 3)
    phases = stats["rebuild_phase_seconds"]  # host time of this rank's rebuilds, by phase
    assert sorted(phases) == ["build", "build_waits", "messages", "round_waits", "rounds"]
    assert all(t > 0 for t in phases.values()), phases


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("ranks, node_memory", [(2, "1"), (4, "1"), (3, "0")])
def test_failing_rank_ends_the_device_job(tmp_path, emulated_lib, ranks,  # noqa: F811
                                          node_memory) -> None:
    """A rank of device slabs (ghosts through node memory or as messages) raising mid-run
    ends the job within seconds: the others would otherwise wait in their next exchange."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    t0 = time.monotonic()
    proc = mpirun(ranks, [str(script), emulated_lib._name, json.dumps(list(CELLS)), "100000",
                          str(tmp_path / "md.npz"), "null"], timeout=90,
                  SIMSPLIT_NODE_MEMORY=node_memory, SIMSPLIT_TEST_FAIL_RANK=f"{ranks - 1}:9")
    assert time.monotonic() - t0 < 45, proc.stderr
    assert proc.returncode != 0
    assert f"simsplit: error: rank {ranks - 1}: InjectedFailure" in proc.stderr, proc.stderr
    assert "rank 0:" not in proc.stderr and "Traceback" not in proc.stderr


# --- Numba CUDA (on the simulator) under mpiexec ----------------------------------------------
NUMBA_DRIVER = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        from tests.cuda_simulator import install
        install()
    from simsplit.backends.numba_cuda.md import NumbaMDKernels
    from simsplit.parallel import context as parallel
    from tests.numba_launches import as_json, record_launches
    from simsplit.md import MDSolver
    from simsplit.md.reference import lj_case

    launched = record_launches(NumbaMDKernels)
    ctx = parallel.MPIContext("numba-cuda")
    case = lj_case(cells=json.loads(sys.argv[1]), subdomains=ctx.size, temperature=3.0)
    case["run"]["backend"] = "numba-cuda"
    md = MDSolver(case, ctx)
    md.step(int(sys.argv[2]))
    x, v, st, stats = md.positions(), md.velocities(), md.state(), md.stats()
    if ctx.rank == 0:
        np.savez(sys.argv[3], positions=x, velocities=v, forces=st["forces"],
                 images=st["images"], stats=json.dumps(stats),
                 launched=as_json(launched))
""")


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("where", [
    "simulator",
    pytest.param("gpu", marks=[pytest.mark.gpu, _needs("numba-cuda")]),
])
def test_numba_cuda_rank_kernels_under_mpi_match_one_process(tmp_path, where: str) -> None:
    """The Numba twins of kernels/md_ranks.cuh on two ranks, on Numba's CUDA simulator (a
    hot melt of 512 atoms, 12 steps) or compiled for a GPU the ranks share (3,072 atoms, 40
    steps): they migrate, pick ghosts and build lists on the device, and equal one CPU
    process bit for bit; every launch passes the argument types NVVM compiles the kernels
    for (the simulator types nothing)."""
    on_gpu = where == "gpu"
    cells, steps = ((8, 8, 12), 40) if on_gpu else ((4, 4, 8), 12)
    ref = MDSolver(lj_case(cells=cells, temperature=3.0))
    ref.step(steps)
    script = tmp_path / "driver.py"
    script.write_text(NUMBA_DRIVER)
    out = tmp_path / "md.npz"
    proc = mpirun(2, [str(script), json.dumps(list(cells)), str(steps), str(out)],
                  timeout=600 if on_gpu else 300, NUMBA_ENABLE_CUDASIM="0" if on_gpu else "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(out)
    for name in ("positions", "velocities", "forces", "images"):
        want = ref.state()[name] if name in ("forces", "images") else getattr(ref, name)()
        assert np.array_equal(got[name], want), name
    stats = json.loads(str(got["stats"]))
    assert stats["ghost_transfer"] == ["remote-device"]
    assert stats["migrations"] > 0 and stats["rebuilds"] == ref.stats()["rebuilds"] > 1
    launched = json.loads(str(got["launched"]))
    assert {"md_rank_gather", "md_rank_place_message"} <= {n.split("<")[0] for n in launched}
    fits_signatures(launched)
