// D3Q19 on run.storage neq16 (simsplit/numerics/neq_storage.py), included at the end of
// d3q19.cu (it uses that file's collide_3d, source_cell_3d and bounce-back); the records are
// read and written by neq_records.cuh. Walls, the lid, forcing, periodic x and y: the case
// checks refuse the rest on this storage.
#include "neq_records.cuh"

// Two-lattice pull step of planes [k0, k1), columns [i0, i1) (1-based interior ones) on neq16
// records (S neq::rec; neq16s's stress-kept records: neq::srec), one cell a thread (float32
// arithmetic; the strides of d3q19_stream_collide, `plane` between record slots). A slab with
// bodies or open faces runs it on the column spans that need no other rule. The grid covers
// columns from 1 (threads before i0 return): i taken as blockIdx.x * blockDim.x + threadIdx.x
// + i0 cost 16-20 % more instructions and 70 % more 16-bit loads per cell (nvcc 13.0, sm_90
// SASS), and neq16s's 512^3 box ran 5,089 MLUPS on an H100 against 6,095 before. P: the
// records' index type (lbm::offset_t, lbm::index_t, neq::halves: the upper slots from
// f_src_hi and f_dst_hi, slot neq::HALVES_SPLIT of each array; the others ignore them).
template <bool STORE_MACRO, bool FORCED, typename P, typename S = neq::rec>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
d3q19_stream_collide_neq(const S* __restrict__ f_src, S* __restrict__ f_dst,
                         const lbm::flag_t* __restrict__ flags, float* __restrict__ rho_out,
                         float* __restrict__ ux_out, float* __restrict__ uy_out,
                         float* __restrict__ uz_out, int nx, int ny, int nz,
                         lbm::index_t pitch64, lbm::index_t layer64, lbm::index_t plane64,
                         int k0, int k1, float om_p, float om_m, float lid_u, float fx, float fy,
                         float fz, int periodic_x, int periodic_y, int i0, int i1,
                         const S* __restrict__ f_src_hi, S* __restrict__ f_dst_hi)
{
    using L = D3Q19;
    const int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    const int j = blockIdx.y + 1;
    const int k = k0 + blockIdx.z;
    if (i > nx || j > ny || k >= k1) return;
    if (i < i0 || i >= i1) return;
    const lbm::offset_t pitch = lbm::offset_t(pitch64), layer = lbm::offset_t(layer64);
    using C = neq::cell_t<P>;
    const P plane = neq::addressing<P>(plane64, reinterpret_cast<const neq::rec*>(f_src_hi),
                                       reinterpret_cast<neq::rec*>(f_dst_hi));
    const bool per_x = periodic_x != 0, per_y = periodic_y != 0;
    const lbm::offset_t cell = cell_offset_3d(i, j, k, pitch, layer);
    const lbm::flag_t own = flags[cell];
    if (own & FLAG_SOLID) return;
    float fl[L::Q];
#pragma unroll
    for (int q = 0; q < L::Q; ++q)
        fl[q] = neq::pull<L>(f_src, q, plane,
                             C(source_cell_3d(q, i, j, k, nx, ny, pitch, layer, per_x, per_y)));
    if (own & FLAG_NEAR_WALL)
        bounce_back_solid_sources(fl, flags, i, j, k, nx, ny, pitch, layer, per_x, per_y, lid_u,
                                  [&](int q, lbm::offset_t) {
                                      return neq::pull<L>(f_src, L::opp(q), plane, C(cell));
                                  });
    float post[L::Q];
    auto out = [&](int q, float v) { post[q] = v; };
    collide_3d<float, STORE_MACRO, FORCED>(fl, i, j, k, nx, ny, rho_out, ux_out, uy_out, uz_out,
                                           om_p, om_m, fx, fy, fz, out);
    neq::store<L>(f_dst, post, plane, C(cell));
}
#include "d3q19_neq_tile.cuh"
