"""The solver's two-steps-per-sweep path (run.temporal_blocking), with the CPU kernel set.

The two-step kernel itself exists on cupy only (kernels/d3q19.cu; checked bit for bit against
two CPU steps in tests/test_kernels_compile.py, and on a GPU in tests/test_d3q19_gpu.py). Here
a stand-in on the CPU kernels (two CPU steps through a scratch array) checks what the solver
does around it: which runs pair their steps, the buffer swaps, rho/u stored on the last step
only, odd step counts, and that a paired run ends bit for bit where a one-step run does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.backends.cpu.d3q19 import D3Q19Kernels
from tests.conftest import fluid_case


class _Calls:
    sweeps = 0
    stored = 0


def _install_stand_in(monkeypatch) -> _Calls:
    """Give the CPU D3Q19 kernel set a two-step entry point: two CPU steps, counted."""
    calls = _Calls()

    def stream_collide_two_steps(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p,
                                 store_macro) -> None:
        calls.sweeps += 1
        calls.stored += bool(store_macro)
        mid = np.empty_like(f_src)
        scratch = [np.empty_like(a) for a in (rho, ux, uy, uz)]
        self.stream_collide(f_src, mid, flags, *scratch, layers, p, False)
        self.stream_collide(mid, f_dst, flags, rho, ux, uy, uz, layers, p, store_macro)

    monkeypatch.setattr(D3Q19Kernels, "stream_collide_two_steps", stream_collide_two_steps,
                        raising=False)
    monkeypatch.setattr(D3Q19Kernels, "two_steps_fit", lambda self, f, dtype: True,
                        raising=False)
    return calls


@pytest.fixture
def two_step_cpu(monkeypatch) -> _Calls:
    return _install_stand_in(monkeypatch)


def _cavity(subdomains: int = 1, **over: Any) -> dict[str, Any]:
    return fluid_case(9, 7, subdomains, domain__shape=[9, 7, 8], run__precision="float32",
                      **over)


def _fields(sim: Simulation) -> tuple[np.ndarray, ...]:
    return sim.solver.populations(), sim.velocity(), sim.density()


@pytest.mark.parametrize("chunks", [[1], [2], [5], [3, 4, 1], [40, 3]])
def test_paired_steps_match_single_steps(two_step_cpu, chunks: list[int]) -> None:
    """Steps taken two per sweep end where one-step sweeps do, bit for bit, for odd and even
    step counts and across step() calls (40 steps: a CUDA graph's worth on a GPU)."""
    paired, single = Simulation(_cavity()), Simulation(_cavity(run__temporal_blocking=False))
    for n in chunks:
        paired.step(n)
        single.step(n)
        for a, b in zip(_fields(paired), _fields(single), strict=True):
            np.testing.assert_array_equal(a, b)
    assert two_step_cpu.sweeps == sum(n // 2 for n in chunks)
    # rho/u come from the last step of each call: by the two-step sweep when the count is even
    assert two_step_cpu.stored == sum(1 for n in chunks if n % 2 == 0)
    assert np.abs(single.velocity()).max() > 1e-3


@pytest.mark.parametrize("over", [{"run__temporal_blocking": False},
                                  {"domain__boundaries": {"x": "wall", "y": "wall",
                                                          "z": "periodic", "lid": False},
                                   "fluid__reynolds": None, "fluid__viscosity": 0.05},
                                  {"run__streaming": "aa"}])
def test_no_pairs_where_not_allowed(two_step_cpu, over: dict[str, Any]) -> None:
    """Off by the case; periodic z (the one slab's ghost planes are halos); in-place streaming."""
    Simulation(_cavity(**over)).step(6)
    assert two_step_cpu.sweeps == 0


def test_no_pairs_across_slabs(two_step_cpu) -> None:
    """Two slabs: each has a halo face, whose ghosts change every step."""
    split, whole = Simulation(_cavity(2)), Simulation(_cavity(1))
    split.step(6)
    assert two_step_cpu.sweeps == 0
    whole.step(6)
    assert two_step_cpu.sweeps == 3
    for a, b in zip(_fields(split), _fields(whole), strict=True):
        np.testing.assert_array_equal(a, b)


def test_cpu_kernels_have_no_two_step_path() -> None:
    """Without the stand-in the CPU backend steps one at a time (its kernel set has none)."""
    sim = Simulation(_cavity())
    assert not any(b.fuses_two_steps() for b in sim.solver.blocks.values())


@pytest.mark.parametrize("paired", [True, False])
def test_run_summary_names_the_sweep(monkeypatch, paired: bool) -> None:
    """The end-of-run summary says when steps went two per sweep."""
    from simsplit.run.report import summary_lines

    if paired:
        _install_stand_in(monkeypatch)
    sim = Simulation(_cavity(run__steps=4))
    lines = summary_lines(sim, sim.run(output=False))
    assert any(line.startswith("sweeps") for line in lines) == paired
