"""Launches of the MD kernels that arrange the atoms of several slabs: slabs sharing one
arena on a device (``kernels/md_arena.cuh``, :mod:`simsplit.md.arena`) and one slab per
process (``kernels/md_ranks.cuh``, :mod:`simsplit.md.rank_slab`).

:class:`SlabLaunches` is a part of :class:`~simsplit.backends.cuda_c.md.DeviceMDKernels`: it
uses that class's ``_launch``, ``_zero``, ``zeros``, ``to_device``, ``_read_small``,
``_exclusive_scan`` and its ``_flags`` and ``_worst`` counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from simsplit.backends.cuda_c.md_names import box_args, scan_scratch, stencil_ranges


@dataclass
class ArenaScratch:
    """Rebuild scratch of a slab arena, reused while the atom count and grid stay: classify
    keys (3 per owned row), bucket counts and starts (2 P ncells buckets), the slab edges on
    the device, the error/migration counters and the small read, old row -> new row, and the
    bucket-sorted entries (owned then ghost rows)."""

    rows: int
    nbuckets: int
    nslab: int
    ncells: int
    keys: Any
    counts: Any
    cell_start: Any
    fill: Any
    chunk_sums: Any
    edges: Any
    err: Any
    bounds: Any
    new_of_old: Any
    entry_row: Any


class SlabLaunches:
    """The arena and rank-slab launches of a GPU MD kernel set (see the module docstring)."""

    # --- several slabs in one arena (kernels/md_arena.cuh, simsplit.md.arena) ---------------
    #: whether this kernel set has the arena kernels
    arenas = True

    def arena_sort(self, x, n: int, box: np.ndarray, ncell: np.ndarray, edges: np.ndarray,
                   cut: float, old_key, gid, scratch: ArenaScratch | None) -> ArenaScratch:
        """Queue the arena's counting sort: owner, cell and ghost destinations of the ``n``
        owned rows (``md_arena_classify``), bucket starts, and the bucket-sorted entries
        (``entry_row``: owned rows of each slab, then ghost rows of each slab, by gid within a
        cell). ``old_key`` None: the first arrangement (nothing to check or count)."""
        nslab = int(edges.shape[0]) - 1
        nc = int(np.prod(ncell))
        nb = 2 * nslab * nc
        if scratch is None or scratch.rows != n or scratch.nbuckets != nb:
            scratch = self._arena_scratch(n, nslab, nc, edges)
        check = old_key is not None
        self._launch("md_arena_classify", x.dtype, n, x, np.int32(n), *box_args(box),
                     *(np.int32(c) for c in ncell), scratch.edges, np.int32(nslab),
                     np.float64(cut), old_key if check else scratch.new_of_old,
                     np.int32(check), scratch.keys, scratch.counts, scratch.err)
        self._bucket_sort(scratch, n, gid)
        return scratch

    def _arena_scratch(self, rows: int, nslab: int, ncells: int, edges: Any) -> ArenaScratch:
        """Sort scratch for ``rows`` rows (every row at most three entries: one owned, two
        ghosts) over 2 ``nslab`` ``ncells`` buckets."""
        nb = 2 * nslab * ncells
        return ArenaScratch(
            rows=rows, nbuckets=nb, nslab=nslab, ncells=ncells,
            keys=self.zeros((3 * rows,), np.int32), counts=self.zeros((nb,), np.int32),
            cell_start=self.zeros((nb + 1,), np.int32), fill=self.zeros((nb,), np.int32),
            chunk_sums=self.zeros((scan_scratch(nb),), np.int32),
            edges=self.to_device(np.asarray(edges, np.float64)),
            err=self.zeros((3,), np.int32), bounds=self.zeros((2 * nslab + 5,), np.int32),
            new_of_old=self.zeros((rows,), np.int32),
            entry_row=self.zeros((3 * rows,), np.int32))

    def _bucket_sort(self, scratch: ArenaScratch, rows: int, gid) -> None:
        """Queue bucket starts from the counts, the entries of ``rows`` rows scattered into
        their buckets, and each bucket sorted by gid."""
        nb = scratch.nbuckets
        self._exclusive_scan(scratch.counts, nb, scratch.chunk_sums, scratch.cell_start,
                             scratch.fill)
        if rows:
            self._launch("md_arena_scatter", None, 3 * rows, scratch.keys, np.int32(3 * rows),
                         scratch.fill, scratch.entry_row)
        self._launch("md_cell_sort", None, nb, scratch.cell_start, np.int32(nb), gid,
                     scratch.entry_row, scratch.counts)

    def arena_place(self, scratch: ArenaScratch, n: int, g_cap: int, old: dict[str, Any],
                    new: dict[str, Any]) -> None:
        """Queue the copies into bucket order: ``new`` x, v, img, gid, key (owned rows
        [0, n), ghost rows after them in x and gid, at most ``g_cap``) from ``old`` x, v, img,
        gid; ``new["ghost_of"]``, the (at most two) ghost rows of each owned row."""
        dtype = old["x"].dtype
        self._launch("md_arena_owned", dtype, n, np.int32(n), scratch.entry_row, scratch.keys,
                     old["x"], old["v"], old["img"], old["gid"], new["key"], new["x"],
                     new["v"], new["img"], new["gid"], scratch.new_of_old, new["ghost_of"])
        if g_cap:
            self._launch("md_arena_ghosts", dtype, g_cap, np.int32(n), np.int32(g_cap),
                         scratch.cell_start, np.int32(scratch.nbuckets), scratch.entry_row,
                         scratch.new_of_old, scratch.keys, old["x"], old["gid"], new["x"],
                         new["gid"], new["ghost_of"])

    def arena_build_neighbors(self, x, n_own: int, rows: int, box: np.ndarray,
                              ncell: np.ndarray, offsets: Sequence[np.ndarray],
                              scratch: ArenaScratch, key, gid, cutsq: float, nl, cnt,
                              x0) -> None:
        """Queue :meth:`build_neighbors` for every owned row of an arena (lists index arena
        rows; rows at or past ``rows`` are never read), and the snapshot ``x0`` of the owned
        positions. :meth:`arena_counts` reads the longest row."""
        self._launch("md_arena_build_neighbors", x.dtype, n_own, x, np.int32(n_own),
                     np.int32(rows), *box_args(box), *(np.int32(c) for c in ncell),
                     *(np.float64(float(b) / float(c)) for b, c in zip(box, ncell, strict=True)),
                     *(np.int32(v) for v in stencil_ranges(offsets)), np.int32(scratch.nslab),
                     key, scratch.cell_start, gid, np.float64(cutsq), nl,
                     np.int32(nl.shape[1]), np.int32(nl.shape[0]), cnt, self._worst, x0)

    def arena_counts(self, scratch: ArenaScratch) -> np.ndarray:
        """Wait for the device; return the ``2 P + 1`` region boundaries of the sorted arena
        (owned rows of each slab, then ghost rows of each slab), the stray flag, a stray
        row, the migrant count and the longest list row if one overflowed (else 0); clears
        the flags for the next rebuild."""
        return np.array(self._read_small(self._arena_bounds(scratch)), dtype=np.int64)

    def queue_arena_counts(self, scratch: ArenaScratch) -> Any:
        """:meth:`arena_counts` without the wait: :meth:`queued_read` of the handle returns
        them once the queue has passed the read."""
        return self.queue_read(self._arena_bounds(scratch))

    def _arena_bounds(self, scratch: ArenaScratch) -> Any:
        """Queue ``md_arena_bounds`` (the counts :meth:`arena_counts` returns) into
        ``scratch.bounds``; returns that array."""
        nbounds = 2 * scratch.nslab + 1
        self._launch("md_arena_bounds", None, nbounds, scratch.cell_start, np.int32(nbounds),
                     np.int32(scratch.ncells), scratch.err, self._worst, scratch.bounds)
        return scratch.bounds

    # --- one slab per process (kernels/md_ranks.cuh, simsplit.md.rank_slab) ---------------
    #: whether this kernel set has the per-process slab kernels
    rank_slabs = True

    def rank_classify(self, x, n: int, edges, nslab: int, me: int, lo: int, hi: int,
                      room: int, counts, kept, to_lo, to_hi) -> None:
        """Queue the owner test of ``n`` owned rows: ``counts`` = [kept, to lo, to hi, stray
        flag, stray row]; the row lists ``kept`` and (at most ``room`` each) ``to_lo``,
        ``to_hi``, zero past their counts (a gather of the whole room reads row 0 there)."""
        for arr in (counts, to_lo, to_hi):
            self._zero(arr)
        if n:
            self._launch("md_rank_classify", x.dtype, n, x, np.int32(n), edges,
                         np.int32(nslab), np.int32(me), np.int32(lo), np.int32(hi),
                         np.int32(room), counts, kept, to_lo, to_hi, counts[3:])

    def rank_select(self, x, n: int, edges, lo: int, hi: int, lz: float, cut: float,
                    room: int, counts, to_lo, to_hi) -> None:
        """Queue the ghost test of ``n`` owned rows: ``counts`` = [near lo, near hi] and the
        row lists (at most ``room`` each, zero past their counts)."""
        for arr in (counts, to_lo, to_hi):
            self._zero(arr)
        if n:
            self._launch("md_rank_select", x.dtype, n, x, np.int32(n), edges, np.int32(lo),
                         np.int32(hi), np.float64(lz), np.float64(cut), np.int32(room), counts,
                         to_lo, to_hi)

    def rank_route(self, x, n: int, edges, nslab: int, me: int, lo: int, hi: int, lz: float,
                   cut: float, rooms: tuple[int, int], counts, kept, lists) -> None:
        """Queue the one-round test of ``n`` owned rows (``md_rank_route``): ``counts`` =
        [kept, to lo, to hi, own ghosts, near lo, near hi, stray flag, stray row, ghost beyond
        reach of one round, relayed ghosts]; ``kept`` and the five lists in ``lists`` (three
        of at most ``rooms[0]`` rows, then two of at most ``rooms[1]``; zero past their
        counts)."""
        for arr in (counts, lists):
            self._zero(arr)
        if n:
            self._launch("md_rank_route", x.dtype, n, x, np.int32(n), edges, np.int32(nslab),
                         np.int32(me), np.int32(lo), np.int32(hi), np.float64(lz),
                         np.float64(cut), np.int32(rooms[0]), np.int32(rooms[1]), counts, kept,
                         lists, counts[6:])

    def rank_refresh_lists(self, x, n_own: int, rows: int, edges, nslab: int,
                           links: tuple[int, ...], lz: float, cut: float,
                           scratch: dict[str, Any], out, bounds) -> None:
        """Queue the ghost refresh lists of every link (one or two) on the sorted rows
        ``x[:rows]`` (``n_own`` owned): in ``out``, each link's owned rows near its slab, then
        the ghost rows it owns, in row order, from the offsets ``bounds`` (2 links + 1
        entries; ``md_rank_mark`` and ``md_rank_compact``). ``scratch``: reused flag and scan
        arrays (grown here); ``out`` holds at least ``len(links) * rows`` entries."""
        self._zero(bounds)
        m = len(links) * rows
        if not m:
            return
        if scratch.get("rows", -1) < m:
            room = m + m // 8 + 16
            scratch.update(rows=room, flags=self.zeros((room,), np.int32),
                           start=self.zeros((room + 1,), np.int32),
                           fill=self.zeros((room,), np.int32),
                           sums=self.zeros((scan_scratch(room),), np.int32))
        flags, start = scratch["flags"], scratch["start"]
        self._launch("md_rank_mark", x.dtype, m, x, np.int32(n_own), np.int32(rows), edges,
                     np.int32(nslab), np.int32(links[0]), np.int32(links[-1]),
                     np.int32(len(links)), np.float64(lz), np.float64(cut), flags)
        self._exclusive_scan(flags, m, scratch["sums"], start, scratch["fill"])
        self._launch("md_rank_compact", None, max(m, 2 * len(links) + 1), flags, start,
                     np.int32(n_own), np.int32(rows), np.int32(len(links)), out, bounds)

    def rank_gather(self, idx, m: int, src: dict[str, Any], out: dict[str, Any],
                    motion: bool) -> None:
        """Queue ``out[name][r] = src[name][idx[r]]`` for r < ``m``: x and gid, and with
        ``motion`` v and img too (``src`` holds all four)."""
        if not m:
            return
        x, v, img, gid = src["x"], src["v"], src["img"], src["gid"]
        # without motion the kernel writes no v or img: the source's stand in for the outputs
        # (arrays of the parameters' types and ranks, which a typed twin compiles against)
        v_out, img_out = (out["v"], out["img"]) if motion else (v, img)
        self._launch("md_rank_gather", x.dtype, m, idx, np.int32(m), x, v, img, gid,
                     np.int32(motion), out["x"], v_out, img_out, out["gid"])

    def rank_gather_message(self, lists: tuple[Any, Any], rows: tuple[int, int],
                            src: dict[str, Any], out: dict[str, dict[str, Any]]) -> None:
        """Queue one link's message in one launch: ``out["mig"][name][r] =
        src[name][lists[0][r]]`` (x, v, img, gid) for r < ``rows[0]`` and ``out["near"]``'s x,
        gid from ``lists[1]`` for r < ``rows[1]`` (a list of no rows: any list)."""
        if not max(rows):
            return
        mig, near = out["mig"], out["near"]
        first = lists[0] if rows[0] else lists[1]
        self._launch("md_rank_gather_message", src["x"].dtype, max(rows), first,
                     np.int32(rows[0]), lists[1] if rows[1] else first, np.int32(rows[1]),
                     src["x"], src["v"], src["img"], src["gid"], mig["x"], mig["v"],
                     mig["img"], mig["gid"], near["x"], near["gid"])

    def rank_place_message(self, msg, dtype: Any, offsets: Sequence[int],
                           counts: tuple[int, int], dst: dict[str, Any],
                           at: tuple[int, int]) -> None:
        """Queue a received message's rows (``msg``: its words on the device, shape (words,
        1); ``offsets``: its sections' offsets in their own elements) into ``dst``: the
        ``counts[0]`` migrants' x, v, img, gid from row ``at[0]``, the ``counts[1]`` ghosts'
        x, gid from row ``at[1]``, in one launch."""
        if not max(counts):
            return
        words, vals = self._message_views(msg, dtype)
        o = [np.int32(a) for a in offsets]
        self._launch("md_rank_place_message", np.dtype(dtype), max(counts), words, vals,
                     o[0], o[1], o[2], o[3], np.int32(counts[0]), o[4], o[5],
                     np.int32(counts[1]), dst["x"], dst["v"], dst["img"], dst["gid"],
                     np.int32(at[0]), np.int32(at[1]))

    def _message_views(self, msg, dtype: Any) -> tuple[Any, Any]:
        """A message's device words as one row of 8-byte words and as values of ``dtype``."""
        words = msg.reshape(msg.shape[0])
        return words, words.view(dtype)

    def rank_sort(self, x, n_own: int, rows: int, box: np.ndarray, ncell: np.ndarray, gid,
                  scratch: ArenaScratch | None) -> ArenaScratch:
        """Queue the counting sort of ``rows`` rows as a one-slab arena (owned rows
        ``[0, n_own)``, then ghost rows): bucket starts and the bucket-sorted ``entry_row``,
        by gid within a cell."""
        nc = int(np.prod(ncell))
        if scratch is None or scratch.rows < rows or scratch.nbuckets != 2 * nc:
            scratch = self._arena_scratch(rows + rows // 8 + 16, 1, nc, np.zeros(2))
        if rows:
            self._launch("md_rank_keys", x.dtype, rows, x, np.int32(n_own), np.int32(rows),
                         *box_args(box), *(np.int32(c) for c in ncell), scratch.keys,
                         scratch.counts)
        self._bucket_sort(scratch, rows, gid)
        return scratch

    def rank_place(self, scratch: ArenaScratch, n_own: int, g: int, old: dict[str, Any],
                   new: dict[str, Any]) -> None:
        """Queue the copies into bucket order (owned rows with v, img and their cell key;
        ``g`` ghost rows after them), and ``scratch.new_of_old``."""
        dtype = old["x"].dtype
        if n_own:
            self._launch("md_arena_owned", dtype, n_own, np.int32(n_own), scratch.entry_row,
                         scratch.keys, old["x"], old["v"], old["img"], old["gid"], new["key"],
                         new["x"], new["v"], new["img"], new["gid"], scratch.new_of_old,
                         new["ghost_of"])
        if g:
            self._launch("md_rank_ghost_rows", dtype, g, np.int32(n_own), np.int32(g),
                         scratch.entry_row, old["x"], old["gid"], new["x"], new["gid"],
                         scratch.new_of_old)

    def rank_compose(self, idx, base: int, m: int, mapping, out) -> None:
        """Queue ``out[j] = mapping[idx[j]]`` (``idx`` None: ``mapping[base + j]``), j < m."""
        if m:
            self._launch("md_rank_compose", None, m, mapping if idx is None else idx,
                         np.int32(idx is not None), np.int32(base), np.int32(m), mapping, out)

    def rank_pack(self, x, rows, trailer: int, buf) -> None:
        """Queue ``buf[:m] = x[rows]`` (m rows) and this step's displacement flags as two
        int32 in row ``m`` (``trailer`` 1; 2: and clear the flags, keeping the rebuild flag
        in the third slot for the step's forces, see ``unless_moved``)."""
        m = int(rows.shape[0])
        self._launch("md_rank_pack", x.dtype, m + 1, x, rows, np.int32(m), self._flags,
                     np.int32(trailer), buf)

    def rank_land(self, src, idx, dst) -> None:
        """Queue ``dst[idx[r]] = src[r]`` for the rows of ``idx`` and merge the rebuild tick
        of ``src``'s trailer row into this kernel set's flags (``md_rank_land``: a device
        link's landing, ``src`` in the neighbour's memory)."""
        m = int(idx.shape[0])
        self._launch("md_rank_land", src.dtype, m + 1, src, idx, np.int32(m), self._flags, dst)
