"""Device time of each launch of an MD neighbour-list rebuild, one slab against an arena of
several slabs on one GPU (issue 20: where the rebuild's extra time goes).

    python scripts/prof_md_arena.py [--systems hoomd fcc8m] [--subdomains 1 4] [--repeats 5]

Each launch of ``--repeats`` rebuilds runs alone (the device is synchronised before and after
it), so the table is the sum of device-plus-launch times per kernel name, per rebuild; the
total of the unsynchronised rebuild is printed beside it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_md_gpu  # noqa: E402
from bench_split_md import bench_md_gpu as _registered  # noqa: E402,F401  (adds fcc8m)


def profile(name: str, slabs: int, repeats: int) -> None:
    from simsplit.md import MDSolver

    s = MDSolver(bench_md_gpu._case(name, "cupy", slabs), "cupy")
    s.step(20)
    k = s.kernels
    s.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        s._rebuild()
    s.synchronize()
    plain = (time.perf_counter() - t0) / repeats
    times: dict[str, float] = defaultdict(float)
    real = k._launch

    def timed(kname, dtype, threads, *args):
        k.synchronize()
        t = time.perf_counter()
        real(kname, dtype, threads, *args)
        k.synchronize()
        times[kname] += time.perf_counter() - t

    k._launch = timed
    for _ in range(repeats):
        s._rebuild()
    k._launch = real
    total = sum(times.values()) / repeats
    print(f"\n{name} ({s.n_atoms} atoms), {slabs} slab(s): rebuild {1e3 * plain:.3f} ms "
          f"(launches alone: {1e3 * total:.3f} ms)")
    for kname, t in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  {kname:<28} {1e3 * t / repeats:9.3f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", nargs="+", default=["hoomd", "fcc8m"])
    ap.add_argument("--subdomains", nargs="+", type=int, default=[1, 4])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    for name in args.systems:
        for n in args.subdomains:
            profile(name, n, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
