"""The fluid physics' own checks of a case, beyond its schema: one Reynolds number or
viscosity, a lid where one is needed, lattice speeds and forces in range, a grid large enough
for its slabs, a stable relaxation time. The case loader calls them; they raise
:class:`~simsplit.errors.CaseError` naming the key, and warn with a
:class:`~simsplit.errors.CaseWarning` about a case that runs close to a stability limit.
"""

from __future__ import annotations

import warnings
from typing import Any

from simsplit.decomp.slabs import MIN_SLAB_ROWS
from simsplit.errors import CaseError, CaseWarning
from simsplit.fluid.params import MAX_BODY_FORCE, MAX_LID_VELOCITY, UnstableSetup
from simsplit.fluid.probes import check_probes, probes_of
from simsplit.fluid.schema import check_dimensions, split_axis
from simsplit.fluid.setup import setup_from_case


def check_fluid_case(case: dict[str, Any]) -> None:
    """Refuse a fluid case that cannot run, with a :class:`CaseError` naming the key."""
    if "domain" not in case:
        raise CaseError("domain: required section is missing (expected domain.shape: [nx, ny])")
    try:
        check_dimensions(case)
    except ValueError as exc:
        raise CaseError(str(exc)) from None
    fluid, bounds = case["fluid"], case["domain"]["boundaries"]
    axis = split_axis(case)  # the lid is the wall at the far end of the split axis
    has_re = fluid.get("reynolds") is not None
    physical = fluid.get("physical") or {}
    has_nu = fluid.get("viscosity") is not None or "viscosity" in physical
    if has_re == has_nu:
        raise CaseError("fluid.reynolds: give exactly one of fluid.reynolds, fluid.viscosity "
                        "and fluid.physical.viscosity")
    if bounds["lid"] and bounds.get(axis, "wall") != "wall":
        raise CaseError(f"domain.boundaries.lid: a lid needs domain.boundaries.{axis}: wall")
    inflow = "inlet" in (bounds.get("x_low"), bounds.get("x_high"))
    open_faces = {bounds.get("x_low"), bounds.get("x_high")} & {"inlet", "outlet"}
    slip = "slip" in (bounds.get("x"), bounds.get("y"), bounds.get("z"), bounds.get("x_low"),
                      bounds.get("x_high"))
    if (case["run"].get("streaming") == "aa"
            and (open_faces or case["domain"].get("bodies") or slip)):
        raise CaseError("run.streaming: aa is not allowed with domain.bodies, inlets, "
                        "outlets or free-slip walls (allowed: two-lattice)")
    _check_records(case)
    if has_re and not bounds["lid"] and not inflow:
        raise CaseError("fluid.reynolds: needs a lid (domain.boundaries.lid: true) or an "
                        "inlet; give fluid.viscosity instead")
    if has_re and bounds["lid"] and fluid["lid_velocity"] <= 0:
        raise CaseError(f"fluid.lid_velocity: {fluid['lid_velocity']!r} is not allowed: "
                        "must be > 0 to define a Reynolds number")
    if fluid["lid_velocity"] > MAX_LID_VELOCITY:
        raise CaseError(f"fluid.lid_velocity: {fluid['lid_velocity']!r} is not allowed: expected "
                        f"<= {MAX_LID_VELOCITY} lattice units (Mach number too high)")
    force = fluid["body_force"]
    if max(abs(f) for f in force) > MAX_BODY_FORCE:
        raise CaseError(f"fluid.body_force: {force!r} is not allowed: expected components of "
                        f"at most {MAX_BODY_FORCE} in magnitude (lattice units per step)")
    ny = case["domain"]["shape"][-1]
    n = case["decomposition"]["subdomains"]
    if ny < n * MIN_SLAB_ROWS:
        raise CaseError(f"decomposition.subdomains: {n} is not allowed: a grid of n{axis} = {ny} "
                        f"{'rows' if axis == 'y' else 'layers'} "
                        f"is too small to split into {n} slabs of at least {MIN_SLAB_ROWS} rows")
    key = ("fluid.physical.viscosity" if "viscosity" in physical
           else "fluid.viscosity" if has_nu else "fluid.reynolds")
    try:
        setup = setup_from_case(case)
    except UnstableSetup as exc:
        raise CaseError(f"{key}: {exc}") from None
    probes = probes_of(case)
    geometry = setup.geometry if setup.dim == 2 or probes else None
    check_probes(probes, geometry.solid if geometry is not None else None)
    for text in setup.advisories:
        warnings.warn(CaseWarning(f"{key}: {text}"), stacklevel=2)
    for body in setup.halfway_bodies:
        warnings.warn(CaseWarning(
            f"{body.key}: a mask of solid cells has no wall distances: its links stay halfway "
            f"under domain.bounce_back: {setup.bounce_back} (values: sdf or grey give sub-cell "
            "walls, docs/bodies.md)"), stacklevel=2)


def _check_records(case: dict[str, Any]) -> None:
    """run.storage neq16 (cell records of moments and deviations) runs two-lattice streaming
    only: refuse aa, naming the key (bodies, open and free-slip faces: the backend's kernel set
    says, simsplit/fluid/block.py)."""
    storage = case["run"].get("storage")
    if storage in ("neq16", "neq16s") and case["run"].get("streaming") == "aa":
        raise CaseError(f"run.storage: {storage} is not allowed with run.streaming: aa "
                        f"({storage} runs two-lattice streaming; allowed here: float16, e4m11, "
                        "float32)")
