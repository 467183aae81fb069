"""Case files: YAML in, a validated case dict with every default filled out.

Sits above the physics packages: the schema is assembled from theirs, and each physics checks
its own section (:func:`simsplit.fluid.validate.check_fluid_case`,
:func:`simsplit.md.schema.check_md_case`).
"""

from simsplit.case.loader import apply_overrides, load_case, validate_case
from simsplit.errors import CaseError

__all__ = ["CaseError", "apply_overrides", "load_case", "validate_case"]
