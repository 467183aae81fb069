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
// docs/ncu_d3q19_h200_2026-12-03.log); population_at below forms the address.

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

// The 19 pulled populations of cell (i, j, k) by scalar loads, all in flight first; returns the
// cell's NEAR_WALL bit (or, tuning variant, every cell ORs its sources' solid bits in, as the
// D2Q9 kernel does).
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
    // cells whose sources do not wrap (all but the periodic rows' ends) address population q
    // as cell + deltas.d[q], the delta the same for every thread (uniform registers): 0.6
    // fewer warp instructions per cell than the general path below, fp16 1.5 % faster (H200,
    // docs/tune_d3q19_h200_2026-12-03_offsets.log; deltas as a kernel parameter, 0.3 fewer
    // again, were no faster). Not with 64-bit offsets: their 19 deltas spill at 48 registers.
    const bool wraps = (per_x && (i == 1 || i == nx)) || (per_y && (j == 1 || j == ny));
    if (sizeof(P) == sizeof(lbm::offset_t) && !wraps) {
        const P cell = P(cell_offset_3d(i, j, k, pitch, layer));
#pragma unroll
        for (int q = 0; q < L::Q; ++q)
            fl[q] = lbm::load_population<L, T>(f_src + (cell + deltas.d[q]), q);
        return near_wall;
    }
#endif
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const lbm::offset_t src = source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y);
        fl[q] = lbm::load_population<L, T>(population_at(f_src, q, plane, src), q);
#ifdef SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS
        near_wall |= __ldg(flags + src) & FLAG_SOLID;
#endif
    }
    return near_wall;
}

// Near a wall (rare and warp-coherent): the pulls from solid sources become bounce-back.
template <typename T, typename S, typename P>
__device__ __forceinline__ void bounce_back_3d(T* fl, const S* __restrict__ f_src,
                                               const lbm::flag_t* __restrict__ flags,
                                               lbm::offset_t cell, int i, int j, int k, int nx,
                                               int ny, lbm::offset_t pitch, lbm::offset_t layer,
                                               P plane, bool per_x, bool per_y,
                                               T lid_u)
{
    using L = D3Q19;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const lbm::flag_t kind =
            __ldg(flags + source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y));
        if (kind & FLAG_SOLID) {
            const T own_opp = lbm::decode<L, T>(
                lbm::read_only(population_at(f_src, L::opp(q), plane, cell)), L::opp(q));
            fl[q] = lbm::bounce_back<L>(q, kind, own_opp, lid_u);
        }
    }
}

}  // namespace

// Cells per thread along x of the two-lattice pull kernel: 1, or 2 (cells i, i + 1 with odd i,
// every population moved as a 2-element vector: fp16 needs more bytes in flight per thread
// than 2-byte accesses give). 2 needs every [q, k, j, 1] aligned to two elements (padded rows:
// simsplit/backends/layout.py), which the launcher checks. The production choice is
// simsplit.backends.cuda_c.source.D3Q19_CELLS_X (the generated header); the AA kernel always
// takes one cell.
#ifndef SIMSPLIT_D3Q19_CELLS_X
#define SIMSPLIT_D3Q19_CELLS_X 1
#endif
static_assert(SIMSPLIT_D3Q19_CELLS_X == 1 || SIMSPLIT_D3Q19_CELLS_X == 2,
              "SIMSPLIT_D3Q19_CELLS_X must be 1 or 2");

// Resident blocks per SM asked of the register allocator for float arithmetic: at one block
// NVRTC gave the kernel 84 registers (37.5 % occupancy at 256 threads) and it reached 62 % of
// the copy bandwidth at 512^3; five blocks cap it at 48 registers without spills: 86 % in
// float32, 51 % in fp16 (H200, scripts/tune_d3q19.py, docs/tune_d3q19_h200_2026-12-02.log).
// Double arithmetic, the variant that also stores rho and u (the last step of a chunk) and
// the in-place kernel would spill at 48 registers: they keep one block. Two cells per thread
// hold two cells' populations: 109 (fp16) and 127 (float) registers at one block (ptxas
// sm_90), which already leaves two blocks of 256 resident; three blocks (80 registers) spill
// (docs/d3q19.md), so one block; on an H200 it ran slower than one cell at any block count
// (docs/tune_d3q19_pairs_h200_2026-12-03.log): the kernels are instruction-issue bound.
#ifndef SIMSPLIT_D3Q19_MIN_BLOCKS
#if SIMSPLIT_D3Q19_CELLS_X == 1
#define SIMSPLIT_D3Q19_MIN_BLOCKS (1280 / SIMSPLIT_BLOCK_X)
#else
#define SIMSPLIT_D3Q19_MIN_BLOCKS 1
#endif
#endif
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
// the DRAM bandwidth, ran 0.3 % slower (docs/tune_d3q19_h200_2026-12-03_l2.log,
// docs/bench_d3q19_h200_2026-12-03_aa.log). The cost: a solid cell's loads are issued for
// nothing, bandwidth in proportion to the solid fraction.
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
    T lid_u, T fx, T fy, T fz, bool per_x, bool per_y)
{
    using L = D3Q19;
    using Pair = lbm::pair_of<S>;
    const bool live[2] = {!(own0 & FLAG_SOLID), !(own1 & FLAG_SOLID)};
    if (!live[0] && !live[1]) return;
    const bool vector = live[0] && live[1] && !(per_x && (i == 1 || i + 1 == nx));
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    lbm::pair_t<S> raw[L::Q];  // stored elements, still encoded: one register per fp16 pair
    lbm::flag_t near_wall[2] = {lbm::flag_t(own0 & FLAG_NEAR_WALL),
                                lbm::flag_t(own1 & FLAG_NEAR_WALL)};
    if (vector) {
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
    // (decoded, dead) half of raw: an fp16 pair stays in one register until it is stored
    auto collide_cell = [&](int c) {
        T fl[L::Q];
#pragma unroll
        for (int q = 0; q < L::Q; ++q) fl[q] = lbm::decode<L, T>(Pair::get(raw[q], c), q);
        if (near_wall[c])
            bounce_back_3d(fl, f_src, flags, cell + c, i + c, j, k, nx, ny, pitch, layer, plane,
                           per_x, per_y, lid_u);
        auto out = [&](int q, T v) {
            const S e = lbm::encode<L, T, S>(v, q);
            S* p = population_at(f_dst, q, plane, cell);
            if (!vector) lbm::store_population(p + c, e);
            else if (c == 0) raw[q] = Pair::with_first(raw[q], e);
            else lbm::store_pair(p, Pair::get(raw[q], 0), e);
        };
        collide_3d<T, STORE_MACRO, FORCED>(fl, i + c, j, k, nx, ny, rho_out, ux_out, uy_out,
                                           uz_out, om_p, om_m, fx, fy, fz, out);
    };
    if (live[0]) collide_cell(0);
    if (live[1]) collide_cell(1);
}

}  // namespace

template <typename T, typename S, bool STORE_MACRO, bool FORCED, typename P>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X, SIMSPLIT_D3Q19_MIN_BLOCKS_FOR(T, STORE_MACRO, P))
d3q19_stream_collide(const S* __restrict__ f_src, S* __restrict__ f_dst,
                     const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                     T* __restrict__ ux_out, T* __restrict__ uy_out, T* __restrict__ uz_out,
                     int nx, int ny, int nz, lbm::index_t pitch64, lbm::index_t layer64,
                     lbm::index_t plane64, int k0, int k1, T om_p, T om_m, T lid_u, T fx, T fy,
                     T fz, int periodic_x, int periodic_y)
{
    constexpr int CELLS_X = SIMSPLIT_D3Q19_CELLS_X;
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
        update_pair_3d<T, S, STORE_MACRO, FORCED, P>(f_src, f_dst, flags, rho_out, ux_out, uy_out,
                                                  uz_out, own, own1, i, j, k, nx, ny, pitch,
                                                  layer, plane, om_p, om_m, lid_u, fx, fy, fz,
                                                  periodic_x != 0, periodic_y != 0);
    } else {
        if (!speculative_pull<S>() && (own & FLAG_SOLID)) return;
        const pull_deltas<P> deltas = make_pull_deltas(plane, pitch, layer);
        update_cell_3d<T, S, STORE_MACRO, FORCED, P>(f_src, f_dst, flags, rho_out, ux_out, uy_out,
                                                  uz_out, own, i, j, k, nx, ny, pitch, layer,
                                                  plane, om_p, om_m, lid_u, fx, fy, fz,
                                                  periodic_x != 0, periodic_y != 0, deltas);
    }
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
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::offset_t src =
                source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y);
            const lbm::flag_t kind = __ldg(flags + src);
            if (kind & FLAG_SOLID) {
                // own post-collision opp q: the own slot q after an even step; after an odd
                // step it went, raw, into the solid source's slot opp q
                const T own_opp =
                    odd ? lbm::decode<L, T>(lbm::load_in_place(population_at(f, q, plane, cell)),
                                            q)
                        : lbm::decode<L, T>(
                              lbm::load_in_place(population_at(f, L::opp(q), plane, src)),
                              L::opp(q));
                fl[q] = lbm::bounce_back<L>(q, kind, own_opp, lid_u);
            }
        }
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
