// neq16 records (neq_records.cuh) rebuilt and stored with fewer operations and the same bits,
// for finite populations and velocities: the candidates' FAST builds (d3q19_neq_tile.cuh).
//
// What neq::pull / neq::store compute, and why each shortcut gives the same float32 bits:
// - c_q . u with the zero products left out and the +-1 products as adds or subtracts: adding
//   +-0 to a nonzero sum returns it, and a zero c_q . u only enters 1 + 3 cu and cu cu, which do
//   not see its sign; the same for the momentum sums of store, which start from +0 and (round
//   to nearest) only reach -0 from -0 + -0, so they stay the sums of their nonzero terms;
// - the pair (q, opp q) shares cu: fl(3 (-cu)) = -fl(3 cu), fl(1 - a) = fl(1 + (-a)),
//   fl(fl(4.5 (-cu)) (-cu)) = fl(fl(4.5 cu) cu) (IEEE rounding is symmetric); w rho and 1.5 usq
//   are the same products every time;
// - ldexpf(x, k) is, as CUDA builds it, x * 2^k * 1 * 1 * 1 for |k| < 101 (one rounding; the
//   host's ldexpf rounds x 2^k once too): the one multiply is taken there, ldexpf elsewhere.
// NaN and infinite inputs (a run that blew up) may give other NaN bits or a NaN for an inf.
#ifndef SIMSPLIT_NEQ_FAST_CUH
#define SIMSPLIT_NEQ_FAST_CUH
#include "neq_records.cuh"

namespace neq {
namespace fast {

// Whether ldexpf(x, k) is x * 2^k, one multiply (then by power_of_two(k)), as CUDA builds it.
__device__ __forceinline__ bool one_multiply(int k) { return k > -101 && k < 101; }

__device__ __forceinline__ float power_of_two(int k)
{
    return lbm::bits_float(static_cast<unsigned int>(k + 127) << 23);
}

// ldexpf(x[q], k) for every q of L, one branch a cell (not one a population)
template <typename L> __device__ __forceinline__ void scale_all(float* x, int k)
{
    if (one_multiply(k)) {
        const float s = power_of_two(k);
#pragma unroll
        for (int q = 0; q < L::Q; ++q) x[q] = x[q] * s;
    } else {
#pragma unroll
        for (int q = 0; q < L::Q; ++q) x[q] = ldexpf(x[q], k);
    }
}

// c_q . u without its zero products
template <typename L>
__device__ __forceinline__ float cu_of(int q, float ux, float uy, float uz)
{
    float s = 0.0f;
    bool any = false;
    const float u[3] = {ux, uy, uz};
    const int c[3] = {L::cx(q), L::cy(q), cz_of<L>(q)};
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        if (c[a] == 0) continue;
        s = any ? (c[a] > 0 ? s + u[a] : s - u[a]) : (c[a] > 0 ? u[a] : -u[a]);
        any = true;
    }
    return s;
}

// The equilibria of (rho, u), feq[q] as neq::equilibrium gives them; 1.5 usq from the caller.
template <typename L>
__device__ __forceinline__ void equilibria(float* feq, float rho, float ux, float uy, float uz,
                                           float usq)
{
    const float c15 = 1.5f * usq;
    feq[0] = float(L::w(0)) * rho * (1.0f - c15);  // c_0 . u = 0: poly (1 + 0) + 0 - c15
#pragma unroll
    for (int q = 1; q < L::Q; ++q) {
        if (q > L::opp(q)) continue;
        const float cu = cu_of<L>(q, ux, uy, uz);
        const float a = 3.0f * cu, b = 4.5f * cu * cu;
        const float wr = float(L::w(q)) * rho;
        feq[q] = wr * (((1.0f + a) + b) - c15);
        feq[L::opp(q)] = wr * (((1.0f - a) + b) - c15);
    }
}

// Every population of the cell at offset `cell` from its record (neq::pull for each q).
template <typename L, typename P>
__device__ __forceinline__ void rebuild(const rec* __restrict__ r, float* f, P plane, P cell)
{
    const float rho = rho_of(slot(r, slot_rho<L>(), plane, cell));
    const float ux = velocity<L>(r, 0, plane, cell), uy = velocity<L>(r, 1, plane, cell),
                uz = velocity<L>(r, 2, plane, cell);
    const int k = short(slot(r, slot_k<L>(), plane, cell));
    float feq[L::Q];
    equilibria<L>(feq, rho, ux, uy, uz, square_sum<L>(ux, uy, uz));
#pragma unroll
    for (int q = 0; q < L::Q; ++q) f[q] = float(int(short(slot(r, q, plane, cell))));
    scale_all<L>(f, k);
#pragma unroll
    for (int q = 0; q < L::Q; ++q) f[q] = f[q] + feq[q];
}

// neq::store with the shortcuts above.
template <typename L, typename P>
__device__ __forceinline__ void store(rec* __restrict__ r, const float* post, P plane, P cell)
{
    float m = 0.0f, j[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const float v = post[q];
        m += v;
        const int c[3] = {L::cx(q), L::cy(q), cz_of<L>(q)};
#pragma unroll
        for (int a = 0; a < 3; ++a)
            if (c[a]) j[a] = c[a] > 0 ? j[a] + v : j[a] - v;
    }
    const float inv = 1.0f / m;
    const float ux = j[0] * inv, uy = j[1] * inv, uz = j[2] * inv;
    const rec rho_bits = lbm::half_from((m - 1.0f) * float(SIMSPLIT_NEQ_RHO_SCALE));
    float d[L::Q];
    equilibria<L>(d, rho_of(rho_bits), ux, uy, uz, square_sum<L>(ux, uy, uz));
    float top = 0.0f;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        d[q] = post[q] - d[q];
        const float a = fabsf(d[q]);
        if (a > top) top = a;
    }
    int e = 0;
    if (top > 0.0f) {
        int ex;
        frexpf(top, &ex);
        e = ex - SIMSPLIT_NEQ_BITS;
        const float t = one_multiply(-e) ? top * power_of_two(-e) : ldexpf(top, -e);
        if (rintf(t) >= float(1 << SIMSPLIT_NEQ_BITS)) ++e;
    }
    scale_all<L>(d, -e);
#pragma unroll
    for (int q = 0; q < L::Q; ++q) *at(r, q, plane, cell) = rec(int(rintf(d[q])));
    store_header<L>(r, e, rho_bits, ux, uy, uz, plane, cell);
}

}  // namespace fast
}  // namespace neq

#endif  // SIMSPLIT_NEQ_FAST_CUH
