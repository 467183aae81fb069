"""The slab splitter: sizes, weights, neighbours and links."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simsplit.decomp.slabs import HIGH, LOW, DecompositionError, SlabDecomposition, split_extent


@given(n=st.integers(1, 10_000), parts=st.integers(1, 64), data=st.data())
def test_split_covers_range_in_order(n, parts, data):
    weights = data.draw(st.none() | st.lists(st.floats(0.01, 100), min_size=parts, max_size=parts))
    if n < parts:
        with pytest.raises(DecompositionError):
            split_extent(n, parts, weights)
        return
    bounds = split_extent(n, parts, weights)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a < b for a, b in bounds)
    assert all(bounds[k][1] == bounds[k + 1][0] for k in range(parts - 1))


def test_equal_split_differs_by_at_most_one():
    sizes = [b - a for a, b in split_extent(130, 4)]
    assert sum(sizes) == 130 and max(sizes) - min(sizes) <= 1


def test_weights_follow_ratio():
    sizes = [b - a for a, b in split_extent(300, 3, [1, 2, 3])]
    assert sizes == [50, 100, 150]


def test_min_size_is_respected():
    sizes = [b - a for a, b in split_extent(10, 3, [100, 1, 1], min_size=2)]
    assert min(sizes) >= 2 and sum(sizes) == 10


def test_bad_weights_rejected():
    with pytest.raises(DecompositionError):
        split_extent(10, 2, [1, 0])
    with pytest.raises(DecompositionError):
        split_extent(10, 2, [1])


def test_links_walls_and_periodic():
    walls = SlabDecomposition(12, 3)
    assert walls.slabs[0].neighbours == (None, 1)
    assert walls.slabs[2].neighbours == (1, None)
    assert (0, HIGH, 1, LOW) in walls.links() and len(walls.links()) == 4
    ring = SlabDecomposition(12, 3, periodic=True)
    assert (2, HIGH, 0, LOW) in ring.links() and len(ring.links()) == 6
    single = SlabDecomposition(12, 1, periodic=True)
    assert single.links() == [(0, LOW, 0, HIGH), (0, HIGH, 0, LOW)]
