"""Where a step of the 64,000-atom MD benchmark goes on one GPU: device time per kernel
(CUDA events), host time per launch, and the force kernel's loop-unroll variants.

    python scripts/prof_md_kernels.py [--system hoomd] [--reps 200]

Builds the ``scripts/bench_md_gpu.py`` system on the cupy backend, warms it up, then times
on the device: the pair forces, the integrate launch, one whole rebuild (cells, row order,
lists), and the host side of a launch (Python and CuPy argument marshalling, no waiting).
Then compiles ``md_lj_forces`` with ``SIMSPLIT_MD_FORCE_UNROLL`` = 1, 2, 4, 8 and times each
on the same lists (float64 and float32 storage), ``md_lj_forces_lanes`` with 2 and 4 threads
per atom (``SIMSPLIT_MD_FORCE_LANES``), and the production kernel with 32, 64 and 128 threads
per block, checking every variant's forces are the production kernel's bit for bit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cupy
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_md_gpu import SYSTEMS, _case  # noqa: E402

from simsplit.backends.cuda_c import md as cmd  # noqa: E402
from simsplit.backends.cuda_c import source  # noqa: E402
from simsplit.backends.cuda_c.d2q9 import compile_options  # noqa: E402
from simsplit.md import MDSolver  # noqa: E402


def device_ms(fn, reps: int) -> float:
    """Mean device milliseconds of ``fn`` (queued work between two events)."""
    fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / reps


def host_us(fn, reps: int) -> float:
    """Mean host microseconds to queue ``fn`` (device drained before and after)."""
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    cupy.cuda.Device().synchronize()
    return 1e6 * (t1 - t0) / reps


def solver(system: str, precision: str) -> MDSolver:
    case = _case(system, "cupy", 1)
    case["run"]["precision"] = precision
    s = MDSolver(case, "cupy")
    s.step(50)
    s.synchronize()
    return s


def force_args(s: MDSolver) -> tuple:
    sl = s.slabs[0]
    return s.kernels.force_args(sl.x, sl.n_own, sl.nl, sl.cnt, s.box, s.cutoff * s.cutoff,
                                s._eps4, s._eps24, s._sigsq, s._eshift, sl.f, sl.pe, sl.vir)


def profile(system: str, precision: str, reps: int) -> None:
    dev = cupy.cuda.Device()
    s = solver(system, precision)
    sl, k = s.slabs[0], s.kernels
    n = sl.n_own
    ctype = "double" if precision == "float64" else "float"
    mean_row = float(cupy.asnumpy(sl.cnt[:n]).mean())
    regs = ", ".join(f"{e.split('<')[0]} {r}" for e, r in k.registers.items()
                     if e.endswith(f"<{ctype}>") and any(w in e for w in ("forces", "advance",
                                                                         "build")))
    print(f"\n{system} {precision}: {n} atoms, {mean_row:.1f} neighbours per row "
          f"(capacity {sl.nl.shape[0]}), registers: {regs}")

    def forces() -> None:
        s._compute_forces(s.steps_done)

    def advance() -> None:  # dt = 0: nothing moves, no flag is raised
        k.advance(sl.x, sl.v, sl.f, sl.img, n, True, 0.0, 0.0, s.box, sl.x0, 1e30, 1e30)

    def binning() -> None:
        k.bin_atoms(sl.x, sl.gid, sl.n_local, s.box, s.ncell, sl.cells)

    def lists() -> None:  # the launch and its one blocking read of the overflow count
        k.build_neighbors(sl.x, n, s.box, s.ncell, sl.cells, s._offsets, s.reach * s.reach,
                          sl.nl, sl.cnt)

    f_dev, a_dev = device_ms(forces, reps), device_ms(advance, reps)
    rebuild = device_ms(s._rebuild, max(10, reps // 10))
    bin_dev, list_dev = device_ms(binning, max(10, reps // 10)), device_ms(lists, 20)
    bin_host = host_us(binning, max(10, reps // 10))
    f_host, a_host = host_us(forces, reps), host_us(advance, reps)
    t0 = time.perf_counter()
    for _ in range(reps):
        k.displacement_flags()
    flag_us = 1e6 * (time.perf_counter() - t0) / reps
    pairs = n * mean_row
    print(f"  forces   {1e3 * f_dev:8.1f} us device ({pairs / f_dev / 1e6:.2f} Gpairs/s)   "
          f"host per launch {f_host:5.1f} us")
    print(f"  advance  {1e3 * a_dev:8.1f} us device   host per launch {a_host:5.1f} us")
    print(f"  rebuild  {1e3 * rebuild:8.1f} us (device span, host launches included): "
          f"binning {1e3 * bin_dev:.1f} us (6 launches, host {bin_host:.1f} us to queue), "
          f"list build {1e3 * list_dev:.1f} us (with its read)")
    print(f"  flag read {flag_us:6.1f} us (idle device)")

    want = cupy.asnumpy(sl.f[:n]).copy()
    fa = force_args(s)
    grid = ((n + cmd.BLOCK - 1) // cmd.BLOCK,)
    for unroll in (1, 2, 4, 8):
        opts = (*compile_options(dev.id), f"-DSIMSPLIT_MD_FORCE_UNROLL={unroll}")
        name = f"md_lj_forces<{ctype}>"
        mod = cupy.RawModule(code=source.kernel_source(cmd.KERNEL_FILE), options=opts,
                             name_expressions=[name])
        kern = mod.get_function(name)
        sl.f[:n] = 0
        ms = device_ms(lambda kern=kern: kern(grid, (cmd.BLOCK,), fa), reps)
        same = np.array_equal(cupy.asnumpy(sl.f[:n]), want)
        print(f"  unroll {unroll}: {1e3 * ms:8.1f} us  {kern.num_regs} registers  "
              f"bitwise {'same' if same else 'DIFFERENT'}")
    for lanes in (2, 4):  # threads per atom, terms added in list order (same bits)
        opts = (*compile_options(dev.id), f"-DSIMSPLIT_MD_FORCE_LANES={lanes}")
        name = f"md_lj_forces_lanes<{ctype}>"
        mod = cupy.RawModule(code=source.kernel_source(cmd.KERNEL_FILE), options=opts,
                             name_expressions=[name])
        kern = mod.get_function(name)
        blocks = ((n * lanes + cmd.BLOCK - 1) // cmd.BLOCK,)
        sl.f[:n] = 0
        ms = device_ms(lambda kern=kern, g=blocks: kern(g, (cmd.BLOCK,), fa), reps)
        same = np.array_equal(cupy.asnumpy(sl.f[:n]), want)
        print(f"  lanes {lanes}:  {1e3 * ms:8.1f} us  {kern.num_regs} registers  "
              f"bitwise {'same' if same else 'DIFFERENT'}")
    # 64,000 atoms are 500 blocks of 128 on 132 SMs: 3 or 4 per SM, all resident at once,
    # so the SMs with 4 set the time; smaller blocks even the load out
    kern = k._kernels[cmd.kernel_name("md_lj_forces", sl.x.dtype)]
    for block in (32, 64, 128):
        blocks = ((n + block - 1) // block,)
        sl.f[:n] = 0
        ms = device_ms(lambda b=block, g=blocks: kern(g, (b,), fa), reps)
        same = np.array_equal(cupy.asnumpy(sl.f[:n]), want)
        print(f"  block {block:3d}: {1e3 * ms:8.1f} us  bitwise {'same' if same else 'DIFFERENT'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", default="hoomd", choices=list(SYSTEMS))
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    print(f"device: {name.decode()}")
    for precision in ("float64", "float32"):
        profile(args.system, precision, args.reps)


if __name__ == "__main__":
    main()
