"""CUDA errors are reported as one line naming kernel, subdomain, device and step; exit code 4."""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.gpu import cuda_errors as errors
from tests.conftest import ROOT, fluid_case

CAVITY = str(ROOT / "cases" / "cavity.yaml")


class CUDARuntimeError(RuntimeError):
    """Stands in for cupy's error class (same name, message in CUDA's words)."""


ILLEGAL = "cudaErrorIllegalAddress: an illegal memory access was encountered"


@pytest.fixture(autouse=True)
def _clean_tracker():
    errors.TRACKER.reset()
    yield
    errors.TRACKER.reset()


def test_message_names_everything_on_one_line() -> None:
    exc = errors.CudaKernelError("illegal address", f"CUDARuntimeError: {ILLEGAL}\nmore",
                                 kernel="d2q9_stream_collide<float, true>", slab=2, device=1,
                                 step=417, device_name="NVIDIA H200",
                                 argv=["run", "cases/cavity.yaml", "--set", "run.steps=500"])
    text = str(exc)
    assert "\n" not in text
    for part in ("CUDA illegal address", "d2q9_stream_collide<float, true>", "subdomain 2",
                 "GPU 1 (NVIDIA H200)", "step 417", "cudaErrorIllegalAddress",
                 "CUDA_LAUNCH_BLOCKING=1", "run.debug=true",
                 "compute-sanitizer --tool memcheck python -m simsplit run cases/cavity.yaml "
                 "--set run.steps=500"):
        assert part in text, part


@pytest.mark.parametrize("message, kind", [
    (ILLEGAL, "illegal address"),
    ("cudaErrorLaunchFailure: unspecified launch failure", "launch failure"),
    ("Out of memory allocating 1,073,741,824 bytes", "out of memory"),
    ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested", "launch out of resources"),
])
def test_classify(message: str, kind: str) -> None:
    assert errors.classify(CUDARuntimeError(message)) == kind
    assert errors.classify(ValueError("shape mismatch")) is None


def test_guarded_launch_names_slab_and_step() -> None:
    a, b = np.zeros(4), np.zeros(4)
    errors.TRACKER.register_slab(3, [a])
    errors.TRACKER.step = 12

    def bad() -> None:
        raise CUDARuntimeError(ILLEGAL)

    with pytest.raises(errors.CudaKernelError) as info:
        errors.guarded_launch("lbm_pack<D2Q9, double>", 0, (b, a), bad)
    e = info.value
    assert (e.kernel, e.slab, e.device, e.step, e.asynchronous) == ("lbm_pack<D2Q9, double>", 3,
                                                                    0, 12, False)
    # a later, asynchronous report is pinned on the last launch
    late = errors.as_cuda_error(CUDARuntimeError(ILLEGAL), "copy GPU 0 -> GPU 1")
    assert late is not None and late.asynchronous and late.slab == 3
    assert "copy GPU 0 -> GPU 1 (last kernel: lbm_pack<D2Q9, double>)" in str(late)
    # other errors pass through untouched
    with pytest.raises(ZeroDivisionError):
        errors.guarded_launch("k", 0, (), lambda: 1 / 0)


def test_debug_synchronises_after_launch() -> None:
    calls = []
    errors.TRACKER.debug = True
    errors.guarded_launch("k", 0, (), lambda: calls.append("launch"), lambda: calls.append("sync"))
    assert calls == ["launch", "sync"]


def test_bad_launch_spec() -> None:
    assert errors.bad_launch_target({}) is None
    assert errors.bad_launch_target({errors.BAD_LAUNCH_ENV: "pack:7"}) == ("pack", 7)
    with pytest.raises(ValueError, match="KERNEL:STEP"):
        errors.bad_launch_target({errors.BAD_LAUNCH_ENV: "pack:x"})


def test_exit_code_4_through_cli(monkeypatch, tmp_path, capsys) -> None:
    """A launch failing at step 3 in slab 1 ends the CLI with one line and exit code 4."""
    from simsplit.backends.cpu import d2q9
    from simsplit.cli import commands as cli

    real = d2q9.D2Q9Kernels.stream_collide

    def failing(self, f_src, *args, **kw):
        def launch() -> None:
            if errors.TRACKER.step == 3 and errors.TRACKER.slab_of([f_src]) == 1:
                raise CUDARuntimeError(ILLEGAL)
            real(self, f_src, *args, **kw)

        errors.guarded_launch("d2q9_stream_collide<double, true>", 0, (f_src,), launch)

    monkeypatch.setattr(d2q9.D2Q9Kernels, "stream_collide", failing)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", CAVITY, "--set", "domain.shape=[16, 16]", "--steps", "5",
                     "--subdomains", "2", "--backend", "cpu", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == errors.EXIT_CUDA == 4
    assert len(err) == 1 and err[0].startswith("simsplit: error: CUDA illegal address in "
                                               "d2q9_stream_collide<double, true>"), err
    assert "subdomain 1, GPU 0, step 3" in err[0]
    assert "compute-sanitizer --tool memcheck python -m simsplit run" in err[0]


def test_debug_halo_check_stops_on_nan() -> None:
    """run.debug: a NaN arriving in a halo stops the run naming the step and receiving slab."""
    from simsplit.errors import DivergenceError
    from simsplit.run.simulation import Simulation

    sim = Simulation(fluid_case(16, 16, 2, run__debug=True, run__steps=4))
    blk = sim.solver.blocks[0]
    pack = blk.kernels.pack

    def poisoned(f, row, direction, buf):
        pack(f, row, direction, buf)
        if errors.TRACKER.step == 2:
            buf[...] = np.nan

    blk.kernels = type("K", (), {})()  # this block only: the other keeps clean kernels
    for name in ("stream_collide", "unpack"):
        setattr(blk.kernels, name, getattr(sim.solver.blocks[1].kernels, name))
    blk.kernels.pack = poisoned
    with pytest.raises(DivergenceError, match="halo") as info:
        sim.run(output=False)
    assert info.value.slab == 1 and info.value.step == 2
