// Lennard-Jones MD on one slab: cell binning, full neighbour lists in canonical cell order,
// forces with per-atom energy and virial, velocity Verlet with the displacement check fused in,
// Langevin forces.
//
// Each kernel mirrors a function of simsplit/backends/cpu/md.py operation for operation, in
// double precision whatever the storage type T (float or double), compiled with --fmad=false:
// every owned atom's force is summed over its list in the CPU's order, so float64 results are
// the CPU backend's to the last bit (Langevin noise aside: log/sin/cos of the GPU math library
// may differ from the host's by an ulp). Keep the two in step.
//
// Canonical list order (the determinism invariant): the stencil cells around the atom's own
// cell in loop order (z outer, x inner, offsets ascending) of the global cell grid, and within
// a cell ascending global id. A cell is a pure function of a coordinate and ghosts are exact
// copies, so a row is the same sequence of atoms for every split and every row order.
//
// Layouts: x, v, f, img are (n, 3) row-major; rows [0, n_own) are owned atoms, the rest
// ghosts. The neighbour list is nl[k * pitch + i] (neighbour k of every atom contiguous, so
// the force loop's loads coalesce), with cnt[i] entries in row i. Cells: cell_of[i], CSR
// cell_start[ncells + 1] and cell_atoms, ascending global id within a cell.
//
// Every kernel is a template so that only the instantiations the launchers name are built.
#include "md_common.cuh"

// Whether a launch of batch step `tick` is skipped: some earlier step of the batch (or, for
// `inclusive`, this one) asked for a rebuild. tick 0 (outside batches) never is. The forces of
// the step that asked are skipped too: the host recomputes them on the new list.
__device__ __forceinline__ bool halted(const int* flags, int tick, bool inclusive)
{
    if (tick <= 0) return false;
    const int at = flags[0];
    return at != 0 && (inclusive ? at <= tick : at < tick);
}

// One launch per step between force evaluations: the second half kick of the previous step
// (when kick != 0; the same rounding as md_final_integrate, since v is stored in between), the
// first half kick and drift of this step with the wrap, then the displacement check against
// x0: flags[0] = tick if some atom moved more than sqrt(limit2), flags[1] = 1 beyond
// sqrt(jump2). Racing stores all write the same value, so no reduction is needed.
//
// Batches (the host queues several steps, then reads the flags once): tick numbers the steps
// of a batch from 1, and once step `flags[0]` has asked for a rebuild every later launch of
// the batch returns at once (see halted()), leaving no trace; the host rebuilds and carries on
// from that step. A launch never halts on its own stores: they write its own tick.
//
// Several slabs in one arena (md_arena.cuh, `ghosts` != 0): an owned row's ghost copies (at
// most two, ghost_of[2 i], ghost_of[2 i + 1], -1 for none) get its new position in the same
// thread, so the ghost refresh costs no launch and no pass of its own.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_advance(T* __restrict__ x, T* __restrict__ v, const T* __restrict__ f,
           long long* __restrict__ img, int n, int kick, double dtf, double dt, double bx,
           double by, double bz, const double* __restrict__ x0, double limit2, double jump2,
           int tick, int* __restrict__ flags, const int* __restrict__ ghost_of, int ghosts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || halted(flags, tick, false)) return;
    const double box[3] = {bx, by, bz};
    double disp[3];
    T xnew[3];
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        const long long a = 3LL * i + d;
        const double fd = double(f[a]);
        T vd = v[a];
        if (kick) vd = T(double(vd) + dtf * fd);
        vd = T(double(vd) + dtf * fd);
        v[a] = vd;
        T xd = T(double(x[a]) + dt * double(vd));
        // wrap on the stored value (float rounding can land exactly on L)
        if (double(xd) < 0.0) {
            xd = T(double(xd) + box[d]);
            img[a] -= 1;
        }
        if (double(xd) >= box[d]) {
            xd = T(double(xd) - box[d]);
            img[a] += 1;
        }
        x[a] = xd;
        xnew[d] = xd;
        disp[d] = md::min_image(double(xd) - x0[a], box[d]);
    }
    if (ghosts) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int g = ghost_of[2LL * i + c];
            if (g >= 0) {
#pragma unroll
                for (int d = 0; d < 3; ++d) x[3LL * g + d] = xnew[d];
            }
        }
    }
    const double r2 = disp[0] * disp[0] + disp[1] * disp[1] + disp[2] * disp[2];
    if (r2 > limit2) flags[0] = tick;
    if (r2 > jump2) flags[1] = 1;
}

template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_final_integrate(T* __restrict__ v, const T* __restrict__ f, int n, double dtf)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        const long long a = 3LL * i + d;
        v[a] = T(double(v[a]) + dtf * double(f[a]));
    }
}

// A half kick with per-type masses: v += table[typ[i]] f, table = dt / 2m per atom type (the
// drift's own kick is then given 0, see simsplit/md/masses.py). In a batch it belongs to step
// `tick`'s drift and halts with it.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_kick_typed(T* __restrict__ v, const T* __restrict__ f, const int* __restrict__ typ, int n,
              const double* __restrict__ table, const int* __restrict__ flags, int tick)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || halted(flags, tick, false)) return;
    const double dtf = table[typ[i]];
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        const long long a = 3LL * i + d;
        v[a] = T(double(v[a]) + dtf * double(f[a]));
    }
}

// Row i's Langevin force: drag -drag v and noise noise N(0, 1) keyed by (seed, step, id).
template <typename T>
__device__ __forceinline__ void langevin_row(T* __restrict__ f, const T* __restrict__ v, int i,
                                             long long id, double drag, double noise,
                                             unsigned long long seed, unsigned long long step)
{
    double g[3];
    md::counter_normals(seed, step, md::u64(id), g[0], g[1], g[2]);
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        const long long a = 3LL * i + d;
        f[a] = T(double(f[a]) - drag * double(v[a]) + noise * g[d]);
    }
}

template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_langevin(T* __restrict__ f, const T* __restrict__ v, const long long* __restrict__ ids, int n,
            double drag, double noise, unsigned long long seed, unsigned long long step,
            const int* __restrict__ flags, int tick)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || halted(flags, tick, true)) return;
    langevin_row(f, v, i, ids[i], drag, noise, seed, step);
}

// Atoms that differ in mass: drag and noise of each row's type (m / damping and
// sqrt(2 m T / (damping dt)) per type).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_langevin_typed(T* __restrict__ f, const T* __restrict__ v, const long long* __restrict__ ids,
                  const int* __restrict__ typ, int n, const double* __restrict__ drag,
                  const double* __restrict__ noise, unsigned long long seed,
                  unsigned long long step, const int* __restrict__ flags, int tick)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || halted(flags, tick, true)) return;
    const int t = typ[i];
    langevin_row(f, v, i, ids[i], drag[t], noise[t], seed, step);
}

// x0 = x of the owned atoms, in double (the reference of the displacement check).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_snapshot(const T* __restrict__ x, int n, double* __restrict__ x0)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 3 * n) return;
    x0[i] = double(x[i]);
}

// Ghost refresh within one GPU: dst row r = src row idx[r], r < m.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_gather_rows(const T* __restrict__ src, const long long* __restrict__ idx, int m,
               T* __restrict__ dst)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= m) return;
    const long long s = 3LL * idx[r];
#pragma unroll
    for (int d = 0; d < 3; ++d) dst[3LL * r + d] = src[s + d];
}

// --- cell list: counting sort ----------------------------------------------------------------
// The global cell of row i (x[3 i .. 3 i + 2]): per axis int(x * (n / L)) clamped to [0, n), the
// CPU's cell_index. Every binning kernel takes its cells from here, so all agree on a cell.
template <typename T>
__device__ __forceinline__ int global_cell(const T* __restrict__ x, int i, double bx, double by,
                                           double bz, int nx, int ny, int nz)
{
    const long long a = 3LL * i;
    long long cx = (long long)(double(x[a]) * (double(nx) / bx));
    long long cy = (long long)(double(x[a + 1]) * (double(ny) / by));
    long long cz = (long long)(double(x[a + 2]) * (double(nz) / bz));
    cx = cx < 0 ? 0 : (cx > nx - 1 ? nx - 1 : cx);
    cy = cy < 0 ? 0 : (cy > ny - 1 ? ny - 1 : cy);
    cz = cz < 0 ? 0 : (cz > nz - 1 ? nz - 1 : cz);
    return int((cz * ny + cy) * nx + cx);
}

// counts must be zero on entry (allocated so, and md_cell_sort clears them after use).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_cell_count(const T* __restrict__ x, int n, double bx, double by, double bz, int nx, int ny,
              int nz, int* __restrict__ cell_of, int* __restrict__ counts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = global_cell(x, i, bx, by, bz, nx, ny, nz);
    cell_of[i] = c;
    atomicAdd(counts + c, 1);
}

// Exclusive scan without block-level synchronisation (so that the host-C++ emulation can run
// it serially), in levels: sums of chunks of `chunk` values, sums of chunks of those, ... until
// one thread scans the last level (md_scan_serial); then each level below takes its chunk
// prefixes from the level above (md_scan_inplace), and md_scan_write the cells' (one thread
// per cell, so that its stores coalesce). Each loop is one thread's: unrolled so that its
// loads overlap.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_scan_chunks(const I* __restrict__ counts, int ncells, int chunk, I* __restrict__ chunk_sums)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int lo = t * chunk;
    if (lo >= ncells) return;
    const int hi = min(lo + chunk, ncells);
    I s = 0;
    SIMSPLIT_MD_UNROLL(SIMSPLIT_MD_SCAN_UNROLL)
    for (int c = lo; c < hi; ++c) s += counts[c];
    chunk_sums[t] = s;
}

template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_scan_serial(I* __restrict__ chunk_sums, int nchunks)
{
    if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
    I run = 0;
    SIMSPLIT_MD_UNROLL(SIMSPLIT_MD_SCAN_UNROLL)
    for (int t = 0; t < nchunks; ++t) {
        const I s = chunk_sums[t];
        chunk_sums[t] = run;
        run += s;
    }
    chunk_sums[nchunks] = run;
}

// One level back down: a[c] = exclusive prefix of a within its chunk plus the chunk's base.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_scan_inplace(I* __restrict__ a, int n, int chunk, const I* __restrict__ base)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int lo = t * chunk;
    if (lo >= n) return;
    const int hi = min(lo + chunk, n);
    I run = base[t];
    SIMSPLIT_MD_UNROLL(SIMSPLIT_MD_SCAN_UNROLL)
    for (int c = lo; c < hi; ++c) {
        const I v = a[c];
        a[c] = run;
        run += v;
    }
}

// cell_start[c] = atoms in cells before c (cell_start[ncells] = all); fill = a copy. One thread
// per cell: its chunk's prefix plus the counts before it in the chunk, read by the whole warp
// at once (the chunk is a warp's cells: broadcast loads), so every store is coalesced. A
// thread per chunk looping over it (the earlier form) writes 32 scattered lines per
// instruction, which beyond the L2's size costs 20 times the bytes.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_scan_write(const I* __restrict__ counts, int ncells, int chunk,
              const I* __restrict__ chunk_sums, I* __restrict__ cell_start, I* __restrict__ fill)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells) return;
    I run = chunk_sums[c / chunk];
    for (int j = c - c % chunk; j < c; ++j) run += counts[j];
    cell_start[c] = run;
    fill[c] = run;
    if (c == ncells - 1) cell_start[ncells] = run + counts[c];
}

// Scatter in atomic (arbitrary) order; md_cell_sort then makes the order canonical.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_cell_scatter(const I* __restrict__ cell_of, int n, I* __restrict__ fill,
                I* __restrict__ cell_atoms)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const I slot = atomicAdd(fill + cell_of[i], I(1));
    cell_atoms[slot] = I(i);
}

// Insertion sort of each cell's atoms (a few per cell) by global id: the within-cell part of
// the canonical list order. Clears the cell's count.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_cell_sort(const I* __restrict__ cell_start, int ncells, const long long* __restrict__ gid,
             I* __restrict__ cell_atoms, I* __restrict__ counts)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells) return;
    counts[c] = 0;  // ready for the next binning (md_scan_write reads them, so not there)
    const I lo = cell_start[c], hi = cell_start[c + 1];
    for (I p = lo + 1; p < hi; ++p) {
        const I a = cell_atoms[p];
        const long long key = gid[a];
        I q = p - 1;
        while (q >= lo && gid[cell_atoms[q]] > key) {
            cell_atoms[q + 1] = cell_atoms[q];
            --q;
        }
        cell_atoms[q + 1] = a;
    }
}

// Rows in cell order (one slab on a device, at each rebuild): out row r = row cell_atoms[r], so
// the atoms of a cell, and of neighbouring cells, sit together and the list build and force
// loops gather from nearby rows. Results do not change: lists are in canonical order, keyed by
// global ids, whatever the rows. cell_atoms becomes the identity (each thread its own entry).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_permute(int n, int* __restrict__ cell_atoms, const int* __restrict__ cell_of,
           const T* __restrict__ x, const T* __restrict__ v, const long long* __restrict__ img,
           const long long* __restrict__ gid, int* __restrict__ cell_of_out,
           T* __restrict__ x_out, T* __restrict__ v_out, long long* __restrict__ img_out,
           long long* __restrict__ gid_out)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int s = cell_atoms[r];
    cell_atoms[r] = r;
    cell_of_out[r] = cell_of[s];
    gid_out[r] = gid[s];
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        x_out[3LL * r + d] = x[3LL * s + d];
        v_out[3LL * r + d] = v[3LL * s + d];
        img_out[3LL * r + d] = img[3LL * s + d];
    }
}

// --- neighbour list --------------------------------------------------------------------------
// Full list of owned atom i: every local atom j != i closer than sqrt(cutsq), written straight
// into nl in scan order, which is the canonical order since cells hold their atoms by global
// id. Stencil axis a covers cell offsets o_a0 .. o_a0 + o_an - 1; o_a0 == 0 means a short axis
// scanned whole (no pruning). h = box / ncell per axis comes from the host (the same IEEE
// quotient; a division here would cost a call and spills). Rows longer than cap are counted,
// not stored, and raise *worst. The minimum of 8 blocks per SM (at most 64 registers) is a hint
// ptxas needs: without it, it squeezes this kernel into 32 registers and spills. With rows in
// cell order (`in_order`, after md_permute) cell_atoms is the identity: atom p of the cell
// order is row p, which spares the loop a dependent load per candidate. shift > 0: each entry
// carries its row's type above bit `shift`, as md_pack_types writes it, without a second pass
// over the list, and a pair enters only within its own list cutoff, list_cutsq[ti * ntypes + tj]
// ((rc_ij + skin)^2, at most cutsq), as LAMMPS lists do: Kob-Andersen's A-B pairs reach 2.3
// instead of 2.8. A pair left out stays beyond rc_ij until the next rebuild, where it would
// only have added +-0.0, so the forces keep their bits.
// A typed build asks for each candidate's type beside its position, so the pair's list cutoff
// is in hand when the distance is. H200, 2026-12-04, Kob-Andersen 1M atoms: 2,369 us a build,
// against 2,522 us asking only for candidates within the largest cutoff, after the distance,
// and 2,526 us with a binary mixture's two cutoffs held in registers and selected by tj.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK, 8)
md_build_neighbors(const T* __restrict__ x, int n_own, double bx, double by, double bz, int nx,
                   int ny, int nz, double hx, double hy, double hz, int ox0, int oxn, int oy0,
                   int oyn, int oz0, int ozn,
                   const int* __restrict__ cell_of, const int* __restrict__ cell_start,
                   const int* __restrict__ cell_atoms, int in_order, double cutsq,
                   int* __restrict__ nl, int pitch, int cap, int* __restrict__ cnt,
                   int* __restrict__ worst, const int* __restrict__ typ, int shift,
                   const double* __restrict__ list_cutsq, int ntypes)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_own) return;
    const double* __restrict__ row_cutsq = shift ? list_cutsq + __ldg(typ + i) * ntypes : nullptr;
    const int c = cell_of[i];
    const int cx = c % nx;
    const int cy = (c / nx) % ny;
    const int cz = c / (nx * ny);
    const double xi = double(x[3LL * i]);
    const double yi = double(x[3LL * i + 1]);
    const double zi = double(x[3LL * i + 2]);
    // conservative: the margin keeps rounding in the face positions from dropping a pair
    const double prune = cutsq * (1.0 + 1e-9) + 1e-12;
    const bool full_x = ox0 == 0, full_y = oy0 == 0, full_z = oz0 == 0;
    int k = 0;
    for (int a = 0; a < ozn; ++a) {
        const int offz = oz0 + a;
        const double dz2 = full_z ? 0.0 : md::face_dist2(zi, cz, offz, hz);
        if (dz2 > prune) continue;
        const int qz = md::wrap_cell(cz + offz, nz);
        for (int b = 0; b < oyn; ++b) {
            const int offy = oy0 + b;
            const double dyz2 = dz2 + (full_y ? 0.0 : md::face_dist2(yi, cy, offy, hy));
            if (dyz2 > prune) continue;
            const int row = (qz * ny + md::wrap_cell(cy + offy, ny)) * nx;
            for (int e = 0; e < oxn; ++e) {
                const int offx = ox0 + e;
                if (dyz2 + (full_x ? 0.0 : md::face_dist2(xi, cx, offx, hx)) > prune) continue;
                const int q = row + md::wrap_cell(cx + offx, nx);
                const int p1 = __ldg(cell_start + q + 1);
                for (int p = __ldg(cell_start + q); p < p1; ++p) {
                    const int j = in_order ? p : __ldg(cell_atoms + p);
                    if (j == i) continue;
                    const int tj = shift ? __ldg(typ + j) : 0;
                    const double dx = md::min_image(xi - double(__ldg(x + 3LL * j)), bx);
                    const double dy = md::min_image(yi - double(__ldg(x + 3LL * j + 1)), by);
                    const double dz = md::min_image(zi - double(__ldg(x + 3LL * j + 2)), bz);
                    const double r2 = dx * dx + dy * dy + dz * dz;
                    if (r2 < (shift ? __ldg(row_cutsq + tj) : cutsq)) {
                        if (k < cap) nl[(long long)k * pitch + i] = shift ? j | (tj << shift) : j;
                        ++k;
                    }
                }
            }
        }
    }
    cnt[i] = k;
    if (k > cap) atomicMax(worst, k);  // only overflows: no contention in the normal case
}

// --- forces ----------------------------------------------------------------------------------
// Truncated LJ on owned atom i over its list in list order; pe and vir get half of each pair's
// energy and r . f. Pairs beyond rc add +-0.0 (a select, as on the CPU), which changes no sum.
// With one thread per atom the loop is bound by the latency of its gathers (nl, then x[j]);
// unrolling lets a thread have several pairs' loads in flight while the sums keep their order
// (measured on an H200 at 64,000 atoms: no faster; scripts/prof_md_kernels.py tries it).
#ifndef SIMSPLIT_MD_FORCE_UNROLL
#define SIMSPLIT_MD_FORCE_UNROLL 1
#endif

// One pair's contributions to atom i: force (dx, dy, dz) * fpair, energy, r . f.
struct PairTerms {
    double fx, fy, fz, e, w;
};

template <typename T>
__device__ __forceinline__ PairTerms lj_pair(double xi, double yi, double zi,
                                             const T* __restrict__ x, long long j, double bx,
                                             double by, double bz, double rcsq, double eps4,
                                             double eps24, double sigsq, double eshift)
{
    const double dx = md::min_image(xi - double(__ldg(x + 3 * j)), bx);
    const double dy = md::min_image(yi - double(__ldg(x + 3 * j + 1)), by);
    const double dz = md::min_image(zi - double(__ldg(x + 3 * j + 2)), bz);
    const double rsq = dx * dx + dy * dy + dz * dz;
    const bool inside = rsq < rcsq;
    const double r2inv = 1.0 / rsq;
    const double sr2 = sigsq * r2inv;
    const double sr6 = sr2 * sr2 * sr2;
    const double fpair = inside ? eps24 * sr6 * (2.0 * sr6 - 1.0) * r2inv : 0.0;
    return {dx * fpair, dy * fpair, dz * fpair,
            inside ? eps4 * sr6 * (sr6 - 1.0) - eshift : 0.0, rsq * fpair};
}

template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_lj_forces(const T* __restrict__ x, int n_own, int row0, const int* __restrict__ nl, int pitch,
             const int* __restrict__ cnt, double bx, double by, double bz, double rcsq,
             double eps4, double eps24, double sigsq, double eshift, T* __restrict__ f,
             double* __restrict__ pe, double* __restrict__ vir, const int* __restrict__ flags,
             int tick)
{
    const int i = row0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_own || halted(flags, tick, true)) return;
    const double xi = double(x[3LL * i]);
    const double yi = double(x[3LL * i + 1]);
    const double zi = double(x[3LL * i + 2]);
    double fx = 0.0, fy = 0.0, fz = 0.0, e = 0.0, w = 0.0;
    const int m = cnt[i];
    SIMSPLIT_MD_UNROLL(SIMSPLIT_MD_FORCE_UNROLL)
    for (int k = 0; k < m; ++k) {
        const PairTerms p = lj_pair(xi, yi, zi, x, __ldg(nl + (long long)k * pitch + i), bx, by,
                                    bz, rcsq, eps4, eps24, sigsq, eshift);
        fx += p.fx;
        fy += p.fy;
        fz += p.fz;
        e += p.e;
        w += p.w;
    }
    f[3LL * i] = T(fx);
    f[3LL * i + 1] = T(fy);
    f[3LL * i + 2] = T(fz);
    pe[i] = 0.5 * e;
    vir[i] = 0.5 * w;
}

// --- several atom types ----------------------------------------------------------------------
// A typed list entry: with type bits (shift > 0, md_pack_types) the row is the low `shift`
// bits and the neighbour's type the bits above; otherwise the entry is the row and its type
// is read from typ. The packed form spares the force loop a gather per pair, and the table
// row no longer waits for it.
struct Neighbour {
    int row, type;
};

__device__ __forceinline__ Neighbour neighbour_of(int entry, int shift,
                                                  const int* __restrict__ typ)
{
    const int row = shift ? entry & ((1 << shift) - 1) : entry;
    return {row, shift ? entry >> shift : __ldg(typ + row)};
}

// One owned row of a typed force kernel: the sums over its list in list order, each pair's
// terms from pair(j, its table row) (rows of W doubles, row typ[i] * ntypes + type of j).
// Coefficients stay loads from the (L1-resident) table: two types' rows held in registers
// took ptxas from 56 to 72 registers, or to spills at 64.
template <int W, typename T, typename Pair>
__device__ __forceinline__ void typed_row(int i, const int* __restrict__ typ, int ntypes,
                                          int shift, const int* __restrict__ nl, int pitch,
                                          const int* __restrict__ cnt,
                                          const double* __restrict__ table, T* __restrict__ f,
                                          double* __restrict__ pe, double* __restrict__ vir,
                                          Pair pair)
{
    const double* rows = table + (long long)W * typ[i] * ntypes;
    double fx = 0.0, fy = 0.0, fz = 0.0, e = 0.0, w = 0.0;
    const int m = cnt[i];
    for (int k = 0; k < m; ++k) {
        const Neighbour nb = neighbour_of(__ldg(nl + (long long)k * pitch + i), shift, typ);
        const PairTerms t = pair(nb.row, rows + W * nb.type);
        fx += t.fx;
        fy += t.fy;
        fz += t.fz;
        e += t.e;
        w += t.w;
    }
    f[3LL * i] = T(fx);
    f[3LL * i + 1] = T(fy);
    f[3LL * i + 2] = T(fz);
    pe[i] = 0.5 * e;
    vir[i] = 0.5 * w;
}

// md_lj_forces for several atom types: each pair's rc^2, 4 eps, 24 eps, sigma^2 and energy
// shift come from row typ[i] * ntypes + typ[j] of `table` (5 doubles a row), the same pair
// terms in the same order. `shift`: the list's type bits (see neighbour_of).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_lj_forces_typed(const T* __restrict__ x, const int* __restrict__ typ, int n_own, int row0,
                   const int* __restrict__ nl, int pitch, const int* __restrict__ cnt,
                   double bx, double by, double bz, const double* __restrict__ table,
                   int ntypes, int shift, T* __restrict__ f, double* __restrict__ pe,
                   double* __restrict__ vir, const int* __restrict__ flags, int tick)
{
    const int i = row0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_own || halted(flags, tick, true)) return;
    const double xi = double(x[3LL * i]);
    const double yi = double(x[3LL * i + 1]);
    const double zi = double(x[3LL * i + 2]);
    typed_row<5>(i, typ, ntypes, shift, nl, pitch, cnt, table, f, pe, vir,
                 [&](int j, const double* p) {
                     return lj_pair(xi, yi, zi, x, j, bx, by, bz, __ldg(p), __ldg(p + 1),
                                    __ldg(p + 2), __ldg(p + 3), __ldg(p + 4));
                 });
}

// md_lj_forces_typed with the force shifted to zero at each pair's cutoff (LAMMPS
// lj/smooth/linear): f(r) - f(rc) and e(r) - e(rc) + (r - rc) f(rc), the CPU's
// _lj_pair_fshift expression for expression; `table` rows hold 7 doubles: rc^2, 4 eps,
// 24 eps, sigma^2, e(rc), f(rc), rc.
template <typename T>
__device__ __forceinline__ PairTerms lj_pair_fshift(double xi, double yi, double zi,
                                                    const T* __restrict__ x, long long j,
                                                    double bx, double by, double bz,
                                                    const double* __restrict__ p)
{
    const double dx = md::min_image(xi - double(__ldg(x + 3 * j)), bx);
    const double dy = md::min_image(yi - double(__ldg(x + 3 * j + 1)), by);
    const double dz = md::min_image(zi - double(__ldg(x + 3 * j + 2)), bz);
    const double rsq = dx * dx + dy * dy + dz * dz;
    const bool inside = rsq < __ldg(p);
    const double r2inv = 1.0 / rsq;
    const double sr2 = __ldg(p + 3) * r2inv;
    const double sr6 = sr2 * sr2 * sr2;
    const double r = sqrt(rsq);
    const double fshift = __ldg(p + 5);
    const double fpair =
        inside ? __ldg(p + 2) * sr6 * (2.0 * sr6 - 1.0) * r2inv - fshift / r : 0.0;
    const double e =
        inside ? __ldg(p + 1) * sr6 * (sr6 - 1.0) - __ldg(p + 4) + (r - __ldg(p + 6)) * fshift
               : 0.0;
    return {dx * fpair, dy * fpair, dz * fpair, e, rsq * fpair};
}

template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_lj_forces_fshift(const T* __restrict__ x, const int* __restrict__ typ, int n_own, int row0,
                    const int* __restrict__ nl, int pitch, const int* __restrict__ cnt,
                    double bx, double by, double bz, const double* __restrict__ table,
                    int ntypes, int shift, T* __restrict__ f, double* __restrict__ pe,
                    double* __restrict__ vir, const int* __restrict__ flags, int tick)
{
    const int i = row0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_own || halted(flags, tick, true)) return;
    const double xi = double(x[3LL * i]);
    const double yi = double(x[3LL * i + 1]);
    const double zi = double(x[3LL * i + 2]);
    typed_row<7>(i, typ, ntypes, shift, nl, pitch, cnt, table, f, pe, vir,
                 [&](int j, const double* p) {
                     return lj_pair_fshift(xi, yi, zi, x, j, bx, by, bz, p);
                 });
}

// typ[r] = types_by_id[gid[r]]: the atom type of every local row (after a rebuild moved them).
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_row_types(const long long* __restrict__ gid, int n, const I* __restrict__ types_by_id,
             I* __restrict__ typ)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    typ[r] = types_by_id[gid[r]];
}

// Type bits into owned row i's list (after md_row_types, once per list build): entry j
// becomes j | typ[j] << shift. The host picks shift so that every row fits below it.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_pack_types(I* __restrict__ nl, int pitch, const I* __restrict__ cnt, int n_own,
              const I* __restrict__ typ, int shift)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_own) return;
    const int m = cnt[i];
    for (int k = 0; k < m; ++k) {
        const long long a = (long long)k * pitch + i;
        const I j = nl[a];
        nl[a] = j | (__ldg(typ + j) << shift);
    }
}

#ifdef SIMSPLIT_MD_FORCE_LANES
// Tuning variant (scripts/prof_md_kernels.py; not built otherwise, and the host emulation
// cannot run it): SIMSPLIT_MD_FORCE_LANES threads per atom evaluate pairs k = base + lane side
// by side, then every lane of the group adds the group's terms in list order (shuffles), so
// the sums are md_lj_forces's bit for bit with twice or four times the threads in flight.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_lj_forces_lanes(const T* __restrict__ x, int n_own, int row0, const int* __restrict__ nl,
                   int pitch,
                   const int* __restrict__ cnt, double bx, double by, double bz, double rcsq,
                   double eps4, double eps24, double sigsq, double eshift, T* __restrict__ f,
                   double* __restrict__ pe, double* __restrict__ vir,
                   const int* __restrict__ flags, int tick)
{
    constexpr int LANES = SIMSPLIT_MD_FORCE_LANES;
    constexpr unsigned ALL = 0xffffffffu;
    if (halted(flags, tick, true)) return;  // the same for every thread
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = row0 + t / LANES, lane = t % LANES;
    const bool live = i < n_own;  // dead groups still take part in the shuffles
    double xi = 0.0, yi = 0.0, zi = 0.0;
    int m = 0;
    if (live) {
        xi = double(x[3LL * i]);
        yi = double(x[3LL * i + 1]);
        zi = double(x[3LL * i + 2]);
        m = cnt[i];
    }
    int rounds = m;  // the warp's longest row: every lane runs as many rounds
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) rounds = max(rounds, __shfl_xor_sync(ALL, rounds, o));
    double fx = 0.0, fy = 0.0, fz = 0.0, e = 0.0, w = 0.0;
    for (int base = 0; base < rounds; base += LANES) {
        const int k = base + lane;
        PairTerms p = {0.0, 0.0, 0.0, 0.0, 0.0};
        if (k < m)
            p = lj_pair(xi, yi, zi, x, __ldg(nl + (long long)k * pitch + i), bx, by, bz, rcsq,
                        eps4, eps24, sigsq, eshift);
#pragma unroll
        for (int s = 0; s < LANES; ++s) {
            const double ax = __shfl_sync(ALL, p.fx, s, LANES);
            const double ay = __shfl_sync(ALL, p.fy, s, LANES);
            const double az = __shfl_sync(ALL, p.fz, s, LANES);
            const double ae = __shfl_sync(ALL, p.e, s, LANES);
            const double aw = __shfl_sync(ALL, p.w, s, LANES);
            if (base + s < m) {
                fx += ax;
                fy += ay;
                fz += az;
                e += ae;
                w += aw;
            }
        }
    }
    if (live && lane == 0) {
        f[3LL * i] = T(fx);
        f[3LL * i + 1] = T(fy);
        f[3LL * i + 2] = T(fz);
        pe[i] = 0.5 * e;
        vir[i] = 0.5 * w;
    }
}
#endif

// Several slabs of one box on one device, in one arena.
#include "md_arena.cuh"

// One slab per process on a GPU: migrants and ghosts as messages, the rest as in the arena.
#include "md_ranks.cuh"

// Exact (correctly rounded) thermo sums.
#include "md_sums.cuh"
