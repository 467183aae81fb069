"""Domain decomposition: who owns which slab of space, and who their neighbours are."""

from simsplit.decomp.slabs import Slab, SlabDecomposition, split_extent

__all__ = ["Slab", "SlabDecomposition", "split_extent"]
