"""Memory preflight: estimate what a case needs per device before allocating anything.

A case too large for the free memory of its GPUs (or for the host's RAM on the CPU backend)
is refused with the numbers and the smallest number of GPUs that would hold it.
"""

from __future__ import annotations

import math
from typing import Any

#: fraction of free memory a run may plan to use (allocator slack, compiled modules, halos)
USABLE_FRACTION = 0.9


class InsufficientMemory(RuntimeError):
    """The case does not fit; the message says by how much and what would fit."""


def fluid_bytes(case: dict[str, Any]) -> list[int]:
    """Bytes per slab of a lattice Boltzmann case: two population lattices, flags, macroscopic
    fields (D2Q9 in 2D, D3Q19 in 3D; slabs along the last axis)."""
    from simsplit.decomp.slabs import split_extent
    from simsplit.fluid.lattice import lattice_for
    from simsplit.fluid.solver import MIN_SLAB_ROWS

    shape = case["domain"]["shape"]
    *cross, ny = shape
    q = lattice_for(len(shape)).q
    layer = math.prod(n + 2 for n in cross)  # cells of one layer, ghosts included
    inner = math.prod(cross)
    item = 4 if case["run"]["precision"] == "float32" else 8
    dec = case["decomposition"]
    n = int(dec["subdomains"])
    out = []
    for a, b in split_extent(ny, n, dec.get("weights"), MIN_SLAB_ROWS):
        cells = (b - a + 2) * layer
        out.append(cells * (2 * q * item + 1) + (2 + len(shape)) * (b - a) * inner * item)
    return out


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_memory(case: dict[str, Any], context: Any) -> None:
    """Raise :class:`InsufficientMemory` when this process's slabs cannot fit where they run.

    Each backend says what is free where its arrays live (GPU memory, or host memory for the
    CPU backend and the CUDA simulator), so no device library is imported here.
    """
    if case["physics"] != "fluid":
        return
    per_slab = fluid_bytes(case)
    total = sum(per_slab)
    need: dict[int, int] = {}
    backends: dict[int, Any] = {}
    for k in context.local_slabs(len(per_slab)):
        dev = context.device_of(k)
        need[dev] = need.get(dev, 0) + per_slab[k]
        backends[dev] = context.backend_for(k)
    free = {dev: backend.memory_free() for dev, backend in backends.items()}
    for dev, b in need.items():
        if b <= USABLE_FRACTION * free[dev]:
            continue
        if not backends[dev].is_device:
            raise InsufficientMemory(
                f"the case needs {_gib(b)} of host memory, {_gib(free[dev])} is available: "
                "use a smaller domain.shape, run.precision: float32, or more hosts under mpiexec")
        gpus = math.ceil(total / (USABLE_FRACTION * min(free.values())))
        raise InsufficientMemory(
            f"GPU {dev} would need {_gib(b)} but has {_gib(free[dev])} free "
            f"(whole case: {_gib(total)}); it fits on at least {gpus} GPUs of this size "
            "with as many subdomains, or use run.precision: float32")
