"""Lattice Boltzmann physics (D2Q9, D3Q19) on slabs: a case's set-up and checks (:mod:`.setup`,
:mod:`.validate`, :mod:`.schema`, :mod:`.params`), the per-slab block (:mod:`.block`), the time
loop (:mod:`.solver`), saving and restoring (:mod:`.state`) and reference data
(:mod:`.reference`). A new boundary condition starts in :mod:`.block` (cell flags from
:mod:`simsplit.numerics.flags`) and the kernels of each backend."""
