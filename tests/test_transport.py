"""Transports in one process, context selection, and overlap versus no overlap (bitwise)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simsplit.case import CaseError, load_case
from simsplit.decomp.slabs import HIGH, LOW, SlabDecomposition
from simsplit.errors import BackendUnavailable
from simsplit.numerics.lattice import equilibrium
from simsplit.parallel.context import MPIContext, ParallelContext, launched_world_size, make_context
from simsplit.run.simulation import Simulation
from simsplit.transport import (
    TRANSPORT_CHOICES,
    NonBlockingTransport,
    finish_exchange,
    link_tag,
    start_exchange,
)
from simsplit.transport.local import LocalTransport

CASE = Path(__file__).resolve().parents[1] / "cases" / "cavity.yaml"


@pytest.fixture(autouse=True)
def _one_numba_thread():
    # tiny grids: a parallel launch costs more than the work (ms per call on a 2-core runner)
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


# --- links and tags -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("periodic", [False, True])
def test_every_ghost_layer_has_one_link_and_a_unique_tag(n, periodic):
    links = SlabDecomposition(4 * n, n, periodic=periodic).links()
    dst = [(d, df) for _, _, d, df in links]
    assert len(dst) == len(set(dst))
    tags = [link_tag(d, df) for d, df in dst]
    assert len(tags) == len(set(tags)) and max(tags, default=0) < 32767
    expected = 2 * n if periodic else 2 * (n - 1)
    assert len(links) == expected
    for _, sf, _, df in links:
        assert df == 1 - sf


def test_tags_stay_below_the_mpi_minimum_for_the_largest_split():
    assert link_tag(4095, HIGH) < 32767


def _fill(links, shape=(3, 4)):
    send = {(s, sf): np.full(shape, 10.0 * s + sf) for s, sf, _, _ in links}
    recv = {(d, df): np.zeros(shape) for _, _, d, df in links}
    return send, recv


@pytest.mark.parametrize("periodic", [False, True])
def test_local_transport_through_the_split_interface(periodic):
    links = SlabDecomposition(12, 3, periodic=periodic).links()
    tr = LocalTransport(links, [0, 1, 2], 3, np.copyto)
    send, recv = _fill(links)
    finish_exchange(tr, start_exchange(tr, send, recv))
    for s, sf, d, df in links:
        assert (recv[(d, df)] == 10.0 * s + sf).all()
    if periodic:
        assert (recv[(0, LOW)] == 10.0 * 2 + HIGH).all()  # the wrap link


class _Recording(NonBlockingTransport):
    name = "recording"

    def __init__(self, links):
        super().__init__(links, [0, 1], 2)
        self.calls: list[str] = []

    def start(self, send, recv):
        self.calls.append("start")
        return "h"

    def finish(self, handle):
        self.calls.append(f"finish {handle}")


def test_exchange_is_start_then_finish():
    tr = _Recording(SlabDecomposition(8, 2).links())
    tr.exchange({}, {})
    assert tr.calls == ["start", "finish h"]


# --- contexts -------------------------------------------------------------------------------------
def test_world_size_comes_from_launcher_variables():
    assert launched_world_size({}) == 1
    assert launched_world_size({"PMI_SIZE": "4"}) == 4
    assert launched_world_size({"OMPI_COMM_WORLD_SIZE": "3"}) == 3
    assert launched_world_size({"PMIX_RANK": "0", "SLURM_STEP_NUM_TASKS": "8"}) == 8
    # a batch script's allocation alone is not an MPI launch
    assert launched_world_size({"SLURM_NTASKS": "8"}) == 1


def test_plain_run_builds_a_single_process_context_without_mpi(monkeypatch):
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE"):
        monkeypatch.delenv(var, raising=False)
    case = load_case(CASE, ["run.backend=cpu"])
    ctx = make_context(case)
    assert type(ctx) is ParallelContext and not isinstance(ctx, MPIContext)
    assert ctx.resolved_transport() == "local"
    assert "transport local" in ctx.describe()


@pytest.mark.parametrize("kind", ["peer", "nccl", "mpi-cuda-aware"])
def test_gpu_transports_refuse_the_cpu_backend(kind):
    ctx = ParallelContext("cpu", transport=kind)
    with pytest.raises(BackendUnavailable, match=f"run.transport: {kind} needs a GPU"):
        ctx.transport(SlabDecomposition(8, 2).links(), 2)


def test_transport_key_is_validated():
    case = load_case(CASE)
    assert case["run"]["transport"] == "auto" and case["run"]["overlap"] is True
    assert case["run"]["devices"] is None and case["run"]["timing"] is False
    assert set(TRANSPORT_CHOICES) >= {"auto", "local", "peer", "nccl", "mpi", "mpi-cuda-aware"}
    with pytest.raises(CaseError, match="run.transport"):
        load_case(CASE, ["run.transport=carrier-pigeon"])
    with pytest.raises(CaseError, match="run.devices"):
        load_case(CASE, ["run.devices=[-1]"])
    with pytest.raises(CaseError, match="run.overlap"):
        load_case(CASE, ["run.overlap=sometimes"])


def test_schema_documents_every_new_key():
    from simsplit.case.schema import RUN_SCHEMA

    for key in ("transport", "devices", "overlap", "timing"):
        entry = RUN_SCHEMA["properties"][key]
        assert "default" in entry and entry["description"]


def test_fault_injection_raises_at_the_named_step(monkeypatch):
    monkeypatch.setenv("SIMSPLIT_TEST_FAIL_RANK", "0:3")
    sim = Simulation(load_case(CASE, ["run.backend=cpu", "domain.shape=[16,16]",
                                      "output.dir=null"]))
    sim.step(2)
    with pytest.raises(RuntimeError, match="SIMSPLIT_TEST_FAIL_RANK at step 3"):
        sim.step(5)
    monkeypatch.setenv("SIMSPLIT_TEST_FAIL_RANK", "1:3")  # another rank: nothing here
    Simulation(load_case(CASE, ["run.backend=cpu", "domain.shape=[16,16]",
                                "output.dir=null"])).step(4)


# --- overlap: bitwise identical to exchange-then-compute ------------------------------------------
CAVITY = ["run.backend=cpu", "domain.shape=[20,16]", "output.dir=null"]
CHANNEL = ["run.backend=cpu", "domain.shape=[12,8]", "output.dir=null",
           "domain.boundaries={x: periodic, y: periodic, lid: false}", "fluid.reynolds=null",
           "fluid.viscosity=0.05", "fluid.lid_velocity=0", "fluid.body_force=[1.0e-5, 0.0]"]


def _random_start(sim: Simulation) -> None:
    s = sim.solver.setup
    rng = np.random.default_rng(3)
    shape = (s.ny, s.nx)
    f = equilibrium(1 + 0.01 * rng.standard_normal(shape), 0.02 * rng.standard_normal(shape),
                    0.02 * rng.standard_normal(shape)).astype(s.dtype)
    for blk in sim.solver.blocks.values():
        blk.set_populations(f[:, blk.row0:blk.row0 + blk.ny])


def _run(base, n, overlap, chunks=(7, 1, 12), random_start=False):
    sim = Simulation(load_case(CASE, base + [f"decomposition.subdomains={n}",
                                             f"run.overlap={str(overlap).lower()}"]))
    if random_start:
        _random_start(sim)
    for c in chunks:
        sim.step(c)
    return sim.solver.populations(), sim.velocity(), sim.density()


@pytest.mark.parametrize(("base", "random_start"), [(CAVITY, False), (CHANNEL, True)],
                         ids=["cavity", "periodic-random"])
def test_overlap_is_bitwise_identical_for_1_to_4_slabs(base, random_start):
    ref = _run(base, 1, False, random_start=random_start)
    assert np.abs(ref[1]).max() > 0
    for n in (1, 2, 3, 4):
        for overlap in (False, True):
            got = _run(base, n, overlap, random_start=random_start)
            for a, b in zip(got, ref, strict=True):
                assert np.array_equal(a, b), (n, overlap)


def test_overlap_with_two_row_slabs_and_a_restart_midway():
    # ny = 8 on 4 slabs: every slab is MIN_SLAB_ROWS thin, so it has no interior rows at all
    ref = _run(CHANNEL, 1, False, random_start=True)
    got = _run(CHANNEL, 4, True, random_start=True)
    assert all(np.array_equal(a, b) for a, b in zip(got, ref, strict=True))
    sim = Simulation(load_case(CASE, CHANNEL + ["decomposition.subdomains=4"]))
    _random_start(sim)
    sim.step(7)
    saved = sim.solver.populations()
    for blk in sim.solver.blocks.values():  # restore replaces f_src: ghosts must be refreshed
        blk.set_populations(saved[:, blk.row0:blk.row0 + blk.ny])
    sim.step(13)
    assert np.array_equal(sim.solver.populations(), ref[0])


def test_buffer_plans_find_by_identity_and_push_out_the_oldest() -> None:
    """Transports keep what they made for their last BufferPlans.KEPT buffer sets, found by
    the buffers' identity (equal contents are another set); a fourth set pushes out the
    first."""
    from simsplit.transport.base import BufferPlans

    plans: BufferPlans[str] = BufferPlans()
    sets = [[np.zeros(2), np.zeros(2)] for _ in range(4)]
    assert plans.find(sets[0]) is None and plans.latest() is None
    assert [plans.add(s, f"p{i}") for i, s in enumerate(sets[:3])] == [None] * 3
    assert plans.find(sets[1]) == "p1" and plans.find([sets[1][0]]) is None
    assert plans.find([np.zeros(2), np.zeros(2)]) is None
    assert plans.add(sets[3], "p3") == "p0" and plans.find(sets[0]) is None
    assert plans.latest() == "p3" and plans.clear() == ["p1", "p2", "p3"]
    assert plans.find(sets[3]) is None
