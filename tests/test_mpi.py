"""Runs under mpiexec (CPU backend): bitwise identity with one process, failures end the job."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from simsplit.case import load_case
from simsplit.run.simulation import Simulation
from tests.conftest import mpirun, needs_mpiexec

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "cases" / "cavity.yaml"
STEPS = 60
SMALL = ["domain.shape=[32,32]", "run.backend=cpu", "output.dir=null", f"run.steps={STEPS}",
         "run.tolerance=0"]
#: a periodic channel with walls in x: every slab has two halo faces, including the wrap link
PERIODIC = ["domain.shape=[24,18]", "domain.boundaries={x: wall, y: periodic, lid: false}",
            "fluid.reynolds=null", "fluid.viscosity=0.04", "fluid.lid_velocity=0",
            "fluid.body_force=[0.0, 1.0e-5]", "run.backend=cpu", "output.dir=null",
            f"run.steps={STEPS}", "run.tolerance=0"]

pytestmark = pytest.mark.mpi


DRIVER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from simsplit.case import load_case
    from simsplit.run.simulation import Simulation

    overrides, random_init, out = json.loads(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    sim = Simulation(load_case(sys.argv[4], overrides))
    if random_init:
        f = initial_populations(sim)
        for blk in sim.solver.blocks.values():
            blk.set_populations(f[:, blk.row0:blk.row0 + blk.ny])
    sim.step(sim.case["run"]["steps"] // 2)
    sim.step(sim.case["run"]["steps"] - sim.steps_done)
    pop, u, rho = sim.solver.populations(), sim.velocity(), sim.density()
    if sim.context.rank == 0:
        np.savez(out, populations=pop, velocity=u, density=rho, size=sim.context.size,
                 sweep=sim.solver.steps_per_sweep)
""")

INIT = textwrap.dedent("""
    def initial_populations(sim):
        from simsplit.numerics.lattice import equilibrium
        s = sim.solver.setup
        rng = np.random.default_rng(7)
        shape = (s.ny, s.nx)
        feq = equilibrium(1 + 0.01 * rng.standard_normal(shape),
                          0.02 * rng.standard_normal(shape), 0.02 * rng.standard_normal(shape))
        return feq.astype(s.dtype)
""")


def run_in_process(overrides: list[str], random_init: bool, steps: int = STEPS
                   ) -> dict[str, np.ndarray]:
    ns: dict = {"np": np}
    exec(INIT, ns)
    sim = Simulation(load_case(CASE, overrides + ["decomposition.subdomains=1"]))
    if random_init:
        f = ns["initial_populations"](sim)
        for blk in sim.solver.blocks.values():
            blk.set_populations(f[:, blk.row0:blk.row0 + blk.ny])
    sim.step(steps)
    return {"populations": sim.solver.populations(), "velocity": sim.velocity(),
            "density": sim.density()}


@needs_mpiexec
@pytest.mark.parametrize(("ranks", "overlap", "periodic", "pairs", "steps"), [
    # pairs need the row kernels (the CPU's two-step kernel is made of them)
    pytest.param(2, True, False, True, STEPS, marks=pytest.mark.cpu_rows),
    pytest.param(3, True, False, True, STEPS + 1, marks=pytest.mark.cpu_rows),
    (3, False, False, False, STEPS),
    pytest.param(2, True, True, True, STEPS + 1, marks=pytest.mark.cpu_rows),
    (3, True, True, False, STEPS),
])
def test_mpi_run_is_bitwise_identical_to_one_process(tmp_path, ranks, overlap, periodic, pairs,
                                                     steps):
    """Every rank's slab ends bit for bit where one process ends, two steps per sweep (each
    halo face's two boundary planes through MPI after each sweep; an odd step count ends the
    second chunk with a single step) and one step per sweep (run.temporal_blocking false)."""
    base = PERIODIC if periodic else SMALL
    base = [o for o in base if not o.startswith("run.steps=")] + [f"run.steps={steps}"]
    overrides = base + [f"run.overlap={str(overlap).lower()}",
                        f"run.temporal_blocking={str(pairs).lower()}"]
    # the one process first: the ranks then load its kernels from Numba's cache instead of
    # each compiling them at once (three ranks on CI's two cores: 14 s a kernel each)
    ref = run_in_process(base, periodic, steps)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.replace("import numpy as np\n", "import numpy as np\n" + INIT, 1))
    out = tmp_path / "fields.npz"
    proc = mpirun(ranks, [str(script), json.dumps(overrides), "1" if periodic else "0",
                          str(out), str(CASE)])
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    assert int(got["size"]) == ranks
    assert int(got["sweep"]) == (2 if pairs else 1)
    for name, arr in ref.items():
        assert np.array_equal(got[name], arr), name
    assert np.abs(ref["velocity"]).max() > 0  # the flow moved: halos carried information


@needs_mpiexec
@pytest.mark.gpu
@pytest.mark.parametrize(("ranks", "overlap", "periodic"), [(2, True, False), (3, False, True)])
def test_d2q9_cupy_under_mpiexec_bitwise(tmp_path, ranks, overlap, periodic):
    """D2Q9 float32 on cupy, one slab per rank (all on one GPU here, so halos go through MPI,
    host-staged): bit for bit as one process on the same GPU, with and without overlap, a
    periodic split axis included."""
    base = [o.replace("run.backend=cpu", "run.backend=cupy") for o in
            (PERIODIC if periodic else SMALL)] + ["run.precision=float32"]
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.replace("import numpy as np\n", "import numpy as np\n" + INIT, 1))
    out = tmp_path / "fields.npz"
    proc = mpirun(ranks, [str(script), json.dumps(base + [f"run.overlap={str(overlap).lower()}"]),
                          "1" if periodic else "0", str(out), str(CASE)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    assert int(got["size"]) == ranks
    ref = run_in_process(base, periodic)
    for name, arr in ref.items():
        assert np.array_equal(got[name], arr), name
    assert np.abs(ref["velocity"]).max() > 0


@needs_mpiexec
@pytest.mark.gpu
@pytest.mark.parametrize("ranks", [2, 3])
def test_d3q19_cupy_under_mpiexec_pairs_bitwise(tmp_path, ranks):
    """D3Q19 float32 on cupy, one slab per rank (all on one GPU here): two steps per sweep with
    each halo face's planes through MPI (host-staged), bit for bit as one process; an odd step
    count ends with a single step."""
    case = ROOT / "cases" / "cavity3d.yaml"
    base = ["domain.shape=[24,20,36]", "run.backend=cupy", "run.precision=float32",
            "output.dir=null", "run.steps=41", "run.tolerance=0"]
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.replace("import numpy as np\n", "import numpy as np\n" + INIT, 1))
    out = tmp_path / "fields.npz"
    proc = mpirun(ranks, [str(script), json.dumps(base), "0", str(out), str(case)],
                  timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    assert int(got["size"]) == ranks and int(got["sweep"]) == 2
    sim = Simulation(load_case(case, base + ["decomposition.subdomains=1"]))
    sim.step(41)
    ref = {"populations": sim.solver.populations(), "velocity": sim.velocity(),
           "density": sim.density()}
    for name, arr in ref.items():
        assert np.array_equal(got[name], arr), name
    assert np.abs(ref["velocity"]).max() > 0


SHARE_DRIVER = textwrap.dedent("""
    import json, os, sys, warnings
    from mpi4py import MPI
    import simsplit.parallel.context as context
    from simsplit.backends import BackendUnavailable

    warnings.simplefilter("ignore")
    context.resolve_backend_name = lambda name: "cupy"  # GPU ranks without a GPU
    out = {}
    for key in ("[0]", "[0, 0]", "[0, 1]", "one visible each"):
        devices = json.loads(key) if key.startswith("[") else [0]
        if key == "one visible each":  # srun --gpus-per-task=1: every rank's GPU is 0
            os.environ["CUDA_VISIBLE_DEVICES"] = str(3 + MPI.COMM_WORLD.Get_rank())
        ctx = context.MPIContext("cupy", devices, "auto")
        out[key] = {"shares": ctx.shares_gpus}
        if ctx.shares_gpus:
            out[key]["auto"] = ctx.resolved_transport()
            try:
                context.MPIContext("cupy", devices, "nccl").resolved_transport()
            except BackendUnavailable as exc:
                out[key]["nccl"] = str(exc)
    if ctx.rank == 0:
        print(json.dumps(out))
""")


@needs_mpiexec
def test_ranks_sharing_a_gpu_take_mpi_not_nccl(tmp_path):
    """Two ranks on one GPU: run.transport auto stages halos through MPI (NCCL links one GPU
    per rank and fails with 'invalid usage' otherwise), and an explicit nccl is refused with
    the reason; on two GPUs the ranks share none, also where each rank sees only its own GPU
    as GPU 0 (told apart by bus id, here by CUDA_VISIBLE_DEVICES: no GPU in this test)."""
    script = tmp_path / "driver.py"
    script.write_text(SHARE_DRIVER)
    proc = mpirun(2, [str(script)], CUDA_VISIBLE_DEVICES="")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for devices in ("[0]", "[0, 0]"):
        assert got[devices]["shares"] and got[devices]["auto"] == "mpi"
        assert "ranks of this job share a GPU" in got[devices]["nccl"]
    assert got["[0, 1]"] == {"shares": False}
    assert got["one visible each"] == {"shares": False}


def _h5_fields(path: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    with h5py.File(path) as fh:
        fh.visititems(lambda name, obj: out.__setitem__(name, obj[()])
                      if isinstance(obj, h5py.Dataset) else None)
    return out


@needs_mpiexec
def test_cli_under_mpiexec_writes_once_and_matches(tmp_path):
    from simsplit.cli.commands import main

    args = ["run", str(CASE), "--quiet", "--set", "domain.shape=[32,32]", "--steps", "50",
            "--backend", "cpu", "--set", "output.plots=false"]
    assert main(args + ["--output", str(tmp_path / "one"), "--subdomains", "1"]) == 0
    proc = mpirun(2, ["-m", "simsplit"] + args + ["--output", str(tmp_path / "two")])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("physics") == 1  # rank 0 alone reports
    assert "2 MPI ranks" in proc.stdout and "MPICH: freeing" not in proc.stderr
    one = _h5_fields(tmp_path / "one" / "fields.h5")
    two = _h5_fields(tmp_path / "two" / "fields.h5")
    assert one.keys() == two.keys() and one
    assert all(np.array_equal(one[k], two[k]) for k in one)
    timing = json.loads((tmp_path / "two" / "timing.json").read_text())
    assert timing["ranks"] == 2 and timing["compute"] > 0


@needs_mpiexec
def test_case_warning_once_under_mpiexec():
    """Every rank validates the same case (and once more for its own slab): one warning line."""
    proc = mpirun(2, ["-m", "simsplit", "run", str(CASE), "--quiet", "--backend", "cpu",
                      "--set", "fluid.reynolds=5000", "--set", "domain.shape=[64,64]",
                      "--steps", "10", "--set", "output.dir=null"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith("simsplit: warning: fluid.reynolds: relaxation time tau")


@needs_mpiexec
@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_failing_rank_ends_the_job(mode):
    spec = "1:20" if mode == "raise" else "1:20:kill"
    t0 = time.monotonic()
    proc = mpirun(3, ["-m", "simsplit", "run", str(CASE), "--quiet", "--set",
                      "domain.shape=[32,32]", "--steps", "100000", "--backend", "cpu",
                      "--set", "output.dir=null", "--set", "run.tolerance=0"],
                  timeout=30, SIMSPLIT_TEST_FAIL_RANK=spec)
    assert time.monotonic() - t0 < 30
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    if mode == "raise":
        assert "simsplit: error: rank 1: InjectedFailure" in text
        assert "rank 0:" not in text and "rank 2:" not in text
    else:
        assert "signal 9" in text or "Killed" in text or "KILLED" in text


@needs_mpiexec
def test_weights_must_match_ranks():
    proc = mpirun(2, ["-m", "simsplit", "run", str(CASE), "--quiet", "--backend", "cpu",
                      "--set", "decomposition.subdomains=3", "--set",
                      "decomposition.weights=[1,2,3]", "--set", "output.dir=null"], timeout=30)
    assert proc.returncode == 2
    assert "decomposition.weights: 3 weights given, but this MPI job has 2 ranks" in proc.stderr


TRANSPORT_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from mpi4py import MPI
    from simsplit.decomp.slabs import SlabDecomposition
    from simsplit.transport.mpi import MPITransport

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    for per_rank in (1, 2):
        n = size * per_rank
        owner = [k // per_rank for k in range(n)]
        for periodic in (False, True):
            links = SlabDecomposition(4 * n, n, periodic=periodic).links()
            local = [k for k in range(n) if owner[k] == rank]
            tr = MPITransport(links, local, n, comm, owner)
            send, recv = {}, {}
            for s, sf, d, df in links:
                if owner[s] == rank:
                    send[(s, sf)] = np.full((3, 5), 10.0 * s + sf)
                if owner[d] == rank:
                    recv[(d, df)] = np.zeros((3, 5))
            for it in range(3):  # persistent requests are reused
                for key in send:
                    send[key][:] = 10.0 * key[0] + key[1] + 100 * it
                tr.exchange(send, recv)
                for s, sf, d, df in links:
                    if owner[d] == rank:
                        assert (recv[(d, df)] == 10.0 * s + sf + 100 * it).all(), (s, d, it)
            assert tr.allreduce_max(rank) == size - 1
            assert tr.allreduce_sum(1.0) == size
            got = tr.gather({k: np.full(2, k) for k in local})
            assert sorted(got) == list(range(n)) and all((got[k] == k).all() for k in got)
            tr.close()
    if rank == 0:
        print("transport ok")
""")


@needs_mpiexec
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_mpi_transport_delivers_every_link(tmp_path, ranks):
    script = tmp_path / "transport.py"
    script.write_text(TRANSPORT_SCRIPT)
    proc = mpirun(ranks, [str(script)], timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "transport ok" in proc.stdout


class _AbortCalled(Exception):
    pass


class _FakeComm:
    def __init__(self, size: int) -> None:
        self.size, self.codes = size, []

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's spelling
        return self.size

    def Get_rank(self) -> int:  # noqa: N802
        return 1

    def Abort(self, code: int) -> None:  # noqa: N802
        self.codes.append(code)
        raise _AbortCalled


@pytest.mark.parametrize("exc, code, line", [
    (ValueError("bad"), 1, "simsplit: error: rank 1: ValueError: bad"),
    (RuntimeError("cudaErrorIllegalAddress: an illegal memory access"), 4, "illegal address"),
    (KeyboardInterrupt(), 130, "simsplit: error: rank 1: interrupted")])
def test_uncaught_exception_hook_aborts_the_job(monkeypatch, capsys, exc, code, line):
    """The hook MPIContext installs for programs outside the command line: one line, then
    ``comm.Abort`` with the kind's exit code; one process (or a hook set already) keeps its."""
    import sys

    from simsplit.parallel import context

    monkeypatch.setattr(context.time, "sleep", lambda s: None)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    context._abort_on_uncaught(_FakeComm(1))
    assert sys.excepthook is sys.__excepthook__
    comm = _FakeComm(2)
    context._abort_on_uncaught(comm)
    hook = sys.excepthook
    assert hook is not sys.__excepthook__
    context._abort_on_uncaught(_FakeComm(2))
    assert sys.excepthook is hook  # never stacked
    with pytest.raises(_AbortCalled):
        hook(type(exc), exc, None)
    assert comm.codes == [code]
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1, err
