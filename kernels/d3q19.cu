// D3Q19 fused pull stream-collide: TRT (BGK when om_m == om_p) with Guo forcing, walls and the
// moving lid (+x) by cell flags, optional periodic x and y. One thread per cell, threads along
// i so every population load and store is coalesced; blockIdx.y is j, blockIdx.z the plane k.
//
// The arithmetic mirrors simsplit/backends/cpu/d3q19.py operation for operation (compiled with
// --fmad=false), so results match the CPU backend's to the last bit as long as no subnormal
// appears. Keep the two in step.
//
// Arrays: f[q][k][j][i] of shape (19, nz + 2, ny + 2, nx + 2); flags (nz + 2, ny + 2, nx + 2);
// rho/ux/uy/uz (nz, ny, nx). Planes [k0, k1) are 1-based interior planes.
#include "simsplit_generated.cuh"
#include "lbm_common.cuh"

namespace {

template <typename T>
__device__ __forceinline__ void relax_pair_3d(int q, const T* fl, T* __restrict__ f_dst,
                                              lbm::index_t plane, lbm::index_t cell, T r, T ux,
                                              T uy, T uz, T usq, T uf, T fx, T fy, T fz, T om_p,
                                              T om_m, T src_p, T src_m)
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
    lbm::store_population(f_dst + q * plane + cell, fl[q] + relax_p + relax_m);
    lbm::store_population(f_dst + o * plane + cell, fl[o] + relax_p - relax_m);
}

// Cell that direction q pulls from, as an offset within a population's array.
__device__ __forceinline__ lbm::index_t source_cell_3d(int q, int i, int j, int k, int nx,
                                                       int ny, bool per_x, bool per_y)
{
    using L = D3Q19;
    const lbm::index_t pitch = nx + 2;
    const lbm::index_t layer = pitch * (ny + 2);
    return (k - L::cz(q)) * layer + lbm::source_column(j, -L::cy(q), ny, per_y) * pitch
           + lbm::source_column(i, -L::cx(q), nx, per_x);
}

}  // namespace

template <typename T, bool STORE_MACRO>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
d3q19_stream_collide(const T* __restrict__ f_src, T* __restrict__ f_dst,
                     const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                     T* __restrict__ ux_out, T* __restrict__ uy_out, T* __restrict__ uz_out,
                     int nx, int ny, int nz, int k0, int k1, T om_p, T om_m, T lid_u, T fx,
                     T fy, T fz, int periodic_x, int periodic_y)
{
    using L = D3Q19;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i > nx || j > ny || k >= k1) return;
    const lbm::index_t pitch = nx + 2;
    const lbm::index_t layer = pitch * (ny + 2);
    const lbm::index_t plane = layer * (nz + 2);
    const lbm::index_t cell = k * layer + j * pitch + i;
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    const bool per_x = periodic_x != 0, per_y = periodic_y != 0;

    // all 19 loads in flight first; only NEAR_WALL cells read their sources' flags
    T fl[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        fl[q] = lbm::load_population(f_src + q * plane
                                     + source_cell_3d(q, i, j, k, nx, ny, per_x, per_y));
    if (own & FLAG_NEAR_WALL) {  // rare and warp-coherent
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::flag_t kind =
                __ldg(flags + source_cell_3d(q, i, j, k, nx, ny, per_x, per_y));
            if (kind & FLAG_SOLID) {
                const T own_opp = __ldg(f_src + L::opp(q) * plane + cell);
                fl[q] = lbm::bounce_back<L>(q, kind, own_opp, lid_u);
            }
        }
    }

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
    lbm::store_population(f_dst + cell, fl[0] - om_p * (fl[0] - feq0) + src_p * s0);
#pragma unroll
    for (int q = 1; q < L::Q; ++q) {
        if (q < L::opp(q)) {
            relax_pair_3d(q, fl, f_dst, plane, cell, r, ux, uy, uz, usq, uf, fx, fy, fz, om_p,
                          om_m, src_p, src_m);
        }
    }
}
