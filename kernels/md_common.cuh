// Constants and per-pair helpers of the Lennard-Jones MD kernels (md_lj.cu).
//
// The SIMSPLIT_MD_* macros are the single source of these numbers: the Python launchers
// (simsplit/backends/cuda_c/md.py, which the Numba CUDA kernels import) read them from here.
// The hash constants are SplitMix64's, as in simsplit/backends/cpu/md.py (a test compares).
#ifndef SIMSPLIT_MD_COMMON_CUH
#define SIMSPLIT_MD_COMMON_CUH

// threads per block of every MD kernel (its __launch_bounds__)
#define SIMSPLIT_MD_BLOCK 128
// largest neighbour-list capacity (rows are written straight to global memory; this only
// bounds the list's size, capacity x rows x 4 bytes, when a runaway density grows it)
#define SIMSPLIT_MD_MAX_NEIGHBORS 1024
// cells per thread at every level of the exclusive scan of the cell counts: each level sums
// chunks of this many values, until at most SIMSPLIT_MD_SCAN_SERIAL sums are left for one
// thread (many short loops: the passes run at memory speed, not one long loop's latency)
#define SIMSPLIT_MD_SCAN_CHUNK 32
#define SIMSPLIT_MD_SCAN_SERIAL 1024
// loads a scan thread keeps in flight (its loops are latency-bound: one thread per chunk)
#define SIMSPLIT_MD_SCAN_UNROLL 16

// exact thermo sums (md_sums.cuh): 32-bit limbs from 2^-1074 up (66 needed), quantities summed
// together (m v^2, energy, virial) and copies of the limbs the atomics are spread over
#define SIMSPLIT_MD_SUM_LIMBS 68
#define SIMSPLIT_MD_SUM_QUANTITIES 3
#define SIMSPLIT_MD_SUM_REPLICAS 64

#define SIMSPLIT_MD_PRAGMA(x) _Pragma(#x)
#define SIMSPLIT_MD_UNROLL(n) SIMSPLIT_MD_PRAGMA(unroll n)

namespace md {

using u64 = unsigned long long;

// 2 pi and 2^-53 bit for bit as the CPU module's 2.0 * np.pi and 1.0 / 2**53
constexpr double TWO_PI = 0x1.921fb54442d18p+2;
constexpr double INV_2_53 = 0x1p-53;
constexpr u64 GOLDEN = 0x9E3779B97F4A7C15ULL;
constexpr u64 MIX1 = 0xBF58476D1CE4E5B9ULL;
constexpr u64 MIX2 = 0x94D049BB133111EBULL;

// Selects, not branches: the loads of several pairs stay in one basic block, so an unrolled
// pair loop can have them all in flight (same values as the CPU's if/else).
__device__ __forceinline__ double min_image(double dx, double length)
{
    const double half = 0.5 * length;
    const double down = dx - length, up = dx + length;
    return dx > half ? down : (dx < -half ? up : dx);
}

// SplitMix64 finaliser: a bijective 64-bit hash with full avalanche.
__device__ __forceinline__ u64 mix64(u64 z)
{
    z = z + GOLDEN;
    z = (z ^ (z >> 30)) * MIX1;
    z = (z ^ (z >> 27)) * MIX2;
    return z ^ (z >> 31);
}

// Top 53 bits of h as a double in the open interval (0, 1).
__device__ __forceinline__ double unit_open(u64 h)
{
    return (double(h >> 11) + 0.5) * INV_2_53;
}

// Three standard normals keyed by (seed, step, atom id): Box-Muller of four hashed uniforms.
__device__ __forceinline__ void counter_normals(u64 seed, u64 step, u64 atom_id, double& g0,
                                                double& g1, double& g2)
{
    u64 key = mix64(seed);
    key = mix64(key ^ step);
    key = mix64(key ^ atom_id);
    const double u1 = unit_open(mix64(key ^ 1ULL));
    const double u2 = unit_open(mix64(key ^ 2ULL));
    const double u3 = unit_open(mix64(key ^ 3ULL));
    const double u4 = unit_open(mix64(key ^ 4ULL));
    const double r1 = sqrt(-2.0 * log(u1));
    const double r2 = sqrt(-2.0 * log(u3));
    g0 = r1 * cos(TWO_PI * u2);
    g1 = r1 * sin(TWO_PI * u2);
    g2 = r2 * cos(TWO_PI * u4);
}

// Periodic cell index for -n <= c < 2n without an integer division.
__device__ __forceinline__ int wrap_cell(int c, int n)
{
    if (c < 0) return c + n;
    if (c >= n) return c - n;
    return c;
}

// Squared distance from coordinate xi (in cell c of width h) to cell c + off.
__device__ __forceinline__ double face_dist2(double xi, int c, int off, double h)
{
    double d;
    if (off > 0) {
        d = double(c + off) * h - xi;
    } else if (off < 0) {
        d = xi - double(c + off + 1) * h;
    } else {
        return 0.0;
    }
    return d > 0.0 ? d * d : 0.0;
}

}  // namespace md

#endif  // SIMSPLIT_MD_COMMON_CUH
