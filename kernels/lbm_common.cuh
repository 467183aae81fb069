// Index math, boundary helpers and halo kernels shared by every lattice (D2Q9, D3Q19, ...).
//
// Layout: populations are structure-of-arrays with one ghost layer all round, population q
// occupying a contiguous "plane" of `plane` elements, the contiguous axis i fastest. A halo
// "layer" is the set of cells at one index of the split (slowest) axis: a row in 2D, an
// xy-plane in 3D; it is contiguous within each population.
//
// Offsets are 64-bit: a 512^3 D3Q19 field holds 2.6e9 populations, beyond int32.
//
// The lattice struct L (D2Q9, ...) and the FLAG_* codes come from the generated header.
#ifndef SIMSPLIT_LBM_COMMON_CUH
#define SIMSPLIT_LBM_COMMON_CUH

#include "simsplit_generated.cuh"

namespace lbm {

using index_t = long long;
using flag_t = unsigned char;

static_assert(FLAG_FLUID == 0, "fluid cells must have flag 0");
static_assert((FLAG_SOLID & FLAG_NEAR_WALL) == 0, "NEAR_WALL must not overlap the solid kinds");

// Source column of a pull from column i (1-based interior) along dx in {-1, 0, 1}; with
// periodic x the ghost columns are never read, the opposite interior column is.
__device__ __forceinline__ int source_column(int i, int dx, int nx, bool periodic)
{
    const int s = i + dx;
    if (!periodic) return s;
    return s < 1 ? nx : (s > nx ? 1 : s);
}

// Population traffic: every value is read once and written once per step, so the variants
// that tell the caches so (evict-first loads/stores) are selectable for tuning.
template <typename T>
__device__ __forceinline__ T load_population(const T* p)
{
#ifdef SIMSPLIT_STREAMING_LOADS
    return __ldcs(p);
#else
    return __ldg(p);
#endif
}

template <typename T>
__device__ __forceinline__ void store_population(T* p, T v)
{
#ifdef SIMSPLIT_STREAMING_STORES
    __stcs(p, v);
#else
    *p = v;
#endif
}

// What a solid pull source sends back: halfway bounce-back of the cell's own opposite
// population, plus the momentum of the lid (moving along +x at lid_u). The product is written
// exactly as the CPU kernel writes it, T(6 w c_x) * u, so both round identically.
template <typename L, typename T>
__device__ __forceinline__ T bounce_back(int q, flag_t kind, T own_opposite, T lid_u)
{
    T v = own_opposite;
    if (kind == FLAG_LID) v += T(6.0 * L::w(q) * L::cx(q)) * lid_u;
    return v;
}

}  // namespace lbm

// Halo pack: the N_CROSS populations of set `set` (0 = crossing upwards, 1 = downwards) in
// layer `layer` of f -> buf[k][n], n < layer_size. One thread per element, blockIdx.y = k.
template <typename L, typename T>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
lbm_pack(const T* __restrict__ f, T* __restrict__ buf, lbm::index_t plane, int layer,
         int layer_size, int set)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= layer_size) return;
    const int k = blockIdx.y;
    const lbm::index_t src = L::halo(set, k) * plane + lbm::index_t(layer) * layer_size + n;
    buf[lbm::index_t(k) * layer_size + n] = f[src];
}

// Halo unpack: the inverse of lbm_pack, into (usually ghost) layer `layer`.
template <typename L, typename T>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
lbm_unpack(const T* __restrict__ buf, T* __restrict__ f, lbm::index_t plane, int layer,
           int layer_size, int set)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= layer_size) return;
    const int k = blockIdx.y;
    const lbm::index_t dst = L::halo(set, k) * plane + lbm::index_t(layer) * layer_size + n;
    f[dst] = buf[lbm::index_t(k) * layer_size + n];
}

#endif  // SIMSPLIT_LBM_COMMON_CUH
