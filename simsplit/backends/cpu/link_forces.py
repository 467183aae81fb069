"""Forces on bodies on the CPU: the momentum of every fluid-to-body link of a slab
(:class:`simsplit.numerics.momentum_exchange.SlabLinkTable`), summed exactly per body and
axis into the limbs the device kernels fill (:mod:`simsplit.numerics.exact`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.numerics.exact import exact_limbs
from simsplit.numerics.momentum_exchange import SlabLinkTable


class LinkForceKernels:
    """The CPU's link-force reduction (NumPy: a few thousand links per body)."""

    def prepare(self, table: SlabLinkTable, f: Any) -> SlabLinkTable:
        """What :meth:`sums` takes for ``table`` on arrays laid out as ``f`` (host: itself)."""
        return table

    def sums(self, f: np.ndarray, table: SlabLinkTable) -> tuple[np.ndarray, bool]:
        """(limb totals ``(n_bodies * dim, EXACT_LIMBS)`` of the force on each body along each
        axis, whether some link's momentum was not finite) from populations ``f``."""
        momentum = table.momentum(f)
        slots = (table.body[:, None] * table.dim + np.arange(table.dim)).ravel()
        values = momentum.ravel()
        return (exact_limbs(values, slots, table.n_bodies * table.dim),
                not bool(np.isfinite(values).all()))
