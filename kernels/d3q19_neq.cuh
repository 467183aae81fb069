// D3Q19 on run.storage neq16 (simsplit/numerics/neq_storage.py), included at the end of
// d3q19.cu (it uses that file's collide_3d, source_cell_3d and bounce-back).
//
// A cell's record is NEQ_SLOTS unsigned shorts, each in its own plane of the array (populations'
// layout, `plane` apart): the int16 significands n_q of d_q = f*_q - f^eq_q(rho, u), the cell's
// power of two k, binary16 bits of (rho - 1) * SIMSPLIT_NEQ_RHO_SCALE, and u in float32 bits
// (low half, high half per component). The pull kernel rebuilds each pulled population from its
// source cell's record, f*_q = n_q 2^k + f^eq_q(rho, u), collides as d3q19_stream_collide does,
// and writes the cell's record. Every operation is simsplit/backends/cpu/d3q19_neq.py's, in
// float32 (compiled with --fmad=false): the moments of f* summed from q = 0 up (zero products
// included), the equilibrium ((1 + 3 cu) + 4.5 cu cu) - 1.5 usq, then (w rho) poly, k the least
// with every |d_q| / 2^k rounding below 2^SIMSPLIT_NEQ_BITS. ldexpf, frexpf and rintf are exact
// here (power-of-two scaling of normal numbers, ties to even), so the float64 steps of the CPU
// kernel give the same bits. Walls, the lid, forcing, periodic x and y: the case checks refuse
// the rest on this storage.
#ifdef SIMSPLIT_HOST_EMULATION
#include <math.h>
#endif

namespace neq {

using rec = unsigned short;
constexpr int K = D3Q19::Q;          // slot of the cell's power of two
constexpr int RHO = D3Q19::Q + 1;    // slot of rho - 1 (binary16 bits)
constexpr int U = D3Q19::Q + 2;      // first slot of u (x low, x high, y low, ...)

template <typename P>
__device__ __forceinline__ rec slot(const rec* __restrict__ r, int s, P plane,
                                    lbm::offset_t cell)
{
    return __ldg(r + (P(s) * plane + P(cell)));
}

__device__ __forceinline__ float rho_of(rec bits)
{
    return 1.0f + lbm::half_to_float(bits) * float(1.0 / SIMSPLIT_NEQ_RHO_SCALE);
}

template <typename P>
__device__ __forceinline__ float velocity(const rec* __restrict__ r, int axis, P plane,
                                          lbm::offset_t cell)
{
    const unsigned int lo = slot(r, U + 2 * axis, plane, cell);
    const unsigned int hi = slot(r, U + 2 * axis + 1, plane, cell);
    return lbm::bits_float(lo | (hi << 16));
}

__device__ __forceinline__ float square_sum(float ux, float uy, float uz)
{
    float s = 0.0f;
    s += ux * ux;
    s += uy * uy;
    s += uz * uz;
    return s;
}

__device__ __forceinline__ float equilibrium(int q, float rho, float ux, float uy, float uz,
                                             float usq)
{
    using L = D3Q19;
    float cu = 0.0f;
    cu += float(L::cx(q)) * ux;
    cu += float(L::cy(q)) * uy;
    cu += float(L::cz(q)) * uz;
    float poly = 1.0f + 3.0f * cu;
    poly = (poly + 4.5f * cu * cu) - 1.5f * usq;
    return float(L::w(q)) * rho * poly;
}

// Population q of the cell at `cell`, rebuilt from its record.
template <typename P>
__device__ __forceinline__ float pull(const rec* __restrict__ r, int q, P plane,
                                      lbm::offset_t cell)
{
    const float rho = rho_of(slot(r, RHO, plane, cell));
    const float ux = velocity(r, 0, plane, cell), uy = velocity(r, 1, plane, cell),
                uz = velocity(r, 2, plane, cell);
    const int k = short(slot(r, K, plane, cell));
    const int n = short(slot(r, q, plane, cell));
    return ldexpf(float(n), k) + equilibrium(q, rho, ux, uy, uz, square_sum(ux, uy, uz));
}

// The record of post-collision populations `post` into the cell at `cell`.
template <typename P>
__device__ __forceinline__ void store(rec* __restrict__ r, const float* post, P plane,
                                      lbm::offset_t cell)
{
    using L = D3Q19;
    float m = 0.0f, jx = 0.0f, jy = 0.0f, jz = 0.0f;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const float v = post[q];
        m += v;
        jx += float(L::cx(q)) * v;
        jy += float(L::cy(q)) * v;
        jz += float(L::cz(q)) * v;
    }
    const float inv = 1.0f / m;
    const float ux = jx * inv, uy = jy * inv, uz = jz * inv;
    const rec rho_bits = lbm::half_from((m - 1.0f) * float(SIMSPLIT_NEQ_RHO_SCALE));
    const float rho = rho_of(rho_bits);
    const float usq = square_sum(ux, uy, uz);
    float d[L::Q];
    float top = 0.0f;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        d[q] = post[q] - equilibrium(q, rho, ux, uy, uz, usq);
        const float a = fabsf(d[q]);
        if (a > top) top = a;
    }
    int e = 0;
    if (top > 0.0f) {
        int ex;
        frexpf(top, &ex);
        e = ex - SIMSPLIT_NEQ_BITS;
        if (rintf(ldexpf(top, -e)) >= float(1 << SIMSPLIT_NEQ_BITS)) ++e;
    }
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        r[P(q) * plane + P(cell)] = rec(int(rintf(ldexpf(d[q], -e))));
    r[P(K) * plane + P(cell)] = rec(e);
    r[P(RHO) * plane + P(cell)] = rho_bits;
    const float u[3] = {ux, uy, uz};
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const unsigned int bits = lbm::float_bits(u[a]);
        r[P(U + 2 * a) * plane + P(cell)] = rec(bits & 0xFFFFu);
        r[P(U + 2 * a + 1) * plane + P(cell)] = rec(bits >> 16);
    }
}

}  // namespace neq

// Two-lattice pull step of planes [k0, k1) on neq16 records, one cell a thread (float32
// arithmetic; the launch and strides of d3q19_stream_collide, `plane` between record slots).
template <bool STORE_MACRO, bool FORCED, typename P>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
d3q19_stream_collide_neq(const neq::rec* __restrict__ f_src, neq::rec* __restrict__ f_dst,
                         const lbm::flag_t* __restrict__ flags, float* __restrict__ rho_out,
                         float* __restrict__ ux_out, float* __restrict__ uy_out,
                         float* __restrict__ uz_out, int nx, int ny, int nz,
                         lbm::index_t pitch64, lbm::index_t layer64, lbm::index_t plane64,
                         int k0, int k1, float om_p, float om_m, float lid_u, float fx, float fy,
                         float fz, int periodic_x, int periodic_y)
{
    using L = D3Q19;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i > nx || j > ny || k >= k1) return;
    const lbm::offset_t pitch = lbm::offset_t(pitch64), layer = lbm::offset_t(layer64);
    const P plane = P(plane64);
    const bool per_x = periodic_x != 0, per_y = periodic_y != 0;
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    float fl[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        fl[q] = neq::pull(f_src, q, plane,
                          source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y));
    if (own & FLAG_NEAR_WALL)
        bounce_back_solid_sources(fl, flags, i, j, k, nx, ny, pitch, layer, per_x, per_y, lid_u,
                                  [&](int q, lbm::offset_t) {
                                      return neq::pull(f_src, L::opp(q), plane, cell);
                                  });
    float post[L::Q];
    auto out = [&](int q, float v) { post[q] = v; };
    collide_3d<float, STORE_MACRO, FORCED>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out,
                                           om_p, om_m, fx, fy, fz, out);
    neq::store(f_dst, post, plane, cell);
}
