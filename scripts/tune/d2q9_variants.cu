// Experimental variants of the D2Q9 stream-collide kernel for scripts/tune_d2q9_layout.py:
// several cells per thread (CELLS, strided by the block so every access stays coalesced),
// 32- or 64-bit index arithmetic (IDX), and an explicit row pitch and first interior column
// (col0) so that a padded layout with 128-byte aligned interior rows can be timed against the
// production layout (col0 = 1, pitch = nx + 2). Same arithmetic as kernels/d2q9.cu.
#include "simsplit_generated.cuh"
#include "lbm_common.cuh"

template <int CELLS, typename IDX>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
d2q9_variant(const float* __restrict__ f_src, float* __restrict__ f_dst,
             const unsigned char* __restrict__ flags, int nx, int ny, int pitch, int col0,
             float om_p, float om_m, float lid_u, float fx, float fy)
{
    using L = D2Q9;
    using T = float;
    const int j = 1 + blockIdx.y;
    const IDX plane = IDX(pitch) * IDX(ny + 2);
    const int base = blockIdx.x * blockDim.x * CELLS + threadIdx.x;
    T fl[CELLS][L::Q];
    IDX cell[CELLS];
    bool live[CELLS];
    unsigned char near[CELLS];
#pragma unroll
    for (int c = 0; c < CELLS; ++c) {
        const int i = base + c * blockDim.x;  // 0-based interior column
        live[c] = i < nx;
        cell[c] = IDX(j) * pitch + col0 + i;
        near[c] = 0;
        if (!live[c]) continue;
        const unsigned char own = flags[cell[c]];
        live[c] = !(own & FLAG_SOLID);
        near[c] = own & FLAG_NEAR_WALL;
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const IDX src = cell[c] - IDX(L::cy(q)) * pitch - L::cx(q);
            fl[c][q] = __ldg(f_src + q * plane + src);
            near[c] |= __ldg(flags + src) & FLAG_SOLID;
        }
    }
#pragma unroll
    for (int c = 0; c < CELLS; ++c) {
        if (!live[c]) continue;
        if (near[c]) {
#pragma unroll
            for (int q = 0; q < L::Q; ++q) {
                const IDX src = cell[c] - IDX(L::cy(q)) * pitch - L::cx(q);
                const unsigned char kind = __ldg(flags + src);
                if (kind & FLAG_SOLID)
                    fl[c][q] = lbm::bounce_back<L>(q, kind, __ldg(f_src + L::opp(q) * plane + cell[c]), lid_u);
            }
        }
        const T one = T(1.0), half = T(0.5);
        T r = T(0.0), jx = T(0.0), jy = T(0.0);
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            r += fl[c][q];
            jx += T(L::cx(q)) * fl[c][q];
            jy += T(L::cy(q)) * fl[c][q];
        }
        const T inv = one / r;
        const T ux = (jx + half * fx) * inv;
        const T uy = (jy + half * fy) * inv;
        const T usq = T(1.5) * (ux * ux + uy * uy);
        const T uf = ux * fx + uy * fy;
        const T src_p = one - half * om_p;
        const T src_m = one - half * om_m;
        const T feq0 = T(L::w(0)) * r * (one - usq);
        const T s0 = T(L::w(0)) * T(-3.0) * uf;
        f_dst[cell[c]] = fl[c][0] - om_p * (fl[c][0] - feq0) + src_p * s0;
#pragma unroll
        for (int q = 1; q < L::Q; ++q) {
            const int o = L::opp(q);
            if (q > o) continue;
            const T w = T(L::w(q));
            const T cu = T(L::cx(q)) * ux + T(L::cy(q)) * uy;
            const T cf = T(L::cx(q)) * fx + T(L::cy(q)) * fy;
            const T feq_p = w * r * (one + T(4.5) * cu * cu - usq);
            const T feq_m = w * r * T(3.0) * cu;
            const T s_p = w * (T(9.0) * cu * cf - T(3.0) * uf);
            const T s_m = w * T(3.0) * cf;
            const T f_p = half * (fl[c][q] + fl[c][o]);
            const T f_m = half * (fl[c][q] - fl[c][o]);
            const T relax_p = -om_p * (f_p - feq_p) + src_p * s_p;
            const T relax_m = -om_m * (f_m - feq_m) + src_m * s_m;
            f_dst[q * plane + cell[c]] = fl[c][q] + relax_p + relax_m;
            f_dst[o * plane + cell[c]] = fl[c][o] + relax_p - relax_m;
        }
    }
}
