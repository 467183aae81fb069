"""Placement: which process and device each slab lives on, and the transport that links them.

Physics sees a context only through :class:`simsplit.decomp.placement.Placement`; this package
chooses one process or MPI ranks, backends per device and the concrete transports.
"""

from simsplit.parallel.context import MPIContext, ParallelContext, launched_world_size, make_context

__all__ = ["MPIContext", "ParallelContext", "launched_world_size", "make_context"]
