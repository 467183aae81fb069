// D3Q19 fused pull stream-collide: TRT (BGK when om_m == om_p) with Guo forcing, walls and the
// moving lid (+x) by cell flags, optional periodic x and y. One thread per cell, threads along
// i so every population load and store is coalesced; blockIdx.y is j, blockIdx.z the plane k.
//
// The arithmetic mirrors simsplit/backends/cpu/d3q19.py operation for operation (compiled with
// --fmad=false), so results match the CPU backend's to the last bit as long as no subnormal
// appears. Keep the two in step.
//
// Arrays: f[q][k][j][i] of logical shape (19, nz + 2, ny + 2, nx + 2) with strides (in
// elements) `plane`, `layer` and `pitch` (padded rows on GPUs: simsplit/backends/layout.py);
// flags (nz + 2, ny + 2, nx + 2) with the same layer and row strides, so one cell index serves
// both; rho/ux/uy/uz (nz, ny, nx), packed. Planes [k0, k1) are 1-based interior planes.
//
// d3q19_stream_collide is the two-lattice pull scheme (f_src -> f_dst);
// d3q19_stream_collide_aa the in-place AA scheme on one array (docs/d3q19.md): an even step
// reads the cell's own slots and writes post-collision q into its own slot opp q, an odd step
// reads slot opp q of x - c_q and writes slot q of x + c_q (solid and ghost cells included,
// where the next even step's bounce-back reads it). Both collide with collide_3d, so they give
// the same bits.
//
// T is the arithmetic type (and that of rho/u), S the population storage type: S == T stores
// f itself; a narrower S (float under double, lbm::half16) stores the shifted encoding of
// lbm_common.cuh, decoded on load and encoded on store, with all arithmetic in T. The fp16
// conversions round as the CPU's (IEEE, nearest even, subnormals kept), so they keep the match.
#include "simsplit_generated.cuh"
#include "lbm_common.cuh"

namespace {

// TRT relaxation of the pair (q, opp q); out(q, value) stores a post-collision population
// (at once: the kernels keep no post-collision array, which would cost registers).
template <typename T, typename Out>
__device__ __forceinline__ void relax_pair_3d(int q, const T* fl, T r, T ux, T uy, T uz, T usq,
                                              T uf, T fx, T fy, T fz, T om_p, T om_m, T src_p,
                                              T src_m, Out& out)
{
    using L = D3Q19;
    const int o = L::opp(q);
    const T w = T(L::w(q));
    const T cu = T(L::cx(q)) * ux + T(L::cy(q)) * uy + T(L::cz(q)) * uz;
    const T cf = T(L::cx(q)) * fx + T(L::cy(q)) * fy + T(L::cz(q)) * fz;
    const T feq_p = w * r * (T(1.0) + T(4.5) * cu * cu - usq);
    const T feq_m = w * r * T(3.0) * cu;
    const T s_p = w * (T(9.0) * cu * cf - T(3.0) * uf);
    const T s_m = w * T(3.0) * cf;
    const T f_p = T(0.5) * (fl[q] + fl[o]);
    const T f_m = T(0.5) * (fl[q] - fl[o]);
    const T relax_p = -om_p * (f_p - feq_p) + src_p * s_p;
    const T relax_m = -om_m * (f_m - feq_m) + src_m * s_m;
    out(q, fl[q] + relax_p + relax_m);
    out(o, fl[o] + relax_p - relax_m);
}

// Collide the pulled populations fl, handing each post-collision value to out(q, value);
// macroscopic fields of 1-based cell (i, j, k) stored if STORE_MACRO.
template <typename T, bool STORE_MACRO, typename Out>
__device__ __forceinline__ void collide_3d(const T* fl, int i, int j, int k, int nx, int ny,
                                           T* __restrict__ rho_out, T* __restrict__ ux_out,
                                           T* __restrict__ uy_out, T* __restrict__ uz_out,
                                           T om_p, T om_m, T fx, T fy, T fz, Out& out)
{
    using L = D3Q19;
    const T one = T(1.0), half = T(0.5);
    T r = T(0.0), jx = T(0.0), jy = T(0.0), jz = T(0.0);
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        r += fl[q];
        jx += T(L::cx(q)) * fl[q];
        jy += T(L::cy(q)) * fl[q];
        jz += T(L::cz(q)) * fl[q];
    }
    const T inv = one / r;
    const T ux = (jx + half * fx) * inv;
    const T uy = (jy + half * fy) * inv;
    const T uz = (jz + half * fz) * inv;
    const T usq = T(1.5) * (ux * ux + uy * uy + uz * uz);
    const T uf = ux * fx + uy * fy + uz * fz;
    if (STORE_MACRO) {
        const lbm::index_t m = (lbm::index_t(k - 1) * ny + (j - 1)) * nx + (i - 1);
        rho_out[m] = r;
        ux_out[m] = ux;
        uy_out[m] = uy;
        uz_out[m] = uz;
    }
    const T src_p = one - half * om_p;  // Guo source weights of the symmetric/antisymmetric parts
    const T src_m = one - half * om_m;
    const T feq0 = T(L::w(0)) * r * (one - usq);
    const T s0 = T(L::w(0)) * T(-3.0) * uf;
    out(0, fl[0] - om_p * (fl[0] - feq0) + src_p * s0);
#pragma unroll
    for (int q = 1; q < L::Q; ++q) {
        if (q < L::opp(q)) {
            relax_pair_3d(q, fl, r, ux, uy, uz, usq, uf, fx, fy, fz, om_p, om_m, src_p, src_m,
                          out);
        }
    }
}

// Cell that direction q pulls from (sign -1) or pushes to (sign +1), as an offset within a
// population's array; periodic x and y wrap, z never does (ghost planes).
__device__ __forceinline__ lbm::index_t neighbour_cell_3d(int q, int sign, int i, int j, int k,
                                                          int nx, int ny, lbm::index_t pitch,
                                                          lbm::index_t layer, bool per_x,
                                                          bool per_y)
{
    using L = D3Q19;
    return (k + sign * L::cz(q)) * layer
           + lbm::source_column(j, sign * L::cy(q), ny, per_y) * pitch
           + lbm::source_column(i, sign * L::cx(q), nx, per_x);
}

__device__ __forceinline__ lbm::index_t source_cell_3d(int q, int i, int j, int k, int nx,
                                                       int ny, lbm::index_t pitch,
                                                       lbm::index_t layer, bool per_x, bool per_y)
{
    return neighbour_cell_3d(q, -1, i, j, k, nx, ny, pitch, layer, per_x, per_y);
}

}  // namespace

// Resident blocks per SM asked of the register allocator for float arithmetic: at one block
// NVRTC gave the kernel 84 registers (37.5 % occupancy at 256 threads) and it reached 62 % of
// the copy bandwidth at 512^3; five blocks cap it at 48 registers without spills: 86 % in
// float32, 51 % in fp16 (H200, scripts/tune_d3q19.py, docs/tune_d3q19_h200_2026-12-02.log).
// Double arithmetic, the variant that also stores rho and u (the last step of a chunk) and
// the in-place kernel would spill at 48 registers: they keep one block.
#ifndef SIMSPLIT_D3Q19_MIN_BLOCKS
#define SIMSPLIT_D3Q19_MIN_BLOCKS (1280 / SIMSPLIT_BLOCK_X)
#endif
#define SIMSPLIT_D3Q19_MIN_BLOCKS_FOR(T, STORE_MACRO) \
    (sizeof(T) == 4 && !(STORE_MACRO) ? SIMSPLIT_D3Q19_MIN_BLOCKS : 1)

template <typename T, typename S, bool STORE_MACRO>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X, SIMSPLIT_D3Q19_MIN_BLOCKS_FOR(T, STORE_MACRO))
d3q19_stream_collide(const S* __restrict__ f_src, S* __restrict__ f_dst,
                     const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                     T* __restrict__ ux_out, T* __restrict__ uy_out, T* __restrict__ uz_out,
                     int nx, int ny, int nz, lbm::index_t pitch, lbm::index_t layer,
                     lbm::index_t plane, int k0, int k1, T om_p, T om_m, T lid_u, T fx, T fy,
                     T fz, int periodic_x, int periodic_y)
{
    using L = D3Q19;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i > nx || j > ny || k >= k1) return;
    const lbm::index_t cell = k * layer + j * pitch + i;
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    const bool per_x = periodic_x != 0, per_y = periodic_y != 0;

    // all 19 loads in flight first; only NEAR_WALL cells read their sources' flags (or, tuning
    // variant, every cell ORs its sources' solid bits in, as the D2Q9 kernel does)
    T fl[L::Q];
    lbm::flag_t near_wall = own & FLAG_NEAR_WALL;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const lbm::index_t src = source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y);
        fl[q] = lbm::load_population<L, T>(f_src + q * plane + src, q);
#ifdef SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS
        near_wall |= __ldg(flags + src) & FLAG_SOLID;
#endif
    }
    if (near_wall) {  // rare and warp-coherent
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::flag_t kind =
                __ldg(flags
                      + source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y));
            if (kind & FLAG_SOLID) {
                const T own_opp = lbm::decode<L, T>(
                    lbm::read_only(f_src + L::opp(q) * plane + cell), L::opp(q));
                fl[q] = lbm::bounce_back<L>(q, kind, own_opp, lid_u);
            }
        }
    }
    auto out = [&](int q, T v) { lbm::store_population<L>(f_dst + q * plane + cell, q, v); };
    collide_3d<T, STORE_MACRO>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out, om_p, om_m,
                               fx, fy, fz, out);
}

// In-place (AA) step of parity `odd` on the one array f. Every slot a thread reads is one only
// it writes, and after reading it, so there are no races; plain loads, not __ldg: f is written
// during the kernel.
template <typename T, typename S, bool STORE_MACRO>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
d3q19_stream_collide_aa(S* __restrict__ f, const lbm::flag_t* __restrict__ flags,
                        T* __restrict__ rho_out, T* __restrict__ ux_out, T* __restrict__ uy_out,
                        T* __restrict__ uz_out, int nx, int ny, int nz, lbm::index_t pitch,
                        lbm::index_t layer, lbm::index_t plane, int k0, int k1, T om_p,
                        T om_m, T lid_u, T fx, T fy, T fz, int periodic_x, int periodic_y,
                        int odd)
{
    using L = D3Q19;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i > nx || j > ny || k >= k1) return;
    const lbm::index_t cell = k * layer + j * pitch + i;
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    const bool per_x = periodic_x != 0, per_y = periodic_y != 0;

    T fl[L::Q];
    if (odd) {  // streamed: x - c_q's post-collision q, in its slot opp q
#pragma unroll
        for (int q = 0; q < L::Q; ++q)
            fl[q] = lbm::decode<L, T>(
                f[L::opp(q) * plane
                  + source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y)],
                L::opp(q));
    } else {  // the previous odd step streamed q into the own slot q
#pragma unroll
        for (int q = 0; q < L::Q; ++q) fl[q] = lbm::decode<L, T>(f[q * plane + cell], q);
    }
    if (own & FLAG_NEAR_WALL) {
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::index_t src =
                source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y);
            const lbm::flag_t kind = __ldg(flags + src);
            if (kind & FLAG_SOLID) {
                // own post-collision opp q: the own slot q after an even step; after an odd
                // step it went, raw, into the solid source's slot opp q
                const T own_opp = odd ? lbm::decode<L, T>(f[q * plane + cell], q)
                                      : lbm::decode<L, T>(f[L::opp(q) * plane + src], L::opp(q));
                fl[q] = lbm::bounce_back<L>(q, kind, own_opp, lid_u);
            }
        }
    }
    // every load is done: the stores may go as the values come
    if (odd) {
        auto out = [&](int q, T v) {
            lbm::store_population<L>(
                f + q * plane
                    + neighbour_cell_3d(q, 1, i, j, k, nx, ny, pitch, layer, per_x, per_y),
                q, v);
        };
        collide_3d<T, STORE_MACRO>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out, om_p,
                                   om_m, fx, fy, fz, out);
    } else {
        auto out = [&](int q, T v) {
            lbm::store_population<L>(f + L::opp(q) * plane + cell, L::opp(q), v);
        };
        collide_3d<T, STORE_MACRO>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out, om_p,
                                   om_m, fx, fy, fz, out);
    }
}
