"""Output of simulation results: HDF5/XDMF grid fields and PNG plots.

The plotting functions are loaded on first use so that ``import simsplit.io`` does not import
matplotlib.
"""

from __future__ import annotations

from typing import Any

from simsplit.io.fields import FieldWriter, list_snapshots, read_snapshot

__all__ = ["FieldWriter", "list_snapshots", "plot_cavity", "plot_series", "read_snapshot"]


def __getattr__(name: str) -> Any:
    if name in ("plot_cavity", "plot_series"):
        from simsplit.io import plots

        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
