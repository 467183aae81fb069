// Several z slabs of one MD box on one device, in one arena (included by md_lj.cu).
//
// Arena rows: [0, n) owned atoms of every slab, slab by slab, each slab's in cell order and
// ascending global id within a cell; then [n, n + g) the slabs' ghost rows, slab by slab, in
// the same order. Each ghost row is a copy of an owned row; ghost_of lists an owned row's
// copies (at most two), which md_advance rewrites with the row every step. A row's bucket key
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
    const int ncells = nx * ny * nz;
    const int c = global_cell(x, i, bx, by, bz, nx, ny, nz);
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
// sorted arena), then err[0 .. 2] and worst[0] (all cleared for the next rebuild): the one
// small read of a rebuild, after its list build.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_bounds(const I* __restrict__ cell_start, int nbounds, int ncells, I* __restrict__ err,
                I* __restrict__ worst, I* __restrict__ out)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < nbounds) out[s] = cell_start[(long long)s * ncells];
    if (s == 0) {
        for (int m = 0; m < 3; ++m) {
            out[nbounds + m] = err[m];
            err[m] = 0;
        }
        out[nbounds + 3] = worst[0];
        worst[0] = 0;
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
// cell for the list build), new_of_old maps the old row to r for the ghost rows, and its
// ghost_of entries are cleared for md_arena_ghosts to fill.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_owned(int n, const int* __restrict__ entry_row, const int* __restrict__ keys,
               const T* __restrict__ x, const T* __restrict__ v,
               const long long* __restrict__ img, const long long* __restrict__ gid,
               int* __restrict__ key_out, T* __restrict__ x_out, T* __restrict__ v_out,
               long long* __restrict__ img_out, long long* __restrict__ gid_out,
               int* __restrict__ new_of_old, int* __restrict__ ghost_of)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int s = entry_row[r];
    ghost_of[2LL * r] = -1;
    ghost_of[2LL * r + 1] = -1;
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

// Ghost rows of the new arena (after the n owned rows; their count is cell_start[nb] - n, read
// here so that the host need not wait for it): copies of their owners' rows, entered in the
// owner's ghost_of (slot 0 for the ghost of the row's first ghost key, 1 for the second).
// At most g_cap rows are written (the room the host guessed; it checks the count afterwards
// and redoes this with more).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_arena_ghosts(int n, int g_cap, const int* __restrict__ cell_start, int nb,
                const int* __restrict__ entry_row, const int* __restrict__ new_of_old,
                const int* __restrict__ keys, const T* __restrict__ x,
                const long long* __restrict__ gid, T* __restrict__ x_out,
                long long* __restrict__ gid_out, int* __restrict__ ghost_of)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= g_cap || r >= cell_start[nb] - n) return;
    const int row = n + r;
    const int s = entry_row[row];
    const int k1 = keys[3LL * s + 1];
    const int slot = (k1 >= 0 && cell_start[k1] <= row && row < cell_start[k1 + 1]) ? 0 : 1;
    ghost_of[2LL * new_of_old[s] + slot] = row;
    gid_out[row] = gid[s];
#pragma unroll
    for (int d = 0; d < 3; ++d) x_out[3LL * row + d] = x[3LL * s + d];
}

// md_build_neighbors for every owned row of the arena at once. Row i of slab k = key / ncells
// scans the stencil cells of the global grid; in each it walks slab k's owned run and ghost
// run of that cell (row ranges of the sorted arena, each in ascending gid) merged by gid, the
// canonical order. Rows at or past `rows` (ghosts the arena had no room for: the host redoes
// the build) are never read. x0 gets the row's position, the displacement check's reference.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK, 8)
md_arena_build_neighbors(const T* __restrict__ x, int n_own, int rows, double bx, double by,
                         double bz, int nx, int ny, int nz, double hx, double hy, double hz,
                         int ox0, int oxn, int oy0, int oyn, int oz0, int ozn, int nslab,
                         const int* __restrict__ key_of, const int* __restrict__ cell_start,
                         const long long* __restrict__ gid, double cutsq,
                         int* __restrict__ nl, int pitch, int cap, int* __restrict__ cnt,
                         int* __restrict__ worst, double* __restrict__ x0)
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
    x0[3LL * i] = xi;
    x0[3LL * i + 1] = yi;
    x0[3LL * i + 2] = zi;
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
                int h = min(__ldg(cell_start + ghost_base + q), rows);
                const int h1 = min(__ldg(cell_start + ghost_base + q + 1), rows);
                if (h == h1) {  // no ghosts in this cell (most cells): the plain scan
                    for (; p < p1; ++p) {
                        if (p == i) continue;
                        const double dx = md::min_image(xi - double(__ldg(x + 3LL * p)), bx);
                        const double dy = md::min_image(yi - double(__ldg(x + 3LL * p + 1)), by);
                        const double dz = md::min_image(zi - double(__ldg(x + 3LL * p + 2)), bz);
                        if (dx * dx + dy * dy + dz * dz < cutsq) {
                            if (k < cap) nl[(long long)k * pitch + i] = p;
                            ++k;
                        }
                    }
                    continue;
                }
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
    // a row that overflowed keeps the entries it holds: work queued on the lists before the
    // host reads ``worst`` (a rank slab's forces) stays inside them, and is redone
    cnt[i] = min(k, cap);
    if (k > cap) atomicMax(worst, k);
}
