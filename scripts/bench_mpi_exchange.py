"""Time the two-way exchange of one slab's ghost positions between two MPI ranks of one node.

    mpiexec -n 2 python scripts/bench_mpi_exchange.py [--sizes-mb 0.1 0.5 1.27 2.5]

Per size, rank 0 prints the microseconds of one exchange (both ranks send, then receive, as
:meth:`simsplit.md.rank_slab.RankSlab.trade_step` does) through ``Isend``/``Recv`` of NumPy
buffers, and through an MPI-3 shared-memory window (each rank copies into its own segment and
sends an 8-byte notice; the neighbour reads the segment in place).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI


def _messages(comm: MPI.Comm, out: np.ndarray, inb: np.ndarray, reps: int) -> float:
    peer = 1 - comm.Get_rank()
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        req = comm.Isend(out, dest=peer, tag=7)
        comm.Recv(inb, source=peer, tag=7)
        req.Wait()
    return (time.perf_counter() - t0) / reps


def _window(comm: MPI.Comm, out: np.ndarray, inb: np.ndarray, reps: int) -> float:
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    peer = 1 - node.Get_rank()
    win = MPI.Win.Allocate_shared(out.nbytes, 1, comm=node)
    mine = np.frombuffer(win.tomemory(), np.uint8)
    buf, _ = win.Shared_query(peer)
    theirs = np.frombuffer(buf, np.uint8)
    notice, got = np.zeros(1, np.int64), np.zeros(1, np.int64)
    src = out.view(np.uint8)
    node.Barrier()
    t0 = time.perf_counter()
    for i in range(reps):
        mine[:] = src
        notice[0] = i
        req = node.Isend(notice, dest=peer, tag=8)
        node.Recv(got, source=peer, tag=8)
        inb.view(np.uint8)[:] = theirs
        req.Wait()
        # the neighbour has read our segment before we overwrite it
        node.Sendrecv(notice, dest=peer, sendtag=9, recvbuf=got, source=peer, recvtag=9)
    dt = (time.perf_counter() - t0) / reps
    win.Free()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes-mb", nargs="+", type=float, default=[0.1, 0.5, 1.27, 2.5])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        raise SystemExit("run with mpiexec -n 2")
    for mb in args.sizes_mb:
        n = int(mb * 1e6) // 8
        out, inb = np.random.default_rng(0).random(n), np.empty(n)
        _messages(comm, out, inb, 10)
        t_msg = _messages(comm, out, inb, args.reps)
        t_win = _window(comm, out, inb, args.reps)
        if comm.Get_rank() == 0:
            print(f"{mb:6.2f} MB: Isend/Recv {1e6 * t_msg:8.1f} us ({mb / 1e3 / t_msg:6.2f} GB/s)"
                  f", shared window with two copies {1e6 * t_win:8.1f} us", flush=True)


if __name__ == "__main__":
    main()
