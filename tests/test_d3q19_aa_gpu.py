"""In-place (AA) streaming on a real GPU: cupy against the CPU's two-lattice run bit for bit
(after odd and even step counts, with CUDA graphs), split identity, numba-cuda's refusal."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_d3q19_storage_gpu import _solver as storage_solver
from tests.test_gpu import _gpu_param

pytestmark = pytest.mark.gpu


def _solver(backend: str, subdomains: int, channel: bool, streaming: str, storage: str):
    return storage_solver(backend, subdomains, channel, storage, streaming=streaming)


def _states(backend, subdomains, channel, streaming, storage):
    from simsplit.fluid.state import raw_populations

    solver = _solver(backend, subdomains, channel, streaming, storage)
    out = []
    for steps in (71, 1):  # 71: graphs of 32 steps plus an odd rest; then 72: even
        solver.step(steps)
        out.append((raw_populations(solver), solver.velocity(), solver.density()))
    return out


@pytest.mark.parametrize("backend", [_gpu_param("cupy")])
@pytest.mark.parametrize("storage", ["float32", "float16"])
@pytest.mark.parametrize("channel", [False, True], ids=["cavity", "channel"])
@pytest.mark.parametrize("subdomains", [1, 3])
def test_aa_cupy_equals_cpu_two_lattice(backend, storage, channel, subdomains) -> None:
    want = _states("cpu", 1, channel, "two-lattice", storage)
    got = _states(backend, subdomains, channel, "aa", storage)
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g, w, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", [_gpu_param("numba-cuda")])
def test_aa_refused_on_numba_cuda(backend: str) -> None:
    from simsplit.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="run.streaming"):
        _solver(backend, 1, False, "aa", "float32")
