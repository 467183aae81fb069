"""The end-of-run summary printed by the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simsplit.simulation import RunSummary, Simulation


def summary_lines(sim: Simulation, summary: RunSummary) -> list[str]:
    case = sim.case
    lines = [
        f"physics      {case['physics']}",
        f"backend      {sim.context.describe()}",
        f"subdomains   {case['decomposition']['subdomains']}",
        f"steps        {summary.steps} (total {sim.steps_done}); {summary.reason}",
        f"wall time    {summary.wall_seconds:.2f} s",
    ]
    if summary.cell_updates_per_second and case["physics"] == "md":
        lines.append(f"throughput   {summary.cell_updates_per_second:.3g} atom-steps/s")
    elif summary.cell_updates_per_second:
        lines.append(f"throughput   {summary.mlups:.1f} MLUPS")
    if summary.residual is not None:
        lines.append(f"residual     {summary.residual:.3e}")
    if case["physics"] == "fluid" and case["domain"]["boundaries"]["lid"]:
        lines += _ghia_lines(sim)
    if case["output"]["dir"]:
        lines.append(f"output       {case['output']['dir']}")
    return lines


def _ghia_lines(sim: Simulation) -> list[str]:
    from simsplit.fluid.reference import compare_to_ghia

    re = sim.case["fluid"].get("reynolds")
    try:
        cmp = compare_to_ghia(sim.velocity(), int(re))
    except (TypeError, ValueError):
        return []
    return [f"Ghia 1982    max |u - u_Ghia| on x = 0.5: {cmp['max_abs_error']:.4f} (Re = {re})"]


def print_summary(sim: Simulation, summary: RunSummary) -> None:
    print("\n".join(summary_lines(sim, summary)))
