// Several z slabs of one MD box on one device, in one arena (included by md_lj.cu).
//
// Arena rows: [0, n) owned atoms of every slab, slab by slab, each slab's in cell order and
// ascending global id within a cell; then [n, n + g) the slabs' ghost rows, slab by slab, in
// the same order. Each ghost row is a copy of an owned row (ghost_src). A row's bucket key
// says where it lives: owned rows of slab k have key k * ncells + cell, ghost rows of slab k
// (P + k) * ncells + cell (P slabs, ncells cells of the global grid). Sorting rows by key and
// gid (the cell-list counting sort over 2 P ncells buckets) gives the whole arena at once.
//
// Why this keeps the one-slab bits: slab k's local atoms in a cell are its owned rows of the
// cell plus its ghost rows of the cell (disjoint: ghosts come from other slabs), both runs in
// ascending gid; md_arena_build_neighbors merges the two runs by gid, which is exactly the
// canonical order of the one-slab list. Ghosts of slab k are the atoms owned by its
// neighbours (after migration) within cut of k's z interval, the CPU's near_interval test, so
// every atom within reach of an owned atom is local. Positions move as raw T copies.

// Python's float modulo (the CPU's near_interval uses it): the sign of the divisor.
__device__ __forceinline__ double py_mod(double a, double m)
{
    double r = fmod(a, m);
    if (r != 0.0) {
        if ((m < 0.0) != (r < 0.0)) r += m;
    } else {
        r = copysign(0.0, m);
    }
    return r;
}

// The owner of wrapped coordinate z: numpy.searchsorted(edges, z, "right") - 1, clamped to
// [0, nslab) (NaN sorts last there: !(z < e) counts it past every edge, as numpy does).
__device__ __forceinline__ int slab_of(double z, const double* __restrict__ edges, int nslab)
{
    int k = -1;
    for (int m = 0; m <= nslab; ++m) k += !(z < edges[m]);
    return k < 0 ? 0 : (k > nslab - 1 ? nslab - 1 : k);
}

// Whether z is within cut of slab s's interval [edges[s], edges[s + 1]) across the periodic
// box of length lz (the CPU's near_interval, operation for operation).
__device__ __forceinline__ bool near_slab(double z, const double* __restrict__ edges, int s,
                                          double lz, double cut)
{
    const double lo = edges[s], hi = edges[s + 1];
    if (lo <= z && z < hi) return true;
    const double below = py_mod(lo - z, lz);
    const double above = py_mod(z - hi, lz);
    return (below < above ? below : above) < cut;
}

// One thread per owned row of the old arena: its global cell, its owner after migration, and
// the slabs it is a ghost of. keys[3 i] = owner * ncells + cell; keys[3 i + 1], keys[3 i + 2]
// = (nslab + neighbour) * ncells + cell or -1; each key counted in counts. old_key is the row's
// key of the previous arrangement (its slab: old_key / ncells), or null at the first build:
// an owner that is neither that slab nor one of its neighbours means an atom crossed a whole
// slab between two rebuilds, reported in err[0] = 1, err[1] = the row; err[2] counts the rows
// whose owner changed (migrations).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_classify(const T* __restrict__ x, int n, double bx, double by, double bz, int nx,
                  int ny, int nz, const double* __restrict__ edges, int nslab, double cut,
                  const int* __restrict__ old_key, int check, int* __restrict__ keys,
                  int* __restrict__ counts, int* __restrict__ err)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long a = 3LL * i;
    long long cx = (long long)(double(x[a]) * (double(nx) / bx));
    long long cy = (long long)(double(x[a + 1]) * (double(ny) / by));
    long long cz = (long long)(double(x[a + 2]) * (double(nz) / bz));
    cx = cx < 0 ? 0 : (cx > nx - 1 ? nx - 1 : cx);
    cy = cy < 0 ? 0 : (cy > ny - 1 ? ny - 1 : cy);
    cz = cz < 0 ? 0 : (cz > nz - 1 ? nz - 1 : cz);
    const int ncells = nx * ny * nz;
    const int c = int((cz * ny + cy) * nx + cx);
    const double z = double(x[a + 2]);
    const int k = slab_of(z, edges, nslab);
    const int lo_nb = k == 0 ? nslab - 1 : k - 1;
    const int hi_nb = k == nslab - 1 ? 0 : k + 1;
    if (check) {
        const int was = old_key[i] / ncells;
        if (k != was && k != (was == 0 ? nslab - 1 : was - 1)
            && k != (was == nslab - 1 ? 0 : was + 1)) {
            err[0] = 1;
            err[1] = i;
        }
        if (k != was) atomicAdd(err + 2, 1);
    }
    const int own = k * ncells + c;
    keys[a] = own;
    atomicAdd(counts + own, 1);
    int g0 = -1, g1 = -1;
    if (lo_nb != k && near_slab(z, edges, lo_nb, bz, cut)) {
        g0 = (nslab + lo_nb) * ncells + c;
        atomicAdd(counts + g0, 1);
    }
    if (hi_nb != k && hi_nb != lo_nb && near_slab(z, edges, hi_nb, bz, cut)) {
        g1 = (nslab + hi_nb) * ncells + c;
        atomicAdd(counts + g1, 1);
    }
    keys[a + 1] = g0;
    keys[a + 2] = g1;
}

// out[s] = cell_start[s * ncells] for s = 0 .. nbounds - 1 (slab and region boundaries of the
// sorted arena), then err[0 .. 2] (cleared for the next rebuild): the one small read of a
// rebuild before its arrays are sized.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_bounds(const I* __restrict__ cell_start, int nbounds, int ncells, I* __restrict__ err,
                I* __restrict__ out)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < nbounds) out[s] = cell_start[(long long)s * ncells];
    if (s == 0) {
        for (int m = 0; m < 3; ++m) {
            out[nbounds + m] = err[m];
            err[m] = 0;
        }
    }
}

// Counting-sort scatter of the classify keys (entry e of row e / 3) in atomic order;
// md_cell_sort then orders each bucket by global id.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_scatter(const I* __restrict__ keys, int nkeys, I* __restrict__ fill,
                 I* __restrict__ entry_row)
{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nkeys) return;
    const I key = keys[e];
    if (key < 0) return;
    const I slot = atomicAdd(fill + key, I(1));
    entry_row[slot] = I(e / 3);
}

// Owned rows of the new arena: row r is old row entry_row[r]; its key goes along (slab and
// cell for the list build), and new_of_old maps the old row to r for the ghost rows.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_owned(int n, const int* __restrict__ entry_row, const int* __restrict__ keys,
               const T* __restrict__ x, const T* __restrict__ v,
               const long long* __restrict__ img, const long long* __restrict__ gid,
               int* __restrict__ key_out, T* __restrict__ x_out, T* __restrict__ v_out,
               long long* __restrict__ img_out, long long* __restrict__ gid_out,
               int* __restrict__ new_of_old)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int s = entry_row[r];
    key_out[r] = keys[3LL * s];
    gid_out[r] = gid[s];
    new_of_old[s] = r;
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        x_out[3LL * r + d] = x[3LL * s + d];
        v_out[3LL * r + d] = v[3LL * s + d];
        img_out[3LL * r + d] = img[3LL * s + d];
    }
}

// Ghost rows of the new arena (g of them after the n owned rows): copies of their owners'
// rows, and ghost_src, the owner rows every step's refresh gathers from (md_gather_rows).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_ghosts(int n, int g, const int* __restrict__ entry_row,
                const int* __restrict__ new_of_old, const T* __restrict__ x,
                const long long* __restrict__ gid, T* __restrict__ x_out,
                long long* __restrict__ gid_out, long long* __restrict__ ghost_src)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= g) return;
    const int s = entry_row[n + r];
    ghost_src[r] = new_of_old[s];
    gid_out[n + r] = gid[s];
#pragma unroll
    for (int d = 0; d < 3; ++d) x_out[3LL * (n + r) + d] = x[3LL * s + d];
}

// md_build_neighbors for every owned row of the arena at once. Row i of slab k = key / ncells
// scans the stencil cells of the global grid; in each it walks slab k's owned run and ghost
// run of that cell (row ranges of the sorted arena, each in ascending gid) merged by gid, the
// canonical order.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK, 8)
md_arena_build_neighbors(const T* __restrict__ x, int n_own, double bx, double by, double bz,
                         int nx, int ny, int nz, double hx, double hy, double hz, int ox0,
                         int oxn, int oy0, int oyn, int oz0, int ozn, int nslab,
                         const int* __restrict__ key_of, const int* __restrict__ cell_start,
                         const long long* __restrict__ gid, double cutsq,
                         int* __restrict__ nl, int pitch, int cap, int* __restrict__ cnt,
                         int* __restrict__ worst)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_own) return;
    const int ncells = nx * ny * nz;
    const int key = key_of[i];
    const int slab = key / ncells;
    const int c = key - slab * ncells;
    const int own_base = slab * ncells;
    const int ghost_base = (nslab + slab) * ncells;
    const int cx = c % nx;
    const int cy = (c / nx) % ny;
    const int cz = c / (nx * ny);
    const double xi = double(x[3LL * i]);
    const double yi = double(x[3LL * i + 1]);
    const double zi = double(x[3LL * i + 2]);
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
                int p = __ldg(cell_start + own_base + q);
                const int p1 = __ldg(cell_start + own_base + q + 1);
                int h = __ldg(cell_start + ghost_base + q);
                const int h1 = __ldg(cell_start + ghost_base + q + 1);
                while (p < p1 || h < h1) {
                    int j;
                    if (h >= h1 || (p < p1 && __ldg(gid + p) < __ldg(gid + h))) {
                        j = p++;
                    } else {
                        j = h++;
                    }
                    if (j == i) continue;
                    const double dx = md::min_image(xi - double(__ldg(x + 3LL * j)), bx);
                    const double dy = md::min_image(yi - double(__ldg(x + 3LL * j + 1)), by);
                    const double dz = md::min_image(zi - double(__ldg(x + 3LL * j + 2)), bz);
                    if (dx * dx + dy * dy + dz * dz < cutsq) {
                        if (k < cap) nl[(long long)k * pitch + i] = j;
                        ++k;
                    }
                }
            }
        }
    }
    cnt[i] = k;
    if (k > cap) atomicMax(worst, k);
}
