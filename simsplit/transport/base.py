"""The transport interface: move buffers along decomposition links, reduce, gather.

A transport sees slab indices, faces and buffers. What the buffers hold (populations,
atoms) belongs to the physics that filled them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping, Sequence

import numpy as np

Key = tuple[int, int]  #: (slab index, face)
Link = tuple[int, int, int, int]  #: (src slab, src face, dst slab, dst face)


class Transport(ABC):
    """Moves halo buffers between slabs and combines per-slab scalars and arrays."""

    name = ""

    def __init__(self, links: Sequence[Link], local_slabs: Sequence[int], n_slabs: int) -> None:
        self.links = list(links)
        self.local_slabs = list(local_slabs)
        self.n_slabs = n_slabs

    @property
    def rank(self) -> int:
        return 0

    @property
    def size(self) -> int:
        return 1

    @abstractmethod
    def exchange(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> None:
        """For every link touching a local slab, deliver ``send[src]`` into ``recv[dst]``."""

    def allreduce_max(self, value: float) -> float:
        return value

    def allreduce_sum(self, value: float) -> float:
        return value

    def gather(self, pieces: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        """Host arrays of every slab, on every rank (collective)."""
        return dict(pieces)

    def bcast(self, obj: Any) -> Any:
        return obj

    def barrier(self) -> None:
        """Wait for every rank (no-op in one process)."""

    def abort(self, code: int = 1) -> None:
        """End every rank at once (one process: nothing else to end)."""

    def describe(self) -> str:
        return self.name
