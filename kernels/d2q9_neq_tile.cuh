// D2Q9 on run.storage neq16 records, tiled: candidates for d2q9_stream_collide_neq (d2q9.cu)
// that rebuild each cell's populations from its record once instead of once per pull, as
// d3q19_neq_tile.cuh does in 3D. Included at the end of d2q9.cu (collide_2d, source_cell).
//
// A block of TX threads owns a strip of TX columns and walks up a run of rows. For each row jj
// its threads first rebuild the 9 populations of the strip's cells and the cell either side
// (periodic x: the opposite interior cells) from their records into shared memory, thread t
// taking cells t and t + TX; then each thread updates its cell of row jj - 1, pulling population
// q of cell x from the shared copy of x - c_q, and stores its record. Population q of row jj is
// read by the update of row jj + c_y: it lives 1, 2 or 3 rows (18 floats a strip cell, two
// barriers a row) or one more (EXTRA = 1: 27 floats, one barrier). The rebuilt values, the
// bounce-back (the own opp q rebuilt from the record, sources flagged BOUNDARY), the collision
// and the record stored are d2q9_stream_collide_neq's, so the bits are too; FAST takes
// neq_fast.cuh's rebuild and store (the same bits for finite values).
// Rows [j0, j1) are written; rows j0 - 1 .. j1 of f_src are read, each run of rows reading one
// row below and above it again.
#ifndef SIMSPLIT_D2Q9_NEQ_TILE_CUH
#define SIMSPLIT_D2Q9_NEQ_TILE_CUH
#include "neq_fast.cuh"

namespace {
namespace neq_tile2 {

template <int TX, int EXTRA> struct shape {
    static constexpr int RX = TX + 2;  // the strip and a cell either side
    static constexpr int THREADS = TX;
    __host__ __device__ static constexpr int depth(int q) { return 2 + D2Q9::cy(q) + EXTRA; }
    __host__ __device__ static constexpr int first(int q)
    {
        int s = 0;
        for (int p = 0; p < q; ++p) s += depth(p);
        return s;
    }
    static constexpr int SLOTS = first(D2Q9::Q);
    static constexpr int SHARED_BYTES = SLOTS * RX * int(sizeof(float));
    // float of population q of strip cell lx (0 .. TX + 1), row jj (>= 0)
    __device__ __forceinline__ static int at(int q, int jj, int lx)
    {
        return (first(q) + jj % depth(q)) * RX + lx;
    }
};

// The block's threads: on a GPU each runs its own index; the host emulation of the tests runs
// every index in turn, a phase at a time.
struct gpu_team {
    template <typename F> __device__ __forceinline__ void each(F&& f) const
    {
        f(int(threadIdx.x));
    }
    __device__ __forceinline__ void sync() const { __syncthreads(); }
};

struct args {
    const neq::rec* __restrict__ f_src;
    neq::rec* __restrict__ f_dst;
    const lbm::flag_t* __restrict__ flags;
    float* __restrict__ rho_out;
    float* __restrict__ ux_out;
    float* __restrict__ uy_out;
    int nx, ny;
    lbm::index_t pitch, plane;
    float om_p, om_m, lid_u, fx, fy;
    bool periodic;
};

// Strip cell c of row jj (columns from i0 - 1): its populations rebuilt as neq::pull rebuilds
// each (columns past the ghost ones are left alone).
template <typename S, bool FAST>
__device__ __forceinline__ void rebuild(const args& a, float* ring, int c, int jj, int i0)
{
    using L = D2Q9;
    int i = i0 - 1 + c;
    if (a.periodic) i = i == 0 ? a.nx : (i == a.nx + 1 ? 1 : i);
    if (i > a.nx + 1) return;
    const lbm::index_t cell = jj * a.pitch + i;
    float f[L::Q];
    if (FAST) {
        neq::fast::rebuild<L>(a.f_src, f, a.plane, cell);
    } else {
        const neq::rec* r = a.f_src;
        const float rho = neq::rho_of(neq::slot(r, neq::slot_rho<L>(), a.plane, cell));
        const float ux = neq::velocity<L>(r, 0, a.plane, cell),
                    uy = neq::velocity<L>(r, 1, a.plane, cell),
                    uz = neq::velocity<L>(r, 2, a.plane, cell);
        const float usq = neq::square_sum<L>(ux, uy, uz);
        const int k = short(neq::slot(r, neq::slot_k<L>(), a.plane, cell));
#pragma unroll
        for (int q = 0; q < L::Q; ++q)
            f[q] = ldexpf(float(int(short(neq::slot(r, q, a.plane, cell)))), k)
                   + neq::equilibrium<L>(q, rho, ux, uy, uz, usq);
    }
#pragma unroll
    for (int q = 0; q < L::Q; ++q) ring[S::at(q, jj, c)] = f[q];
}

// Strip cell t of row jb: pulled from the ring, collided, stored.
template <typename S, bool FAST, bool STORE_MACRO>
__device__ __forceinline__ void update(const args& a, const float* ring, int t, int jb, int i0)
{
    using L = D2Q9;
    const int i = i0 + t, lx = t + 1;
    if (i > a.nx) return;
    const lbm::index_t cell = jb * a.pitch + i;
    const lbm::flag_t own = a.flags[cell];
    if (own & FLAG_SOLID) return;
    float fl[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q) fl[q] = ring[S::at(q, jb - L::cy(q), lx - L::cx(q))];
    if (own & FLAG_NEAR_WALL) {
#pragma unroll
        for (int q = 0; q < L::Q; ++q) {
            const lbm::flag_t kind =
                __ldg(a.flags + source_cell(q, i, jb, a.nx, a.pitch, a.periodic));
            if (kind & FLAG_BOUNDARY)
                fl[q] = lbm::bounce_back<L>(q, kind,
                                            neq::pull<L>(a.f_src, L::opp(q), a.plane, cell),
                                            a.lid_u);
        }
    }
    float post[L::Q];
    auto out = [&](int q, float v) { post[q] = v; };
    collide_2d<float, STORE_MACRO>(fl, i, jb, a.nx, a.rho_out, a.ux_out, a.uy_out, a.om_p,
                                   a.om_m, a.fx, a.fy, out);
    if (FAST)
        neq::fast::store<L>(a.f_dst, post, a.plane, cell);
    else
        neq::store<L>(a.f_dst, post, a.plane, cell);
}

// One block's sweep: strip bx, rows [ja, jb) of f_dst. The phases capture row numbers by
// value: the host emulation may run a phase later, anywhere before the next barrier.
template <int TX, int EXTRA, bool FAST, bool STORE_MACRO, typename Team>
__device__ __forceinline__ void sweep(const Team& team, const args& a, float* ring, int bx,
                                      int ja, int jb)
{
    using S = shape<TX, EXTRA>;
    const int i0 = bx * TX + 1;
    for (int jj = ja - 1; jj <= jb; ++jj) {
        team.each([&a, ring, jj, i0](int t) {
#pragma unroll
            for (int c = t; c < S::RX; c += S::THREADS) rebuild<S, FAST>(a, ring, c, jj, i0);
        });
        team.sync();  // row jj is in the ring before any update reads it
        if (jj - 1 >= ja)
            team.each([&a, ring, jj, i0](int t) {
                update<S, FAST, STORE_MACRO>(a, ring, t, jj - 1, i0);
            });
        if (EXTRA == 0) team.sync();  // the next rebuild overwrites c_y = -1 values just read
    }
}

}  // namespace neq_tile2
}  // namespace

// Rows [j0, j1) of neq16 records f_src -> f_dst, as d2q9_stream_collide_neq (the same
// arguments, then `run_rows`). Grid: strips of TX columns (blockIdx.x) times runs of run_rows
// rows (blockIdx.y); TX threads; neq_tile2::shape<TX, EXTRA>::SHARED_BYTES of dynamic shared
// memory.
template <int TX, int EXTRA, int MIN_BLOCKS, bool FAST, bool STORE_MACRO>
__global__ void __launch_bounds__(TX, MIN_BLOCKS)
d2q9_stream_collide_neq_tile(const neq::rec* __restrict__ f_src, neq::rec* __restrict__ f_dst,
                             const lbm::flag_t* __restrict__ flags, float* __restrict__ rho_out,
                             float* __restrict__ ux_out, float* __restrict__ uy_out, int nx,
                             int ny, lbm::index_t pitch, lbm::index_t plane, int j0, int j1,
                             float om_p, float om_m, float lid_u, float fx, float fy,
                             int periodic_x, int run_rows)
{
    extern __shared__ __align__(16) unsigned char neq_tile2_bytes[];
    const int ja = j0 + int(blockIdx.y) * run_rows;
    const int jb = ja + run_rows < j1 ? ja + run_rows : j1;
    const neq_tile2::args a{f_src, f_dst, flags, rho_out, ux_out, uy_out, nx, ny, pitch, plane,
                            om_p, om_m, lid_u, fx, fy, periodic_x != 0};
    neq_tile2::sweep<TX, EXTRA, FAST, STORE_MACRO>(neq_tile2::gpu_team{}, a,
                                                   reinterpret_cast<float*>(neq_tile2_bytes),
                                                   int(blockIdx.x), ja, jb);
}

#endif  // SIMSPLIT_D2Q9_NEQ_TILE_CUH
