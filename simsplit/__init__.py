"""simsplit: domain-decomposed lattice Boltzmann and molecular dynamics on CPUs and GPUs.

The front door: :class:`Simulation` and :func:`load_case`. The tree, layer by layer, is drawn
in ``docs/architecture.md``.
"""

from simsplit.case import load_case
from simsplit.errors import CaseError
from simsplit.run.simulation import Simulation
from simsplit.version import __version__

__all__ = ["CaseError", "Simulation", "load_case", "__version__"]
