"""One message per link and round of a rank slab's rebuild: the migrants' x, v, img, gid and
the ghosts' x, gid in one buffer of int64 words.

Words ``[0, 4)``: a header the host writes after the download (migrant count, migrant room,
ghost count, ghost room); then one section per array, 8-byte aligned, laid out by the lists'
rooms (known before the counts: the packs are gathered over the whole room). A post ends with
the last used row, so a message is at most the rooms' size.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

HEADER = 4
#: (list, array, values per row, dtype; None: the storage type of x and v), in layout order
SECTIONS = (("mig", "x", 3, None), ("mig", "v", 3, None), ("mig", "img", 3, np.int64),
            ("mig", "gid", 1, np.int64), ("near", "x", 3, None), ("near", "gid", 1, np.int64))


def _words(rows: int, width: int, dtype: Any) -> int:
    return -(-rows * width * np.dtype(dtype).itemsize // 8)


def layout(dtype: Any, rooms: tuple[int, int]
           ) -> tuple[tuple[tuple[str, str, int, int, Any], ...], int]:
    """The sections ``(list, array, word offset, width, dtype)`` of a message whose lists have
    ``rooms`` (migrants, ghosts) rows, and its size in words."""
    return _layout(np.dtype(dtype), (int(rooms[0]), int(rooms[1])))


@functools.lru_cache(maxsize=64)
def _layout(dtype: np.dtype, rooms: tuple[int, int]
            ) -> tuple[tuple[tuple[str, str, int, int, Any], ...], int]:
    # cached: a rebuild asks for the same few layouts every time (rooms grow rarely)
    out, at = [], HEADER
    for which, name, width, dt in SECTIONS:
        dt = np.dtype(dtype if dt is None else dt)
        out.append((which, name, at, width, dt))
        at += _words(rooms[which == "near"], width, dt)
    return tuple(out), at


def place_offsets(dtype: Any, rooms: tuple[int, int]) -> tuple[int, ...]:
    """Where each section starts, in its own elements (x and v in values of ``dtype``, img
    and gid in words), in :data:`SECTIONS` order: the offsets ``md_rank_place_message``
    takes into a message seen as words and as values."""
    dtype = np.dtype(dtype)
    per_word = 8 // dtype.itemsize
    return tuple(at * per_word if dt == dtype else at
                 for _, _, at, _, dt in layout(dtype, rooms)[0])


def used_words(dtype: Any, rooms: tuple[int, int], counts: tuple[int, int]) -> int:
    """Words to post: up to the end of the last section's ``counts`` rows."""
    end = HEADER
    for which, _, at, width, dt in layout(dtype, rooms)[0]:
        m = counts[which == "near"]
        if m:
            end = at + _words(m, width, dt)
    return end


def sections(buf: Any, dtype: Any, rooms: tuple[int, int], counts: tuple[int, int]
             ) -> dict[str, dict[str, Any]]:
    """Views of the first ``counts`` rows of each array in the words ``buf`` (device or host,
    shape (words, 1)): ``{"mig": {x, v, img, gid}, "near": {x, gid}}``, no copies."""
    out: dict[str, dict[str, Any]] = {"mig": {}, "near": {}}
    for which, name, at, width, dt in layout(dtype, rooms)[0]:
        m = counts[which == "near"]
        nw = _words(m, width, dt)
        flat = buf[at: at + nw].reshape(nw).view(dt)[: m * width]
        out[which][name] = flat.reshape((m, width) if width > 1 else (m,))
    return out


def write_header(host: np.ndarray, rooms: tuple[int, int], counts: tuple[int, int]) -> None:
    """The header of a downloaded message (after the download: it covers these words too)."""
    host[:HEADER, 0] = (counts[0], rooms[0], counts[1], rooms[1])


def header(got: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]]:
    """The counts and rooms (migrants, ghosts) in a received message's header."""
    m_mig, r_mig, m_near, r_near = (int(w) for w in got[:HEADER, 0])
    return (m_mig, m_near), (r_mig, r_near)

