"""The end-of-run summary printed by the command line."""

from __future__ import annotations

from simsplit.run.operations import RunningSimulation, RunSummary
from simsplit.run.probes import probe_lines


def summary_lines(sim: RunningSimulation, summary: RunSummary) -> list[str]:
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
        rate = summary.mlups  # tiny grids (the CUDA simulator) run far below 0.1 MLUPS
        lines.append(f"throughput   {rate:.1f} MLUPS" if rate >= 1 else
                     f"throughput   {rate:.2g} MLUPS")
    if getattr(sim.solver, "steps_per_sweep", 1) > 1:
        lines.append("sweeps       two time steps per kernel sweep (run.temporal_blocking)")
    if summary.residual is not None:
        lines.append(f"residual     {summary.residual:.3e}")
    if "balance" in summary.extra:
        lines += balance_lines(summary.extra["balance"])
    timing = summary.extra.get("timing")
    if timing is not None and case["run"].get("timing"):  # host timers alone miss graph replays
        lines.append(f"timing       {timing}")
    lines += inflow_lines(sim)
    lines += body_lines(summary.extra.get("bodies"))
    physical = getattr(getattr(sim.solver, "setup", None), "physical", None)
    lines += probe_lines(summary.extra.get("probes"),
                         None if physical is None else f"{physical.length_unit}/s")
    if case["physics"] == "fluid" and case["domain"]["boundaries"]["lid"]:
        lines += _ghia_lines(sim) if len(case["domain"]["shape"]) == 2 else _cube_lines(sim)
    elif case["physics"] == "fluid":
        lines += _poiseuille_lines(sim)
    if case["output"]["dir"]:
        lines.append(f"output       {case['output']['dir']}")
    return lines


def inflow_lines(sim: RunningSimulation) -> list[str]:
    """With an inlet: the lattice values the case turned into, the Mach and Reynolds numbers
    and, with fluid.physical, dx, dt and the physical values."""
    from simsplit.fluid.setup import inflow_report

    setup = getattr(sim.solver, "setup", None)
    report = inflow_report(setup) if getattr(setup, "inlet", None) is not None else None
    if report is None:
        return []
    lat, length = report["lattice"], report["reference_length"]
    lines = [f"lattice      tau {lat['tau']:.4g}, nu {lat['viscosity']:.4g}; inflow max "
             f"{lat['inflow_velocity']:.4g} (Mach {report['mach']:.3f}), mean "
             f"{lat['inflow_mean_velocity']:.4g}; Re = U_mean L / nu = "
             f"{report['reynolds']:.4g} (L {length['cells']:.4g} cells, {length['of']})"]
    phys = report["physical"]
    if phys is not None:
        unit = phys["length_unit"]
        lines.append(f"physical     dx {phys['dx']:.6g} {unit}, dt {phys['dt']:.6g} s; inflow "
                     f"max {phys['inflow_velocity']:.6g} {unit}/s, mean "
                     f"{phys['inflow_mean_velocity']:.6g} {unit}/s; nu "
                     f"{phys['viscosity']:.6g} {unit}^2/s; L {length['physical']:.6g} {unit}; "
                     f"{sim.steps_done} steps = {sim.steps_done * phys['dt']:.6g} s")
    return lines


def body_lines(bodies: dict | None) -> list[str]:
    """Per body: drag and lift coefficients (at the last measurement) and the force."""
    lines = []
    for name, b in (bodies or {}).items():
        force = ", ".join(f"{v:.6g}" if v is not None else "nan" for v in b["force"])
        if b["drag_coefficient"] is None:
            coeff = "no coefficients (no inlet gives a reference velocity)"
        else:
            ref = (f"L {b['reference_length_cells']:.4g} cells" if "reference_area_cells" not in b
                   else f"A {b['reference_area_cells']:.4g} cells^2")
            coeff = (f"Cd {b['drag_coefficient']:.5f}  Cl {b['lift_coefficient']:.5f} "
                     f"(U {b['reference_velocity']:.4g}, {ref})")
        phys = b.get("force_physical")
        si = "" if phys is None else " = (" + ", ".join(
            f"{v:.6g}" if v is not None else "nan" for v in phys) + ") physical (SI: N/m in 2D, N)"
        lines.append(f"body         {name}: {coeff}; force ({force}) lattice units{si} at step "
                     f"{b['step']}")
        if b.get("walls", "").startswith("halfway ("):  # interpolation asked for, not possible
            lines.append(f"             walls {b['walls']}: values: sdf or grey give sub-cell "
                         "walls (docs/bodies.md)")
        if b.get("strouhal") is not None:
            lines.append(f"             shedding over {b['periods']} periods: Strouhal "
                         f"{b['strouhal']:.4f}, Cd max {b['drag_coefficient_max']:.4f} (mean "
                         f"{b['drag_coefficient_mean']:.4f}), Cl max "
                         f"{b['lift_coefficient_max']:.4f}")
    return lines


def _ratio(values: list[float], fmt: str) -> str:
    return ":".join(format(v, fmt) for v in values)


def balance_lines(report: dict) -> list[str]:
    """The load-balance decision (see :mod:`simsplit.decomp.balance`) in a few lines."""
    verb = "re-split" if report["applied"] else "kept"
    if report.get("note"):
        verb += f" ({report['note']})"
    lines = [
        f"balance      {verb} at step {report['step']}: layers "
        f"{_ratio(report['layers_before'], 'd')} -> {_ratio(report['layers'], 'd')} "
        f"(weights {_ratio(report['weights'], '.3f')}; {report['rebalances']} re-split(s))",
        f"             slab speeds {_ratio(report['speeds_mlups'], '.2f')} MLUPS over "
        f"{report['probe_steps']} steps; predicted gain x{report['predicted_gain']:.2f}",
    ]
    measured = report.get("measured") or {}
    if "gain" in measured:  # the measuring window ended before the run did
        lines.append(f"             measured {measured['mlups_before']:.2f} -> "
                     f"{measured['mlups_after']:.2f} MLUPS (x{measured['gain']:.2f}; ideal "
                     f"{report['ideal_mlups']:.2f}); re-split took "
                     f"{measured.get('resplit_seconds', 0.0):.2f} s")
    return lines


def _ghia_lines(sim: RunningSimulation) -> list[str]:
    from simsplit.fluid.reference import compare_to_ghia

    re = sim.case["fluid"].get("reynolds")
    try:
        cmp = compare_to_ghia(sim.velocity(), int(re))
    except (TypeError, ValueError):
        return []
    return [f"Ghia 1982    max |u - u_Ghia| on x = 0.5: {cmp['max_abs_error']:.4f} (Re = {re})"]


def _cube_lines(sim: RunningSimulation) -> list[str]:
    """The 3D cavity against Albensoeder & Kuhlmann (2005), when the plot overlays them."""
    from simsplit.fluid.reference import CUBE_CITATION, cavity_reference, compare_to_cube

    re = sim.case["fluid"].get("reynolds")
    ref = cavity_reference(sim.solver.setup, re)
    if ref is None or ref.get("citation") != CUBE_CITATION:  # none, or Ghia's for a 2D flow
        return []
    cmp = compare_to_cube(sim.velocity(), re)
    return [f"A&K 2005     max |u_x - ref| on x = y = 0.5: {cmp['vertical']['max_abs_error']:.4f}, "
            f"|u_z - ref| on y = z = 0.5: {cmp['horizontal']['max_abs_error']:.4f} "
            f"(Re = {re})"]


def _poiseuille_lines(sim: RunningSimulation) -> list[str]:
    from simsplit.fluid.poiseuille import channel_of, compare_to_poiseuille

    channel = channel_of(sim.case)
    if channel is None:
        return []
    cmp = compare_to_poiseuille(sim.velocity(), channel)
    flow, wall = channel.names
    return [f"Poiseuille   u_{flow}({wall}) against g / (2 nu) {wall} (H - {wall}): L2 error "
            f"{cmp['l2_error']:.2e}; u_max {cmp['u_max_measured']:.6f} (analytic "
            f"{cmp['u_max']:.6f}, lattice units)"]


def print_summary(sim: RunningSimulation, summary: RunSummary) -> None:
    print("\n".join(summary_lines(sim, summary)))
