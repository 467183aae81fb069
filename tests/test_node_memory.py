"""Shared memory between the MPI ranks of one node (``simsplit.transport.node_memory``): the
notices that replace messages between ranks of a node keep MPI's order per (source, tag)."""

from __future__ import annotations

import pytest

from tests.conftest import mpirun, needs_mpiexec

_NOTICES = """
from mpi4py import MPI
from simsplit.transport.node_memory import NOTICE_RING, NodeNotices

comm = MPI.COMM_WORLD
me, size = comm.Get_rank(), comm.Get_size()
notices = NodeNotices(comm)
n = 3 * NOTICE_RING  # more than a ring holds: the writers wait for their readers
chunk = NOTICE_RING // 2
peers = [r for r in range(size) if r != me]
assert all(notices.shares(r) for r in peers)
for i in range(n):  # tags 7 and 9 interleaved, a value that names sender and order
    for dst in peers:
        notices.post(dst, 7 if i % 2 else 9, i, 1000 * me + i)
    if i % chunk == chunk - 1:  # this chunk's tag 9 notices: tag 7 ones are read on the way
        for src in peers:
            for j in range(i - chunk + 1, i + 1, 2):
                assert notices.take(src, 9) == (j, 1000 * src + j)
for src in peers:  # then every tag 7 notice, in order (all but the last read early)
    for j in range(1, n, 2):
        assert notices.take(src, 7) == (j, 1000 * src + j), (src, j)
comm.Barrier()
print("ok", me)
"""


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_notices_keep_the_order_of_each_source_and_tag(ranks: int) -> None:
    res = mpirun(ranks, ["-c", _NOTICES], timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stdout.count("ok") == ranks, res.stdout


_VOTES = """
from mpi4py import MPI
from simsplit.transport.node_memory import NodeMemory

comm = MPI.COMM_WORLD
me, size = comm.Get_rank(), comm.Get_size()
node = NodeMemory(comm)
node.reserve({(1 - me % 2, "t"): 100})
first = node.generation
# announced early, every need fits: the reserve of the same needs keeps the segments
fits = {(1 - me % 2, "t"): 50}
node.announce(fits)
comm.Barrier()  # another collective while the vote is open
node.reserve(fits)
assert node.generation == first, (me, node.generation)
# one rank outgrows its outbox: every rank grows, announced or not
grown = {(1 - me % 2, "t"): 5000 if me == size - 1 else 50}
node.announce(grown)
node.reserve(grown)
assert node.generation == first + 1, (me, node.generation)
assert node.regions[(1 - me % 2, "t")][1] >= grown[(1 - me % 2, "t")]
# a vote no reserve takes (other needs asked for) is settled, then voted on again
node.announce(fits)
node.reserve({(1 - me % 2, "t"): 9000 if me == 0 else 1})
assert node.generation == first + 2, (me, node.generation)
node.announce(fits)
node.close()
print("ok", me)
"""


@needs_mpiexec
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_announced_votes_grow_the_segments_as_blocking_ones(ranks: int) -> None:
    res = mpirun(ranks, ["-c", _VOTES], timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stdout.count("ok") == ranks, res.stdout
