"""One message per link and round of a rank slab's rebuild: the migrants' x, v, img, gid and
the ghosts' x, gid in one buffer of int64 words.

Words ``[0, 4)``: a header the host writes after the download (migrant count, migrant room,
ghost count, ghost room); then one section per array, 8-byte aligned, laid out by the lists'
rooms (known before the counts: the packs are gathered over the whole room). A post ends with
the last used row, so a message is at most the rooms' size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

HEADER = 4
#: (list, array, values per row, dtype; None: the storage type of x and v), in layout order
SECTIONS = (("mig", "x", 3, None), ("mig", "v", 3, None), ("mig", "img", 3, np.int64),
            ("mig", "gid", 1, np.int64), ("near", "x", 3, None), ("near", "gid", 1, np.int64))


def _words(rows: int, width: int, dtype: Any) -> int:
    return -(-rows * width * np.dtype(dtype).itemsize // 8)


def layout(dtype: Any, rooms: tuple[int, int]) -> tuple[list[tuple[str, str, int, int, Any]],
                                                        int]:
    """The sections ``(list, array, word offset, width, dtype)`` of a message whose lists have
    ``rooms`` (migrants, ghosts) rows, and its size in words."""
    out, at = [], HEADER
    for which, name, width, dt in SECTIONS:
        dt = np.dtype(dtype if dt is None else dt)
        out.append((which, name, at, width, dt))
        at += _words(rooms[which == "near"], width, dt)
    return out, at


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


def split(got: np.ndarray, dtype: Any) -> dict[str, dict[str, np.ndarray]]:
    """The arrays of a received message (views of ``got``, shape (words, 1))."""
    m_mig, r_mig, m_near, r_near = (int(w) for w in got[:HEADER, 0])
    return sections(got, dtype, (r_mig, r_near), (m_mig, m_near))
