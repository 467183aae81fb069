"""How finely neq16 keeps populations next to a body, against float32 storage (issue 25).

Runs the Schäfer-Turek 2D-1 cylinder as ``scripts/fp16_study.py`` does (cases/cylinder2d.yaml,
linear interpolated bounce-back, one slab, CPU): float64 storage to its steady tolerance, then
float32 storage and neq16 for as many steps, and compares, per fluid cell, the largest
rounding a stored population can carry: half a unit of the cell's power of two 2^k on neq16
(every deviation of a cell shares it), half an ulp of the cell's largest population on
float32. Cells are grouped by their distance from the cylinder's surface.

    PYTHONPATH=$PWD python scripts/neq16_wall_rounding.py --diameters 10 20
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from simsplit import Simulation
from simsplit.numerics.neq_storage import exponent_slot

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fp16_study  # noqa: E402

#: distance bands from the cylinder's surface, in cells
BANDS = ((0.0, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (8.0, np.inf))


def rounding_per_cell(d: int, storage: str) -> np.ndarray:
    """The largest rounding of a stored population per cell, ``(ny, nx)``, on ``storage``
    (fp16_study's name: f32 or f32/neq16) after fp16_study's float64 run took the cylinder at
    ``d`` cells to steady state; NaN in solid cells."""
    sim = Simulation(fp16_study.cylinder_case(fp16_study.Storage(storage), d))
    sim.run(output=False)
    (block,) = sim.solver.blocks.values()
    f = block.populations()
    solid = ~np.isfinite(f).all(axis=0) | (np.abs(f).max(axis=0) == 0)
    if storage.endswith("neq16"):
        k = block.raw_populations()[exponent_slot(f.shape[0])].view(np.int16)
        half_unit = np.ldexp(0.5, k.astype(np.int64))
    else:
        half_unit = (np.spacing(np.abs(f)) / 2).max(axis=0).astype(np.float64)
    return np.where(solid, np.nan, half_unit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--diameters", type=int, nargs="+", default=[10, 20], choices=[10, 20],
                    help="cells across the cylinder (the CPU resolutions of docs/storage.md)")
    args = ap.parse_args()
    for d in args.diameters:
        fp16_study.cylinder2d(fp16_study.Storage("f64"), d)  # the steps of the runs below
        neq, f32 = rounding_per_cell(d, "f32/neq16"), rounding_per_cell(d, "f32")
        ny, nx = neq.shape
        x, y = np.meshgrid(np.arange(nx) + 0.5, np.arange(ny) + 0.5)
        # the case's cylinder: centre (0.2, 0.2) of a 2.2 x 0.41 channel, diameter d cells
        wall = np.hypot(x - 0.2 / 2.2 * nx, y - 0.2 / 0.41 * ny) - d / 2
        for lo, hi in BANDS:
            m = (wall > lo) & (wall <= hi) & np.isfinite(neq) & np.isfinite(f32)
            ratio = neq[m] / f32[m]
            print(f"D={d:3d}  {lo:g}-{hi:g} cells from the surface  {m.sum():6d} cells  "
                  f"neq16 median {np.median(neq[m]):.2e} max {neq[m].max():.2e}  "
                  f"float32 median {np.median(f32[m]):.2e} max {f32[m].max():.2e}  "
                  f"neq16/float32 median {np.median(ratio):.3g} max {ratio.max():.3g}",
                  flush=True)


if __name__ == "__main__":
    main()
