"""Lid-driven cavity against Ghia, Ghia & Shin (1982), Table I: u along x = 0.5."""

import pytest

from simsplit import Simulation, load_case
from simsplit.fluid.reference import compare_to_ghia
from tests.conftest import ROOT


def _ghia_error(reynolds: int, n: int, tolerance: float, backend: str = "cpu") -> float:
    case = load_case(ROOT / "cases" / "cavity.yaml", {
        "fluid.reynolds": reynolds, "domain.shape": [n, n], "run.tolerance": tolerance,
        "run.backend": backend, "run.steps": 400_000, "output.dir": None,
    })
    sim = Simulation(case)
    summary = sim.run(output=False)
    assert summary.converged, summary.reason
    err = compare_to_ghia(sim.velocity(), reynolds)["max_abs_error"]
    print(f"Ghia Re={reynolds} on {n}x{n} ({backend}, {summary.steps} steps, "
          f"{summary.wall_seconds:.1f} s): max |u - u_Ghia| = {err:.4f}")
    return err


BACKENDS = ["cpu", pytest.param("cupy", marks=pytest.mark.gpu)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_ghia_re100_128(backend):
    assert _ghia_error(100, 128, 1e-7, backend) <= 0.01


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_ghia_re1000_256_trt(backend):
    assert _ghia_error(1000, 256, 1e-6, backend) <= 0.02
