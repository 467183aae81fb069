// One z slab of an MD box per process (MPI rank) on a GPU (included by md_lj.cu after
// md_arena.cuh, whose slab_of and near_slab it shares).
//
// A rebuild keeps the atoms on the device; only leavers and ghosts travel, as messages:
// 1. md_rank_route (one message round; see simsplit/md/rank_rounds.py): on the old rows, the
//    kept rows, the leavers to each neighbour, the kept rows near each neighbour and this
//    slab's leavers near it, listed by atomic cursors; the host reads the counts once.
//    md_rank_gather_message packs leavers (x, v, img, gid) and ghosts (x, gid) into one
//    message per link; md_rank_gather compacts the kept rows; the arrivals and received
//    ghosts (md_rank_place_message, one launch per received message) and the own leavers
//    near this slab (a local gather) follow them.
//    Two rounds where one cannot find every ghost: md_rank_classify (owners, leavers), then
//    md_rank_select (owned rows, kept and arrived, near each neighbour: near_slab, the CPU's
//    near_interval, same margin).
// 2. md_rank_keys bins the rows as a one-slab arena: owned rows under key cell, ghost rows
//    under ncells + cell; the arena's scatter, gid sort, owned placement (md_arena_owned) and
//    list build do the rest, md_rank_ghost_rows places the ghost rows.
// 3. md_rank_mark, the scan and md_rank_compact list, in row order, the sorted owned rows near
//    each neighbour (sent each step: md_rank_pack) and the ghost rows it owns (received:
//    md_scatter_rows, or md_rank_land straight from the neighbour's device memory). Rows are in (cell, id) order on both sides, so the lists match.
// Row order never enters a sum (lists are in canonical order), so atomic list order is fine.

// Owned row i: kept (owner me), or leaving for the low or high neighbour (lo == hi with two
// slabs). Lists hold at most `room` leavers each (the counts go on; the host checks them). An
// owner that is no neighbour means the atom crossed a whole slab: err[0] = 1, err[1] = i.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_classify(const T* __restrict__ x, int n, const double* __restrict__ edges, int nslab,
                 int me, int lo, int hi, int room, int* __restrict__ cursor,
                 int* __restrict__ kept, int* __restrict__ to_lo, int* __restrict__ to_hi,
                 int* __restrict__ err)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int k = slab_of(double(x[3LL * i + 2]), edges, nslab);
    if (k == me) {
        kept[atomicAdd(cursor, 1)] = i;
    } else if (k == lo) {
        const int s = atomicAdd(cursor + 1, 1);
        if (s < room) to_lo[s] = i;
    } else if (k == hi) {
        const int s = atomicAdd(cursor + 2, 1);
        if (s < room) to_hi[s] = i;
    } else {
        err[0] = 1;
        err[1] = i;
    }
}

// Rows idx[0 .. m) gathered: gid and x always, v and img with `motion` (migrants).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_gather(const int* __restrict__ idx, int m, const T* __restrict__ x,
               const T* __restrict__ v, const long long* __restrict__ img,
               const long long* __restrict__ gid, int motion, T* __restrict__ x_out,
               T* __restrict__ v_out, long long* __restrict__ img_out,
               long long* __restrict__ gid_out)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= m) return;
    const long long s = idx[r];
    gid_out[r] = gid[s];
#pragma unroll
    for (int d = 0; d < 3; ++d) x_out[3LL * r + d] = x[3 * s + d];
    if (motion) {
#pragma unroll
        for (int d = 0; d < 3; ++d) {
            v_out[3LL * r + d] = v[3 * s + d];
            img_out[3LL * r + d] = img[3 * s + d];
        }
    }
}

// One link's message of a round in one launch (simsplit/md/rank_message.py): rows mig[0 .. n_mig)
// (x, v, img, gid) and near[0 .. n_near) (x, gid) gathered into the sections of one buffer.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_gather_message(const int* __restrict__ mig, int n_mig, const int* __restrict__ near,
                       int n_near, const T* __restrict__ x, const T* __restrict__ v,
                       const long long* __restrict__ img, const long long* __restrict__ gid,
                       T* __restrict__ mx, T* __restrict__ mv, long long* __restrict__ mimg,
                       long long* __restrict__ mgid, T* __restrict__ gx,
                       long long* __restrict__ ggid)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n_mig) {
        const long long s = mig[r];
        mgid[r] = gid[s];
#pragma unroll
        for (int d = 0; d < 3; ++d) {
            mx[3LL * r + d] = x[3 * s + d];
            mv[3LL * r + d] = v[3 * s + d];
            mimg[3LL * r + d] = img[3 * s + d];
        }
    }
    if (r < n_near) {
        const long long s = near[r];
        ggid[r] = gid[s];
#pragma unroll
        for (int d = 0; d < 3; ++d) gx[3LL * r + d] = x[3 * s + d];
    }
}

// One link's received message of a round (md_rank_gather_message's sections, uploaded whole)
// placed in one launch: its migrants' rows into x, v, img, gid from row at_mig, its ghosts'
// x and gid from row at_near. `words` and `vals` are the message as 8-byte words and as T;
// each section's offset is in its own elements (simsplit/md/rank_message.py place_offsets).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_place_message(const long long* __restrict__ words, const T* __restrict__ vals,
                      int o_mx, int o_mv, int o_mimg, int o_mgid, int n_mig, int o_gx,
                      int o_ggid, int n_near, T* __restrict__ x, T* __restrict__ v,
                      long long* __restrict__ img, long long* __restrict__ gid, int at_mig,
                      int at_near)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n_mig) {
        const long long o = (long long)at_mig + r;
        gid[o] = words[o_mgid + r];
#pragma unroll
        for (int d = 0; d < 3; ++d) {
            x[3 * o + d] = vals[o_mx + 3LL * r + d];
            v[3 * o + d] = vals[o_mv + 3LL * r + d];
            img[3 * o + d] = words[o_mimg + 3LL * r + d];
        }
    }
    if (r < n_near) {
        const long long o = (long long)at_near + r;
        gid[o] = words[o_ggid + r];
#pragma unroll
        for (int d = 0; d < 3; ++d) x[3 * o + d] = vals[o_gx + 3LL * r + d];
    }
}

// Owned row i is a ghost of the low neighbour when near its interval, and of the high one
// (another slab than the low one) when near its; lists as in md_rank_classify.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_select(const T* __restrict__ x, int n, const double* __restrict__ edges, int lo, int hi,
               double lz, double cut, int room, int* __restrict__ cursor,
               int* __restrict__ to_lo, int* __restrict__ to_hi)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double z = double(x[3LL * i + 2]);
    if (near_slab(z, edges, lo, lz, cut)) {
        const int s = atomicAdd(cursor, 1);
        if (s < room) to_lo[s] = i;
    }
    if (hi != lo && near_slab(z, edges, hi, lz, cut)) {
        const int s = atomicAdd(cursor + 1, 1);
        if (s < room) to_hi[s] = i;
    }
}

// One message round per rebuild (md_rank_route replaces md_rank_classify and md_rank_select):
// owned row i of the old arrangement is kept (owner me) or leaves for lo or hi (lists 0, 1).
// A leaver near this slab stays here as a ghost (list 2: its new owner sends its position
// each step). A kept row near a neighbour is that neighbour's ghost (lists 3, 4). A leaver to
// neighbour k near the slab beyond k is a ghost there too: with three slabs that slab is this
// one's other neighbour and gets it in this round (relay, counted in err[3]); with more nobody
// can send it in one round, so err[2] = 1 (the caller takes md_rank_classify's two rounds
// where slabs are thin enough for that to happen). Lists 0-2 hold at most `room` rows from
// lists[list * room], lists 3-4 at most `near_room` from lists[3 room + (list - 3) near_room];
// cursor[0] counts the kept rows, cursor[1 + list] each list; err[0], err[1] as in
// md_rank_classify.
__device__ __forceinline__ void md_rank_push(int* cursor, int list, int room, int near_room,
                                             int* lists, int i)
{
    const int s = atomicAdd(cursor + 1 + list, 1);
    const int cap = list < 3 ? room : near_room;
    const long long base = list < 3 ? (long long)list * room
                                    : 3LL * room + (long long)(list - 3) * near_room;
    if (s < cap) lists[base + s] = i;
}

template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_route(const T* __restrict__ x, int n, const double* __restrict__ edges, int nslab,
              int me, int lo, int hi, double lz, double cut, int room, int near_room,
              int* __restrict__ cursor, int* __restrict__ kept, int* __restrict__ lists,
              int* __restrict__ err)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double z = double(x[3LL * i + 2]);
    const int k = slab_of(z, edges, nslab);
    if (k == me) {
        kept[atomicAdd(cursor, 1)] = i;
        if (near_slab(z, edges, lo, lz, cut)) md_rank_push(cursor, 3, room, near_room, lists, i);
        if (hi != lo && near_slab(z, edges, hi, lz, cut))
            md_rank_push(cursor, 4, room, near_room, lists, i);
    } else if (k == lo || k == hi) {
        md_rank_push(cursor, k == lo ? 0 : 1, room, near_room, lists, i);
        if (near_slab(z, edges, me, lz, cut)) md_rank_push(cursor, 2, room, near_room, lists, i);
        const int beyond = k == lo ? (lo == 0 ? nslab - 1 : lo - 1)
                                   : (hi == nslab - 1 ? 0 : hi + 1);
        if (beyond != me && near_slab(z, edges, beyond, lz, cut)) {
            if (beyond == lo || beyond == hi) {
                md_rank_push(cursor, beyond == lo ? 3 : 4, room, near_room, lists, i);
                atomicAdd(err + 3, 1);
            } else {
                err[2] = 1;
            }
        }
    } else {
        err[0] = 1;
        err[1] = i;
    }
}

// The refresh lists of every link in one scan: segment j (of nlinks, link links[j]) flags the
// sorted rows [0, rows) of x: an owned row (r < n_own) near that slab, a ghost row owned by it.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_mark(const T* __restrict__ x, int n_own, int rows, const double* __restrict__ edges,
             int nslab, int link0, int link1, int nlinks, double lz, double cut,
             int* __restrict__ flags)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)nlinks * rows) return;
    const int r = int(t % rows);
    const int s = t < rows ? link0 : link1;
    const double z = double(x[3LL * r + 2]);
    flags[t] = r < n_own ? near_slab(z, edges, s, lz, cut) : slab_of(z, edges, nslab) == s;
}

// Order-preserving compaction of md_rank_mark's flags (start: their exclusive scan): out[start[t]]
// = the row of entry t, and bounds[b] = start of entry (b / 2) rows + (b % 2) n_own for
// b < 2 nlinks + 1: each link's sent rows are out[bounds[2 j] .. bounds[2 j + 1]), its received
// ones out[bounds[2 j + 1] .. bounds[2 j + 2]).
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_compact(const I* __restrict__ flags, const I* __restrict__ start, int n_own, int rows,
                int nlinks, long long* __restrict__ out, I* __restrict__ bounds)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < (long long)nlinks * rows && flags[t]) out[start[t]] = t % rows;
    if (t < 2 * nlinks + 1) bounds[t] = start[(long long)(t / 2) * rows + (t % 2) * n_own];
}

// Bucket keys of a one-slab arena: rows [0, n_own) owned (key = cell), [n_own, rows) ghosts
// (key = ncells + cell); three entries per row as md_arena_scatter reads them, two unused.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_keys(const T* __restrict__ x, int n_own, int rows, double bx, double by, double bz,
             int nx, int ny, int nz, int* __restrict__ keys, int* __restrict__ counts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const int key = (i < n_own ? 0 : nx * ny * nz) + global_cell(x, i, bx, by, bz, nx, ny, nz);
    keys[3LL * i] = key;
    keys[3LL * i + 1] = -1;
    keys[3LL * i + 2] = -1;
    atomicAdd(counts + key, 1);
}

// Ghost rows [n_own, n_own + g) of the sorted arrays: copies of the received rows in bucket
// order; new_of_old maps each received row to its place.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_ghost_rows(int n_own, int g, const int* __restrict__ entry_row,
                   const T* __restrict__ x, const long long* __restrict__ gid,
                   T* __restrict__ x_out, long long* __restrict__ gid_out,
                   int* __restrict__ new_of_old)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= g) return;
    const int row = n_own + r;
    const int s = entry_row[row];
    new_of_old[s] = row;
    gid_out[row] = gid[s];
#pragma unroll
    for (int d = 0; d < 3; ++d) x_out[3LL * row + d] = x[3LL * s + d];
}

// out[j] = map[idx[j]] (use_idx) or map[base + j]: the sorted rows of a packed list, or of a
// run of received rows.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_compose(const I* __restrict__ idx, int use_idx, int base, int m,
                const I* __restrict__ map, long long* __restrict__ out)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    out[j] = map[use_idx ? idx[j] : base + j];
}

// dst[idx[r]] = src[r]: received ghost positions into their rows.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_scatter_rows(const T* __restrict__ src, const long long* __restrict__ idx, int m,
                T* __restrict__ dst)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= m) return;
    const long long s = 3LL * idx[r];
#pragma unroll
    for (int d = 0; d < 3; ++d) dst[s + d] = src[3LL * r + d];
}

// The per-step ghost landing of a device link (simsplit/md/rank_links.py): src is the
// neighbour's pack of this step, read in place in its device memory (same GPU or peer); rows
// [0, m) go to dst[idx[r]], and one thread merges the neighbour's first rebuild tick (trailer
// word 0) into this slab's flags, the earlier nonzero tick winning, so every slab halts its
// batch at the same step without the host (exact for up to three slabs, where every slab is a
// neighbour of every other). The jump flag stays the slab's own: the slab that saw it raises.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_land(const T* __restrict__ src, const long long* __restrict__ idx, int m,
             int* __restrict__ flags, T* __restrict__ dst)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < m) {
        const long long s = 3LL * idx[r];
#pragma unroll
        for (int d = 0; d < 3; ++d) dst[s + d] = src[3LL * r + d];
    } else if (r == m) {
        const int at = reinterpret_cast<const int*>(src + 3LL * m)[0];
        if (at != 0 && (flags[0] == 0 || at < flags[0])) flags[0] = at;
    }
}

// The per-step ghost message of one link: buf rows [0, m) = x[idx]; with `trailer`, row m
// carries this step's displacement flags as two int32 (trailer 2: then clears them, for the
// last link, keeping flags[2] = flags[0] for the step's interior forces), so the flag read
// travels with the ghost download (one wait per step) and each neighbour learns this slab's
// flags.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_rank_pack(const T* __restrict__ x, const long long* __restrict__ idx, int m,
             int* __restrict__ flags, int trailer, T* __restrict__ buf)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < m) {
        const long long s = 3LL * idx[r];
#pragma unroll
        for (int d = 0; d < 3; ++d) buf[3LL * r + d] = x[s + d];
    } else if (r == m && trailer) {
        int* words = reinterpret_cast<int*>(buf + 3LL * m);
        words[0] = flags[0];
        words[1] = flags[1];
        if (trailer == 2) {
            flags[2] = flags[0];  // the step's own rebuild flag, for its interior forces
            flags[0] = 0;
            flags[1] = 0;
        }
    }
}
