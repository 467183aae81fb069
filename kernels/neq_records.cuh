// run.storage neq16 cell records (simsplit/numerics/neq_storage.py), read and written by the
// D2Q9 and D3Q19 records kernels (d2q9.cu, d3q19_neq.cuh) for lattice L.
//
// A cell's record is L::Q + 2 + 2 L::DIM unsigned shorts, each in its own plane of the array
// (populations' layout, `plane` apart): the int16 significands n_q of d_q = f*_q - f^eq_q(rho,
// u), the cell's power of two k, binary16 bits of (rho - 1) * SIMSPLIT_NEQ_RHO_SCALE, and u in
// float32 bits (low half, high half per component). Every operation is
// simsplit/backends/cpu/neq_codec.py's, in float32 (compiled with --fmad=false): the moments of
// f* summed from q = 0 up (zero products included), the equilibrium ((1 + 3 cu) + 4.5 cu cu) -
// 1.5 usq, then (w rho) poly, k the least with every |d_q| / 2^k rounding below
// 2^SIMSPLIT_NEQ_BITS. ldexpf, frexpf and rintf are exact here (power-of-two scaling of normal
// numbers, ties to even), so the float64 steps of the CPU code give the same bits; the CPU adds
// the z terms in 2D as exact zeros, which change no value.
#ifndef SIMSPLIT_NEQ_RECORDS_CUH
#define SIMSPLIT_NEQ_RECORDS_CUH
#ifdef SIMSPLIT_HOST_EMULATION
#include <math.h>
#endif

namespace neq {

using rec = unsigned short;
// Whether a kernel's storage type S holds records (the bodies and open-rules kernels read and
// write through them where it does)
template <typename S> struct is_records { static constexpr bool value = false; };
template <> struct is_records<rec> { static constexpr bool value = true; };
// run.storage neq16s's stress-kept records: the same unsigned short slots, as a type of their
// own, so that a kernel templated on its storage type S (the bodies kernels, the link-force
// sums) reads and writes them through the overloads of pull and store below
enum class srec : unsigned short {};
template <> struct is_records<srec> { static constexpr bool value = true; };
// slots of lattice L's record: the power of two, rho - 1, the first of u (x low, x high, ...)
template <typename L> __device__ __forceinline__ constexpr int slot_k() { return L::Q; }
template <typename L> __device__ __forceinline__ constexpr int slot_rho() { return L::Q + 1; }
template <typename L> __device__ __forceinline__ constexpr int slot_u() { return L::Q + 2; }

// Addressing of a record array by 32-bit offsets from two bases: slots below HALVES_SPLIT from the
// array's start, the others from a second base pointer. It reaches arrays whose elements outnumber
// 32-bit offsets while each part fits them (a slab of up to about 560^3 cells on neq16s's stress-
// kept records, 620^3 on neq16's), and it is the D3Q19 box kernel's addressing wherever it fits
// (source.d3q19_records_index). The kernel takes both arrays' second bases as parameters; reads go
// through `read_hi`, writes through `write_hi` (a kernel reads one array and writes another).
// Measured (nvcc 13.0, sm_90, the box kernel without stores of rho and u): with 64-bit offsets it
// took 116 registers on neq16s's records, with 32-bit offsets from one base 80, with two halves 80
// (4,448 instructions, 344 loads against 4,400 and 343); on neq16's 90, 78 and 64, and two halves
// ran 6-11 % faster than one base on an H100 (neq16s's: the same speed). Upper bases the compiler
// could derive from the first (pointer arithmetic, an opaque asm) took 80 to 194 registers or 45 %
// more loads. The split moves registers by chance: 100 to 104 at 10, 11 and 16.
struct halves {
    lbm::offset_t plane;
    const rec* read_hi;
    rec* write_hi;
};
constexpr int HALVES_SPLIT = SIMSPLIT_NEQ_HALVES_SPLIT;

// The type of a cell's offset within one slot's plane under index type P.
template <typename P> struct cell_of { using type = P; };
template <> struct cell_of<halves> { using type = lbm::offset_t; };
template <typename P> using cell_t = typename cell_of<P>::type;

// Index type P's addressing of a record array with `plane` elements between slots; `read_hi`
// and `write_hi`: slot HALVES_SPLIT of the arrays read and written (used by halves only).
template <typename P>
__device__ __forceinline__ P addressing(lbm::index_t plane, const rec*, rec*)
{
    return P(plane);
}
template <>
__device__ __forceinline__ halves addressing<halves>(lbm::index_t plane, const rec* read_hi,
                                                     rec* write_hi)
{
    return halves{lbm::offset_t(plane), read_hi, write_hi};
}

// Where slot s of the cell at offset `cell` lies.
template <typename R, typename P>
__device__ __forceinline__ R* at(R* r, int s, P plane, cell_t<P> cell)
{
    return r + (P(s) * plane + cell);
}
__device__ __forceinline__ const rec* at(const rec* r, int s, halves h, lbm::offset_t cell)
{
    return s < HALVES_SPLIT ? r + (lbm::offset_t(s) * h.plane + cell)
                            : h.read_hi + (lbm::offset_t(s - HALVES_SPLIT) * h.plane + cell);
}
__device__ __forceinline__ rec* at(rec* r, int s, halves h, lbm::offset_t cell)
{
    return s < HALVES_SPLIT ? r + (lbm::offset_t(s) * h.plane + cell)
                            : h.write_hi + (lbm::offset_t(s - HALVES_SPLIT) * h.plane + cell);
}

template <typename P>
__device__ __forceinline__ rec slot(const rec* __restrict__ r, int s, P plane, cell_t<P> cell)
{
    return __ldg(at(r, s, plane, cell));
}

__device__ __forceinline__ float rho_of(rec bits)
{
    return 1.0f + lbm::half_to_float(bits) * float(1.0 / SIMSPLIT_NEQ_RHO_SCALE);
}

template <typename L, typename P>
__device__ __forceinline__ float velocity(const rec* __restrict__ r, int axis, P plane,
                                          cell_t<P> cell)
{
    if (axis >= L::DIM) return 0.0f;
    const unsigned int lo = slot(r, slot_u<L>() + 2 * axis, plane, cell);
    const unsigned int hi = slot(r, slot_u<L>() + 2 * axis + 1, plane, cell);
    return lbm::bits_float(lo | (hi << 16));
}

template <typename L>
__device__ __forceinline__ float square_sum(float ux, float uy, float uz)
{
    float s = 0.0f;
    s += ux * ux;
    s += uy * uy;
    if constexpr (L::DIM == 3) s += uz * uz;
    return s;
}

template <typename L> __device__ __forceinline__ int cz_of(int q)
{
    if constexpr (L::DIM == 3) return L::cz(q);
    return 0;
}

template <typename L>
__device__ __forceinline__ float equilibrium(int q, float rho, float ux, float uy, float uz,
                                             float usq)
{
    float cu = 0.0f;
    cu += float(L::cx(q)) * ux;
    cu += float(L::cy(q)) * uy;
    if constexpr (L::DIM == 3) cu += float(cz_of<L>(q)) * uz;
    float poly = 1.0f + 3.0f * cu;
    poly = (poly + 4.5f * cu * cu) - 1.5f * usq;
    return float(L::w(q)) * rho * poly;
}

// The stress-kept records (STRESS true): after u, the cell's stress components j < L::SN
// ((L::sa(j), L::sb(j)): xx, xy, (xz), yy, (yz), (zz)) as binary16 of Pi * 2^10, and the
// deviations taken from f^eq plus the first-order part of that rounded stress.
template <typename L> __device__ __forceinline__ constexpr int slot_stress()
{
    return L::Q + 2 + 2 * L::DIM;
}

__device__ __forceinline__ float stress_of(rec bits)
{
    return lbm::half_to_float(bits) * float(1.0 / SIMSPLIT_NEQ_STRESS_SCALE);
}

// Population q's first-order non-equilibrium of the rounded stress `pi`: its terms added in
// component order from zero, those of zero weight left out (q folds at compile time: the
// stress slots q does not see are not loaded; with them nvcc 13.5 spilled 416 bytes in the
// bodies kernel on these records, without them 168).
template <typename L>
__device__ __forceinline__ float first_order(int q, const float* pi)
{
    float g = 0.0f;
#pragma unroll
    for (int j = 0; j < L::SN; ++j)
        if (L::sw(q, j) != 0.0f) g += L::sw(q, j) * pi[j];
    return g;
}

// Population q of the cell at offset `cell` of a slot's plane, rebuilt from its record.
template <typename L, typename P, bool STRESS = false>
__device__ __forceinline__ float pull(const rec* __restrict__ r, int q, P plane, cell_t<P> cell)
{
    const float rho = rho_of(slot(r, slot_rho<L>(), plane, cell));
    const float ux = velocity<L>(r, 0, plane, cell), uy = velocity<L>(r, 1, plane, cell),
                uz = velocity<L>(r, 2, plane, cell);
    const int k = short(slot(r, slot_k<L>(), plane, cell));
    const int n = short(slot(r, q, plane, cell));
    if constexpr (STRESS) {
        float pi[L::SN];
#pragma unroll
        for (int j = 0; j < L::SN; ++j)
            pi[j] = stress_of(slot(r, slot_stress<L>() + j, plane, cell));
        const float base = equilibrium<L>(q, rho, ux, uy, uz, square_sum<L>(ux, uy, uz))
                           + first_order<L>(q, pi);
        return ldexpf(float(n), k) + base;
    } else {
        return ldexpf(float(n), k)
               + equilibrium<L>(q, rho, ux, uy, uz, square_sum<L>(ux, uy, uz));
    }
}

// The slots of a record besides its significands: the power of two e, rho - 1's bits and u.
template <typename L, typename P>
__device__ __forceinline__ void store_header(rec* __restrict__ r, int e, rec rho_bits, float ux,
                                             float uy, float uz, P plane, cell_t<P> cell)
{
    *at(r, slot_k<L>(), plane, cell) = rec(e);
    *at(r, slot_rho<L>(), plane, cell) = rho_bits;
    const float u[3] = {ux, uy, uz};
#pragma unroll
    for (int a = 0; a < L::DIM; ++a) {
        const unsigned int bits = lbm::float_bits(u[a]);
        *at(r, slot_u<L>() + 2 * a, plane, cell) = rec(bits & 0xFFFFu);
        *at(r, slot_u<L>() + 2 * a + 1, plane, cell) = rec(bits >> 16);
    }
}

// Velocity component `a` (0: x, 1: y, 2: z) of direction q.
template <typename L> __device__ __forceinline__ int component(int a, int q)
{
    return a == 0 ? L::cx(q) : (a == 1 ? L::cy(q) : cz_of<L>(q));
}

// A stress-kept record's deviations `d` of post-collision populations `post` and its stress
// slots `pi_bits`: Pi of the deviations from f^eq(rho, u) (summed from q = 0 up), rounded as
// binary16 of Pi * 2^10, and d = post - (f^eq + f^1(rounded Pi)).
template <typename L>
__device__ __forceinline__ void stress_deviations(const float* post, float rho, float ux,
                                                  float uy, float uz, float usq, float* d,
                                                  rec* pi_bits)
{
    float feq[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        feq[q] = equilibrium<L>(q, rho, ux, uy, uz, usq);
        d[q] = post[q] - feq[q];
    }
    float pi[L::SN];
#pragma unroll
    for (int j = 0; j < L::SN; ++j) {
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < L::Q; ++q)
            s += float(component<L>(L::sa(j), q) * component<L>(L::sb(j), q)) * d[q];
        pi_bits[j] = lbm::half_from(s * float(SIMSPLIT_NEQ_STRESS_SCALE));
        pi[j] = stress_of(pi_bits[j]);
    }
#pragma unroll
    for (int q = 0; q < L::Q; ++q) d[q] = post[q] - (feq[q] + first_order<L>(q, pi));
}

// The record of post-collision populations `post` into the cell at offset `cell`.
template <typename L, typename P, bool STRESS = false>
__device__ __forceinline__ void store(rec* __restrict__ r, const float* post, P plane,
                                      cell_t<P> cell)
{
    float m = 0.0f, jx = 0.0f, jy = 0.0f, jz = 0.0f;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const float v = post[q];
        m += v;
        jx += float(L::cx(q)) * v;
        jy += float(L::cy(q)) * v;
        if constexpr (L::DIM == 3) jz += float(cz_of<L>(q)) * v;
    }
    const float inv = 1.0f / m;
    const float ux = jx * inv, uy = jy * inv, uz = jz * inv;
    const rec rho_bits = lbm::half_from((m - 1.0f) * float(SIMSPLIT_NEQ_RHO_SCALE));
    const float rho = rho_of(rho_bits);
    const float usq = square_sum<L>(ux, uy, uz);
    float d[L::Q];
    float top = 0.0f;
    rec pi_bits[STRESS ? L::SN : 1];
    if constexpr (STRESS) {
        stress_deviations<L>(post, rho, ux, uy, uz, usq, d, pi_bits);
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const float a = fabsf(d[q]);
            if (a > top) top = a;
        }
    } else {
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            d[q] = post[q] - equilibrium<L>(q, rho, ux, uy, uz, usq);
            const float a = fabsf(d[q]);
            if (a > top) top = a;
        }
    }
    int e = 0;
    if (top > 0.0f) {
        int ex;
        frexpf(top, &ex);
        e = ex - SIMSPLIT_NEQ_BITS;
        if (rintf(ldexpf(top, -e)) >= float(1 << SIMSPLIT_NEQ_BITS)) ++e;
    }
#pragma unroll
    for (int q = 0; q < L::Q; ++q) *at(r, q, plane, cell) = rec(int(rintf(ldexpf(d[q], -e))));
    store_header<L>(r, e, rho_bits, ux, uy, uz, plane, cell);
    if constexpr (STRESS) {
#pragma unroll
        for (int j = 0; j < L::SN; ++j) *at(r, slot_stress<L>() + j, plane, cell) = pi_bits[j];
    }
}

// Stress-kept records (neq16s) through their own slot type: pull and store with STRESS.
template <typename L, typename P>
__device__ __forceinline__ float pull(const srec* __restrict__ r, int q, P plane, cell_t<P> cell)
{
    return pull<L, P, true>(reinterpret_cast<const rec*>(r), q, plane, cell);
}

template <typename L, typename P>
__device__ __forceinline__ void store(srec* __restrict__ r, const float* post, P plane,
                                      cell_t<P> cell)
{
    store<L, P, true>(reinterpret_cast<rec*>(r), post, plane, cell);
}

}  // namespace neq

#endif  // SIMSPLIT_NEQ_RECORDS_CUH
