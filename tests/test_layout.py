"""The padded GPU field layout: logical shape unchanged, aligned interior rows, shared pitch."""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.backends.layout import ALIGN, element_strides, padded_empty, padded_pitch


@pytest.mark.parametrize("shape", [(9, 6, 10), (19, 5, 7, 33), (3, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8])
def test_rows_padded_and_interior_aligned(shape, dtype):
    a = padded_empty(np, shape, dtype)
    pitch = padded_pitch(shape[-1])
    assert a.shape == shape and a.dtype == dtype
    assert a.flags.c_contiguous == (pitch == shape[-1])
    st = element_strides(a)
    assert st[-1] == 1 and st[-2] == pitch and pitch % ALIGN == 0 and pitch >= shape[-1]
    for k in range(len(shape) - 2):  # outer strides: whole padded rows
        assert st[k] == pitch * int(np.prod(shape[k + 1:-1]))
    base = a.base if a.base is not None else a
    while getattr(base, "base", None) is not None:
        base = base.base
    offset = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0])
    assert (offset // a.itemsize + 1) % ALIGN == 0  # column 1 of row 0 on the boundary
    want = (np.arange(a.size) % 251).astype(dtype).reshape(shape)
    a[...] = want  # every element addressable, none shared with another
    assert np.array_equal(a, want)


def test_flags_share_the_population_pitch_in_elements():
    f = padded_empty(np, (9, 12, 70), np.float32)
    flags = padded_empty(np, (12, 70), np.uint8)
    assert element_strides(f)[1:] == element_strides(flags)
