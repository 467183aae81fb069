"""The D3Q19 kernels' memory traffic without their arithmetic: a roofline for their access pattern.

Each thread of a copy kernel moves the 19 populations of one cell of a 512^3 padded D3Q19 array
pair, reading the cell's flag byte as the stream-collide kernel does: either straight (every
population from the cell itself: 38 aligned streams) or pulled (population q from x - c_q, the
two-lattice kernel's loads). No collision, no bounce-back. Prints cell updates per second
(MLUPS) and their fraction of the device-to-device copy bandwidth measured in the same run, so
the stream-collide kernel's MLUPS (scripts/tune_d3q19.py) can be read against what its loads
and stores alone reach on the same device.
(scripts/tune_d3q19_fp16.py times the same kernel with fp16 words of 2 and 4 cells and the L2
fetch hint.)
Usage: python scripts/stream_copy_d3q19.py [--n 512] [--steps 100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_d2q9 import copy_bandwidth, timed_launches  # noqa: E402

from simsplit.backends.cuda_c import source  # noqa: E402
from simsplit.backends.layout import field_strides, padded_empty  # noqa: E402

KERNEL = r"""
// Each thread moves the 19 populations of W adjacent x-cells (elements E; the first cell at
// i = W n + 1, aligned to W elements on padded rows) as one word V = W elements per
// population: straight (the cells' own slots) or pulled from x - c_q, where an x-shifted word
// of W > 1 is cut from the two aligned words around it, as lbm::load_pair does for fp16 pairs.
// HINT: loads ask the L2 for 256 B around a miss (ld.global.nc.L2::256B, lbm_common.cuh).
template <typename V> __device__ __forceinline__ V load_word(const V* p, bool hint)
{
    return __ldg(p);
}
template <> __device__ __forceinline__ unsigned short load_word(const unsigned short* p, bool hint)
{
    unsigned short v;
    if (hint) asm("ld.global.nc.L2::256B.u16 %0, [%1];" : "=h"(v) : "l"(p));
    else v = __ldg(p);
    return v;
}
template <> __device__ __forceinline__ unsigned int load_word(const unsigned int* p, bool hint)
{
    unsigned int v;
    if (hint) asm("ld.global.nc.L2::256B.u32 %0, [%1];" : "=r"(v) : "l"(p));
    else v = __ldg(p);
    return v;
}
template <> __device__ __forceinline__ unsigned long long load_word(const unsigned long long* p,
                                                                    bool hint)
{
    unsigned long long v;
    if (hint) asm("ld.global.nc.L2::256B.u64 %0, [%1];" : "=l"(v) : "l"(p));
    else v = __ldg(p);
    return v;
}
template <typename E, typename V, bool PULL, bool HINT>
__global__ void copy_words(const E* __restrict__ src, E* __restrict__ dst,
                           const unsigned char* __restrict__ flags, int nx, unsigned pitch,
                           unsigned layer, unsigned plane)
{
    using L = D3Q19;
    constexpr int W = sizeof(V) / sizeof(E), EB = 8 * sizeof(E), VB = 8 * sizeof(V);
    const int i = W * (blockIdx.x * blockDim.x + threadIdx.x) + 1;
    if (i > nx) return;
    const unsigned cell = (blockIdx.z + 1) * layer + (blockIdx.y + 1) * pitch + unsigned(i);
    const unsigned char own = flags[cell];
    V v[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        unsigned at = unsigned(q) * plane + cell;
        if (PULL) at -= unsigned(L::cz(q)) * layer + unsigned(L::cy(q)) * pitch;
        const V* w = reinterpret_cast<const V*>(src + at);
        if constexpr (W == 1) {
            v[q] = load_word(PULL ? w - L::cx(q) : w, HINT);
        } else {  // lower addresses in the lower bits
            if (!PULL || L::cx(q) == 0)
                v[q] = load_word(w, HINT);
            else if (L::cx(q) > 0)  // the last element of the word before, then this one's
                v[q] = (load_word(w - 1, HINT) >> (VB - EB)) | (load_word(w, HINT) << EB);
            else  // this word's but its first, then the first of the word after
                v[q] = (load_word(w, HINT) >> EB) | (load_word(w + 1, HINT) << (VB - EB));
        }
    }
    if (own == 0xff) return;  // never true: keeps the flag load, as the real kernel needs it
#pragma unroll
    for (int q = 0; q < L::Q; ++q) reinterpret_cast<V*>(dst + unsigned(q) * plane + cell)[0] = v[q];
}
"""
#: element type of the copies (bits: a copy does not read the values)
CTYPES = {"float32": "unsigned int", "float16": "unsigned short"}
DTYPES = {"float32": np.float32, "float16": np.uint16}


def scalar_copy(ctype: str, pull: str) -> str:
    """The one-cell copy of ``ctype`` elements, plain read-only loads."""
    return f"copy_words<{ctype}, {ctype}, {pull}, false>"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    n = args.n
    names = [scalar_copy(c, p) for c in CTYPES.values() for p in ("false", "true")]
    cc = cupy.cuda.Device().compute_capability
    mod = cupy.RawModule(code=source.generated_header() + KERNEL, name_expressions=names,
                         options=("--std=c++17", f"-arch=sm_{cc}"))
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s; grid {n}^3, {args.steps} steps, padded rows")
    print(f"{'storage':>8} {'loads':>8} {'block':>5} {'MLUPS':>8} {'%copy':>6}")
    for storage, per_cell in (("float32", 153), ("float16", 77)):
        f = [padded_empty(cupy, (19, n + 2, n + 2, n + 2), DTYPES[storage]) for _ in range(2)]
        for a in f:
            a[...] = 0
        flags = padded_empty(cupy, (n + 2, n + 2, n + 2), np.uint8)
        flags[...] = 0
        pitch, layer, plane = (np.uint32(v) for v in field_strides(f[0], flags, f[1]))
        for pull in ("false", "true"):
            kern = mod.get_function(scalar_copy(CTYPES[storage], pull))
            for block in (256, 128, 64):
                grid = ((n + block - 1) // block, n, n)

                launch = (f, flags, np.int32(n), pitch, layer, plane)

                def step(k: int, kern=kern, grid=grid, block=block, launch=launch) -> None:
                    a, flg, *rest = launch
                    kern(grid, (block,), (a[k % 2], a[(k + 1) % 2], flg, *rest))

                mlups = n ** 3 * args.steps / timed_launches(step, args.steps, warmup=2) / 1e6
                kind = "pulled" if pull == "true" else "straight"
                print(f"{storage:>8} {kind:>8} {block:>5} {mlups:>8.0f} "
                      f"{100 * mlups * 1e6 * per_cell / bw:>5.1f}%", flush=True)
        f = flags = None


if __name__ == "__main__":
    main()
