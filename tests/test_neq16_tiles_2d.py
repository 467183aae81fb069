"""The tiled candidates of the D2Q9 neq16 box kernel (kernels/d2q9_neq_tile.cuh) write the CPU
kernel's records bit for bit, in the host emulation of tests/test_neq16_tiles.py (phases between
barriers in order or the later first, shared memory starting as NaN bits): walls, the lid, solid
cells inside, a body force, periodic x, row ranges cut into runs, slabs with ghost rows, several
steps; the candidates' strips and 4-column ones so that small grids span several strips."""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

from simsplit.backends.cuda_c import kernel_names, neq_tiles, source
from tests.conftest import CXX
from tests.test_kernels_compile import (
    _EMULATION_PRELUDE,
    _data,
    _nvcc,
    _padded_copy,
    _ptr,
    needs_nvcc,
)
from tests.test_neq16_tiles import _TEAM

#: (TX, EXTRA, FAST) of the emulated sweeps: the candidates', then 4-column strips
SHAPES = [*sorted({(v[0], v[1], int(v[3])) for v in neq_tiles.D2Q9_NEQ_TILES.values()}),
          *((4, extra, fast) for extra in (0, 1) for fast in (0, 1))]
SMALL = [s for s in SHAPES if s[0] == 4]

_LAUNCHER = _TEAM + """
template <int TX, int EXTRA, bool FAST, bool STORE>
static void strip_run(const unsigned short* s, unsigned short* d, const unsigned char* fl,
                      float* rr, float* uu, float* vv, int nx, int ny, long long pitch,
                      long long plane, int j0, int j1, int run, double op, double om,
                      double lid, double fx, double fy, int px, int later_first) {
    using S = neq_tile2::shape<TX, EXTRA>;
    const neq_tile2::args a{s, d, fl, rr, uu, vv, nx, ny, pitch, plane, float(op), float(om),
                            float(lid), float(fx), float(fy), px != 0};
    std::vector<float> ring(S::SHARED_BYTES / sizeof(float));
    blockDim = {unsigned(S::THREADS), 1, 1};
    for (int ja = j0; ja < j1; ja += run)
        for (int bx = 0; bx * TX < nx; ++bx) {
            std::memset(ring.data(), 0xFF, ring.size() * sizeof(float));
            tile_team<S::THREADS> team;
            team.later_first = later_first != 0;
            neq_tile2::sweep<TX, EXTRA, FAST, STORE>(team, a, ring.data(), bx, ja,
                                                     ja + run < j1 ? ja + run : j1);
            team.sync();
        }
}
extern "C" void neq_strip_step(int tx, int extra, int fast, const void* fs, void* fd,
                               const unsigned char* fl, float* rr, float* uu, float* vv, int nx,
                               int ny, long long pitch, long long plane, int j0, int j1,
                               int run, double op, double om, double lid, double fx, double fy,
                               int px, int later_first, int store) {
    auto s = static_cast<const unsigned short*>(fs);
    auto d = static_cast<unsigned short*>(fd);
#define SIMSPLIT_STRIP_ARGS s, d, fl, rr, uu, vv, nx, ny, pitch, plane, j0, j1, run, op, om, \\
    lid, fx, fy, px, later_first
%s
}
"""


def _dispatch() -> str:
    def one(tx: int, extra: int, fast: int) -> str:
        t = f"{tx}, {extra}, {'true' if fast else 'false'}"
        return (f"    if (tx == {tx} && extra == {extra} && fast == {fast}) {{ if (store) "
                f"strip_run<{t}, true>(SIMSPLIT_STRIP_ARGS); "
                f"else strip_run<{t}, false>(SIMSPLIT_STRIP_ARGS); }}")
    return "\n".join(one(*s) for s in SHAPES)


@pytest.fixture(scope="module")
def strips(tmp_path_factory):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("neq_strips")
    (tmp / "strips.cpp").write_text(_EMULATION_PRELUDE + source.kernel_source("d2q9.cu")
                                    + _LAUNCHER % _dispatch())
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "strips.so"), str(tmp / "strips.cpp")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "strips.so"))


def _step(lib, shape, src, dst, flags, macro, rows, params, run, store=True,
          later_first=False) -> None:
    from simsplit.backends.layout import field_strides

    ny, nx = (n - 2 for n in flags.shape)
    lib.neq_strip_step(*map(ctypes.c_int, shape), *(_data(a) for a in (src, dst, flags)),
                       *(_ptr(a) for a in macro), ctypes.c_int(nx), ctypes.c_int(ny),
                       *map(ctypes.c_longlong, field_strides(src, flags, dst)),
                       *map(ctypes.c_int, (*rows, run)),
                       *map(ctypes.c_double, (params.omega_plus, params.omega_minus,
                                              params.lid_velocity, params.force_x,
                                              params.force_y)),
                       *map(ctypes.c_int, (int(params.periodic_x), int(later_first),
                                           int(store))))


def _case(nx: int, ny: int, periodic: bool, seed: int = 29):
    """A CPU neq16 D2Q9 block (walls, the lid, a body force, solid cells inside) with random
    records: its kernels, params, records and flags."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lattice import D2Q9_W
    from simsplit.numerics.lbm_params import D2Q9Params

    params = D2Q9Params(1 / 0.7, 1 / 1.1, 0.06, 2e-5, -1e-5, periodic)
    block = D2Q9Block(CPUBackend(), nx, ny, 0, (Face.WALL, Face.LID), params, "float32",
                      storage="neq16")
    rng = np.random.default_rng(seed)
    dev = 0.02 * rng.standard_normal((9, ny, nx)) * 10.0 ** rng.uniform(-5, 0, (1, ny, nx))
    block.set_populations(D2Q9_W[:, None, None] * (1 + dev))
    flags = block.flags.copy()
    for cell in ((3, 4), (5, 5), (7, nx), (2, 1)):
        flags[cell] = fl.WALL
    inner = (slice(1, -1),) * 2
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    return block.kernels, params, block.f_src.copy(), flags


def _cpu_step(kernels, params, f, flags):
    ny, nx = (n - 2 for n in flags.shape)
    dst = f.copy()
    macro = [np.zeros((ny, nx), np.float32) for _ in range(3)]
    kernels.stream_collide(f, dst, flags, *macro, (1, ny + 1), params, True)
    return dst, macro


def _same(got, want, macro=(), want_macro=()) -> None:
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    for a, b in zip(macro, want_macro, strict=True):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("periodic", [False, True])
def test_strip_matches_cpu(strips, shape, periodic) -> None:
    """One step as two launches of row ranges, runs of 3 rows (and of the whole range), packed
    and padded rows, with and without rho/u, phases in order and the later first."""
    nx, ny = 13, 9
    kernels, params, f0, flags = _case(nx, ny, periodic)
    want, want_macro = _cpu_step(kernels, params, f0, flags)
    for padded, run, later_first in ((False, 3, False), (True, 3, True), (True, 64, False)):
        src, dst, flg = ((_padded_copy(a) for a in (f0, f0, flags)) if padded
                         else (f0, f0.copy(), flags))
        macro = [np.zeros((ny, nx), np.float32) for _ in range(3)]
        for rows in ((1, 4), (4, ny + 1)):
            _step(strips, shape, src, dst, flg, macro, rows, params, run,
                  later_first=later_first)
        _same(dst, want, macro, want_macro)
        none = [np.zeros((ny, nx), np.float32) for _ in range(3)]
        dst[...] = f0
        _step(strips, shape, src, dst, flg, none, (1, ny + 1), params, run, store=False)
        _same(dst, want)
        assert not any(a.any() for a in none)
    assert np.abs(want[:9, 1:-1, 1:-1].view(np.int16)).max() >= 2**13


@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("slabs", [1, 2, 3])
@pytest.mark.parametrize("periodic", [False, True])
def test_strip_slabs_and_steps_match_cpu(strips, shape, slabs, periodic) -> None:
    """Three steps on ``slabs`` slabs cut from the whole array with a ghost row each side
    against three CPU steps of the whole block."""
    nx, ny = 11, 10
    kernels, params, f, flags = _case(nx, ny, periodic, seed=37)
    cuts = np.linspace(1, ny + 1, slabs + 1).round().astype(int)
    for _ in range(3):
        want, want_macro = _cpu_step(kernels, params, f, flags)
        got = f.copy()
        macro = [np.zeros((ny, nx), np.float32) for _ in range(3)]
        for j0, j1 in zip(cuts[:-1], cuts[1:], strict=True):
            src, dst = (_padded_copy(f[:, j0 - 1:j1 + 1]) for _ in range(2))
            flg = _padded_copy(flags[j0 - 1:j1 + 1])
            part = [np.zeros((j1 - j0, nx), np.float32) for _ in range(3)]
            _step(strips, shape, src, dst, flg, part, (1, j1 - j0 + 1), params, 2,
                  later_first=True)
            got[:, j0:j1] = dst[:, 1:-1]
            for whole, p in zip(macro, part, strict=True):
                whole[j0 - 1:j1 - 1] = p
        _same(got, want, macro, want_macro)
        f = want


def test_strip_candidates_named() -> None:
    """Each D2Q9 candidate: its two instantiations, in the module every run compiles for the
    default and outside it for the others, a launch shape within the device's limits."""
    every = kernel_names.name_expressions("d2q9.cu")
    for tile, (tx, extra, _, _) in neq_tiles.D2Q9_NEQ_TILES.items():
        names = neq_tiles.d2q9_neq_tile_expressions(tile)
        default = tile == neq_tiles.D2Q9_NEQ_TILE_DEFAULT
        assert len(names) == 2 and set(names) & set(every) == (set(names) if default else set())
        grid, threads, shared = neq_tiles.d2q9_neq_tile_launch(tile, 8192, 8192)
        assert grid == (-(-8192 // tx), -(-8192 // neq_tiles.D2Q9_NEQ_TILE_RUN))
        assert threads == tx <= 1024 and shared == (18 + 9 * extra) * (tx + 2) * 4


@needs_nvcc
def test_strips_compile_without_spills(tmp_path, capsys) -> None:
    """nvcc builds every D2Q9 candidate for sm_90 (they are not in the d2q9.cu module the
    compile tests build): no multiply-add contracted, no stack frame or spill; registers
    printed."""
    exprs = [e for t in neq_tiles.D2Q9_NEQ_TILES for e in neq_tiles.d2q9_neq_tile_expressions(t)]
    res = _nvcc(tmp_path, "d2q9.cu", "-cubin", "-Xptxas", "-v", "--keep", "--keep-dir",
                str(tmp_path), "-o", "out.cubin", exprs=exprs)
    assert res.returncode == 0, res.stderr
    ptx = (tmp_path / "d2q9.ptx").read_text()
    assert len(re.findall(r"\.entry\s+(\w+)", ptx)) == len(exprs)
    assert not re.search(r"\bfma\.rn\.f32", ptx)
    frames = [ln for ln in res.stderr.splitlines() if "stack frame" in ln]
    assert len(frames) == len(exprs)
    assert all(re.search(r"\b0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                         ln) for ln in frames), frames
    with capsys.disabled():
        print("\nD2Q9 neq16 candidates (sm_90, ptxas -v):")
        for ln in res.stderr.splitlines():
            if m := re.search(r"Used (\d+) registers", ln):
                print(f"  {m.group(1)} registers")
