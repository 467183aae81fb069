"""Forces on bodies reduced by kernels/link_forces.cu, run as host C++ (CUDA built-ins
emulated, as tests/test_kernels_compile.py does for the stream kernels): the limbs equal the
CPU reduction's, hence the forces equal the host path's bit for bit, fp16 storage and neq16
records included."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.backends.cuda_c import source
from simsplit.backends.layout import element_strides
from simsplit.fluid.deep_halo import far_source
from simsplit.fluid.forces import body_links
from simsplit.numerics.exact import EXACT_LIMBS
from tests.conftest import CXX, body_case, body_case_3d
from tests.test_kernels_compile import _EMULATION_LAUNCH, _EMULATION_PRELUDE

_ATOMICS = """
template <typename T> static T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
static long long __double_as_longlong(double d) { long long r; __builtin_memcpy(&r, &d, 8);
                                                  return r; }
"""

_LAUNCHERS = _EMULATION_LAUNCH + """
#define LINKS(T, S, NAME) extern "C" void NAME(const S* f, int n, const long long* ao,          \\
    const long long* ai, const long long* an, const long long* af, const double* wo,             \\
    const double* wi, const double* wf, const double* k, const double* w1, const double* w2,     \\
    const double* c, const int* body, int dim, double inv, int shifted,                          \\
    unsigned long long* acc, int* bad) {                                                         \\
    launch((n + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, 1, 1, [&] {                            \\
        link_force_sums<T, S>(f, n, ao, ai, an, af, wo, wi, wf, k, w1, w2, c, body, dim, T(inv), \\
                              shifted, acc, bad); }); }
LINKS(float, float, links_f32) LINKS(double, double, links_f64)
LINKS(float, lbm::half16, links_f32_f16) LINKS(double, lbm::half16, links_f64_f16)
#define LINKS_NEQ(L, NAME) extern "C" void NAME(const unsigned short* f, int n,                 \
    const long long* ao, const long long* ai, const long long* an, const long long* af,          \
    const double* wo, const double* wi, const double* wf, const double* k, const double* w1,     \
    const double* w2, const double* c, const int* body, int dim, long long plane,                \
    unsigned long long* acc, int* bad) {                                                         \
    launch((n + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, 1, 1, [&] {                            \
        link_force_sums_neq<L>(f, n, ao, ai, an, af, wo, wi, wf, k, w1, w2, c, body, dim, plane, \
                               acc, bad); }); }
LINKS_NEQ(D2Q9, links_neq_2) LINKS_NEQ(D3Q19, links_neq_3)
"""


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("links")
    (tmp / "links.cpp").write_text(_EMULATION_PRELUDE + _ATOMICS
                                   + source.kernel_source("link_forces.cu") + _LAUNCHERS)
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "links.so"), str(tmp / "links.cpp")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "links.so"))


def _emulated_sums(lib, blk, table) -> np.ndarray:
    f = far_source(blk)[0]
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[table.arith]
    fn = getattr(lib, f"links_neq_{table.dim}" if table.records
                 else f"links_{suffix}" + ("_f16" if f.dtype == np.float16 else ""))
    scalars = ((ctypes.c_longlong(element_strides(f)[0]),) if table.records
               else (ctypes.c_double(table.inv_scale), ctypes.c_int(int(table.shifted))))
    arrays = [np.ascontiguousarray(a) for a in (
        *table.flat(element_strides(f)), table.w_out, table.w_in, table.w_far, table.k,
        table.w1, table.w2, table.c, table.body.astype(np.int32))]
    acc = np.zeros(table.n_bodies * table.dim * EXACT_LIMBS, np.uint64)
    bad = np.zeros(1, np.int32)
    fn(ctypes.c_void_p(f.ctypes.data), ctypes.c_int(table.n),
       *(ctypes.c_void_p(a.ctypes.data) for a in arrays), ctypes.c_int(table.dim), *scalars,
       ctypes.c_void_p(acc.ctypes.data), ctypes.c_void_p(bad.ctypes.data))
    assert not bad[0]
    return acc.view(np.int64).reshape(-1, EXACT_LIMBS)


@pytest.mark.parametrize("dim, precision, storage, bounce", [
    (2, "float64", None, "linear"), (2, "float32", None, "halfway"),
    (3, "float32", "float16", "linear"), (3, "float64", None, "linear"),
    (2, "float64", None, "quadratic"), (2, "float32", None, "quadratic"),
    (3, "float32", "float16", "quadratic"), (3, "float64", None, "quadratic"),
    (2, "float32", "neq16", "linear"), (3, "float32", "neq16", "quadratic")])
def test_emulated_link_force_sums_match_cpu(emulated, dim, precision, storage, bounce) -> None:
    """Three slabs, a body across slab faces: every slab's limbs from the CUDA C kernel equal
    the CPU kernel set's (links whose neighbour lies in a ghost plane included; quadratic:
    links whose third population lies in the second ghost plane too; neq16: populations
    rebuilt from the cells' records)."""
    bodies = ([{"name": "ball", "shape": "sphere", "centre": [7.3, 5.2, 6.1], "radius": 2.6}]
              if dim == 3 else
              [{"name": "cyl", "shape": "circle", "centre": [10.0, 11.7], "radius": 3.4}])
    case = (body_case_3d(24, 10, 12, 3, bodies=bodies, run__precision=precision) if dim == 3
            else body_case(32, 24, 3, bodies=bodies, run__precision=precision))
    if storage:
        case["run"]["storage"] = storage
    case["domain"]["bounce_back"] = bounce
    sim = Simulation(case)
    sim.step(20)
    sim.solver.refresh_ghosts()
    links = body_links(sim.solver.setup)
    ghosts = pushed = deep = 0
    for blk in sim.solver.blocks.values():
        g = blk.depth
        table = links.slab_table(blk.layer0, blk.layers, blk.storage, g)
        ghosts += int(((table.k >= 0) & ((table.nb[1] == g - 1)
                                         | (table.nb[1] == blk.layers + g))).sum())
        deep += int(((table.w2 != 0) & ((table.far[1] == 0)
                                        | (table.far[1] == blk.layers + 3))).sum())
        want, bad = blk.backend.link_forces.sums(far_source(blk)[0], table)
        assert not bad
        pushed += int(np.any(want))
        np.testing.assert_array_equal(_emulated_sums(emulated, blk, table), want)
    assert pushed >= 2 and (ghosts > 0 or bounce == "halfway")
    assert deep > 0 or bounce != "quadratic"
