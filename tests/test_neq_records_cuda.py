"""The CUDA C record functions of run.storage neq16 (``kernels/neq_records.cuh``: ``neq::store``
and ``neq::pull``), built as host C++ with the CUDA built-ins emulated, against the reference
codec (:mod:`simsplit.numerics.neq_storage`): the plain records and the stress-kept ones, bit
for bit, on both lattices."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from simsplit.backends.cuda_c import source
from simsplit.numerics import neq_storage
from simsplit.numerics.lattice import D2Q9, D3Q19
from tests.conftest import CXX
from tests.test_kernels_compile import _EMULATION_PRELUDE

_HARNESS = r"""
#include "simsplit_generated.cuh"
#include "lbm_common.cuh"
#include "neq_records.cuh"
template <typename L, bool S>
static void encode_cells(const float* f, unsigned short* r, long long n) {
    for (long long i = 0; i < n; ++i) {
        float post[L::Q];
        for (int q = 0; q < L::Q; ++q) post[q] = f[q * n + i];
        neq::store<L, long long, S>(r, post, n, i);
    }
}
template <typename L, bool S>
static void decode_cells(const unsigned short* r, float* f, long long n) {
    for (long long i = 0; i < n; ++i)
        for (int q = 0; q < L::Q; ++q) f[q * n + i] = neq::pull<L, long long, S>(r, q, n, i);
}
#define CODEC(L, S, NAME) \
    extern "C" void encode_##NAME(const float* f, unsigned short* r, long long n) { \
        encode_cells<L, S>(f, r, n); } \
    extern "C" void decode_##NAME(const unsigned short* r, float* f, long long n) { \
        decode_cells<L, S>(r, f, n); }
CODEC(D2Q9, false, d2q9)
CODEC(D2Q9, true, d2q9_stress)
CODEC(D3Q19, false, d3q19)
CODEC(D3Q19, true, d3q19_stress)
"""


@pytest.fixture(scope="module")
def records_host(tmp_path_factory):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("neq_records")
    (tmp / "harness.cu").write_text(_HARNESS)
    text = _EMULATION_PRELUDE + source.expand_includes(
        "harness.cu", {"harness.cu": _HARNESS})
    (tmp / "records.cpp").write_text(text)
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "records.so"), str(tmp / "records.cpp")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-4000:]
    return ctypes.CDLL(str(tmp / "records.so"))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize("stress", [False, True], ids=["plain", "stress"])
@pytest.mark.parametrize("lattice", [D2Q9, D3Q19], ids=["d2q9", "d3q19"])
def test_store_and_pull_are_the_reference_codec(study, records_host, lattice, stress) -> None:
    """``neq::store`` writes ``neq_storage.encode``'s records and ``neq::pull`` rebuilds
    ``neq_storage.decode``'s populations, every bit (stress-kept: ``STRESS`` true)."""
    f, _ = study.neq_check_input(lattice, 4000, seed=21)
    cells = f.shape[1]
    name = lattice.name.lower() + ("_stress" if stress else "")
    expected = neq_storage.encode(f, stress=stress)
    got = np.zeros_like(expected)
    getattr(records_host, f"encode_{name}")(_ptr(f), _ptr(got), ctypes.c_longlong(cells))
    np.testing.assert_array_equal(got, expected)
    back = np.zeros_like(f)
    getattr(records_host, f"decode_{name}")(_ptr(expected), _ptr(back),
                                            ctypes.c_longlong(cells))
    np.testing.assert_array_equal(back.view(np.uint32),
                                  neq_storage.decode(expected).view(np.uint32))
    if stress:  # the stress slots are there and used
        assert (expected[neq_storage.stress_slot(lattice.q, 0):] != 0).any()
        assert not np.array_equal(back, neq_storage.decode(neq_storage.encode(f)))
