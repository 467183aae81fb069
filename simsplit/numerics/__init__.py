"""Numerics shared by physics and backends: lattice Boltzmann velocity sets (:mod:`.lattice`),
cell flags (:mod:`.flags`), kernel parameters (:mod:`.lbm_params`), 16-bit population storage
(:mod:`.storage`) and profile comparisons against reference data (:mod:`.profiles`). A leaf: it
imports nothing else of simsplit."""
