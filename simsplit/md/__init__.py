"""Lennard-Jones molecular dynamics, domain-decomposed in slabs along z."""

from simsplit.md.schema import MD_SCHEMA, check_md_case, fill_md_defaults
from simsplit.md.solver import MDSolver

__all__ = ["MD_SCHEMA", "MDSolver", "check_md_case", "fill_md_defaults"]
