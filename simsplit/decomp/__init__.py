"""Domain decomposition: who owns which slab of space, who their neighbours are, and how big
each slab should be (load balance: :mod:`.balance`, :mod:`.balancer`)."""

from simsplit.decomp.slabs import Slab, SlabDecomposition, split_extent

__all__ = ["Slab", "SlabDecomposition", "split_extent"]
