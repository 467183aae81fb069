"""What physics may ask of the placement of its slabs: the interface between a solver and the
parallel context that runs it (:class:`simsplit.parallel.ParallelContext` and its MPI variant).

A solver asks which slabs are its own, which backend each runs on and for a transport over
its links; it never sees ranks, devices or MPI. Physics imports this protocol, not the context.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from simsplit.backends.base import Backend
from simsplit.transport.base import Link, Transport


class Placement(Protocol):
    """Where slabs live and how their halos travel."""

    backend_name: str

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def on_gpu(self) -> bool: ...

    @property
    def has_fault(self) -> bool: ...

    def local_slabs(self, n_slabs: int) -> list[int]:
        """The slabs this process holds, of ``n_slabs`` in all."""

    def device_of(self, slab: int) -> int:
        """The device id slab ``slab`` runs on."""

    def backend_for(self, slab: int) -> Backend:
        """The backend (arrays and kernels) of slab ``slab``'s device."""

    def transport(self, links: Sequence[Link], n_slabs: int) -> Transport:
        """A transport carrying ``links`` between this process's slabs and everyone else's."""

    def check_fault(self, step: int) -> None:
        """Test mode: fail on purpose at ``step`` where the environment asks this rank to."""

    def describe(self) -> Any: ...
