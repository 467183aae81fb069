"""Compare the final state of two simsplit output directories bit for bit.

    python scripts/compare_outputs.py OUT_A OUT_B

Fluid runs: the newest snapshot of ``fields.h5`` (every field); MD runs: the last frame of the
H5MD trajectory (positions, velocities where written). Prints one line per array and exits 1
if any differs (with the largest absolute difference).
"""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import numpy as np


def final_arrays(directory: Path) -> dict[str, np.ndarray]:
    """Name -> array of the last written state in an output directory."""
    fields = directory / "fields.h5"
    if fields.exists():
        with h5py.File(fields) as h5:
            last = max(h5["snapshots"].values(), key=lambda g: int(g.attrs["step"]))
            out = {f"step {int(last.attrs['step'])} {k}": v[...] for k, v in last.items()}
        return out
    trajectories = sorted(directory.glob("*.h5md"))
    if not trajectories:
        raise SystemExit(f"{directory}: neither fields.h5 nor an .h5md trajectory")
    out = {}
    with h5py.File(trajectories[-1]) as h5:
        for name, group in h5["particles/trajectory"].items():
            if isinstance(group, h5py.Group) and "value" in group:
                step = int(group["step"][-1])
                out[f"step {step} {name}"] = group["value"][-1]
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a, b = (final_arrays(Path(p)) for p in argv)
    if a.keys() != b.keys():
        print(f"different contents: {sorted(a)} vs {sorted(b)}")
        return 1
    same = True
    for name in sorted(a):
        x, y = a[name], b[name]
        if x.shape == y.shape and np.array_equal(x, y):
            print(f"{name}: bitwise identical {x.shape}")
            continue
        same = False
        diff = (np.abs(x.astype(np.float64) - y.astype(np.float64)).max()
                if x.shape == y.shape else "shapes differ")
        print(f"{name}: DIFFERS (max |a - b| {diff})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
