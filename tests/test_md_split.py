"""Trajectories are independent of the slab split and of restarts; rebuild timing changes
only rounding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simsplit.md import MDSolver
from simsplit.md.reference import lj_case

CELLS = (6, 6, 9)  # 1296 atoms; box z = 15.1 so three slabs are 5.0 > cutoff + skin thick


def _run(steps, **kw):
    s = MDSolver(lj_case(cells=CELLS, **kw))
    s.step(steps)
    return s


def test_split_bitwise_identical_nve():
    runs = {n: _run(1000, subdomains=n) for n in (1, 2, 3)}
    runs["3w"] = _run(1000, subdomains=3, weights=[1.0, 1.4, 0.9])
    ref = runs[1]
    for key, s in runs.items():
        st = s.stats()
        print(key, {k: st[k] for k in ("rebuilds", "migrations", "capacity_growths", "ghosts",
                                       "atoms_per_slab")})
        assert st["rebuilds"] > 1
        if key != 1:
            assert st["migrations"] > 0 and st["ghosts"] > 0
        assert np.array_equal(s.positions(), ref.positions()), key
        assert np.array_equal(s.velocities(), ref.velocities()), key
        assert np.array_equal(s.images(), ref.images()), key
        assert s.thermo() == ref.thermo(), key
    assert ref.stats()["migrations"] == 0  # one slab: nothing to migrate
    # the run went somewhere: atoms left their initial slabs and crossed the box
    assert np.abs(ref.images()).sum() > 0


def test_split_bitwise_identical_langevin():
    kw = dict(ensemble="langevin", langevin={"temperature": 2.0, "damping": 0.2})
    a = _run(300, subdomains=1, **kw)
    b = _run(300, subdomains=3, weights=[2.0, 1.0, 1.0], **kw)
    assert b.stats()["migrations"] > 0
    assert np.array_equal(a.positions(), b.positions())
    assert np.array_equal(a.velocities(), b.velocities())


def test_rebuild_schedule_changes_only_rounding():
    """skin 0 rebuilds every step: each list is in the cell order of its own build, so the
    force sums round differently from skin 0.3 (the trajectory depends on when lists are
    rebuilt), but only by rounding, which 150 steps of chaos amplify to ~1e-13 here. At a fixed
    schedule the split still does not matter."""
    a = _run(150, subdomains=2)
    b = _run(150, subdomains=3, neighbor={"skin": 0.0})
    c = _run(150, subdomains=1, neighbor={"skin": 0.0})
    assert b.stats()["rebuilds"] == 151
    assert a.stats()["rebuilds"] < 40
    assert np.array_equal(b.positions(), c.positions())
    assert np.array_equal(b.velocities(), c.velocities())
    d = a.positions() - b.positions()
    d -= a.box * np.round(d / a.box)
    assert np.abs(d).max() < 1e-10
    assert np.abs(a.velocities() - b.velocities()).max() < 1e-9
    for key in ("pe", "ke", "etotal", "press"):
        assert a.thermo()[-1][key] == pytest.approx(b.thermo()[-1][key], rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("ensemble", ["nve", "langevin"])
def test_restart_is_bitwise(ensemble):
    full = _run(300, subdomains=2, ensemble=ensemble, thermo_every=25)
    half = _run(170, subdomains=3, ensemble=ensemble, thermo_every=25)
    snap = half.state()
    assert all(isinstance(v, np.ndarray) for v in snap.values())
    fresh = MDSolver(lj_case(cells=CELLS, subdomains=1, ensemble=ensemble, thermo_every=25))
    fresh.load_state(snap)
    assert fresh.steps_done == 170
    fresh.step(130)
    assert np.array_equal(fresh.positions(), full.positions())
    assert np.array_equal(fresh.velocities(), full.velocities())
    assert fresh.thermo()[-1] == full.thermo()[-1]


def test_float32_runs_close_to_float64():
    case = lj_case(cells=(4, 4, 4), subdomains=1)
    case["run"]["precision"] = "float32"
    s32 = MDSolver(case)
    s64 = MDSolver(lj_case(cells=(4, 4, 4)))
    assert s32.positions().dtype == np.float32
    assert abs(s32.thermo()[0]["pe"] - s64.thermo()[0]["pe"]) < 1e-5
    s32.step(100)
    s64.step(100)
    assert abs(s32.thermo()[-1]["etotal"] - s64.thermo()[-1]["etotal"]) < 1e-3


@settings(max_examples=12, deadline=None)
@given(parts=st.integers(1, 4),
       weights=st.lists(st.floats(0.8, 1.25), min_size=4, max_size=4),
       jitter=st.integers(0, 2**31 - 1))
def test_forces_split_independent_any_weights(parts, weights, jitter):
    """Random jittered configurations, 1-4 slabs with random weights: same forces, bitwise."""
    from simsplit.md.lattice import fcc_lattice

    pos, box = fcc_lattice(0.8442, (5, 5, 12))
    pos = pos + np.random.default_rng(jitter).uniform(-0.3, 0.3, pos.shape)
    ref = MDSolver(lj_case(cells=(5, 5, 12)))
    ref.load_state({"positions": pos % box, "velocities": ref.velocities(), "step": 0})
    s = MDSolver(lj_case(cells=(5, 5, 12), subdomains=parts, weights=weights[:parts]))
    s.load_state(ref.state())
    assert np.array_equal(s.forces(), ref.forces())
    assert s.thermo()[-1] == ref.thermo()[-1]


def use_reference_kernels(monkeypatch) -> None:
    """Make the CPU force and list calls below the thread threshold run the one-loop reference
    kernels (:func:`~simsplit.backends.cpu.md_forces.lj_forces_reference`, the typed one and
    :func:`~simsplit.backends.cpu.md_neighbors.build_neighbors_reference`) instead of the
    staged ones."""
    from simsplit.backends.cpu import md_forces, md_neighbors

    monkeypatch.setattr(md_neighbors, "build_neighbors_staged",
                        lambda *a: md_neighbors.build_neighbors_reference(*a[:15]))
    monkeypatch.setattr(md_forces, "lj_forces_staged",
                        lambda *a: md_forces.lj_forces_reference(*a[:13]))
    monkeypatch.setattr(md_forces, "lj_typed_forces_staged",
                        lambda *a: md_forces.lj_typed_forces_reference(*a[:12]))


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_parallel_kernels_match_serial(monkeypatch, precision):
    """Force the prange drivers on a small system, and run the staged force and list kernels
    on one thread: same bits as the one-loop reference kernels, float32 storage too. The one
    threshold in ``md`` reaches the list build and the forces in their own modules."""
    from simsplit.backends.cpu import md as kernels
    from simsplit.backends.cpu import md_forces, md_neighbors

    def run():
        case = lj_case(cells=CELLS, subdomains=2, ensemble="langevin",
                       langevin={"temperature": 1.2, "damping": 0.5})
        case.setdefault("run", {})["precision"] = precision
        s = MDSolver(case)
        s.step(200)
        return s

    calls = []

    def counted(kernel):
        def call(*args):
            calls.append(kernel.__name__)
            return kernel(*args)
        return call

    monkeypatch.setattr(md_forces, "lj_forces_staged", counted(md_forces.lj_forces_staged))
    monkeypatch.setattr(md_neighbors, "build_neighbors_staged",
                        counted(md_neighbors.build_neighbors_staged))
    staged = run()
    assert set(calls) == {"lj_forces_staged", "build_neighbors_staged"}
    with monkeypatch.context() as m:
        use_reference_kernels(m)
        serial = run()
    monkeypatch.setattr(kernels, "PARALLEL_MIN_ATOMS", 0)
    calls.clear()
    for module, name in ((kernels, "_disp_parallel"), (md_neighbors, "build_neighbors_parallel"),
                         (md_forces, "lj_forces_parallel")):
        monkeypatch.setattr(module, name, counted(getattr(module, name)))
    parallel = run()
    assert set(calls) == {"_disp_parallel", "build_neighbors_parallel", "lj_forces_parallel"}
    for s in (staged, parallel):
        assert np.array_equal(s.positions(), serial.positions())
        assert np.array_equal(s.velocities(), serial.velocities())
