"""Memory preflight: estimate what a case needs per device before allocating anything.

A case too large for the free memory of its GPUs (or for the host's RAM on the CPU backend)
is refused with the numbers and the smallest number of GPUs that would hold it.
"""

from __future__ import annotations

import math
from typing import Any

from simsplit.backends.base import USABLE_MEMORY_FRACTION, Backend
from simsplit.decomp.placement import Placement
from simsplit.fluid.setup import fluid_bytes


class InsufficientMemory(RuntimeError):
    """The case does not fit; the message says by how much and what would fit."""


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_memory(case: dict[str, Any], context: Placement) -> None:
    """Raise :class:`InsufficientMemory` when this process's slabs cannot fit where they run.

    Each backend says what is free where its arrays live (GPU memory, or host memory for the
    CPU backend and the CUDA simulator), so no device library is imported here.
    """
    if case["physics"] != "fluid":
        return
    per_slab = fluid_bytes(case)
    total = sum(per_slab)
    need: dict[int, int] = {}
    backends: dict[int, Backend] = {}
    for k in context.local_slabs(len(per_slab)):
        dev = context.device_of(k)
        need[dev] = need.get(dev, 0) + per_slab[k]
        backends[dev] = context.backend_for(k)
    free = {dev: backend.memory_free() for dev, backend in backends.items()}
    for dev, b in need.items():
        if b <= USABLE_MEMORY_FRACTION * free[dev]:
            continue
        if not backends[dev].is_device:
            raise InsufficientMemory(
                f"the case needs {_gib(b)} of host memory, {_gib(free[dev])} is available: "
                "use a smaller domain.shape, run.precision: float32, or more hosts under mpiexec")
        gpus = math.ceil(total / (USABLE_MEMORY_FRACTION * min(free.values())))
        raise InsufficientMemory(
            f"GPU {dev} would need {_gib(b)} but has {_gib(free[dev])} free "
            f"(whole case: {_gib(total)}); it fits on at least {gpus} GPUs of this size "
            "with as many subdomains, or use run.precision: float32")
