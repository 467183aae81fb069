"""Non-equilibrium storage, emulated (scripts/fp16_study.py, docs/storage.md "Non-equilibrium
storage"): a cell's moments in the arithmetic type and d_q = f*_q - f^eq_q(rho, u) in 16 bits.

The reconstruction f^eq + decode(d) gives back f exactly where d is representable, rounds d
once (to its format's quantum, or bfp's per-cell quantum) elsewhere, and on the steady forced
channel, where plain 16-bit storage of f - w freezes 10 % off, stays near float32 storage.
"""

from __future__ import annotations

import math
import subprocess

import numba
import numpy as np
import pytest

from simsplit.numerics import neq_storage
from simsplit.numerics.lattice import D2Q9, D3Q19


def _equilibria(lattice, cells: int, seed: int) -> np.ndarray:
    """float32 equilibria ``(q, cells)`` of random moments near rest."""
    rng = np.random.default_rng(seed)
    rho = (1 + 0.02 * rng.standard_normal(cells)).astype(np.float32)
    u = (0.08 * rng.standard_normal((lattice.dim, cells))).astype(np.float32)
    return lattice.equilibrium(rho, *u, dtype=np.float32)


@pytest.mark.parametrize("lattice", [D2Q9, D3Q19], ids=["d2q9", "d3q19"])
@pytest.mark.parametrize("fmt", ["fp16", "e4m11", "bfp"])
def test_reconstruction_exact_where_d_is_representable(study, lattice, fmt) -> None:
    """f = f^eq + d with d of 11 significant bits at most (within each format's normal
    range) and f^eq on the same grid of 2^-22 (so that f - f^eq is d in float32): the stored d
    is d itself and f comes back bit for bit; cells off the fluid mask are left alone."""
    cells = 40
    feq = np.round(_equilibria(lattice, cells, 1) * 2.0**22) * np.float32(2.0**-22)
    rng = np.random.default_rng(2)
    d = (rng.integers(-2047, 2048, feq.shape) * 2.0**-22).astype(np.float32)  # |d| < 5e-4
    f = feq + d
    assert np.array_equal(f - feq, d)
    neq = study.NeqStorage(f"neq-{fmt}", np.dtype(np.float32))
    mask = np.arange(cells) % 7 != 3
    g = f.copy()
    g[:, ~mask] = 0.5
    study._neq_round_trip(g, feq, mask, *neq.d_fmt, neq.bfp)
    assert np.array_equal(g[:, mask], f[:, mask])
    assert (g[:, ~mask] == 0.5).all()


@pytest.mark.parametrize("fmt,bits", [("fp16", 11), ("e4m11", 12), ("bfp", 15)])
def test_one_rounding_of_d(study, fmt, bits) -> None:
    """Random d: each rebuilt f is within half a quantum of d of f (the format's: 2^-bits
    relative to |d|; bfp's: 2^-15 relative to the cell's largest |d|), and the round trip of
    the whole emulation (moments, equilibrium, d) keeps every population that close."""
    cells = 50
    feq = _equilibria(D3Q19, cells, 3)
    rng = np.random.default_rng(4)
    d = (3e-4 * rng.standard_normal(feq.shape)).astype(np.float32)
    f = feq + d
    d = f - feq  # what the writer computes
    neq = study.NeqStorage(f"neq-{fmt}", np.dtype(np.float32))
    g = f.copy()
    study._neq_round_trip(g, feq, np.ones(cells, bool), *neq.d_fmt, neq.bfp)
    if fmt == "bfp":
        top = np.abs(d).max(axis=0)
        half = np.ldexp(1.0, np.frexp(top)[1] - bits - 1)
    else:
        half = np.ldexp(1.0, np.frexp(np.abs(d))[1] - bits - 1)
    err = np.abs(g.astype(np.float64) - f)
    ulp = np.spacing(np.abs(f)).astype(np.float64)  # the float32 sum f^eq + decode(d)
    assert (err <= half + ulp).all()
    assert (g != f).any()  # 24-bit d does get rounded
    f3 = f.reshape(19, 5, 10).copy()
    feq_used = neq.round_trip(f3, np.ones((5, 10), bool), D3Q19)
    assert feq_used.shape == (19, cells) and feq_used.dtype == np.float32
    moved = np.abs(f3.reshape(19, -1).astype(np.float64) - f)
    assert moved.max() < 2 * math.ldexp(1.0, -bits) * float(np.abs(d).max()) + 1e-7


def test_poiseuille_far_below_fp16(study) -> None:
    """The steady forced channel (8 x 16, 6000 steps), float32 arithmetic: fp16 of f - w
    freezes at a state a few per cent off the parabola; non-equilibrium storage with bfp
    deviations lands at float32 storage's error or below (measured, this machine: float32
    9.57e-6, fp16 3.48e-2, neq-bfp 3.53e-6; bounds 25 % above)."""
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        errs = {st: study.poiseuille2d(study.Storage(st), h=16, steps=6000)[1]["exact_l2"]
                for st in ("f32", "f32/fp16", "f32/neq-bfp")}
    finally:
        numba.set_num_threads(before)
    print("D2Q9 Poiseuille 8 x 16, 6000 steps, L2 error: "
          + ", ".join(f"{k} {v:.3e}" for k, v in errs.items()))
    assert 1e-2 < errs["f32/fp16"] < 4.4e-2
    assert errs["f32/neq-bfp"] < 4.4e-6
    assert errs["f32/neq-bfp"] < 1.3 * errs["f32"]


_HOST_WRAPPERS = r"""
extern "C" void neq_round_trip_float(NEQ_ARGS(float)) {
    for (long long i = 0; i < cells; ++i) if (fluid[i]) neq_cell<float>(NEQ_CALL);
}
extern "C" void neq_round_trip_double(NEQ_ARGS(double)) {
    for (long long i = 0; i < cells; ++i) if (fluid[i]) neq_cell<double>(NEQ_CALL);
}
"""


@pytest.fixture(scope="module")
def neq_host(study, tmp_path_factory):
    """The GPU run's round trip (``NEQ_CELL_SOURCE``) built as host C++, no FMA contraction."""
    import ctypes

    from tests.conftest import CXX

    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("neq_host")
    src = tmp / "neq.cpp"
    src.write_text("#include <math.h>\n#define NEQ_FN static inline\n"
                   + study.NEQ_CELL_SOURCE + _HOST_WRAPPERS)
    build = subprocess.run([CXX, "-std=c++17", "-O2", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "neq.so"), str(src)],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "neq.so"))


@pytest.mark.parametrize("lattice", [D2Q9, D3Q19], ids=["d2q9", "d3q19"])
@pytest.mark.parametrize("fmt,dtype", [("neq-bfp-rho16", np.float32), ("neq-bfp", np.float32),
                                       ("neq-e4m11", np.float32), ("neq-fp16-eq1", np.float32),
                                       ("neq-bfp-rho16", np.float64),
                                       ("neq-bfp-rho16-reg", np.float32)])
def test_device_source_rounds_as_the_cpu_emulation(study, neq_host, lattice, fmt,
                                                    dtype) -> None:
    """The CUDA source a cupy run emulates with (one thread a cell) gives, built for the host,
    the CPU emulation's populations bit for bit: moments, equilibrium, d and its rounding in
    the same operations and order."""
    import ctypes

    f, mask = study.neq_check_input(lattice, 3000, seed=7)
    f = np.ascontiguousarray(f.astype(dtype))
    neq = study.NeqStorage(fmt, np.dtype(dtype))
    expected = f.copy()
    neq.round_trip(expected, mask, lattice)
    got = f.copy()
    fluid = np.ascontiguousarray(mask.astype(np.uint8))
    c = np.ascontiguousarray(lattice.c, np.int32)
    w = np.ascontiguousarray(lattice.w, np.float64)
    kind = "float" if dtype == np.float32 else "double"

    def ptr(a: np.ndarray) -> ctypes.c_void_p:
        return ctypes.c_void_p(a.ctypes.data)
    weights = neq.stress_weights(lattice)
    sw = np.ascontiguousarray(np.zeros((1, 0)) if weights is None else weights, np.float64)
    ints = [*neq.rho_fmt, neq.order, *neq.d_fmt, neq.bfp, sw.shape[1]]
    getattr(neq_host, f"neq_round_trip_{kind}")(
        ptr(got), ptr(fluid), ctypes.c_longlong(f.shape[1]), ctypes.c_int(lattice.q),
        ctypes.c_int(lattice.dim), ptr(c), ptr(w), *map(ctypes.c_int, ints), ptr(sw))
    assert not np.array_equal(expected, f)  # the round trip did round
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_device_source_compiles_with_nvrtc(study) -> None:
    """What ``--backend cupy`` hands to NVRTC (through CuPy) compiles, without FMAs."""
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception:  # module or libnvrtc missing
        pytest.skip("NVRTC (cuda-bindings + libnvrtc) not available")
    _, prog = nvrtc.nvrtcCreateProgram(study.NEQ_DEVICE_SOURCE.encode(), b"neq.cu", 0, [], [])
    opts = [b"--fmad=false", b"-arch=sm_90"]
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert res == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    nvrtc.nvrtcDestroyProgram(prog)
    assert b"neq_round_trip_float" in ptx and b"fma.rn" not in ptx


@pytest.mark.parametrize("lattice", [D2Q9, D3Q19], ids=["d2q9", "d3q19"])
def test_first_order_neq_is_the_stress_part_of_the_deviations(study, lattice) -> None:
    """``-reg``'s base: first_order_neq(d) has no mass or momentum, has d's stress (each
    component rounded as binary16 of Pi * 2^10: 11 significant bits here) as its own, and gives
    back a stress-only d (within float32's rounding of its sums)."""
    rng = np.random.default_rng(5)
    cells = 64
    d = (1e-3 * rng.standard_normal((lattice.q, cells))).astype(np.float32)
    c = lattice.c.astype(np.float64)
    first = study.first_order_neq(d, lattice).astype(np.float64)
    assert first.shape == d.shape
    sums = 64 * np.finfo(np.float32).eps * np.abs(first).max()  # float32 sums of q terms
    assert np.abs(first.sum(axis=0)).max() < sums
    assert np.abs(c.T @ first).max() < sums
    for a in range(lattice.dim):
        for b in range(lattice.dim):
            pi_d = (c[:, a, None] * c[:, b, None] * d).sum(axis=0)
            pi_first = (c[:, a, None] * c[:, b, None] * first).sum(axis=0)
            assert np.abs(pi_first - pi_d).max() <= 2.0**-11 * np.abs(pi_d).max() + sums
    again = study.first_order_neq(first.astype(np.float32), lattice).astype(np.float64)
    assert np.abs(again - first).max() <= 2.0**-10 * np.abs(first).max()
    assert np.abs(first - d).max() > 10 * sums  # a random d is not stress-only


def test_round_stress_is_one_binary16_rounding_of_the_scaled_stress() -> None:
    """The stress slots' rounding: 11 significant bits (nearest even) for 2^-24 <= |Pi| < 64,
    the binary16 subnormal step 2^-34 below, signs kept, zero kept."""
    pi = np.array([0.0, 1e-3, -1e-3, 3.0e-5, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1e-12,
                   -5.0e-9], np.float32)
    got = neq_storage.round_stress(pi).astype(np.float64)
    assert got[0] == 0.0
    m, e = np.frexp(pi[1:4].astype(np.float64))
    assert np.array_equal(got[1:4], np.ldexp(np.rint(np.ldexp(m, 11)), e - 11))
    assert got[4] == 1.0 and got[5] == 1.0 + 2.0**-9  # ties to even, both ways
    assert got[6] == 0.0 and got[7] == -2.0**-34 * round(5.0e-9 / 2.0**-34)
