"""simsplit: domain-decomposed lattice Boltzmann and molecular dynamics on CPUs and GPUs."""

__version__ = "0.1.0"

from simsplit.case import CaseError, load_case  # noqa: E402
from simsplit.simulation import Simulation  # noqa: E402

__all__ = ["CaseError", "Simulation", "load_case", "__version__"]
