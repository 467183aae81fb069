// D2Q9 fused pull stream-collide: TRT (BGK when om_m == om_p) with Guo forcing, walls, the
// moving lid, velocity inlets and outlets (pressure, zero-gradient, convective) by cell flags, optional periodic x. One
// thread per cell, threads along i so every population load and store is coalesced;
// blockIdx.y (and z) picks the row.
//
// The arithmetic mirrors simsplit/backends/cpu/d2q9.py operation for operation (same formulae,
// same order, compiled with --fmad=false so no multiply-add is fused), so results match the CPU
// backend's to the last bit as long as no subnormal appears (CuPy compiles with -ftz=true).
// Keep the two in step.
//
// T is the arithmetic type (and that of rho/u, inlet speeds and link weights), S the population
// storage type: S == T stores f_q, a narrower S (run.storage: float under double, lbm::half16,
// lbm::e4m11) the shifted encoding of lbm_common.cuh, decoded on load and encoded on store as
// the D3Q19 kernels do, all arithmetic in T.
//
// Arrays: f[q][j][i] (storage type) of logical shape (9, ny + 2, nx + 2) with a row stride of
// `pitch` and a population stride of `plane` elements (padded rows on GPUs: simsplit/backends/layout.py);
// flags (ny + 2, nx + 2) with the same row stride, so one cell index serves both; rho/ux/uy
// (ny, nx), packed; inlet (ny + 2): the inflow speed of each row (ghosts included); links:
// interpolated bounce-back weights in f's layout, read only where a cell is FLAG_CURVED (27
// planes where `quadratic`: w0, w1, w2 of every direction, simsplit/fluid/geometry/links.py);
// far: the array behind f_src (f_src's row 0 is its row far_off), where quadratic links read
// two rows away, beyond f_src's ghost row;
// outlet_slots (9 x (ny + 2), packed): a convective outlet's previous values, read and written
// only by the links of its cells. Rows [j0, j1) and columns [i0, i1) are 1-based interior ones.
#include "simsplit_generated.cuh"
#include "lbm_common.cuh"
#include "neq_records.cuh"

namespace {

// Relaxation of direction q and its opposite together: symmetric and antisymmetric parts,
// handed to out(q, value).
template <typename T, typename Out>
__device__ __forceinline__ void relax_pair(int q, const T* fl, Out& out, T r, T ux, T uy, T usq,
                                           T uf, T fx, T fy, T om_p, T om_m, T src_p, T src_m)
{
    using L = D2Q9;
    const int o = L::opp(q);
    const T w = T(L::w(q));
    const T cu = T(L::cx(q)) * ux + T(L::cy(q)) * uy;
    const T cf = T(L::cx(q)) * fx + T(L::cy(q)) * fy;
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

// Collision of cell (i, j)'s pulled populations `fl`: each post-collision population to
// out(q, value), rho/u to the fields where STORE_MACRO.
template <typename T, bool STORE_MACRO, typename Out>
__device__ __forceinline__ void collide_2d(const T* fl, int i, int j, int nx,
                                           T* __restrict__ rho_out, T* __restrict__ ux_out,
                                           T* __restrict__ uy_out, T om_p, T om_m, T fx, T fy,
                                           Out& out)
{
    using L = D2Q9;
    const T one = T(1.0), half = T(0.5);
    T r = T(0.0), jx = T(0.0), jy = T(0.0);
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        r += fl[q];
        jx += T(L::cx(q)) * fl[q];
        jy += T(L::cy(q)) * fl[q];
    }
    const T inv = one / r;
    const T ux = (jx + half * fx) * inv;
    const T uy = (jy + half * fy) * inv;
    const T usq = T(1.5) * (ux * ux + uy * uy);
    const T uf = ux * fx + uy * fy;
    if (STORE_MACRO) {
        const lbm::index_t m = lbm::index_t(j - 1) * nx + (i - 1);
        rho_out[m] = r;
        ux_out[m] = ux;
        uy_out[m] = uy;
    }
    const T src_p = one - half * om_p;  // Guo source weights of the symmetric/antisymmetric parts
    const T src_m = one - half * om_m;
    // rest population: purely symmetric
    const T feq0 = T(L::w(0)) * r * (one - usq);
    const T s0 = T(L::w(0)) * T(-3.0) * uf;
    out(0, fl[0] - om_p * (fl[0] - feq0) + src_p * s0);
#pragma unroll
    for (int q = 1; q < L::Q; ++q) {
        if (q < L::opp(q))
            relax_pair(q, fl, out, r, ux, uy, usq, uf, fx, fy, om_p, om_m, src_p, src_m);
    }
}

// Population q of the cell at `at`, read through the read-only path and decoded; on neq16
// records (neq_records.cuh, float32; stress-kept too) rebuilt from the cell's record, for every
// rule of the kernel.
template <typename T, typename S>
__device__ __forceinline__ T read_decoded(const S* __restrict__ f_src, lbm::index_t plane,
                                          lbm::index_t at, int q)
{
    if constexpr (neq::is_records<S>::value)
        return neq::pull<D2Q9>(f_src, q, plane, at);
    else
        return lbm::decode<D2Q9, T>(lbm::read_only(f_src + q * plane + at), q);
}

// Pressure outlet (anti-bounce-back): -f*_opp(q) + 2 w_q rho_w (1 + 4.5 (c_q.u)^2 - 1.5 u^2),
// u the own cell's velocity from its post-collision populations of step t (a local rule: no
// neighbour read, so every split sees the same). Mirrors _anti_bounce_back of the CPU kernel.
template <typename T, typename S>
__device__ __forceinline__ T anti_bounce_back(const S* __restrict__ f_src, lbm::index_t plane,
                                              lbm::index_t cell, int q, T rho_w)
{
    using L = D2Q9;
    T r = T(0.0), jx = T(0.0), jy = T(0.0);
#pragma unroll
    for (int p = 0; p < L::Q; ++p) {
        const T v = read_decoded<T>(f_src, plane, cell, p);
        r += v;
        jx += T(L::cx(p)) * v;
        jy += T(L::cy(p)) * v;
    }
    const T inv = T(1.0) / r;
    const T ux = jx * inv;
    const T uy = jy * inv;
    const T cu = T(L::cx(q)) * ux + T(L::cy(q)) * uy;
    const T usq = T(1.5) * (ux * ux + uy * uy);
    const T feq = T(2.0 * L::w(q)) * rho_w * (T(1.0) + T(4.5) * cu * cu - usq);
    return feq - read_decoded<T>(f_src, plane, cell, L::opp(q));
}

// Zero-gradient and convective outlets (OUTLET_ZERO_GRADIENT, OUTLET_CONVECTIVE): the link's
// source f*_q(j - c_qy, i) is what the interior neighbour x + c_qx pulls along q this step; it
// lies in the own column (a ghost row across a slab face only for a q that crosses it, which
// the halo carries). Convective: keep * previous + take * source (df/dt + U df/dx = 0,
// implicit upwind), the result kept in slots[q][j] (rows ny + 2 apart) for the next step.
// press_w > 0 mixes the pressure outlet's value in. Mirrors _outlet of the CPU kernel.
template <typename T, typename S>
__device__ __forceinline__ T outlet_link(const S* __restrict__ f_src, lbm::index_t pitch,
                                         lbm::index_t plane, lbm::index_t cell, int q, int j,
                                         int ny, T rho_w, int kind, T keep, T take, T press_w,
                                         T* __restrict__ slots)
{
    using L = D2Q9;
    const bool pressure = kind == OUTLET_PRESSURE;
    // one anti-bounce-back in the code, whichever rule takes it (two inlined copies per
    // direction cost the open kernel registers)
    const T v_abb = pressure || press_w > T(0.0) ? anti_bounce_back(f_src, plane, cell, q, rho_w)
                                                 : T(0.0);
    if (pressure) return v_abb;
    T v = read_decoded<T>(f_src, plane, cell - L::cy(q) * pitch, q);
    T* slot = slots + lbm::index_t(q) * (ny + 2) + j;
    if (kind == OUTLET_CONVECTIVE) v = keep * *slot + take * v;
    if (press_w > T(0.0)) v += press_w * (v_abb - v);
    if (kind == OUTLET_CONVECTIVE) *slot = v;
    return v;
}

// Interpolated bounce-back (Bouzidi et al. 2001, linear) of a link to a body: the link's
// weight k (simsplit/fluid/geometry/links.py) >= 0 mixes f*_opp(q) of this cell with that of
// the neighbour x + c_q, k < 0 with this cell's f*_q. Quadratic links (`quadratic`): |k|
// f*_opp(q)(x) + w1 A, then + w2 B unless w2 is 0; (A, B) = f*_opp(q) at x + c_q and x + 2 c_q
// where k >= 0, f*_q at x and x + c_q else (x + 2 c_q read from `far`). Mirrors the CPU
// kernel's CURVED branch and its _quadratic.
template <typename T, typename S>
__device__ __forceinline__ T interpolated_bounce_back(int q, int i, int j, int nx,
                                                      lbm::index_t pitch, lbm::index_t plane,
                                                      lbm::index_t cell, bool periodic,
                                                      const S* __restrict__ f_src,
                                                      const T* __restrict__ links, T own_opp,
                                                      bool quadratic,
                                                      const S* __restrict__ far, int far_off)
{
    using L = D2Q9;
    const T k = __ldg(links + q * plane + cell);
    if (quadratic) {
        const T w1 = __ldg(links + (L::Q + q) * plane + cell);
        const T w2 = __ldg(links + (2 * L::Q + q) * plane + cell);
        const lbm::index_t nb = (j + L::cy(q)) * pitch
                                + lbm::far_column(i, L::cx(q), nx, periodic);
        if (k >= T(0.0)) {
            T v = k * own_opp + w1 * read_decoded<T>(f_src, plane, nb, L::opp(q));
            if (w2 != T(0.0)) {
                const lbm::index_t at = (j + 2 * L::cy(q) + far_off) * pitch
                                        + lbm::far_column(i, 2 * L::cx(q), nx, periodic);
                v = v + w2 * read_decoded<T>(far, plane, at, L::opp(q));
            }
            return v;
        }
        T v = (-k) * own_opp + w1 * read_decoded<T>(f_src, plane, cell, q);
        if (w2 != T(0.0)) v = v + w2 * read_decoded<T>(f_src, plane, nb, q);
        return v;
    }
    if (k >= T(0.0)) {
        const lbm::index_t nb = (j + L::cy(q)) * pitch
                                + lbm::source_column(i, L::cx(q), nx, periodic);
        return k * own_opp + (T(1.0) - k) * read_decoded<T>(f_src, plane, nb, L::opp(q));
    }
    return (-k) * own_opp + (T(1.0) + k) * read_decoded<T>(f_src, plane, cell, q);
}

// Free-slip walls (specular reflection, docs/bodies.md): direction q arrives reflected across
// the slip faces its link crosses (those whose ghost one step along the axis alone is SLIP),
// from the cell beside, x - c_q without those components; where that is no fluid cell,
// bounce back. The CPU kernel's _specular, with its cases that return the own opposite
// population written out: a link along an axis, and a diagonal one reflected across both
// faces (a corner) or neither, all come back as own_opp; only a diagonal link across one slip
// face reads another cell (a runtime direction here spilled the double/fp16 kernel).
template <typename T, typename S>
__device__ __forceinline__ T specular(int q, int i, int j, int nx, lbm::index_t pitch,
                                      lbm::index_t plane, bool periodic,
                                      const S* __restrict__ f_src,
                                      const lbm::flag_t* __restrict__ flags, T own_opp)
{
    using L = D2Q9;
    if (L::cx(q) == 0 || L::cy(q) == 0) return own_opp;
    const int si = lbm::source_column(i, -L::cx(q), nx, periodic);
    const bool mirror_x = __ldg(flags + j * pitch + si) == FLAG_SLIP;
    const bool mirror_y = __ldg(flags + (j - L::cy(q)) * pitch + i) == FLAG_SLIP;
    if (mirror_x == mirror_y) return own_opp;
    const lbm::index_t beside = mirror_y ? j * pitch + si : (j - L::cy(q)) * pitch + i;
    if (__ldg(flags + beside) & FLAG_BOUNDARY) return own_opp;
    return read_decoded<T>(f_src, plane, beside,
                           mirror_y ? d2q9_specular(q, 2) : d2q9_specular(q, 1));
}

// Cell that direction q pulls from, as an offset within a population plane.
__device__ __forceinline__ lbm::index_t source_cell(int q, int i, int j, int nx,
                                                    lbm::index_t pitch, bool periodic)
{
    using L = D2Q9;
    return (j - L::cy(q)) * pitch + lbm::source_column(i, -L::cx(q), nx, periodic);
}

}  // namespace

// OPEN: the rules of inlets, outlets, free-slip walls and interpolated bounce-back are compiled
// in. A box (walls and the lid only) launches the kernel without them: their code in the rare
// near-wall branch cost a box 13 % of its speed on an H200 (44,416 against 50,919 MLUPS at
// 8192^2 float32), although no box cell ever takes it. A slab with open faces or curved walls
// launches it only on the column spans that need those rules (SlabBlock.column_spans: next to
// an inlet or outlet, across a curved body) and the kernel without them elsewhere.
// S = neq::rec (run.storage neq16, T float; neq::srec: neq16s; instantiated with OPEN only:
// the box of records has d2q9_stream_collide_neq): every population is rebuilt from its source
// cell's record, the cell's record written from its post-collision populations.
template <typename T, typename S, bool STORE_MACRO, bool OPEN>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
d2q9_stream_collide(const S* __restrict__ f_src, S* __restrict__ f_dst,
                    const lbm::flag_t* __restrict__ flags, T* __restrict__ rho_out,
                    T* __restrict__ ux_out, T* __restrict__ uy_out, int nx, int ny,
                    lbm::index_t pitch, lbm::index_t plane, int j0, int j1, int i0, int i1,
                    T om_p, T om_m,
                    T lid_u, T fx, T fy, int periodic_x, const T* __restrict__ inlet,
                    T inlet_scale, T rho_w, const T* __restrict__ links, int outlet_kind,
                    T outlet_keep, T outlet_take, T outlet_press_w, T* __restrict__ outlet_slots,
                    int quadratic, const S* __restrict__ far, int far_off)
{
    using L = D2Q9;
    // __umul24: the product fits 24 bits; with a plain multiply ptxas allotted the double
    // open kernel 64 registers and spilled (74 before the column offset, none spilled)
    const int i = __umul24(blockIdx.x, blockDim.x) + threadIdx.x + i0;
    // one row per block row; rows beyond CUDA's 65535 limit on gridDim.y go on in blockIdx.z
    // (a grid-stride loop over rows instead costs 24 registers: loop-invariant hoisting)
    const int j = j0 + blockIdx.y + blockIdx.z * gridDim.y;
    if (i >= i1 || j >= j1) return;
    const lbm::index_t cell = j * pitch + i;
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    const bool periodic = periodic_x != 0;

    // Pull every population from its upstream cell first, so all nine loads are in flight at
    // once. Only cells flagged NEAR_WALL read their sources' flags and patch solid ones: an
    // interior cell moves 9 populations in, 9 out and its own flag byte, nothing else.
    T fl[L::Q];
    lbm::flag_t near_wall = own & FLAG_NEAR_WALL;
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const lbm::index_t src = source_cell(q, i, j, nx, pitch, periodic);
        if constexpr (neq::is_records<S>::value)
            fl[q] = read_decoded<T>(f_src, plane, src, q);
        else
            fl[q] = lbm::load_population<L, T>(f_src + q * plane + src, q);
#ifdef SIMSPLIT_NEIGHBOUR_FLAGS  // decide from the sources' flags (faster on an H200: L1 hits)
        near_wall |= __ldg(flags + src) & FLAG_BOUNDARY;
#endif
    }
    if (near_wall) {  // rare and warp-coherent
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::flag_t kind = __ldg(flags + source_cell(q, i, j, nx, pitch, periodic));
            if (kind & FLAG_BOUNDARY) {
                const T own_opp = read_decoded<T>(f_src, plane, cell, L::opp(q));
                if (!OPEN)
                    fl[q] = lbm::bounce_back<L>(q, kind, own_opp, lid_u);
                else if (kind == FLAG_INLET)  // Ladd: the wall moves at the row's inflow speed
                    fl[q] = own_opp + T(6.0 * L::w(q) * L::cx(q)) * (inlet_scale * inlet[j]);
                else if (kind == FLAG_OUTLET)
                    fl[q] = outlet_link(f_src, pitch, plane, cell, q, j, ny, rho_w,
                                        outlet_kind, outlet_keep, outlet_take, outlet_press_w,
                                        outlet_slots);
                else if (kind == FLAG_SLIP)
                    fl[q] = specular(q, i, j, nx, pitch, plane, periodic, f_src, flags,
                                     own_opp);
                else if (kind == FLAG_WALL && (own & FLAG_CURVED))
                    fl[q] = interpolated_bounce_back(q, i, j, nx, pitch, plane, cell, periodic,
                                                     f_src, links, own_opp, quadratic != 0,
                                                     far, far_off);
                else
                    fl[q] = lbm::bounce_back<L>(q, kind, own_opp, lid_u);
            }
        }
    }

    if constexpr (neq::is_records<S>::value) {
        T post[L::Q];
        auto out = [&](int q, T v) { post[q] = v; };
        collide_2d<T, STORE_MACRO>(fl, i, j, nx, rho_out, ux_out, uy_out, om_p, om_m, fx, fy,
                                   out);
        neq::store<L>(f_dst, post, plane, cell);
    } else {
        auto out = [&](int q, T v) { lbm::store_population<L>(f_dst + q * plane + cell, q, v); };
        collide_2d<T, STORE_MACRO>(fl, i, j, nx, rho_out, ux_out, uy_out, om_p, om_m, fx, fy,
                                   out);
    }
}

// Pull step of rows [j0, j1), columns [i0, i1) on run.storage neq16 cell records
// (neq_records.cuh; float32 arithmetic, one cell a thread, `plane` between record slots): walls
// and the lid bounce back the own cell's rebuilt opposite population, as the CPU kernel does on
// records (bodies, open faces and free-slip walls on records: d2q9_stream_collide with S =
// neq::rec, on the column spans that need them; this kernel on the others). S neq::srec:
// neq16s's stress-kept records. P: the element offsets, lbm::offset_t where the array fits
// them, else lbm::index_t (nvcc 13.0, sm_90: 40 registers against 77-78 with 64-bit offsets,
// 6-8 % fewer instructions).
template <bool STORE_MACRO, typename P, typename S = neq::rec>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
d2q9_stream_collide_neq(const S* __restrict__ f_src, S* __restrict__ f_dst,
                        const lbm::flag_t* __restrict__ flags, float* __restrict__ rho_out,
                        float* __restrict__ ux_out, float* __restrict__ uy_out, int nx, int ny,
                        lbm::index_t pitch, lbm::index_t plane64, int j0, int j1, float om_p,
                        float om_m, float lid_u, float fx, float fy, int periodic_x, int i0,
                        int i1)
{
    using L = D2Q9;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + i0;
    const int j = j0 + blockIdx.y + blockIdx.z * gridDim.y;
    if (i >= i1 || j >= j1) return;
    const P plane = P(plane64);
    const P cell = P(j * pitch + i);
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    const bool periodic = periodic_x != 0;
    float fl[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        fl[q] = neq::pull<L>(f_src, q, plane, P(source_cell(q, i, j, nx, pitch, periodic)));
    if (own & FLAG_NEAR_WALL) {
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::flag_t kind = __ldg(flags + source_cell(q, i, j, nx, pitch, periodic));
            if (kind & FLAG_BOUNDARY)
                fl[q] = lbm::bounce_back<L>(q, kind, neq::pull<L>(f_src, L::opp(q), plane, cell),
                                            lid_u);
        }
    }
    float post[L::Q];
    auto out = [&](int q, float v) { post[q] = v; };
    collide_2d<float, STORE_MACRO>(fl, i, j, nx, rho_out, ux_out, uy_out, om_p, om_m, fx, fy,
                                   out);
    neq::store<L>(f_dst, post, plane, cell);
}

#include "d2q9_neq_tile.cuh"
