"""Case files: YAML in, a validated case dict with every default filled out."""

from simsplit.case.loader import CaseError, apply_overrides, load_case, validate_case

__all__ = ["CaseError", "apply_overrides", "load_case", "validate_case"]
