"""Where Kob-Andersen's extra time goes against a one-type liquid on one GPU (issue 22):
device time per step phase of each system, and the typed force kernel's table variants.

    python scripts/prof_md_typed.py [--systems liq1m ka1m] [--reps 100] [--define NAME=VALUE]

``--define`` compiles ``kernels/md_lj.cu`` with that macro (for example
``SIMSPLIT_MD_FORCE_UNROLL=2``), so two builds compare in two runs of this script in one call.

Builds each ``scripts/bench_md_gpu.py`` system on the cupy backend (a ``liq*`` system melted
and held first, as the benchmark does), then times on the device: the pair forces, the
integrate launch and one whole rebuild, and prints the mean list row and the share of listed
pairs inside their cutoff.

Tried and dropped (H200, 2026-12-04, 1M atoms): the typed kernel's pair table copied into
shared memory per block, 829 us against 693 us through the read-only cache (the copy reads
through generic loads); its rows padded to 16-byte pairs and loaded as vectors, 64 registers
and a spill in float (56 before).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_md_gpu import SYSTEMS, _case, _liquid  # noqa: E402
from prof_md_kernels import device_ms  # noqa: E402

from simsplit.md import MDSolver  # noqa: E402


def build(system: str) -> MDSolver:
    s = _liquid(system, "cupy", 1) if system.startswith("liq") else \
        MDSolver(_case(system, "cupy", 1), "cupy")
    s.step(50)
    s.synchronize()
    return s


def pairs_inside(s: MDSolver) -> tuple[float, float]:
    """Mean list row and the share of listed pairs within the largest cutoff (host check on a
    sample of rows)."""
    sl = s.slabs[0]
    n = sl.n_own
    cnt = cupy.asnumpy(sl.cnt[:n])
    rows = np.arange(0, n, max(1, n // 4000))
    x = cupy.asnumpy(sl.x)
    nl = cupy.asnumpy(sl.nl[:, rows])
    mask = (1 << sl.type_shift) - 1 if getattr(sl, "type_shift", 0) else -1
    inside = total = 0
    for c, i in enumerate(rows):
        j = nl[: cnt[i], c] & mask
        d = x[j] - x[i]
        d -= s.box * np.round(d / s.box)
        r2 = (d * d).sum(axis=1)
        inside += int((r2 < s.cutoff * s.cutoff).sum())
        total += int(cnt[i])
    return float(cnt.mean()), inside / max(1, total)


def profile(system: str, reps: int) -> None:
    s = build(system)
    sl, k = s.slabs[0], s.kernels
    n = sl.n_own
    row, share = pairs_inside(s)

    def forces() -> None:
        s._compute_forces(s.steps_done)

    def advance() -> None:  # dt = 0: nothing moves, no flag is raised
        k.advance(sl.x, sl.v, sl.f, sl.img, n, True, 0.0, 0.0, s.box, sl.x0, 1e30, 1e30)

    f_dev, a_dev = device_ms(forces, reps), device_ms(advance, reps)
    rebuild = device_ms(s._rebuild, max(10, reps // 10))
    print(f"\n{system}: {n} atoms, {row:.1f} listed neighbours per row, "
          f"{100 * share:.1f} % inside rc {s.cutoff}; forces {1e3 * f_dev:.1f} us "
          f"({n * row / f_dev / 1e6:.2f} Glisted pairs/s), advance {1e3 * a_dev:.1f} us, "
          f"rebuild {1e3 * rebuild:.1f} us")
    phases = rebuild_phases(s, max(10, reps // 10))
    print("  rebuild phases: " + ", ".join(f"{k} {1e3 * v:.1f} us" for k, v in phases.items()))


def rebuild_phases(s: MDSolver, reps: int) -> dict[str, float]:
    """Device ms of each part of a one-slab rebuild, each repeated on the same atoms: the
    cell list, the rows put in cell order, the rows' types and the list build (which waits
    for its overflow word, as in a run)."""
    sl, k = s.slabs[0], s.kernels

    def cells() -> None:
        sl.cells = k.bin_atoms(sl.x, sl.gid, sl.n_local, s.box, s.ncell, sl.cells)

    def order() -> None:
        sl.x, sl.v, sl.img, sl.gid = k.reorder_by_cell(sl.cells, sl.n_own, sl.x, sl.v,
                                                        sl.img, sl.gid)

    def types() -> None:
        s._row_types(sl)

    shift = s._row_types(sl)

    def lists() -> None:
        s._build_neighbors(sl, shift)

    out = {"cells": device_ms(cells, reps), "cell order": device_ms(order, reps)}
    cells()
    out["types"] = device_ms(types, reps)
    out["lists"] = device_ms(lists, reps)
    return out


def _define(macro: str) -> None:
    """Compile the MD module of this process with ``-D<macro>``."""
    import simsplit.backends.cuda_c.d2q9 as d2q9

    base = d2q9.compile_options
    d2q9.compile_options = lambda device: (*base(device), f"-D{macro}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", nargs="+", default=["liq1m", "ka1m"], choices=list(SYSTEMS))
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--define", default=None, help="NAME=VALUE for kernels/md_lj.cu")
    args = ap.parse_args()
    if args.define:
        _define(args.define)
        print(f"compiled with -D{args.define}")
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    print(f"device: {name.decode()}")
    for system in args.systems:
        profile(system, args.reps)


if __name__ == "__main__":
    main()
