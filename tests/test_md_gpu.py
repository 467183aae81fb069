"""MD on a real GPU: CuPy and Numba CUDA kernels against the CPU kernels, bit for bit.

Every test is marked ``gpu`` and skipped where its backend finds no GPU (``pytest -m gpu``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

CELLS = (10, 10, 10)  # 4000 atoms; three slabs of 5.6 > cutoff + skin


def _unavailable(name: str) -> str | None:
    if name == "cupy":
        from simsplit.backends import gpu_count

        return None if gpu_count() > 0 else "cupy: no CuPy or no CUDA GPU"
    try:
        from numba import cuda
    except ImportError as exc:
        return f"numba-cuda: {exc}"
    return None if cuda.is_available() else "numba-cuda: no usable CUDA GPU"


BACKENDS = [pytest.param(name, id=name, marks=pytest.mark.skipif(
    _unavailable(name) is not None, reason=_unavailable(name) or ""))
    for name in ("cupy", "numba-cuda")]


def _solver(backend: str, subdomains: int = 1, cells=CELLS, precision: str = "float64",
            **md: Any) -> Any:
    from simsplit.md import MDSolver
    from simsplit.md.reference import lj_case

    case = lj_case(cells=cells, subdomains=subdomains, **md)
    case["run"].update(backend=backend, precision=precision)
    return MDSolver(case, backend)


def _same(a: Any, b: Any) -> None:
    for name in ("positions", "velocities", "images", "forces"):
        assert np.array_equal(getattr(a, name)(), getattr(b, name)()), name
    assert a.thermo() == b.thermo()


@pytest.fixture(scope="module")
def cpu_nve() -> Any:
    s = _solver("cpu")
    s.step(1000)
    return s


@pytest.mark.parametrize("backend", BACKENDS)
def test_nve_1000_steps_bitwise_cpu_and_split(backend, cpu_nve) -> None:
    runs = {n: _solver(backend, n) for n in (1, 2, 3)}
    for n, s in runs.items():
        assert s.kernels.is_device
        s.step(1000)
        st = s.stats()
        print(backend, n, {k: st[k] for k in ("rebuilds", "migrations", "ghosts",
                                              "capacity_growths")})
        assert st["rebuilds"] > 10
        _same(s, cpu_nve)


@pytest.mark.parametrize("backend", BACKENDS)
def test_langevin_split_bitwise_and_close_to_cpu(backend) -> None:
    """Splits agree bit for bit; the CPU only closely: the GPU's log/sin/cos may differ by an
    ulp from the host libm's, and the difference grows with the chaotic dynamics."""
    kw = dict(ensemble="langevin", langevin={"temperature": 2.0, "damping": 0.2})
    one, three = _solver(backend, 1, **kw), _solver(backend, 3, **kw)
    cpu = _solver("cpu", **kw)
    for s in (one, three, cpu):
        s.step(100)
    assert np.array_equal(one.positions(), three.positions())
    assert np.array_equal(one.velocities(), three.velocities())
    np.testing.assert_allclose(one.positions(), cpu.positions(), rtol=0, atol=1e-7)
    np.testing.assert_allclose(one.velocities(), cpu.velocities(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_bitwise_cpu(backend) -> None:
    gpu = _solver(backend, 2, cells=(6, 6, 6), precision="float32")
    cpu = _solver("cpu", 1, cells=(6, 6, 6), precision="float32")
    gpu.step(300)
    cpu.step(300)
    _same(gpu, cpu)


@pytest.mark.parametrize("backend", BACKENDS)
def test_capacity_growth_and_restart(backend) -> None:
    kw = dict(neighbor={"skin": 0.3, "capacity": 24})
    ref = _solver("cpu", cells=(6, 6, 6), **kw)
    ref.step(200)
    gpu = _solver(backend, 1, cells=(6, 6, 6), **kw)
    assert gpu.stats()["capacity_growths"] > 0
    gpu.step(120)
    fresh = _solver(backend, 2, cells=(6, 6, 6))
    fresh.load_state(gpu.state())
    fresh.step(80)
    assert np.array_equal(fresh.positions(), ref.positions())
    assert np.array_equal(fresh.velocities(), ref.velocities())


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_order_and_kick_fusion_do_not_change_bits(backend) -> None:
    """One slab reorders rows by cell at every rebuild and fuses each second half kick into
    the next step's launch: without the reorder, in step(5) calls, the bits are the same."""
    fused = _solver(backend, cells=(6, 6, 6))
    fused.step(300)
    plain = _solver(backend, cells=(6, 6, 6))
    plain.reorder = False
    for _ in range(60):
        plain.step(5)
    assert fused.stats()["rebuilds"] > 5
    _same(fused, plain)


def test_cupy_registers(capsys) -> None:
    if _unavailable("cupy"):
        pytest.skip(_unavailable("cupy") or "")
    from simsplit.backends import get_backend

    regs = get_backend("cupy").md.registers
    with capsys.disabled():
        print("\nmd_lj.cu registers (NVRTC, this GPU):")
        for name, n in sorted(regs.items()):
            print(f"  {n:4d}  {name}")
    assert regs["md_lj_forces<double>"] <= 64


@pytest.mark.parametrize("backend", BACKENDS)
def test_arena_hot_melt_four_slabs_bitwise(backend) -> None:
    """Several slabs on one GPU share one arena, rebuilt on the device: a hot melt (heavy
    migration, batches cut short by rebuilds) on 2, 3 and 4 slabs, weighted too, equals the
    CPU's one-slab run bit for bit, float32 storage included."""
    kw = dict(cells=(10, 10, 16), temperature=3.0, precision="float32")
    cpu = _solver("cpu", **kw)
    cpu.step(600)
    for n, weights in ((2, None), (3, None), (4, None), (4, [1.0, 2.0, 1.5, 1.0])):
        s = _solver(backend, n, weights=weights, **kw)
        assert s.arena is not None
        s.step(600)
        st = s.stats()
        print(backend, n, weights, {k: st[k] for k in ("rebuilds", "migrations", "ghosts",
                                                       "batches")})
        assert st["migrations"] > 100 and st["batches"] < 600
        _same(s, cpu)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kob_andersen_types_bitwise_cpu_and_split(backend) -> None:
    """Two atom types with per-pair coefficients (the typed force kernel) on 1 and 3 slabs
    equal the CPU's one-slab run bit for bit."""
    from simsplit.md import MDSolver
    from simsplit.md.reference import lj_case

    def case(n: int) -> dict:
        c = lj_case(cells=(8, 8, 12), density=1.2, temperature=1.0, subdomains=n,
                    potential={"shift": True, "cutoff": 2.5},
                    pair_coeffs=[{"types": [1, 1], "epsilon": 1.0, "sigma": 1.0},
                                 {"types": [1, 2], "epsilon": 1.5, "sigma": 0.8,
                                  "cutoff": 2.0},
                                 {"types": [2, 2], "epsilon": 0.5, "sigma": 0.88,
                                  "cutoff": 2.2}])
        c["md"]["lattice"]["fractions"] = [0.8, 0.2]
        c["run"]["backend"] = backend
        return c

    cpu = MDSolver(case(1))
    cpu.step(400)
    for n in (1, 3):
        s = MDSolver(case(n), backend)
        assert s.typed
        s.step(400)
        _same(s, cpu)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("md", [
    {"potential": {"cutoff": 2.5, "shift": "force"}},
    {"ensemble": "npt", "temperature": 1.0, "barostat": {"pressure": 6.0, "damping": 0.5}},
    {"ensemble": "nose-hoover", "temperature": 1.0, "masses": [1.0, 0.5]},
], ids=["force-shift", "npt", "masses"])
def test_force_shift_and_npt_bitwise_cpu_and_split(backend, md) -> None:
    """The force-shift kernel; NPT (box and positions scaled every step, exact virial sums,
    slab edges and cell grid following the box); per-type masses (kicks per type, kinetic
    sums per atom): on 1 and 3 slabs equal to the CPU."""
    from simsplit.md import MDSolver
    from simsplit.md.reference import lj_case

    def case(n: int) -> dict:
        c = lj_case(cells=(6, 6, 9), density=0.8, subdomains=n, **md)
        if "masses" in md:
            c["md"]["lattice"]["fractions"] = [0.8, 0.2]
        c["run"]["backend"] = backend
        return c

    cpu = MDSolver(case(1))
    cpu.step(300)
    for n in (1, 3):
        s = MDSolver(case(n), backend)
        s.step(300)
        _same(s, cpu)
