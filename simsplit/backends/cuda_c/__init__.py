"""CUDA C backend: hand-written kernels (``kernels/*.cu``) compiled at run time by NVRTC via CuPy.

Importing this package needs no CuPy: :class:`CupyBackend` raises
:class:`~simsplit.backends.base.BackendUnavailable` when it is constructed without CuPy or a GPU,
and :mod:`.source` (kernel lookup, generated lattice header) serves the compile tests anywhere.
"""

from simsplit.backends.cuda_c.backend import CupyBackend
from simsplit.backends.cuda_c.graph import CudaGraphReplay

__all__ = ["CupyBackend", "CudaGraphReplay"]
