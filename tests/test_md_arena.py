"""Several slabs on one GPU in one arena (:mod:`simsplit.md.arena`): the CUDA C kernels run as
host C++ (the emulation of ``test_md_kernels_compile``) through the CuPy backend's launch
sequence. Every run must equal the CPU's one-slab run bit for bit, and between observations the
host may read counts only, never an atom.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit.md import MDSolver
from simsplit.md.reference import lj_case
from tests.test_md_kernels_compile import emulated, emulated_lib  # noqa: F401

CELLS = (6, 6, 12)  # 1728 atoms, L_z 20.2: four slabs of 5.04 > cutoff + skin
HOT = {"temperature": 3.0, "neighbor": {"skin": 0.3}}  # a melt: atoms cross slab faces often


def _run(backend: str, steps: int, subdomains: int = 1, weights: list[float] | None = None,
         precision: str = "float64", **kw: Any) -> MDSolver:
    case = lj_case(cells=CELLS, subdomains=subdomains, weights=weights, **{**HOT, **kw})
    case["run"]["precision"] = precision
    s = MDSolver(case, backend)
    s.step(steps)
    return s


def _same(a: MDSolver, b: MDSolver) -> None:
    for name in ("positions", "velocities", "images", "forces", "per_atom_energy"):
        assert np.array_equal(getattr(a, name)(), getattr(b, name)()), name
    assert a.thermo() == b.thermo()


@pytest.fixture(scope="module")
def one_slab() -> MDSolver:
    return _run("cpu", 300)


@pytest.mark.parametrize("subdomains, weights", [
    (2, None), (3, None), (4, None), (3, [1.0, 2.5, 1.5]),
])
def test_arena_is_bitwise_the_one_slab_run(emulated, one_slab, subdomains,  # noqa: F811
                                           weights) -> None:
    s = _run("emulated", 300, subdomains, weights)
    assert s.arena is not None and len(s.slabs) == 1
    st = s.stats()
    assert st["ghost_transfer"] == ["arena"]
    assert st["rebuilds"] > 20 and st["migrations"] > 50 and st["batches"] < 200
    assert len(st["atoms_per_slab"]) == subdomains and sum(st["atoms_per_slab"]) == s.n_atoms
    _same(s, one_slab)


def test_arena_counts_equal_the_host_path(emulated) -> None:  # noqa: F811
    """Owned and ghost atoms per slab, and migrations, equal the CPU's host migration and ghost
    selection (the rebuild oracle), after the same 200 steps."""
    cpu = _run("cpu", 200, 3)
    emu = _run("emulated", 200, 3)
    st, want = emu.stats(), cpu.stats()
    assert st["atoms_per_slab"] == want["atoms_per_slab"]
    assert st["ghosts_per_slab"] == [s.n_ghost for s in cpu.slabs]
    assert st["migrations"] == want["migrations"] and st["rebuilds"] == want["rebuilds"]
    # every slab's owned ids are the CPU slab's
    arena, gid = emu.arena, emu.slabs[0].gid
    for k, sc in enumerate(cpu.slabs):
        lo, hi = arena.bounds[k], arena.bounds[k + 1]
        assert np.array_equal(np.sort(gid[lo:hi]), np.sort(sc.ids[: sc.n_own]))
        glo, ghi = arena.bounds[3 + k], arena.bounds[3 + k + 1]
        assert np.array_equal(np.sort(gid[glo:ghi]), np.sort(sc.ids[sc.n_own: sc.n_local]))


def test_arena_langevin_float32_and_growth(emulated) -> None:  # noqa: F811
    kw = dict(ensemble="langevin", langevin={"temperature": 2.0, "damping": 0.2},
              neighbor={"skin": 0.3, "capacity": 20})
    ref = _run("cpu", 150, 1, precision="float32", **kw)
    s = _run("emulated", 150, 4, precision="float32", **kw)
    assert s.stats()["capacity_growths"] > 0
    _same(s, ref)


def test_arena_batches_match_step_by_step(emulated) -> None:  # noqa: F811
    """Batches cut short by a rebuild request: same bits as reading the flag every step."""
    batched = _run("emulated", 240, 3)
    stepwise = MDSolver(lj_case(cells=CELLS, subdomains=3, **HOT), "emulated")
    stepwise.kernels.batches = False
    stepwise.step(240)
    assert batched.stats()["batches"] < 120 and stepwise.stats()["batches"] == 0
    _same(batched, stepwise)


@pytest.mark.parametrize("onto", [1, 2, 4])
def test_arena_restart_onto_other_splits(emulated, one_slab, onto) -> None:  # noqa: F811
    half = _run("emulated", 130, 3)
    fresh = MDSolver(lj_case(cells=CELLS, subdomains=onto, **HOT), "emulated")
    fresh.load_state(half.state())
    fresh.step(170)
    for name in ("positions", "velocities", "images", "forces", "per_atom_energy"):
        assert np.array_equal(getattr(fresh, name)(), getattr(one_slab, name)()), name
    later = [r for r in one_slab.thermo() if r["step"] > 130]
    assert later and fresh.thermo()[-len(later):] == later


def test_arena_host_reads_counts_only(emulated) -> None:  # noqa: F811
    """Between observations the host uploads nothing and reads only a few integers per batch
    and per rebuild: the flags, the region counts, the longest list row."""
    s = MDSolver(lj_case(cells=CELLS, subdomains=4, thermo_every=10_000, **HOT), "emulated")
    k = s.kernels
    reads: list[int] = []
    real_host, real_dev = k.to_host, k.to_device

    def to_host(arr: Any) -> np.ndarray:
        reads.append(int(np.asarray(arr).nbytes))
        return real_host(arr)

    def to_device(arr: Any) -> Any:
        raise AssertionError(f"upload of {np.asarray(arr).nbytes} bytes while stepping")

    k.to_host, k.to_device = to_host, to_device
    before = s.stats()
    s.step(300)
    k.to_host, k.to_device = real_host, real_dev
    st = s.stats()
    rebuilds, batches = st["rebuilds"] - before["rebuilds"], st["batches"] - before["batches"]
    assert rebuilds > 20
    assert max(reads) <= 4 * (2 * 4 + 4)  # the region counts of four slabs
    assert len(reads) <= batches + 2 * rebuilds


def test_arena_reports_an_atom_that_crossed_a_slab(emulated) -> None:  # noqa: F811
    s = MDSolver(lj_case(cells=CELLS, subdomains=4, **HOT), "emulated")
    x = s.slabs[0].x
    row = int(np.flatnonzero(s.slabs[0].key[: s.n_atoms] // np.prod(s.ncell) == 0)[0])
    x[row, 2] = (x[row, 2] + 0.5 * s.box[2]) % s.box[2]  # two slabs away
    with pytest.raises(RuntimeError, match=r"atom \d+ \(z = .*\) crossed a whole slab"):
        s.arena.arrange()
