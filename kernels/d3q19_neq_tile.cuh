// D3Q19 on run.storage neq16 records, tiled: candidates for d3q19_stream_collide_neq (the
// production records kernel, d3q19_neq.cuh) that rebuild each cell's populations from its
// record once instead of once per pull. Included at the end of d3q19_neq.cuh (it uses
// d3q19.cu's collide_3d, bounce-back and fused::footprint_cell / gpu_team).
//
// A block of TX * TY threads owns a TX x TY column of cells in x-y and walks up a run of
// planes. For each plane kk its threads first rebuild the 19 populations f_q = n_q 2^k +
// f^eq_q(rho, u) of the column's cells and the ring of cells around it ((TX + 2) x (TY + 2),
// periodic x and y: the opposite interior cells) from their records into shared memory, a
// thread taking cells t, t + TX * TY, ...; then each thread updates its cell of plane kk - 1,
// pulling population q of cell x from the shared copy of x - c_q, and stores its record. Each rebuilt value is neq::pull's, operation for operation
// (the same moments, neq::equilibrium, ldexpf; compiled with --fmad=false), so the records
// are bit for bit those of d3q19_stream_collide_neq. Bounce-back takes the cell's own opp q
// from its record through neq::pull, as that kernel does (near-wall cells only).
//
// Shared memory: population q of plane kk is read by the update of plane kk - cz_q, so
// cz = -1 populations live one plane, cz = 0 two and cz = +1 three (with two barriers a plane:
// 38 floats a footprint cell), or one more each for one barrier a plane (EXTRA = 1: 57 floats;
// a plane's writes then never meet a slower warp's reads of the plane before).
// FAST: the records rebuilt and stored by neq_fast.cuh (the same bits for finite values, fewer
// operations) instead of neq::pull's and neq::store's own operations.
// Planes [k0, k1) are written; planes k0 - 1 .. k1 of f_src are read (ghost planes included),
// each run of planes reading one plane below and above it again.
#ifndef SIMSPLIT_D3Q19_NEQ_TILE_CUH
#define SIMSPLIT_D3Q19_NEQ_TILE_CUH
#include "neq_fast.cuh"

namespace {
namespace neq_tile {

// The shared-memory layout of a TX x TY column's candidate.
template <int TX, int TY, int EXTRA> struct shape {
    static constexpr int RX = TX + 2, RY = TY + 2;
    static constexpr int CELLS = RX * RY;     // the footprint
    static constexpr int THREADS = TX * TY;  // a block's, one per column cell
    // planes of population q held
    __host__ __device__ static constexpr int depth(int q) { return 2 + D3Q19::cz(q) + EXTRA; }
    __host__ __device__ static constexpr int first(int q)
    {
        int s = 0;
        for (int p = 0; p < q; ++p) s += depth(p);
        return s;
    }
    static constexpr int SLOTS = first(D3Q19::Q);
    static constexpr int SHARED_BYTES = SLOTS * CELLS * int(sizeof(float));
    // float of population q of footprint cell (lx, ly), plane kk (>= 0)
    __device__ __forceinline__ static int at(int q, int kk, int lx, int ly)
    {
        return (first(q) + kk % depth(q)) * CELLS + ly * RX + lx;
    }
};

// What every thread of a sweep needs (fused::sweep_args less the storage type).
template <typename P> struct args {
    const neq::rec* __restrict__ f_src;
    neq::rec* __restrict__ f_dst;
    const lbm::flag_t* __restrict__ flags;
    float* __restrict__ rho_out;
    float* __restrict__ ux_out;
    float* __restrict__ uy_out;
    float* __restrict__ uz_out;
    int nx, ny;
    lbm::offset_t pitch, layer;
    P plane;
    float om_p, om_m, lid_u, fx, fy, fz;
    bool per_x, per_y;
};

// Footprint cell t of plane kk (columns from i0 - 1, rows from j0 - 1): its 19 populations
// rebuilt as neq::pull rebuilds each (cells past the array's ghost ring are left alone).
template <typename S, bool FAST, typename P>
__device__ __forceinline__ void rebuild(const args<P>& a, float* ring, int t, int kk, int i0,
                                        int j0)
{
    using L = D3Q19;
    const int lx = t % S::RX, ly = t / S::RX;
    const int i = fused::footprint_cell(i0 - 1 + lx, a.nx, a.per_x);
    const int j = fused::footprint_cell(j0 - 1 + ly, a.ny, a.per_y);
    if (i > a.nx + 1 || j > a.ny + 1) return;
    const P cell = P(cell_offset_3d(i, j, kk, a.pitch, a.layer));
    if (FAST) {
        float f[L::Q];
        neq::fast::rebuild<L>(a.f_src, f, a.plane, cell);
#pragma unroll
        for (int q = 0; q < L::Q; ++q) ring[S::at(q, kk, lx, ly)] = f[q];
        return;
    }
    const neq::rec* r = a.f_src;
    const float rho = neq::rho_of(neq::slot(r, neq::slot_rho<L>(), a.plane, cell));
    const float ux = neq::velocity<L>(r, 0, a.plane, cell),
                uy = neq::velocity<L>(r, 1, a.plane, cell),
                uz = neq::velocity<L>(r, 2, a.plane, cell);
    const float usq = neq::square_sum<L>(ux, uy, uz);
    const int k = short(neq::slot(r, neq::slot_k<L>(), a.plane, cell));
#pragma unroll
    for (int q = 0; q < L::Q; ++q) {
        const int n = short(neq::slot(r, q, a.plane, cell));
        ring[S::at(q, kk, lx, ly)] =
            ldexpf(float(n), k) + neq::equilibrium<L>(q, rho, ux, uy, uz, usq);
    }
}

// Column cell t of plane kb: pulled from the ring, collided, stored.
template <typename S, int TX, bool FAST, bool STORE_MACRO, bool FORCED, typename P>
__device__ __forceinline__ void update(const args<P>& a, const float* ring, int t, int kb,
                                       int i0, int j0)
{
    using L = D3Q19;
    const int lx = t % TX + 1, ly = t / TX + 1;
    const int i = i0 + lx - 1, j = j0 + ly - 1;
    if (i > a.nx || j > a.ny) return;
    const lbm::offset_t cell = cell_offset_3d(i, j, kb, a.pitch, a.layer);
    const lbm::flag_t own = a.flags[cell];
    if (own & FLAG_SOLID) return;
    float fl[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        fl[q] = ring[S::at(q, kb - L::cz(q), lx - L::cx(q), ly - L::cy(q))];
    if (own & FLAG_NEAR_WALL)
        bounce_back_solid_sources(fl, a.flags, i, j, kb, a.nx, a.ny, a.pitch, a.layer, a.per_x,
                                  a.per_y, a.lid_u, [&](int q, lbm::offset_t) {
                                      return neq::pull<L>(a.f_src, L::opp(q), a.plane, P(cell));
                                  });
    float post[L::Q];
    auto out = [&](int q, float v) { post[q] = v; };
    collide_3d<float, STORE_MACRO, FORCED>(fl, i, j, kb, a.nx, a.ny, a.rho_out, a.ux_out,
                                           a.uy_out, a.uz_out, a.om_p, a.om_m, a.fx, a.fy, a.fz,
                                           out);
    if (FAST)
        neq::fast::store<L>(a.f_dst, post, a.plane, P(cell));
    else
        neq::store<L>(a.f_dst, post, a.plane, P(cell));
}

// One block's sweep: column (bx, by), planes [za, zb) of f_dst.
template <int TX, int TY, int EXTRA, bool FAST, bool STORE_MACRO, bool FORCED, typename P,
          typename Team>
__device__ __forceinline__ void sweep(const Team& team, const args<P>& a, float* ring, int bx,
                                      int by, int za, int zb)
{
    using S = shape<TX, TY, EXTRA>;
    const int i0 = bx * TX + 1, j0 = by * TY + 1;
    // the phases capture plane numbers by value: the host emulation may run a phase later,
    // anywhere before the next barrier (as a slow warp would)
    for (int kk = za - 1; kk <= zb; ++kk) {
        team.each([&a, ring, kk, i0, j0](int t) {
#pragma unroll
            for (int c = t; c < S::CELLS; c += S::THREADS)
                rebuild<S, FAST>(a, ring, c, kk, i0, j0);
        });
        team.sync();  // plane kk is in the ring before any update reads it
        if (kk - 1 >= za)
            team.each([&a, ring, kk, i0, j0](int t) {
                update<S, TX, FAST, STORE_MACRO, FORCED>(a, ring, t, kk - 1, i0, j0);
            });
        if (EXTRA == 0) team.sync();  // the next rebuild overwrites cz = -1 values just read
    }
}

}  // namespace neq_tile
}  // namespace

// Planes [k0, k1) of neq16 records f_src -> f_dst, as d3q19_stream_collide_neq (the same
// arguments, then `run_planes`). Grid: x-y columns of TX x TY cells (blockIdx.x, blockIdx.y)
// times runs of run_planes planes (blockIdx.z); TX * TY threads;
// neq_tile::shape<TX, TY, EXTRA>::SHARED_BYTES of dynamic shared memory. 32-bit offsets.
// MIN_BLOCKS resident blocks an SM asked of the register allocator; the forced kernels at most
// 768 threads' worth (80 registers: at 64 the forced kernel without rho/u spilled 8 bytes).
template <int TX, int TY, int EXTRA, int MIN_BLOCKS, bool FAST, bool STORE_MACRO, bool FORCED>
__global__ void __launch_bounds__(TX * TY, FORCED && MIN_BLOCKS * TX * TY > 768
                                               ? 768 / (TX * TY) : MIN_BLOCKS)
d3q19_stream_collide_neq_tile(const neq::rec* __restrict__ f_src, neq::rec* __restrict__ f_dst,
                              const lbm::flag_t* __restrict__ flags, float* __restrict__ rho_out,
                              float* __restrict__ ux_out, float* __restrict__ uy_out,
                              float* __restrict__ uz_out, int nx, int ny, int nz,
                              lbm::index_t pitch64, lbm::index_t layer64, lbm::index_t plane64,
                              int k0, int k1, float om_p, float om_m, float lid_u, float fx,
                              float fy, float fz, int periodic_x, int periodic_y, int run_planes)
{
    using P = lbm::offset_t;
    extern __shared__ __align__(16) unsigned char neq_tile_bytes[];
    const int za = k0 + int(blockIdx.z) * run_planes;
    const int zb = za + run_planes < k1 ? za + run_planes : k1;
    (void)nz;
    const neq_tile::args<P> a{f_src, f_dst, flags, rho_out, ux_out, uy_out, uz_out, nx, ny,
                              lbm::offset_t(pitch64), lbm::offset_t(layer64), P(plane64), om_p,
                              om_m, lid_u, fx, fy, fz, periodic_x != 0, periodic_y != 0};
    neq_tile::sweep<TX, TY, EXTRA, FAST, STORE_MACRO, FORCED, P>(
        fused::gpu_team{}, a, reinterpret_cast<float*>(neq_tile_bytes), int(blockIdx.x),
        int(blockIdx.y), za, zb);
}

#endif  // SIMSPLIT_D3Q19_NEQ_TILE_CUH
