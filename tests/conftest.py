"""Shared fixtures: small fluid cases built in code, and a CLI runner in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _numba_threads_per_worker() -> None:
    """Under pytest-xdist each worker gets an equal share of the cores for Numba's threads
    (and so do the processes its tests start), before anything imports Numba. With a thread
    per core in every worker the cores are oversubscribed, and a parallel kernel's closing
    barrier waits for a thread the OS has put aside: a 24 x 20 D2Q9 step on 2 slabs took
    6.1 ms instead of 77 us on the 2-core CI machine. Results do not depend on the count; an
    explicit NUMBA_NUM_THREADS wins."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "NUMBA_NUM_THREADS" not in os.environ:
        os.environ["NUMBA_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))


_numba_threads_per_worker()


def fluid_case(nx: int = 32, ny: int = 32, subdomains: int = 1, **over: Any) -> dict[str, Any]:
    """A lid-driven cavity case dict (validated later by Simulation)."""
    case: dict[str, Any] = {
        "physics": "fluid",
        "fluid": {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"},
        "domain": {"shape": [nx, ny]},
        "decomposition": {"subdomains": subdomains},
        "run": {"backend": "cpu", "precision": "float64", "tolerance": 0.0},
        "output": {"dir": None},
    }
    for key, value in over.items():
        section, _, name = key.partition("__")
        case.setdefault(section, {})[name] = value
    return case


def body_case(nx: int = 48, ny: int = 20, subdomains: int = 1, bodies: list | None = None,
              **over: Any) -> dict[str, Any]:
    """A channel with a parabolic velocity inlet at x = 0, a pressure outlet at x = 1 and, by
    default, a circle that straddles the middle rows (issue #21), as a case dict."""
    if bodies is None:
        bodies = [{"name": "cyl", "shape": "circle", "centre": [nx / 4, ny / 2 - 0.3],
                   "radius": ny / 6}]
    case = fluid_case(nx, ny, subdomains, fluid__reynolds=None, fluid__viscosity=0.05)
    case["domain"] = {"shape": [nx, ny], "bodies": bodies,
                      "boundaries": {"x_low": "inlet", "x_high": "outlet", "lid": False},
                      "inlet": {"velocity": 0.06, "ramp_steps": 40}}
    for key, value in over.items():
        section, _, name = key.partition("__")
        case.setdefault(section, {})[name] = value
    return case


def body_case_3d(nx: int = 24, ny: int = 10, nz: int = 12, subdomains: int = 1,
                 bodies: list | None = None, **over: Any) -> dict[str, Any]:
    """A 3D duct with a velocity inlet at x = 0 (the parabolic product profile), a pressure
    outlet at x = 1 and, by default, a sphere off the axis that straddles the middle planes
    (issue #21), as a case dict."""
    if bodies is None:
        bodies = [{"name": "ball", "shape": "sphere", "centre": [nx / 3, ny / 2 + 0.2,
                                                                 nz / 2 + 0.1], "radius": 2.6}]
    case = fluid_case(nx, ny, subdomains, fluid__reynolds=None, fluid__viscosity=0.05)
    case["domain"] = {"shape": [nx, ny, nz], "bodies": bodies,
                      "boundaries": {"x_low": "inlet", "x_high": "outlet", "lid": False},
                      "inlet": {"velocity": 0.06, "ramp_steps": 10}}
    for key, value in over.items():
        section, _, name = key.partition("__")
        case.setdefault(section, {})[name] = value
    return case


#: (domain.outlet.kind, pressure_weight) of the kernel tests: every branch of the outlet rules
OUTLETS = [("pressure", 0.0), ("zero_gradient", 0.3), ("convective", 0.0), ("convective", 0.25)]


def outlet_params(kind: str, weight: float) -> dict[str, Any]:
    """Kernel parameters (D2Q9Params, D3Q19Params keywords) of an outlet; a convective one
    leaves at U = 0.07."""
    from simsplit.numerics.lbm_params import OUTLET_KINDS

    return {"outlet_kind": OUTLET_KINDS.index(kind), "outlet_pressure_weight": weight,
            "outlet_courant": 0.07 if kind == "convective" else 0.0}


#: True inside the child process that runs Numba CUDA kernels on the simulator
IN_SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
if IN_SIMULATOR:
    from tests.cuda_simulator import install as install_simulator_speedups

    install_simulator_speedups()


def run_bodies(raw: dict[str, Any], steps: int) -> tuple[Any, ...]:
    """A bodies case (``raw``, its run.backend on local transport) after ``steps`` steps: the
    populations as stored, the velocity, and the forces on the bodies summed on the host and
    reduced on the device."""
    from simsplit.case import validate_case
    from simsplit.fluid.forces import DeviceForces, body_links, measure_forces
    from simsplit.fluid.solver import FluidSolver
    from simsplit.fluid.state import raw_populations
    from simsplit.parallel.context import ParallelContext

    case = validate_case(raw)
    solver = FluidSolver(case, ParallelContext(case["run"]["backend"], transport="local"))
    solver.step(steps)
    links = body_links(solver.setup)
    return (raw_populations(solver), solver.velocity(), measure_forces(solver, links),
            DeviceForces(links).measure(solver))


def run_in_cuda_simulator(test_file: str, timeout: float = 900, **extra: str) -> None:
    """Run ``test_file`` again in a child with NUMBA_ENABLE_CUDASIM=1 (and the environment
    variables ``extra``) and require it to pass.

    The simulator has to be chosen before numba.cuda is first imported, which this process
    (running CPU tests) has already done.
    """
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               **extra)
    res = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=-ra", "-q", "-p",
                          "no:cacheprovider",
                          str(test_file)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, (
        f"simulator tests failed:\n{res.stdout[-6000:]}\n{res.stderr[-3000:]}")
    assert " passed" in res.stdout and "skipped" in res.stdout  # the launcher skips itself


def find_nvcc() -> str | None:
    """nvcc from the ``nvidia-cuda-nvcc`` wheel the test extras install (the same compiler on
    every machine), else nvcc on PATH."""
    import importlib.util

    for package in ("nvidia.cu13", "nvidia.cuda_nvcc"):
        try:
            spec = importlib.util.find_spec(package)
        except ModuleNotFoundError:
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            cand = Path(root) / "bin" / "nvcc"
            if cand.exists():
                return str(cand)
    return shutil.which("nvcc")


#: C++ compiler for the tests that run the CUDA C kernels as host code
CXX = shutil.which("g++") or shutil.which("c++")


def find_mpiexec() -> str | None:
    """mpiexec on PATH, else beside this interpreter (the ``mpich`` wheel puts it there)."""
    found = shutil.which("mpiexec")
    if found:
        return found
    cand = Path(sysconfig.get_path("scripts")) / "mpiexec"
    return str(cand) if cand.exists() else None


MPIEXEC = find_mpiexec()
needs_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec found")


def mpi_env(**extra: str) -> dict[str, str]:
    """Environment for ranks started by a test: the checkout first, one thread per rank."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "MPI_LOCALNRANKS"):
        env.pop(var, None)  # a pytest started under mpiexec must not leak its world
    if os.geteuid() == 0:  # Open MPI refuses root without both (containers, GPU machines)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra)
    return env


def mpirun(n: int, args: list[str], timeout: float = 60, **env: str
           ) -> subprocess.CompletedProcess[str]:
    """``mpiexec -n n python args`` from the repository root."""
    assert MPIEXEC is not None
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, *args], cwd=ROOT,
                          env=mpi_env(**env), capture_output=True, text=True, timeout=timeout)


#: test files of about a minute or more on two cores (CI's machine), the longest first. The
#: workers take whole files (``--dist loadfile``) in collection order (``--no-loadscope-
#: reorder``), so these start first and the short files fill in the end; in the default order
#: (most tests first) the warm-up and simulator files came last and one core idled minutes.
LONG_FILES = ("test_warmup.py", "test_md_npt.py", "test_md_gpu_sim.py", "test_cpu_rows.py",
              "test_kernels_compile.py", "test_ghia.py", "test_md_multi_device.py",
              "test_numba_cuda_sim.py", "test_checkpoint.py", "test_d3q19_storage.py",
              "test_d3q19_sim.py", "test_md_thermostats.py", "test_autotune.py",
              "test_md_output.py", "test_md_masses.py", "test_fuzz.py", "test_d3q19.py",
              "test_bodies_flow.py")


def pytest_collection_modifyitems(config, items):
    """The long files first (:data:`LONG_FILES`); GPU tests need a CUDA device: skip them
    (with the reason) where there is none."""
    from simsplit.backends import gpu_count

    rank = {name: k for k, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable
    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none usable here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _cpu_row_kernels(request, monkeypatch):
    """The CPU lattice Boltzmann launchers run the scalar kernel on every cell (the same bits as
    the row kernels, which tests/test_cpu_rows.py checks), unless a test is marked
    ``cpu_rows``: each generated row kernel takes 10-25 s to compile, more than most tests run.
    Scalar, row and two-step kernels run as their serial twins (the same source and bits as
    the threaded builds, a third of the compile time), unless a test is marked
    ``cpu_threads``. An explicit ``SIMSPLIT_CPU_ROWS`` in the environment wins (``=1``: every
    test runs the row kernels, threaded)."""
    from simsplit.backends.cpu.rowgen import ROWS_ENV, SERIAL_ENV

    if ROWS_ENV not in os.environ:
        rows = request.node.get_closest_marker("cpu_rows") is not None
        threads = request.node.get_closest_marker("cpu_threads") is not None
        monkeypatch.setenv(ROWS_ENV, "1" if rows else "0")
        monkeypatch.setenv(SERIAL_ENV, "0" if threads else "1")


@pytest.fixture
def run_cli(tmp_path: Path):
    """Run ``python -m simsplit ARGS`` in ``tmp_path``; returns the CompletedProcess."""

    def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        return subprocess.run(
            [sys.executable, "-m", "simsplit", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return _run


@pytest.fixture
def one_thread():
    """Tiny grids, many steps: one Numba thread avoids a parallel region's sync per step (slow
    on a loaded machine); results do not depend on the thread count."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


@pytest.fixture(scope="module")
def study():
    """scripts/fp16_study.py as a module (the storage study and its emulations)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "fp16_study.py"
    spec = importlib.util.spec_from_file_location("fp16_study", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fp16_study"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("fp16_study", None)
