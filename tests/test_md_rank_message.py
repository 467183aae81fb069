"""One message per link and round of a rank slab's rebuild (simsplit/md/rank_message.py): the
layout's round trip through views, md_rank_gather_message (kernels/md_ranks.cuh, emulated on
the host) filling every section in one launch, and md_rank_place_message placing a received
message's rows in one launch."""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.backends.cuda_c import md_names
from simsplit.md import rank_message
from tests.test_md_kernels_compile import EmulatedMDKernels, emulated_lib  # noqa: F401

CASES = [((5, 7), (3, 6)), ((0, 0), (0, 0)), ((5, 0), (5, 0)), ((0, 3), (0, 1)),
         ((9, 4), (0, 4)), ((1, 1), (1, 0))]


def _rows(rng: np.random.Generator, n: int, dtype) -> dict[str, np.ndarray]:
    return {"x": rng.normal(size=(n, 3)).astype(dtype), "v": rng.normal(size=(n, 3)).astype(dtype),
            "img": rng.integers(-5, 5, (n, 3)), "gid": rng.permutation(n).astype(np.int64) + 100}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rooms, counts", CASES)
def test_message_layout_round_trip(dtype, rooms, counts) -> None:
    """Sections are views of the words, 8-byte aligned and disjoint; the posted words (header
    and used rows) split back into the same rows."""
    rng = np.random.default_rng(1)
    sections, words = rank_message.layout(dtype, rooms)
    buf = np.zeros((words, 1), np.int64)
    views = rank_message.sections(buf, dtype, rooms, rooms)
    ends = []
    for (which, name, at, _, dt), want_rows in zip(sections, [rooms[0]] * 4 + [rooms[1]] * 2,
                                                   strict=True):
        view = views[which][name]
        assert view.dtype == dt and view.shape[0] == want_rows and view.flags.c_contiguous
        if view.size:
            assert np.shares_memory(view, buf)
            assert view.ctypes.data == buf.ctypes.data + 8 * at  # aligned, at its offset
        view[...] = rng.integers(-99, 99, view.shape).astype(dt)
        ends.append(at * 8 + view.nbytes)
    assert all(a <= 8 * s[2] for a, s in zip(ends, sections[1:], strict=False))  # disjoint
    rank_message.write_header(buf, rooms, counts)
    used = rank_message.used_words(dtype, rooms, counts)
    assert rank_message.HEADER <= used <= words
    head = rank_message.header(buf)
    assert head == (counts, rooms)
    got = rank_message.sections(buf[:used].copy(), dtype, rooms, counts)
    for which, arrays in views.items():
        for name, rows in arrays.items():
            m = counts[which == "near"]
            assert got[which][name].dtype == rows.dtype
            assert np.array_equal(got[which][name], rows[:m]), (which, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rooms", [(6, 4), (6, 0), (0, 5), (0, 0)])
def test_emulated_gather_message_one_launch(emulated_lib, dtype, rooms) -> None:  # noqa: F811
    """md_rank_gather_message writes both lists' rows into their sections in one launch,
    equal bit for bit to indexing the rows (and nothing outside the sections)."""
    k = EmulatedMDKernels(emulated_lib)
    rng = np.random.default_rng(2)
    src = _rows(rng, 20, dtype)
    mig = rng.choice(20, rooms[0], replace=False).astype(np.int32)
    near = rng.choice(20, rooms[1], replace=False).astype(np.int32)
    words = rank_message.layout(dtype, rooms)[1]
    buf = np.full((words + 3, 1), -7, np.int64)
    k.rank_gather_message((mig, near), rooms, src,
                          rank_message.sections(buf, dtype, rooms, rooms))
    name = md_names.kernel_name("md_rank_gather_message", dtype)
    assert k.launches.get(name, 0) == (1 if max(rooms) else 0)
    assert (buf[:rank_message.HEADER] == -7).all() and (buf[words:] == -7).all()
    got = rank_message.sections(buf, dtype, rooms, rooms)
    for which, idx in (("mig", mig), ("near", near)):
        for array, rows in got[which].items():
            assert np.array_equal(rows, src[array][idx]), (which, array)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rooms, counts", CASES)
def test_emulated_place_message_round_trip(emulated_lib, dtype, rooms, counts) -> None:  # noqa: F811
    """A gathered message, cut at its used words as posted, placed by md_rank_place_message
    (one launch) puts the migrants' x, v, img, gid at their row and the ghosts' x, gid at
    theirs, bit for bit, and writes no other row."""
    k = EmulatedMDKernels(emulated_lib)
    rng = np.random.default_rng(3)
    src = _rows(rng, 20, dtype)
    mig = rng.choice(20, rooms[0], replace=False).astype(np.int32)
    near = rng.choice(20, rooms[1], replace=False).astype(np.int32)
    buf = np.zeros((rank_message.layout(dtype, rooms)[1], 1), np.int64)
    k.rank_gather_message((mig, near), rooms, src,
                          rank_message.sections(buf, dtype, rooms, rooms))
    rank_message.write_header(buf, rooms, counts)
    posted = buf[:rank_message.used_words(dtype, rooms, counts)].copy()
    dst = {"x": np.full((30, 3), -1, dtype), "v": np.full((30, 3), -2, dtype),
           "img": np.full((30, 3), -3, np.int64), "gid": np.full(30, -4, np.int64)}
    before = {name: a.copy() for name, a in dst.items()}
    at = (4, 17)
    got_counts, got_rooms = rank_message.header(posted)
    k.rank_place_message(posted, dtype, rank_message.place_offsets(dtype, got_rooms),
                         got_counts, dst, at)
    name = md_names.kernel_name("md_rank_place_message", dtype)
    assert k.launches.get(name, 0) == (1 if max(counts) else 0)
    mig_rows = slice(at[0], at[0] + counts[0])
    near_rows = slice(at[1], at[1] + counts[1])
    for array in ("x", "v", "img", "gid"):
        assert np.array_equal(dst[array][mig_rows], src[array][mig[:counts[0]]]), array
    for array in ("x", "gid"):
        assert np.array_equal(dst[array][near_rows], src[array][near[:counts[1]]]), array
    untouched = np.ones(30, bool)
    untouched[mig_rows] = False
    for array in ("x", "gid"):
        keep = untouched.copy()
        keep[near_rows] = False
        assert np.array_equal(dst[array][keep], before[array][keep]), array
    for array in ("v", "img"):
        assert np.array_equal(dst[array][untouched], before[array][untouched]), array
