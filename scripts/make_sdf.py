"""Write the signed distance field the project's SDF mask case uses (no imaging library).

    python scripts/make_sdf.py            # cases/cylinder2d_sdf.npy

``cylinder2d_sdf.npy``: the exact signed distance (cells, float32, negative inside) of the
Schäfer-Turek 2D-1 cylinder at D = 10 cells, centre (20, 20) cells, sampled at the cell centres
of the 24 x 24 cells from cell (8, 8) (``origin: [8, 8]`` in cases/cylinder2d_sdf.yaml),
indexed [j, i] with row 0 the lowest. 2.4 kB: the case ships the file, this script remakes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CASES = Path(__file__).resolve().parents[1] / "cases"
ORIGIN, SIZE, CENTRE, RADIUS = (8, 8), 24, (20.0, 20.0), 5.0


def cylinder_sdf() -> np.ndarray:
    """The cylinder's signed distance over the mask's cells, [j, i], float32."""
    x = np.arange(SIZE) + ORIGIN[0] + 0.5
    y = np.arange(SIZE) + ORIGIN[1] + 0.5
    phi = np.hypot(x[None, :] - CENTRE[0], y[:, None] - CENTRE[1]) - RADIUS
    return phi.astype(np.float32)


def main() -> None:
    path = CASES / "cylinder2d_sdf.npy"
    np.save(path, cylinder_sdf())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
