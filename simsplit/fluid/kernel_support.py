"""What a backend's kernel set for one lattice can run: one-line refusals before any allocation.

A kernel set announces its abilities as class attributes (``records``: neq16 cell records,
``records_boundaries``: records with bodies, inlets, outlets and free-slip walls,
``stress_records``: the records that keep each cell's stress too (neq16s),
``stream_collide_aa``: in-place streaming); a block asks here before it allocates anything.
"""

from __future__ import annotations

from typing import Any

from simsplit.errors import BackendUnavailable


def refuse_unsupported(kernels: Any, backend: str, lattice: str, records: bool, aa: bool,
                       boundaries: bool, stress: bool = False) -> None:
    """Raise :class:`BackendUnavailable` (one line naming the key) for what ``kernels`` lacks.

    ``records``: the storage is neq16 (``stress``: neq16s); ``aa``: in-place streaming;
    ``boundaries``: the block has bodies, inlets, outlets or free-slip walls.
    """
    if stress and not getattr(kernels, "stress_records", False):
        raise BackendUnavailable(f"run.storage: neq16s is not allowed on backend {backend} "
                                 f"for {lattice} (allowed: float16, e4m11, neq16, float32; "
                                 "neq16s runs on backends cpu, cupy and numba-cuda)")
    if records and not getattr(kernels, "records", False):
        raise BackendUnavailable(f"run.storage: neq16 is not allowed on backend {backend} "
                                 f"for {lattice} (allowed: float16, e4m11, float32)")
    if records and boundaries and not getattr(kernels, "records_boundaries", False):
        raise BackendUnavailable(f"run.storage: neq16 with domain.bodies, inlets, outlets or "
                                 f"free-slip walls is not allowed on backend {backend} "
                                 "(allowed: float16, e4m11, float32; neq16 with them runs on "
                                 "backends cpu and cupy)")
    if aa and not hasattr(kernels, "stream_collide_aa"):
        raise BackendUnavailable(f"run.streaming: aa is not allowed on backend {backend} "
                                 "(allowed: two-lattice); use backend cupy or cpu")
