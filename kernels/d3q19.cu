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
//
// FORCED: with the body-force (Guo) terms; the unforced kernels leave them out, as the CPU
// does (D3Q19Params.forced). P: the type of whole-array element offsets (population_at).
#include "simsplit_generated.cuh"
#include "lbm_common.cuh"
#include "neq_records.cuh"

namespace {

// c_q . (a, b, c) with the zero components of c_q left out, in the CPU kernels' order. A
// product with zero is not free under IEEE rules (0 * inf, the sign of -0), so no compiler
// drops it; the CPU and Numba kernels leave out the same terms.
template <typename T>
__device__ __forceinline__ T dot_c(int q, T a, T b, T c)
{
    using L = D3Q19;
    const int cx = L::cx(q), cy = L::cy(q), cz = L::cz(q);
    T s = cx ? T(cx) * a : (cy ? T(cy) * b : T(cz) * c);
    if (cx && cy) s += T(cy) * b;
    if ((cx || cy) && cz) s += T(cz) * c;
    return s;
}

// TRT relaxation of the pair (q, opp q), sum = f_q + f_opp and dif = f_q - f_opp; out(q,
// value) stores a post-collision population
// (at once: the kernels keep no post-collision array, which would cost registers). Without a
// body force (FORCED false) the Guo source terms are left out, as in the CPU kernels.
//
// The symmetric part relaxes as -om_p * ((f_q + f_opp) / 2 - feq_p), written here (and in the
// CPU and Numba kernels) as (-om_p / 2) * ((f_q + f_opp) - 2 feq_p): the halvings and doublings
// are exact, so both forms round to the same bits, and this one has no multiply by 1/2 (the
// kernels are bound by instruction issue). nh_om_p = -om_p / 2; the same for the antisymmetric
// part.
template <typename T, bool FORCED, typename Out>
__device__ __forceinline__ void relax_pair_3d(int q, const T* fl, T sum, T dif, T r, T ux, T uy,
                                              T uz, T usq, T uf, T fx, T fy, T fz, T nh_om_p,
                                              T nh_om_m, T src_p, T src_m, Out& out)
{
    using L = D3Q19;
    const int o = L::opp(q);
    const T w = T(L::w(q));
    const T w2 = T(2.0 * L::w(q));
    const T cu = dot_c(q, ux, uy, uz);
    const T feq_p2 = w2 * r * (T(1.0) + T(4.5) * cu * cu - usq);
    const T feq_m2 = w2 * r * T(3.0) * cu;
    T relax_p = nh_om_p * (sum - feq_p2);
    T relax_m = nh_om_m * (dif - feq_m2);
    if (FORCED) {
        const T cf = dot_c(q, fx, fy, fz);
        const T s_p = w * (T(9.0) * cu * cf - T(3.0) * uf);
        const T s_m = w * T(3.0) * cf;
        relax_p += src_p * s_p;
        relax_m += src_m * s_m;
    }
    out(q, fl[q] + relax_p + relax_m);
    out(o, fl[o] + relax_p - relax_m);
}

// Collide the pulled populations fl, handing each post-collision value to out(q, value);
// macroscopic fields of 1-based cell (i, j, k) stored if STORE_MACRO.
template <typename T, bool STORE_MACRO, bool FORCED, typename Out>
__device__ __forceinline__ void collide_3d(const T* fl, int i, int j, int k, int nx, int ny,
                                           T* __restrict__ rho_out, T* __restrict__ ux_out,
                                           T* __restrict__ uy_out, T* __restrict__ uz_out,
                                           T om_p, T om_m, T fx, T fy, T fz, Out& out)
{
    using L = D3Q19;
    const T one = T(1.0), half = T(0.5);
    // moments from the pairs' sums and differences: one add or subtract per pair and
    // component instead of one per population; each momentum component starts from its first
    // nonzero term (the CPU and Numba kernels do the same)
    T r = fl[0], jx = T(0.0), jy = T(0.0), jz = T(0.0);
    bool has_x = false, has_y = false, has_z = false;
#pragma unroll
    for (int q = 1; q < L::Q; ++q) {
        if (q < L::opp(q)) {
            const T dif = fl[q] - fl[L::opp(q)];
            r += fl[q] + fl[L::opp(q)];
            if (L::cx(q)) {
                jx = has_x ? jx + T(L::cx(q)) * dif : T(L::cx(q)) * dif;
                has_x = true;
            }
            if (L::cy(q)) {
                jy = has_y ? jy + T(L::cy(q)) * dif : T(L::cy(q)) * dif;
                has_y = true;
            }
            if (L::cz(q)) {
                jz = has_z ? jz + T(L::cz(q)) * dif : T(L::cz(q)) * dif;
                has_z = true;
            }
        }
    }
    const T inv = one / r;
    T ux = jx * inv, uy = jy * inv, uz = jz * inv, uf = T(0.0);
    if (FORCED) {
        ux = (jx + half * fx) * inv;
        uy = (jy + half * fy) * inv;
        uz = (jz + half * fz) * inv;
        uf = ux * fx + uy * fy + uz * fz;
    }
    const T usq = T(1.5) * (ux * ux + uy * uy + uz * uz);
    if (STORE_MACRO) {
        const lbm::index_t m = (lbm::index_t(k - 1) * ny + (j - 1)) * nx + (i - 1);
        rho_out[m] = r;
        ux_out[m] = ux;
        uy_out[m] = uy;
        uz_out[m] = uz;
    }
    const T src_p = one - half * om_p;  // Guo source weights of the symmetric/antisymmetric parts
    const T src_m = one - half * om_m;
    const T nh_om_p = T(-0.5) * om_p, nh_om_m = T(-0.5) * om_m;
    const T feq0 = T(L::w(0)) * r * (one - usq);
    T post0 = fl[0] - om_p * (fl[0] - feq0);
    if (FORCED) post0 += src_p * (T(L::w(0)) * T(-3.0) * uf);
    out(0, post0);
#pragma unroll
    for (int q = 1; q < L::Q; ++q) {
        if (q < L::opp(q)) {
            // the pair's sum and difference again (same bits), not kept from the moments: kept,
            // 18 more live values spill at the 48 registers asked for
            T a = fl[q], b = fl[L::opp(q)];
            lbm::opaque(a);
            lbm::opaque(b);
            relax_pair_3d<T, FORCED>(q, fl, a + b, a - b, r, ux, uy, uz, usq, uf, fx, fy, fz,
                                     nh_om_p, nh_om_m, src_p, src_m, out);
        }
    }
}

// In-plane offsets are 32-bit (lbm::offset_t): a population plane of any array that fits in
// GPU memory holds fewer than 2^32 cells (the launcher checks), and 64-bit index math cost
// about a third of the instructions per cell, which bound the kernel (Nsight Compute,
// benchmarks/logs/ncu_d3q19_h200_2026-12-03.log); population_at below forms the address.

// Offset to the column i + d, d in {-1, 0, 1} (1-based interior i); periodic x wraps to the
// opposite interior column (its ghost columns are never read). The same for rows, scaled.
__device__ __forceinline__ int column_offset(int d, int i, int n, bool periodic)
{
    if (d == 0) return 0;
    if (d < 0) return periodic && i == 1 ? n - 1 : -1;
    return periodic && i == n ? 1 - n : 1;
}

// In-plane offset of cell (i, j, k) from the array's start.
__device__ __forceinline__ lbm::offset_t cell_offset_3d(int i, int j, int k, lbm::offset_t pitch,
                                                        lbm::offset_t layer)
{
    return lbm::offset_t(k) * layer + lbm::offset_t(j) * pitch + lbm::offset_t(i);
}

// Cell that direction q pulls from (sign -1) or pushes to (sign +1), as an in-plane offset;
// periodic x and y wrap, z never does (ghost planes). Unsigned arithmetic wraps the negative
// steps, and the sum lands inside the plane.
__device__ __forceinline__ lbm::offset_t neighbour_cell_3d(int q, int sign, int i, int j, int k,
                                                           int nx, int ny, lbm::offset_t pitch,
                                                           lbm::offset_t layer, bool per_x,
                                                           bool per_y)
{
    using L = D3Q19;
    return cell_offset_3d(i, j, k, pitch, layer)
           + lbm::offset_t(column_offset(sign * L::cx(q), i, nx, per_x))
           + lbm::offset_t(column_offset(sign * L::cy(q), j, ny, per_y)) * pitch
           + lbm::offset_t(sign * L::cz(q)) * layer;
}

__device__ __forceinline__ lbm::offset_t source_cell_3d(int q, int i, int j, int k, int nx,
                                                        int ny, lbm::offset_t pitch,
                                                        lbm::offset_t layer, bool per_x,
                                                        bool per_y)
{
    return neighbour_cell_3d(q, -1, i, j, k, nx, ny, pitch, layer, per_x, per_y);
}

// Population q of the cell at in-plane offset `cell` of array f, populations `plane` apart.
// P is the type of the whole offset: lbm::offset_t (32 bits, one multiply-add per address)
// while the array holds fewer than 2^32 elements (19 planes of up to 226e6 cells: 512^3 fits,
// the largest in-place cubes do not), else lbm::index_t; the launcher picks.
template <typename S, typename P>
__device__ __forceinline__ S* population_at(S* f, int q, P plane, lbm::offset_t cell)
{
    return f + (P(q) * plane + P(cell));
}

// --- the two-lattice pull kernel's per-cell steps: the one-cell kernel (update_cell_3d) and the
// pair kernel (update_pair_3d) share the bounce-back and collide_3d, one copy each ----------

// Element offset of each population's pull source from the pulling cell, q plane - c_q .
// (1, pitch, layer), for cells whose sources do not wrap (pull_3d).
template <typename P> struct pull_deltas {
    P d[D3Q19::Q];
};

template <typename P>
__device__ __forceinline__ pull_deltas<P> make_pull_deltas(P plane, lbm::offset_t pitch,
                                                           lbm::offset_t layer)
{
    using L = D3Q19;
    pull_deltas<P> out{};
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        out.d[q] = P(q) * plane - P(L::cz(q)) * P(layer) - P(L::cy(q)) * P(pitch) - P(L::cx(q));
    return out;
}

// The 19 stored elements pulled into cell (i, j, k) by scalar loads, all in flight at once,
// each handed to take(q, element). Cells whose sources do not wrap (all but the periodic rows'
// ends) address population q as cell + deltas.d[q], the delta the same for every thread
// (uniform registers): 0.6 fewer warp instructions per cell than the general path, fp16 1.5 %
// faster (H200, benchmarks/logs/tune_d3q19_h200_2026-12-03_offsets.log; deltas as a kernel
// parameter, 0.3 fewer again, were no faster). Not with 64-bit offsets: their 19 deltas spill
// at 48 registers.
template <typename S, typename P, typename Take>
__device__ __forceinline__ void pull_each_3d(const S* __restrict__ f_src, int i, int j, int k,
                                             int nx, int ny, lbm::offset_t pitch,
                                             lbm::offset_t layer, P plane, bool per_x,
                                             bool per_y, const pull_deltas<P>& deltas,
                                             Take take)
{
    using L = D3Q19;
    const bool wraps = (per_x && (i == 1 || i == nx)) || (per_y && (j == 1 || j == ny));
    if (sizeof(P) == sizeof(lbm::offset_t) && !wraps) {
        const P cell = P(cell_offset_3d(i, j, k, pitch, layer));
#pragma unroll
        for (int q = 0; q < L::Q; ++q) take(q, lbm::load_population(f_src + (cell + deltas.d[q])));
        return;
    }
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        take(q, lbm::load_population(population_at(
                    f_src, q, plane, source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x,
                                                    per_y))));
}

// The 19 pulled populations of cell (i, j, k), decoded; returns the cell's NEAR_WALL bit (or,
// tuning variant, every cell ORs its sources' solid bits in, as the D2Q9 kernel does).
template <typename T, typename S, typename P>
__device__ __forceinline__ lbm::flag_t pull_3d(T* fl, const S* __restrict__ f_src,
                                               const lbm::flag_t* __restrict__ flags,
                                               lbm::flag_t own, int i, int j, int k, int nx,
                                               int ny, lbm::offset_t pitch, lbm::offset_t layer,
                                               P plane, bool per_x, bool per_y,
                                               const pull_deltas<P>& deltas)
{
    using L = D3Q19;
    lbm::flag_t near_wall = own & FLAG_NEAR_WALL;
#ifndef SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS
    pull_each_3d(f_src, i, j, k, nx, ny, pitch, layer, plane, per_x, per_y, deltas,
                 [&](int q, S raw) { fl[q] = lbm::decode<L, T>(raw, q); });
#else
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const lbm::offset_t src = source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y);
        fl[q] = lbm::load_population<L, T>(population_at(f_src, q, plane, src), q);
        near_wall |= __ldg(flags + src) & FLAG_SOLID;
    }
#endif
    return near_wall;
}

// Near a wall (rare and warp-coherent): the pulls from solid sources become bounce-back of the
// cell's own post-collision opp q, own_opp(q, src) (src: the solid source cell's offset); every
// kernel keeps that value somewhere else (f_src, the in-place array's slots, shared memory).
template <typename T, typename OwnOpp>
__device__ __forceinline__ void bounce_back_solid_sources(T* fl,
                                                          const lbm::flag_t* __restrict__ flags,
                                                          int i, int j, int k, int nx, int ny,
                                                          lbm::offset_t pitch,
                                                          lbm::offset_t layer, bool per_x,
                                                          bool per_y, T lid_u, OwnOpp own_opp)
{
    using L = D3Q19;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const lbm::offset_t src = source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y);
        const lbm::flag_t kind = __ldg(flags + src);
        if (kind & FLAG_SOLID) fl[q] = lbm::bounce_back<L>(q, kind, own_opp(q, src), lid_u);
    }
}

// The two-lattice kernels' bounce-back: the own opp q from f_src.
template <typename T, typename S, typename P>
__device__ __forceinline__ void bounce_back_3d(T* fl, const S* __restrict__ f_src,
                                               const lbm::flag_t* __restrict__ flags,
                                               lbm::offset_t cell, int i, int j, int k, int nx,
                                               int ny, lbm::offset_t pitch, lbm::offset_t layer,
                                               P plane, bool per_x, bool per_y,
                                               T lid_u)
{
    using L = D3Q19;
    bounce_back_solid_sources(fl, flags, i, j, k, nx, ny, pitch, layer, per_x, per_y, lid_u,
                              [&](int q, lbm::offset_t) {
                                  return lbm::decode<L, T>(lbm::read_only(population_at(
                                                               f_src, L::opp(q), plane, cell)),
                                                           L::opp(q));
                              });
}

}  // namespace

// Cells per thread along x of the two-lattice pull kernels: d3q19_stream_collide takes one,
// d3q19_stream_collide_x2 two (cells i, i + 1 with odd i, every population moved as a
// 2-element vector: fp16 needs more bytes in flight per thread than 2-byte accesses give).
// Pairs need every [q, k, j, 1] aligned to two elements (padded rows:
// simsplit/backends/layout.py), which the launcher checks. Which storage takes which is
// simsplit.backends.cuda_c.source.d3q19_takes_x2; the AA kernel always takes one cell.

// Resident blocks per SM asked of the register allocator for float arithmetic: at one block
// NVRTC gave the kernel 84 registers (37.5 % occupancy at 256 threads) and it reached 62 % of
// the copy bandwidth at 512^3; five blocks cap it at 48 registers without spills: 86 % in
// float32, 51 % in fp16 (H200, scripts/tune_d3q19.py,
// benchmarks/logs/tune_d3q19_h200_2026-12-02.log).
// Double arithmetic, the variant that also stores rho and u (the last step of a chunk) and
// the in-place kernel would spill at 48 registers: they keep one block.
#ifndef SIMSPLIT_D3Q19_MIN_BLOCKS
#define SIMSPLIT_D3Q19_MIN_BLOCKS (1280 / SIMSPLIT_BLOCK_X)
#endif
// The pair kernel holds two cells' populations: 109 (fp16) and 127 (float) registers at one
// block of 256 (ptxas sm_90). Blocks of 64 threads with 16 resident (64 registers, no spill:
// ptxas 13.0, its SASS that of the tuned build) ran fastest with fp16 storage on an H200
// (42,933 against 41,451 MLUPS for the one-cell kernel at 512^3; 80 registers at 128 x 6:
// 39,657; benchmarks/logs/tune_d3q19_fp16_h200_2026-12-05.log); float32 storage ran slower
// than one cell at any block count (benchmarks/logs/tune_d3q19_pairs_h200_2026-12-03.log).
// The forced variant asks for 14 blocks (72 registers, an 8-byte spill on the near-wall path;
// not measured); those that store rho and u, double arithmetic and 64-bit offsets keep one
// block.
#define SIMSPLIT_D3Q19_X2_MIN_BLOCKS_FOR(T, STORE_MACRO, FORCED, P)                      \
    (sizeof(T) == 4 && !(STORE_MACRO) && sizeof(P) == 4                                  \
         ? ((FORCED) ? SIMSPLIT_D3Q19_X2_MIN_BLOCKS * 7 / 8 : SIMSPLIT_D3Q19_X2_MIN_BLOCKS) \
         : 1)
// 64-bit element offsets (P, arrays beyond 2^32 elements) need more: up to 85 registers
// (at 64 the float32 variants spilled).
#define SIMSPLIT_D3Q19_MIN_BLOCKS_FOR(T, STORE_MACRO, P)                      \
    (sizeof(T) == 4 && !(STORE_MACRO)                                          \
         ? (sizeof(P) == 4 ? SIMSPLIT_D3Q19_MIN_BLOCKS : 768 / SIMSPLIT_BLOCK_X) \
         : 1)

// Whether the one-cell pull kernel and the in-place kernel issue a cell's 19 loads before its
// own flag has arrived (dropping a solid cell's values afterwards) rather than waiting for the
// flag first: the wait is a whole memory latency per warp before any population is asked for.
// With fp16 storage, short of bytes in flight, speculating ran 2-4 % faster on an H200 (pull
// kernel; with the L2 fetch hint the in-place kernel gained 17 %); float32 storage, held by
// the DRAM bandwidth, ran 0.3 % slower (benchmarks/logs/tune_d3q19_h200_2026-12-03_l2.log,
// benchmarks/logs/bench_d3q19_h200_2026-12-03_aa.log). The cost: a solid cell's loads are
// issued for nothing, bandwidth in proportion to the solid fraction.
// SIMSPLIT_D3Q19_SPECULATE 0 / 1 forces either for every storage (tuning).
template <typename S>
__device__ __forceinline__ constexpr bool speculative_pull()
{
#ifdef SIMSPLIT_D3Q19_SPECULATE
    return SIMSPLIT_D3Q19_SPECULATE != 0;
#else
    return sizeof(S) == 2;
#endif
}

namespace {

// The whole update of fluid cell (i, j, k) with scalar accesses: the one-cell kernel's body.
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__device__ __forceinline__ void update_cell_3d(
    const S* __restrict__ f_src, S* __restrict__ f_dst, const lbm::flag_t* __restrict__ flags,
    T* __restrict__ rho_out, T* __restrict__ ux_out, T* __restrict__ uy_out,
    T* __restrict__ uz_out, lbm::flag_t own, int i, int j, int k, int nx, int ny,
    lbm::offset_t pitch, lbm::offset_t layer, P plane, T om_p, T om_m, T lid_u, T fx,
    T fy, T fz, bool per_x, bool per_y, const pull_deltas<P>& deltas)
{
    using L = D3Q19;
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    T fl[L::Q];
    const lbm::flag_t near_wall = pull_3d(fl, f_src, flags, own, i, j, k, nx, ny, pitch, layer,
                                          plane, per_x, per_y, deltas);
    if (speculative_pull<S>() && (own & FLAG_SOLID)) return;
    if (near_wall)
        bounce_back_3d(fl, f_src, flags, cell, i, j, k, nx, ny, pitch, layer, plane, per_x,
                       per_y, lid_u);
    auto out = [&](int q, T v) {
        lbm::store_population<L>(population_at(f_dst, q, plane, cell), q, v);
    };
    collide_3d<T, STORE_MACRO, FORCED>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out,
                                       om_p, om_m, fx, fy, fz, out);
}

// Cells (i, i + 1), odd i (own1: FLAG_SOLID where i + 1 is past the row's end). Each live
// cell collides alone, as in the one-cell kernel; around that, every population moves as a
// pair per q (lbm::load_pair, lbm::store_pair) when both cells are fluid and no source wraps
// periodic x, else cell by cell with scalar accesses (a lone or solid cell in the pair: a
// vector store would write both; a wrapped source: not beside the other cell's).
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__device__ __forceinline__ void update_pair_3d(
    const S* __restrict__ f_src, S* __restrict__ f_dst, const lbm::flag_t* __restrict__ flags,
    T* __restrict__ rho_out, T* __restrict__ ux_out, T* __restrict__ uy_out,
    T* __restrict__ uz_out, lbm::flag_t own0, lbm::flag_t own1, int i, int j, int k, int nx,
    int ny, lbm::offset_t pitch, lbm::offset_t layer, P plane, T om_p, T om_m,
    T lid_u, T fx, T fy, T fz, bool per_x, bool per_y, const pull_deltas<P>& deltas)
{
    using L = D3Q19;
    using Pair = lbm::pair_of<S>;
    const bool live[2] = {!(own0 & FLAG_SOLID), !(own1 & FLAG_SOLID)};
    const bool wraps_x = per_x && (i == 1 || i + 1 == nx);
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    lbm::pair_t<S> raw[L::Q];  // stored elements, still encoded: one register per fp16 pair
    lbm::flag_t near_wall[2] = {lbm::flag_t(own0 & FLAG_NEAR_WALL),
                                lbm::flag_t(own1 & FLAG_NEAR_WALL)};
    auto load_vectors = [&]() {
#ifndef SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS
        // rows that do not wrap periodic y: the uniform deltas of the one-cell kernel
        if (sizeof(P) == sizeof(lbm::offset_t) && !(per_y && (j == 1 || j == ny))) {
#pragma unroll
            for (int q = 0; q < L::Q; ++q)
                raw[q] = lbm::load_pair(f_src + (P(cell) + deltas.d[q]), L::cx(q) == 0);
            return;
        }
#endif
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::offset_t src =
                source_cell_3d(q, i, j, k, nx, ny, pitch, layer, false, per_y);
            raw[q] = lbm::load_pair(population_at(f_src, q, plane, src), L::cx(q) == 0);
#ifdef SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS
            near_wall[0] |= __ldg(flags + src) & FLAG_SOLID;
            near_wall[1] |= __ldg(flags + src + 1) & FLAG_SOLID;
#endif
        }
    };
    // speculative (speculative_pull): the vector loads go out before the own flags are known,
    // as the one-cell kernel's; a pair that turns out not to take them loads again below
#ifndef SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS
    const bool early = speculative_pull<S>() && !wraps_x;
#else
    const bool early = false;
#endif
    if (early) load_vectors();
    if (!live[0] && !live[1]) return;
    const bool vector = live[0] && live[1] && !wraps_x;
    if (vector) {
        if (!early) load_vectors();
    } else {  // a dead cell's loads are wasted, not wrong: its sources are in the array
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            lbm::offset_t src[2];
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                src[c] = source_cell_3d(q, live[c] ? i + c : i, j, k, nx, ny, pitch, layer,
                                        per_x, per_y);
#ifdef SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS
                near_wall[c] |= __ldg(flags + src[c]) & FLAG_SOLID;
#endif
            }
            raw[q] = Pair::make(lbm::load_population(population_at(f_src, q, plane, src[0])),
                                lbm::load_population(population_at(f_src, q, plane, src[1])));
        }
    }
    // each live cell collides alone; cell i's results wait for cell i + 1's in cell i's
    // (decoded, dead) half of raw: an fp16 pair stays in one register until it is stored.
    // mode: 0 scalar stores, 1 vector stores, 2 either, chosen at run time by `vector` (one
    // body for both: SIMSPLIT_D3Q19_X2_SPLIT_PATHS below)
    auto collide_cell = [&](int c, auto mode) {
        constexpr int MODE = decltype(mode)::value;
        T fl[L::Q];
#pragma unroll
        for (int q = 0; q < L::Q; ++q) fl[q] = lbm::decode<L, T>(Pair::get(raw[q], c), q);
        if (near_wall[c])
            bounce_back_3d(fl, f_src, flags, cell + c, i + c, j, k, nx, ny, pitch, layer, plane,
                           per_x, per_y, lid_u);
        auto out = [&](int q, T v) {
            const S e = lbm::encode<L, T, S>(v, q);
            const bool vec = MODE == 2 ? vector : MODE == 1;
            S* p = population_at(f_dst, q, plane, cell);
            if (!vec) lbm::store_population(p + c, e);
            else if (c == 0) raw[q] = Pair::with_first(raw[q], e);
            else if (MODE == 2) lbm::store_pair(p, Pair::make(Pair::get(raw[q], 0), e));
            else lbm::store_pair(p, Pair::with_second(raw[q], e));
        };
        collide_3d<T, STORE_MACRO, FORCED>(fl, i + c, j, k, nx, ny, rho_out, ux_out, uy_out,
                                           uz_out, om_p, om_m, fx, fy, fz, out);
    };
    // SIMSPLIT_D3Q19_X2_SPLIT_PATHS 1 (source.D3Q19_X2_SPLIT_PATHS): the vector and the scalar
    // path as separate code. The one body issues both kinds of store, predicated, and cell i's
    // scalar store addresses on the vector path too: split, fp16 pairs away from walls execute
    // 15.7 % fewer instructions (Nsight Compute, H100, 512^3) but ran 2.2 % slower on an H100,
    // whose fp16 pairs are bound by DRAM (docs/d3q19.md); not yet timed on an H200
#if SIMSPLIT_D3Q19_X2_SPLIT_PATHS
    if (vector) {
        collide_cell(0, lbm::constant<1>{});
        collide_cell(1, lbm::constant<1>{});
    } else {
        if (live[0]) collide_cell(0, lbm::constant<0>{});
        if (live[1]) collide_cell(1, lbm::constant<0>{});
    }
#else
    if (live[0]) collide_cell(0, lbm::constant<2>{});
    if (live[1]) collide_cell(1, lbm::constant<2>{});
#endif
}

// The pull kernels' body: CELLS_X adjacent x-cells of row (j, k) per thread.
template <int CELLS_X, typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__device__ __forceinline__ void stream_collide_cells(
    const S* __restrict__ f_src, S* __restrict__ f_dst, const lbm::flag_t* __restrict__ flags,
    T* __restrict__ rho_out, T* __restrict__ ux_out, T* __restrict__ uy_out,
    T* __restrict__ uz_out, int nx, int ny, int nz, lbm::index_t pitch64, lbm::index_t layer64,
    lbm::index_t plane64, int k0, int k1, T om_p, T om_m, T lid_u, T fx, T fy, T fz,
    int periodic_x, int periodic_y)
{
    const int i = CELLS_X * (blockIdx.x * blockDim.x + threadIdx.x) + 1;  // first of the cells
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i > nx || j > ny || k >= k1) return;
    const lbm::offset_t pitch = lbm::offset_t(pitch64), layer = lbm::offset_t(layer64);
    const P plane = P(plane64);
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    const lbm::flag_t own = flags[cell];
    if constexpr (CELLS_X == 2) {
        const lbm::flag_t own1 = i < nx ? flags[cell + 1] : FLAG_SOLID;  // odd nx: a lone cell
        const pull_deltas<P> deltas = make_pull_deltas(plane, pitch, layer);
        update_pair_3d<T, S, STORE_MACRO, FORCED, P>(f_src, f_dst, flags, rho_out, ux_out, uy_out,
                                                  uz_out, own, own1, i, j, k, nx, ny, pitch,
                                                  layer, plane, om_p, om_m, lid_u, fx, fy, fz,
                                                  periodic_x != 0, periodic_y != 0, deltas);
    } else {
        if (!speculative_pull<S>() && (own & FLAG_SOLID)) return;
        const pull_deltas<P> deltas = make_pull_deltas(plane, pitch, layer);
        update_cell_3d<T, S, STORE_MACRO, FORCED, P>(f_src, f_dst, flags, rho_out, ux_out, uy_out,
                                                  uz_out, own, i, j, k, nx, ny, pitch, layer,
                                                  plane, om_p, om_m, lid_u, fx, fy, fz,
                                                  periodic_x != 0, periodic_y != 0, deltas);
    }
}

}  // namespace

// One cell per thread.
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X, SIMSPLIT_D3Q19_MIN_BLOCKS_FOR(T, STORE_MACRO, P))
d3q19_stream_collide(const S* __restrict__ f_src, S* __restrict__ f_dst,
                     const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                     T* __restrict__ ux_out, T* __restrict__ uy_out, T* __restrict__ uz_out,
                     int nx, int ny, int nz, lbm::index_t pitch64, lbm::index_t layer64,
                     lbm::index_t plane64, int k0, int k1, T om_p, T om_m, T lid_u, T fx, T fy,
                     T fz, int periodic_x, int periodic_y)
{
    stream_collide_cells<1, T, S, STORE_MACRO, FORCED, P>(
        f_src, f_dst, flags, rho_out, ux_out, uy_out, uz_out, nx, ny, nz, pitch64, layer64,
        plane64, k0, k1, om_p, om_m, lid_u, fx, fy, fz, periodic_x, periodic_y);
}

// Two adjacent x-cells per thread (populations aligned for 2-element vectors).
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__global__ void __launch_bounds__(SIMSPLIT_D3Q19_X2_BLOCK_X,
                                  SIMSPLIT_D3Q19_X2_MIN_BLOCKS_FOR(T, STORE_MACRO, FORCED, P))
d3q19_stream_collide_x2(const S* __restrict__ f_src, S* __restrict__ f_dst,
                           const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                           T* __restrict__ ux_out, T* __restrict__ uy_out,
                           T* __restrict__ uz_out, int nx, int ny, int nz,
                           lbm::index_t pitch64, lbm::index_t layer64, lbm::index_t plane64,
                           int k0, int k1, T om_p, T om_m, T lid_u, T fx, T fy, T fz,
                           int periodic_x, int periodic_y)
{
    stream_collide_cells<2, T, S, STORE_MACRO, FORCED, P>(
        f_src, f_dst, flags, rho_out, ux_out, uy_out, uz_out, nx, ny, nz, pitch64, layer64,
        plane64, k0, k1, om_p, om_m, lid_u, fx, fy, fz, periodic_x, periodic_y);
}

// In-place (AA) step of parity `odd` on the one array f. Every slot a thread reads is one only
// it writes, and after reading it, so there are no races; plain loads, not __ldg: f is written
// during the kernel.
// (The explicit one block per SM: without it ptxas 13.0 held the double, unforced variant to
// 80 registers with an 8-byte spill.)
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X, 1)
d3q19_stream_collide_aa(S* __restrict__ f, const lbm::flag_t* __restrict__ flags,
                        T* __restrict__ rho_out, T* __restrict__ ux_out, T* __restrict__ uy_out,
                        T* __restrict__ uz_out, int nx, int ny, int nz, lbm::index_t pitch64,
                        lbm::index_t layer64, lbm::index_t plane64, int k0, int k1, T om_p,
                        T om_m, T lid_u, T fx, T fy, T fz, int periodic_x, int periodic_y,
                        int odd)
{
    using L = D3Q19;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i > nx || j > ny || k >= k1) return;
    const lbm::offset_t pitch = lbm::offset_t(pitch64), layer = lbm::offset_t(layer64);
    const P plane = P(plane64);
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    const lbm::flag_t own = flags[cell];
    if (!speculative_pull<S>() && (own & FLAG_SOLID)) return;
    const bool per_x = periodic_x != 0, per_y = periodic_y != 0;

    T fl[L::Q];
    if (odd) {  // streamed: x - c_q's post-collision q, in its slot opp q
#pragma unroll
        for (int q = 0; q < L::Q; ++q)
            fl[q] = lbm::decode<L, T>(
                lbm::load_in_place(population_at(
                    f, L::opp(q), plane,
                    source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y))),
                L::opp(q));
    } else {  // the previous odd step streamed q into the own slot q
#pragma unroll
        for (int q = 0; q < L::Q; ++q)
            fl[q] = lbm::decode<L, T>(lbm::load_in_place(population_at(f, q, plane, cell)), q);
    }
    if (speculative_pull<S>() && (own & FLAG_SOLID)) return;  // a solid cell is never written
    if (own & FLAG_NEAR_WALL) {
        // own post-collision opp q: the own slot q after an even step; after an odd step it
        // went, raw, into the solid source's slot opp q
        bounce_back_solid_sources(
            fl, flags, i, j, k, nx, ny, pitch, layer, per_x, per_y, lid_u,
            [&](int q, lbm::offset_t src) {
                return odd ? lbm::decode<L, T>(
                                 lbm::load_in_place(population_at(f, q, plane, cell)), q)
                           : lbm::decode<L, T>(
                                 lbm::load_in_place(population_at(f, L::opp(q), plane, src)),
                                 L::opp(q));
            });
    }
    // every load is done: the stores may go as the values come
    if (odd) {
        auto out = [&](int q, T v) {
            lbm::store_population<L>(
                population_at(
                    f, q, plane,
                    neighbour_cell_3d(q, 1, i, j, k, nx, ny, pitch, layer, per_x, per_y)),
                q, v);
        };
        collide_3d<T, STORE_MACRO, FORCED>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out,
                                           uz_out, om_p, om_m, fx, fy, fz, out);
    } else {
        auto out = [&](int q, T v) {
            lbm::store_population<L>(population_at(f, L::opp(q), plane, cell), L::opp(q), v);
        };
        collide_3d<T, STORE_MACRO, FORCED>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out,
                                           uz_out, om_p, om_m, fx, fy, fz, out);
    }
}

// --- two time steps per sweep: temporal blocking through shared memory --------------------
// The two-lattice kernel moves every population through DRAM once per step, 153 B per float32
// update, and runs at 98 % of the speed of those bytes alone (scripts/stream_copy_d3q19.py):
// fewer bytes, not fewer instructions, is what is left. d3q19_stream_collide_two_steps does
// steps t + 1 and t + 2 in one sweep, f_src (step t) -> f_dst (step t + 2), with the step t + 1
// populations kept on chip. A block owns a TX x TY column of cells in x-y and walks up a run of
// planes: for each plane kk it first updates (kk's step t + 1) the (TX + 2) x (TY + 2) cells
// of its column and the ring of cells around it, into shared memory; then it updates the
// column's cells of plane kk - 1 to step t + 2, pulling step t + 1 from shared memory (planes
// kk - 2 .. kk), and stores them. A step t + 1 value thus never goes to DRAM; what the first
// step reads for the ring cells is also read by the neighbouring columns' blocks, partly from
// the L2 (Nsight Compute at 512^3: DRAM reads 1.22x the minimum, writes the minimum).
//
// Each update is the same function of the same 19 values as in d3q19_stream_collide (pull_3d,
// bounce_back_3d, collide_3d; a step t + 1 value goes through the storage encoding on its way
// into shared memory, as it would through DRAM), so two steps here give the bits of two launches
// of that kernel. Planes [k0, k1) of f_dst are written; the first step reads planes k0 - 2 ..
// k1 + 1 of f_src, so ghost planes must hold what does not change between the two steps: solid
// walls or the lid (slabs with halo faces, whose ghosts change every step, step one at a time:
// simsplit/fluid/block.py fuses_two_steps).
// The ring cells of periodic x and y stand for the opposite interior cells.
//
// Threads: one per cell of the (TX + 2) x (TY + 2) footprint in the first step, the first
// TX * TY of them one per column cell in the second. Shared memory: RING planes of 19
// populations of the footprint, in the storage type; with four, one barrier per plane suffices
// (the first step of plane kk + 1 writes the slot of plane kk - 3, which the second step of
// plane kk - 1 does not read).
//
// TX, TY, RING and the resident blocks per SM asked of the register allocator come from the
// generated header (simsplit.backends.cuda_c.source.D3Q19_FUSED_*, and D3Q19_FUSED16 for 16-bit
// storage: the launcher's grid and shared memory follow the same values); -D options override
// them for tuning.

namespace {
namespace fused {

// The shape of a block's sweep for populations stored as S: 16-bit storage has its own
// (SIMSPLIT_D3Q19_FUSED16_*, source.D3Q19_FUSED16), the others share SIMSPLIT_D3Q19_FUSED_*.
template <typename S> struct shape {
    static constexpr bool narrow = sizeof(S) == 2;
    static constexpr int TX = narrow ? SIMSPLIT_D3Q19_FUSED16_TX : SIMSPLIT_D3Q19_FUSED_TX;
    static constexpr int TY = narrow ? SIMSPLIT_D3Q19_FUSED16_TY : SIMSPLIT_D3Q19_FUSED_TY;
    static constexpr int RX = TX + 2, RY = TY + 2;  // the footprint: column and ring of one cell
    static constexpr int THREADS = RX * RY;
    static constexpr int RING = narrow ? SIMSPLIT_D3Q19_FUSED16_RING : SIMSPLIT_D3Q19_FUSED_RING;
    static constexpr int MIN_BLOCKS =
        narrow ? SIMSPLIT_D3Q19_FUSED16_MIN_BLOCKS : SIMSPLIT_D3Q19_FUSED_MIN_BLOCKS;
    static_assert(RING == 3 || RING == 4, "the ring holds 3 or 4 planes");
};

// Element of shared memory holding population q of footprint cell (lx, ly) of ring slot s.
template <typename S>
__device__ __forceinline__ int slot_index(int s, int q, int lx, int ly)
{
    return ((s * D3Q19::Q + q) * shape<S>::RY + ly) * shape<S>::RX + lx;
}

template <typename S>
__device__ __forceinline__ int slot_of(int k)
{
    return k % shape<S>::RING;  // k >= 0
}

// Interior cell a footprint position g (0 .. n + 1 and beyond) stands for: periodic axes wrap
// the ghost positions to the opposite interior cells; otherwise g itself.
__device__ __forceinline__ int footprint_cell(int g, int n, bool periodic)
{
    if (!periodic) return g;
    return g == 0 ? n : (g == n + 1 ? 1 : g);
}

// The block's threads: on a GPU each thread runs its own index; the host emulation of the
// tests runs every index in turn, and a barrier is then a no-op.
struct gpu_team {
    template <typename F> __device__ __forceinline__ void each(F&& f) const
    {
        f(int(threadIdx.x));
    }
    __device__ __forceinline__ void sync() const { __syncthreads(); }
    // a value each thread keeps from one phase to a later one (registers)
    template <typename X> struct local {
        X v;
        __device__ __forceinline__ X& operator()(int) { return v; }
    };
};

// What every thread of a sweep needs: the arrays, the grid, the parameters.
template <typename T, typename S, typename P> struct sweep_args {
    const S* __restrict__ f_src;
    S* __restrict__ f_dst;
    const lbm::flag_t* __restrict__ flags;
    T* __restrict__ rho_out;
    T* __restrict__ ux_out;
    T* __restrict__ uy_out;
    T* __restrict__ uz_out;
    int nx, ny, nz;
    lbm::offset_t pitch, layer;
    P plane;
    T om_p, om_m, lid_u, fx, fy, fz;
    bool per_x, per_y;
};

// Footprint cell t (thread index) of a block whose column starts at (i0, j0): its position
// (lx, ly) in the footprint and the cell (i, j) it stands for.
struct footprint_pos {
    int lx, ly, i, j;
};
template <typename T, typename S, typename P>
__device__ __forceinline__ footprint_pos footprint_of(const sweep_args<T, S, P>& a, int t, int i0,
                                                      int j0)
{
    constexpr int RX = shape<S>::RX;
    const int lx = t % RX, ly = t / RX;
    return {lx, ly, footprint_cell(i0 - 1 + lx, a.nx, a.per_x),
            footprint_cell(j0 - 1 + ly, a.ny, a.per_y)};
}

// Step t + 1 of fluid footprint cell c of plane kk from its pulled populations fl into ring
// slot kk.
template <typename T, typename S, bool FORCED, typename P>
__device__ __forceinline__ void first_collide(const sweep_args<T, S, P>& a, S* ring,
                                              const footprint_pos& c, int kk,
                                              lbm::offset_t cell, lbm::flag_t near_wall, T* fl)
{
    using L = D3Q19;
    if (near_wall)
        bounce_back_3d(fl, a.f_src, a.flags, cell, c.i, c.j, kk, a.nx, a.ny, a.pitch, a.layer,
                       a.plane, a.per_x, a.per_y, a.lid_u);
    const int s = slot_of<S>(kk);
    auto out = [&](int q, T v) {
        ring[slot_index<S>(s, q, c.lx, c.ly)] = lbm::encode<L, T, S>(v, q);
    };
    collide_3d<T, false, FORCED>(fl, c.i, c.j, kk, a.nx, a.ny, a.rho_out, a.ux_out, a.uy_out,
                                 a.uz_out, a.om_p, a.om_m, a.fx, a.fy, a.fz, out);
}

// Step t + 1 of footprint cell t (thread index) of plane kk into ring slot kk, columns from
// i0 - 1 and rows from j0 - 1; solid cells and cells past the array are left alone (a pull
// from a solid cell becomes a bounce-back in the second step, without reading it).
template <typename T, typename S, bool FORCED, typename P>
__device__ __forceinline__ void first_step(const sweep_args<T, S, P>& a, S* ring, int t, int kk,
                                           int i0, int j0, const pull_deltas<P>& deltas)
{
    using L = D3Q19;
    const footprint_pos c = footprint_of(a, t, i0, j0);
    if (c.i > a.nx + 1 || c.j > a.ny + 1) return;
    const lbm::offset_t cell = cell_offset_3d(c.i, c.j, kk, a.pitch, a.layer);
    const lbm::flag_t own = a.flags[cell];
    if (own & FLAG_SOLID) return;  // ghost cells of walls included: only interior cells pass
    T fl[L::Q];
    const lbm::flag_t near_wall = pull_3d(fl, a.f_src, a.flags, own, c.i, c.j, kk, a.nx, a.ny,
                                          a.pitch, a.layer, a.plane, a.per_x, a.per_y, deltas);
    first_collide<T, S, FORCED>(a, ring, c, kk, cell, near_wall, fl);
}

// Prefetch (SIMSPLIT_D3Q19_FUSED_PREFETCH, source.D3Q19_FUSED_PREFETCH: 0 off, 1 for every
// storage, 2 for 16-bit storage only): each thread issues the loads of its footprint cell's
// next plane (own flag and 19 stored elements, not waiting for the flag) before it collides
// the current one, so that they are in flight through the collision, the barrier and the
// second step instead of starting after the barrier; the elements wait in registers, still
// encoded (19 more live values). A footprint position that stands for no interior cell (a
// ghost cell of a wall, past the array) loads its flag only; one that turns out fluid pulls
// when it is used, as first_step does. The same bits either way: only when the loads are
// issued changes.
#if SIMSPLIT_D3Q19_FUSED_PREFETCH && defined(SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS)
#error "SIMSPLIT_D3Q19_FUSED_PREFETCH takes each cell's own NEAR_WALL bit (no neighbour flags)"
#endif
template <typename S> __device__ __forceinline__ constexpr bool prefetch_planes()
{
    return SIMSPLIT_D3Q19_FUSED_PREFETCH == 1
           || (SIMSPLIT_D3Q19_FUSED_PREFETCH == 2 && sizeof(S) == 2);
}
template <typename S> struct pending_cell {
    S raw[D3Q19::Q];
    lbm::flag_t own;  // FLAG_SOLID past the array: nothing to do
    bool pulled;
};

template <typename T, typename S, typename P>
__device__ __forceinline__ void first_load(const sweep_args<T, S, P>& a, pending_cell<S>& pend,
                                           int t, int kk, int i0, int j0,
                                           const pull_deltas<P>& deltas)
{
    const footprint_pos c = footprint_of(a, t, i0, j0);
    pend.own = FLAG_SOLID;
    pend.pulled = false;
    if (c.i > a.nx + 1 || c.j > a.ny + 1) return;
    pend.own = a.flags[cell_offset_3d(c.i, c.j, kk, a.pitch, a.layer)];
    if (c.i < 1 || c.i > a.nx || c.j < 1 || c.j > a.ny) return;
    pull_each_3d(a.f_src, c.i, c.j, kk, a.nx, a.ny, a.pitch, a.layer, a.plane, a.per_x, a.per_y,
                 deltas, [&](int q, S raw) { pend.raw[q] = raw; });
    pend.pulled = true;
}

template <typename T, typename S, bool FORCED, typename P>
__device__ __forceinline__ void first_finish(const sweep_args<T, S, P>& a, S* ring,
                                             const pending_cell<S>& pend, int t, int kk, int i0,
                                             int j0, const pull_deltas<P>& deltas)
{
    using L = D3Q19;
    if (pend.own & FLAG_SOLID) return;
    const footprint_pos c = footprint_of(a, t, i0, j0);
    T fl[L::Q];
    if (pend.pulled) {
#pragma unroll
        for (int q = 0; q < L::Q; ++q) fl[q] = lbm::decode<L, T>(pend.raw[q], q);
    } else {
        pull_3d(fl, a.f_src, a.flags, pend.own, c.i, c.j, kk, a.nx, a.ny, a.pitch, a.layer,
                a.plane, a.per_x, a.per_y, deltas);
    }
    first_collide<T, S, FORCED>(a, ring, c, kk, cell_offset_3d(c.i, c.j, kk, a.pitch, a.layer),
                                pend.own & FLAG_NEAR_WALL, fl);
}

// Step t + 2 of column cell t (thread index, t < TX * TY) of plane kb from the ring, into f_dst.
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__device__ __forceinline__ void second_step(const sweep_args<T, S, P>& a, const S* ring, int t,
                                            int kb, int i0, int j0)
{
    using L = D3Q19;
    constexpr int TX = shape<S>::TX;
    const int lx = t % TX + 1, ly = t / TX + 1;
    const int i = i0 + lx - 1, j = j0 + ly - 1;
    if (i > a.nx || j > a.ny) return;
    const lbm::offset_t cell = cell_offset_3d(i, j, kb, a.pitch, a.layer);
    const lbm::flag_t own = a.flags[cell];
    if (own & FLAG_SOLID) return;
    T fl[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        fl[q] = lbm::decode<L, T>(
            ring[slot_index<S>(slot_of<S>(kb - L::cz(q)), q, lx - L::cx(q), ly - L::cy(q))],
            q);
    if (own & FLAG_NEAR_WALL)  // the own opp q of step t + 1 is in the ring
        bounce_back_solid_sources(fl, a.flags, i, j, kb, a.nx, a.ny, a.pitch, a.layer, a.per_x,
                                  a.per_y, a.lid_u, [&](int q, lbm::offset_t) {
                                      return lbm::decode<L, T>(
                                          ring[slot_index<S>(slot_of<S>(kb), L::opp(q), lx,
                                                             ly)],
                                          L::opp(q));
                                  });
    auto out = [&](int q, T v) {
        lbm::store_population<L>(population_at(a.f_dst, q, a.plane, cell), q, v);
    };
    collide_3d<T, STORE_MACRO, FORCED>(fl, i, j, kb, a.nx, a.ny, a.rho_out, a.ux_out, a.uy_out,
                                       a.uz_out, a.om_p, a.om_m, a.fx, a.fy, a.fz, out);
}

// One block's sweep: column (bx, by), planes [za, zb) of f_dst to step t + 2.
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P, typename Team>
__device__ __forceinline__ void sweep(const Team& team, const sweep_args<T, S, P>& a, S* ring,
                                      int bx, int by, int za, int zb)
{
    constexpr int TX = shape<S>::TX, TY = shape<S>::TY;
    const int i0 = bx * TX + 1, j0 = by * TY + 1;
    const pull_deltas<P> deltas = make_pull_deltas(a.plane, a.pitch, a.layer);
    // prefetch: the first step's planes are za - 1 .. zb, those that exist (kk below)
    const int fa = za - 1 < 1 ? 1 : za - 1, fb = zb < a.nz ? zb : a.nz;
    typename Team::template local<pending_cell<S>> pend;
    if (prefetch_planes<S>() && fa <= fb)
        team.each([&](int t) { first_load(a, pend(t), t, fa, i0, j0, deltas); });
    for (int kk = za - 1; kk <= zb; ++kk) {
        if (kk >= 1 && kk <= a.nz) {
            if (prefetch_planes<S>()) {
                team.each([&](int t) {
                    const pending_cell<S> cur = pend(t);
                    if (kk < fb) first_load(a, pend(t), t, kk + 1, i0, j0, deltas);
                    first_finish<T, S, FORCED>(a, ring, cur, t, kk, i0, j0, deltas);
                });
            } else {
                team.each([&](int t) { first_step<T, S, FORCED>(a, ring, t, kk, i0, j0, deltas); });
            }
        }
        team.sync();  // plane kk's step t + 1 is in the ring before any second step reads it
        if (kk - 1 >= za)
            team.each([&](int t) {
                if (t < TX * TY) second_step<T, S, STORE_MACRO, FORCED>(a, ring, t, kk - 1, i0, j0);
            });
        if (shape<S>::RING == 3) team.sync();  // the next first step overwrites the slot read
    }
}

}  // namespace fused
}  // namespace

// Steps t + 1 and t + 2 of planes [k0, k1): f_src (step t) -> f_dst (step t + 2). Grid: x-y
// columns of TX x TY cells (fused::shape<S>; blockIdx.x, blockIdx.y) times runs of `run_planes`
// planes (blockIdx.z); THREADS threads; RING * 19 * THREADS stored elements of dynamic
// shared memory. rho/u (if STORE_MACRO) are those of step t + 2.
// (double arithmetic asks for one resident block: at two it spilled with float storage)
template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__global__ void __launch_bounds__(fused::shape<S>::THREADS,
                                  sizeof(T) == 4 ? fused::shape<S>::MIN_BLOCKS : 1)
d3q19_stream_collide_two_steps(const S* __restrict__ f_src, S* __restrict__ f_dst,
                               const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                               T* __restrict__ ux_out, T* __restrict__ uy_out,
                               T* __restrict__ uz_out, int nx, int ny, int nz,
                               lbm::index_t pitch64, lbm::index_t layer64, lbm::index_t plane64,
                               int k0, int k1, int run_planes, T om_p, T om_m, T lid_u, T fx,
                               T fy, T fz, int periodic_x, int periodic_y)
{
    extern __shared__ __align__(16) unsigned char fused_ring_bytes[];
    const int za = k0 + int(blockIdx.z) * run_planes;
    const int zb = za + run_planes < k1 ? za + run_planes : k1;
    const fused::sweep_args<T, S, P> a{f_src, f_dst, flags, rho_out, ux_out, uy_out, uz_out,
                                       nx, ny, nz, lbm::offset_t(pitch64),
                                       lbm::offset_t(layer64), P(plane64), om_p, om_m, lid_u,
                                       fx, fy, fz, periodic_x != 0, periodic_y != 0};
    fused::sweep<T, S, STORE_MACRO, FORCED, P>(fused::gpu_team{}, a,
                                               reinterpret_cast<S*>(fused_ring_bytes),
                                               int(blockIdx.x), int(blockIdx.y), za, zb);
}

// --- bodies, inlets and outlets (domain.bodies, domain.boundaries.x_low/x_high) -----------------
// d3q19_stream_collide_bodies is the one-cell two-lattice pull kernel (pull_3d, collide_3d: the
// same bits as d3q19_stream_collide on every cell that borders no open face and no body link)
// with the boundary rules of kernels/d2q9.cu near a wall: INLET ghost cells return Ladd's
// moving-wall value at the inflow speed of the cell's line (k, j), OUTLET ones the outlet's rule
// (anti-bounce-back at density rho_w, zero-gradient or convective: outlet_link_3d), and the body links of FLAG_CURVED cells interpolated bounce-back (Bouzidi,
// linear, one weight per link, or quadratic where `quadratic`, three: 57 weight planes,
// simsplit/fluid/geometry/links.py; reads two planes away go to `far`, the array behind f_src,
// whose plane far_off is f_src's plane 0). A separate kernel so that the
// tuned box kernel keeps its registers. Float arithmetic asks for four resident blocks (64
// registers, no spills: the box kernel's five would cap it at 48 and spill 52-116 bytes, even
// the variant without open faces with float storage under nvcc 13.5); double for one, as the
// in-place kernel (without it ptxas 13.0 held the double/fp16 variant to 80 registers with a
// 4-byte spill; at one it takes 92-150). Launched in blocks of D3Q19_BODIES_BLOCK_X threads
// (simsplit/backends/cuda_c/source.py): at 256 a block is a whole row of a narrow duct, and
// its slow open-rule warps held the row's plain warps resident (3D-1Z at 250 x 41 x 41 double:
// 58 % of the box kernel on an H200, BENCHMARKS.md). Near a wall a cell with an outlet link
// (the flag beside it, not its sources') computes its velocity once for all of them, then
// applies each link's rule.
// OPEN, the open-face rules compiled in (generated header, source.D3Q19_BODIES_OPEN):
// BODIES_WALLS none (x faces walls or periodic: bodies and walls only), BODIES_PRESSURE_OUTLET
// the inlet and the pressure outlet, BODIES_ANY_OUTLET every outlet kind, BODIES_SLIP every
// outlet kind and free-slip walls (SLIP ghost cells: specular_3d; every 3D slab with a slip
// cell takes it, and in float it asks for three resident blocks, not four: with the slip
// rule, 64 registers spilled 16-32 bytes under nvcc 13.0). The launcher picks
// the smallest that holds the slab's flags and the outlet's kind; each gives the bits of the
// general one where it applies (the outlet kinds' code cost 3 % at 3D-1Z, BENCHMARKS.md).
// BODIES_QUADRATIC: every outlet kind and quadratic interpolated bounce-back (its code in the
// other variants made the float ones spill 128 bytes under their 64-register cap; this one
// asks for three resident blocks instead of four). BODIES_SLIP_QUADRATIC: both the slip rule
// and quadratic links (a slab with slip cells and quadratic links), a variant of its own so
// that BODIES_SLIP and BODIES_QUADRATIC keep their code; in float it asks for two resident
// blocks (at three, 80 registers, the float/e4m11 one with rho/u stores and the force spilled
// 24 bytes under nvcc 13.0, sm_90).
// Mirrors the NEAR_WALL branch of simsplit/backends/cpu/d3q19.py operation for operation.
//
// inlet: (nz + 2) x (ny + 2) speeds, packed; links: the weights in f's layout (same element
// strides), in the arithmetic type; outlet_slots: 19 x (nz + 2) x (ny + 2), packed (a
// convective outlet's previous values, touched only by its links). 32-bit element offsets only (the launcher checks).
// Columns [i0, i1) (1-based interior ones): the launcher runs it on the column spans of a slab
// that need its rules and the box kernel of the storage on the others where it has one (neq16
// records: d3q19_stream_collide_neq, whose registers allow more blocks per SM).
namespace {

// Population q of `cell`: decoded from storage S, or on neq16 records (S = neq::rec, T
// float) rebuilt from the cell's record, for every rule of the bodies kernel
template <typename T, typename S, typename P>
__device__ __forceinline__ T fetch_3d(const S* __restrict__ f, int q, P plane, lbm::offset_t cell)
{
    if constexpr (neq::is_records<S>::value)
        return neq::pull<D3Q19>(f, q, plane, P(cell));
    else
        return lbm::decode<D3Q19, T>(lbm::read_only(population_at(f, q, plane, cell)), q);
}

// Velocity of the own cell's post-collision populations of step t, which the pressure outlet's
// anti-bounce-back takes: every population in order, zero products included (as the CPU
// kernel's _anti_bounce_back). usq = 1.5 u.u.
template <typename T> struct outlet_velocity {
    T ux, uy, uz, usq;
};

template <typename T, typename S, typename P>
__device__ __forceinline__ outlet_velocity<T> own_velocity_3d(const S* __restrict__ f_src,
                                                              P plane, lbm::offset_t cell)
{
    using L = D3Q19;
    T r = T(0.0), jx = T(0.0), jy = T(0.0), jz = T(0.0);
#pragma unroll
    for (int p = 0; p < L::Q; ++p) {
        const T v = fetch_3d<T>(f_src, p, plane, cell);
        r += v;
        jx += T(L::cx(p)) * v;
        jy += T(L::cy(p)) * v;
        jz += T(L::cz(p)) * v;
    }
    const T inv = T(1.0) / r;
    outlet_velocity<T> u;
    u.ux = jx * inv;
    u.uy = jy * inv;
    u.uz = jz * inv;
    u.usq = T(1.5) * (u.ux * u.ux + u.uy * u.uy + u.uz * u.uz);
    return u;
}

// Pressure outlet: -f*_opp(q) + 2 w_q rho_w (1 + 4.5 (c_q.u)^2 - 1.5 u^2), u = own_velocity_3d.
template <typename T>
__device__ __forceinline__ T anti_bounce_back_3d(int q, const outlet_velocity<T>& u, T rho_w,
                                                 T own_opp)
{
    using L = D3Q19;
    const T cu = T(L::cx(q)) * u.ux + T(L::cy(q)) * u.uy + T(L::cz(q)) * u.uz;
    const T feq = T(2.0 * L::w(q)) * rho_w * (T(1.0) + T(4.5) * cu * cu - u.usq);
    return feq - own_opp;
}

// The outlet's rule and state (domain.outlet): kind OUTLET_PRESSURE, OUTLET_ZERO_GRADIENT or
// OUTLET_CONVECTIVE; the convective step's weights keep (previous value) and take (source);
// press_w, the weight of the pressure outlet's value mixed into the open kinds'; slots, a
// convective outlet's previous values [q][k][j], (nz + 2) x (ny + 2) per population.
template <typename T> struct outlet_rule {
    int kind;
    T keep, take, press_w;
    T* slots;
};

// What an outlet link returns along q into `cell` (k, j): the rules of kernels/d2q9.cu
// outlet_link. The open kinds' source f*_q(k - c_qz, j - c_qy, i) is the pull source `src`
// moved back one column into the own one (no periodic x beside an outlet).
template <typename T, typename S, typename P>
__device__ __forceinline__ T outlet_link_3d(int q, const outlet_rule<T>& rule, T rho_w,
                                            const outlet_velocity<T>& outlet_u, T own_opp,
                                            const S* __restrict__ f_src, P plane,
                                            lbm::offset_t src, int j, int k, int ny, int nz)
{
    using L = D3Q19;
    if (rule.kind == OUTLET_PRESSURE) return anti_bounce_back_3d(q, outlet_u, rho_w, own_opp);
    const lbm::offset_t nb = lbm::offset_t(lbm::index_t(src) + L::cx(q));
    T v = fetch_3d<T>(f_src, q, plane, nb);
    T* slot = rule.slots + (lbm::index_t(q) * (nz + 2) + k) * (ny + 2) + j;
    if (rule.kind == OUTLET_CONVECTIVE) v = rule.keep * *slot + rule.take * v;
    if (rule.press_w > T(0.0))
        v += rule.press_w * (anti_bounce_back_3d(q, outlet_u, rho_w, own_opp) - v);
    if (rule.kind == OUTLET_CONVECTIVE) *slot = v;
    return v;
}

// Free-slip walls: the D2Q9 kernel's specular (kernels/d2q9.cu) with z, which never wraps
// (ghost planes). Mirrors _specular of simsplit/backends/cpu/d3q19.py.
template <typename T, typename S, typename P>
__device__ __forceinline__ T specular_3d(int q, const S* __restrict__ f_src,
                                         const lbm::flag_t* __restrict__ flags, P plane,
                                         lbm::offset_t cell, int i, int j, int nx, int ny,
                                         lbm::offset_t pitch, lbm::offset_t layer, bool per_x,
                                         bool per_y, T own_opp)
{
    using L = D3Q19;
    const lbm::offset_t dx = lbm::offset_t(column_offset(-L::cx(q), i, nx, per_x));
    const lbm::offset_t dy = lbm::offset_t(column_offset(-L::cy(q), j, ny, per_y)) * pitch;
    const lbm::offset_t dz = lbm::offset_t(-L::cz(q)) * layer;
    int mask = 0;
    if (L::cx(q) != 0 && __ldg(flags + (cell + dx)) == FLAG_SLIP) mask |= 1;
    if (L::cy(q) != 0 && __ldg(flags + (cell + dy)) == FLAG_SLIP) mask |= 2;
    if (L::cz(q) != 0 && __ldg(flags + (cell + dz)) == FLAG_SLIP) mask |= 4;
    const lbm::offset_t beside = cell + ((mask & 1) ? 0u : dx) + ((mask & 2) ? 0u : dy)
                                 + ((mask & 4) ? 0u : dz);
    if (__ldg(flags + beside) & FLAG_BOUNDARY) return own_opp;
    const int m = d3q19_specular(q, mask);
    return fetch_3d<T>(f_src, m, plane, beside);
}

// What the geometry returns along q into fluid cell `cell` from boundary source `kind` at
// `src`; outlet_u: own_velocity_3d of the cell (read only where kind is FLAG_OUTLET and the
// outlet's rule takes the pressure outlet's value). OPEN (BODIES_*): which open-face rules
// are compiled in (free-slip walls: BODIES_SLIP and BODIES_SLIP_QUADRATIC; quadratic links:
// BODIES_QUADRATIC and BODIES_SLIP_QUADRATIC); a variant without them never sees
// their flags (the launcher's choice).
template <int OPEN, typename T, typename S, typename P>
__device__ __forceinline__ T body_boundary_3d(int q, lbm::flag_t kind, lbm::flag_t own,
                                              const S* __restrict__ f_src,
                                              const lbm::flag_t* __restrict__ flags, P plane,
                                              lbm::offset_t cell, lbm::offset_t src, int i,
                                              int j, int k, int nx, int ny, int nz,
                                              lbm::offset_t pitch, lbm::offset_t layer,
                                              bool per_x, bool per_y, T lid_u,
                                              const T* __restrict__ inlet, T inlet_scale,
                                              T rho_w, const outlet_velocity<T>& outlet_u,
                                              const outlet_rule<T>& outlet,
                                              const T* __restrict__ links, bool quadratic,
                                              const S* __restrict__ far, int far_off)
{
    using L = D3Q19;
    const int o = L::opp(q);
    const T own_opp = fetch_3d<T>(f_src, o, plane, cell);
    if constexpr (OPEN != BODIES_WALLS) {
        if (kind == FLAG_INLET)
            return own_opp + T(6.0 * L::w(q) * L::cx(q))
                                 * (inlet_scale * __ldg(inlet + lbm::index_t(k) * (ny + 2) + j));
        if (kind == FLAG_OUTLET) {
            if constexpr (OPEN == BODIES_PRESSURE_OUTLET)
                return anti_bounce_back_3d(q, outlet_u, rho_w, own_opp);
            else
                return outlet_link_3d(q, outlet, rho_w, outlet_u, own_opp, f_src, plane, src, j,
                                      k, ny, nz);
        }
    }
    if constexpr (OPEN == BODIES_SLIP || OPEN == BODIES_SLIP_QUADRATIC) {
        if (kind == FLAG_SLIP)
            return specular_3d(q, f_src, flags, plane, cell, i, j, nx, ny, pitch, layer, per_x,
                               per_y, own_opp);
    }
    if (kind == FLAG_WALL && (own & FLAG_CURVED)) {
        // both candidates are loaded with the weight, before its sign picks one: one memory
        // round trip per link instead of two
        const T w = __ldg(population_at(links, q, plane, cell));
        const lbm::offset_t nb =
            neighbour_cell_3d(q, 1, i, j, k, nx, ny, pitch, layer, per_x, per_y);
        const T nb_opp = fetch_3d<T>(f_src, o, plane, nb);
        const T own_q = fetch_3d<T>(f_src, q, plane, cell);
        if ((OPEN == BODIES_QUADRATIC || OPEN == BODIES_SLIP_QUADRATIC) && quadratic) {
            // |w| own_opp + w1 A, then + w2 B unless w2 is 0 (as the CPU kernel)
            const T w1 = __ldg(population_at(links, L::Q + q, plane, cell));
            const T w2 = __ldg(population_at(links, 2 * L::Q + q, plane, cell));
            if (w >= T(0.0)) {  // A, B: f*_opp at x + c_q and x + 2 c_q
                T v = w * own_opp + w1 * nb_opp;
                if (w2 != T(0.0)) {
                    const lbm::offset_t at = cell_offset_3d(
                        lbm::far_column(i, 2 * L::cx(q), nx, per_x),
                        lbm::far_column(j, 2 * L::cy(q), ny, per_y), k + 2 * L::cz(q) + far_off,
                        pitch, layer);
                    v = v + w2 * fetch_3d<T>(far, o, plane, at);
                }
                return v;
            }
            T v = (-w) * own_opp + w1 * own_q;  // A, B: f*_q at x and x + c_q
            if (w2 != T(0.0))
                v = v + w2 * fetch_3d<T>(f_src, q, plane, nb);
            return v;
        }
        if (w >= T(0.0)) return w * own_opp + (T(1.0) - w) * nb_opp;  // wall nearer than halfway
        return (-w) * own_opp + (T(1.0) + w) * own_q;  // beyond halfway: the own cell's q
    }
    return lbm::bounce_back<L>(q, kind, own_opp, lid_u);
}

}  // namespace

// Resident blocks per SM the bodies kernel asks of the register allocator (see above); on
// neq16 records one (each rule rebuilds its populations: with two, 128 registers, it spilled
// 644 bytes).
template <typename T, typename S, int OPEN> __host__ __device__ constexpr int bodies_min_blocks()
{
    if (sizeof(T) != 4 || neq::is_records<S>::value) return 1;
    if (OPEN == BODIES_SLIP_QUADRATIC) return 2;
    return OPEN == BODIES_SLIP || OPEN == BODIES_QUADRATIC ? 3 : 4;
}

template <typename T, typename S, bool STORE_MACRO, bool FORCED, int OPEN>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X, bodies_min_blocks<T, S, OPEN>())
d3q19_stream_collide_bodies(const S* __restrict__ f_src, S* __restrict__ f_dst,
                            const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                            T* __restrict__ ux_out, T* __restrict__ uy_out,
                            T* __restrict__ uz_out, int nx, int ny, int nz, lbm::index_t pitch64,
                            lbm::index_t layer64, lbm::index_t plane64, int k0, int k1, T om_p,
                            T om_m, T lid_u, T fx, T fy, T fz, int periodic_x, int periodic_y,
                            const T* __restrict__ inlet, T inlet_scale, T rho_w,
                            const T* __restrict__ links, int outlet_kind, T outlet_keep,
                            T outlet_take, T outlet_press_w, T* __restrict__ outlet_slots,
                            int quadratic, const S* __restrict__ far, int far_off, int i0,
                            int i1)
{
    using L = D3Q19;
    using P = lbm::offset_t;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + i0;
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i >= i1 || j > ny || k >= k1) return;
    const lbm::offset_t pitch = lbm::offset_t(pitch64), layer = lbm::offset_t(layer64);
    const P plane = P(plane64);
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    const bool per_x = periodic_x != 0, per_y = periodic_y != 0;
    const pull_deltas<P> deltas = make_pull_deltas(plane, pitch, layer);
    T fl[L::Q];
    lbm::flag_t near_wall;
    if constexpr (neq::is_records<S>::value) {  // each population rebuilt from its source
        near_wall = own & FLAG_NEAR_WALL;
#pragma unroll
        for (int q = 0; q < L::Q; ++q)
            fl[q] = fetch_3d<T>(f_src, q, plane,
                                source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y));
    } else {
        near_wall = pull_3d(fl, f_src, flags, own, i, j, k, nx, ny, pitch, layer, plane, per_x,
                            per_y, deltas);
    }
    if (near_wall) {  // rare and warp-coherent
        // the outlet's velocity once per cell, not once per outlet link (five of them: each
        // would reload the cell's 19 populations and divide, a chain of memory round trips
        // that held the whole block); the same bits, as the same operations
        // Whether the cell has one: outlets are the ghost columns i = 0 and nx + 1 of every
        // interior line (simsplit/fluid/geometry/grid.py paint), so a cell pulls from the
        // outlet exactly when it is the first or last of its line and the line's own ghost
        // beside it is one: one flag beside the cell's own, not its 19 sources' (a memory
        // round trip before the velocity's loads could start).
        const outlet_rule<T> outlet{outlet_kind, outlet_keep, outlet_take, outlet_press_w,
                                    outlet_slots};
        outlet_velocity<T> outlet_u{};
        if constexpr (OPEN != BODIES_WALLS) {
            const bool outlet_link = (i == nx && __ldg(flags + cell + 1) == FLAG_OUTLET)
                                     || (i == 1 && __ldg(flags + cell - 1) == FLAG_OUTLET);
            if (outlet_link && (OPEN == BODIES_PRESSURE_OUTLET || outlet_kind == OUTLET_PRESSURE
                                || outlet_press_w > T(0.0)))
                outlet_u = own_velocity_3d<T>(f_src, plane, cell);
        }
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::offset_t src =
                source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y);
            const lbm::flag_t kind = __ldg(flags + src);
            if (kind & FLAG_BOUNDARY)
                fl[q] = body_boundary_3d<OPEN>(q, kind, own, f_src, flags, plane, cell, src, i,
                                               j, k, nx, ny, nz, pitch, layer, per_x, per_y,
                                               lid_u, inlet, inlet_scale, rho_w, outlet_u,
                                               outlet, links, quadratic != 0, far, far_off);
        }
    }
    if constexpr (neq::is_records<S>::value) {
        T post[L::Q];
        auto out = [&](int q, T v) { post[q] = v; };
        collide_3d<T, STORE_MACRO, FORCED>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out,
                                           om_p, om_m, fx, fy, fz, out);
        neq::store<L>(f_dst, post, plane, P(cell));
    } else {
        auto out = [&](int q, T v) {
            lbm::store_population<L>(population_at(f_dst, q, plane, cell), q, v);
        };
        collide_3d<T, STORE_MACRO, FORCED>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out,
                                           om_p, om_m, fx, fy, fz, out);
    }
}

#include "d3q19_neq.cuh"
