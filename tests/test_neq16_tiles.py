"""The tiled candidates of the D3Q19 neq16 box kernel (kernels/d3q19_neq_tile.cuh) write the CPU
kernel's records bit for bit: built as host C++ with the CUDA built-ins emulated (as
test_kernels_compile.py builds d3q19.cu), each block's sweep run by a team whose phases between
two barriers run one after another, in order or the later first (as warps out of step may run
them: a missing barrier shows), shared memory starting as NaN bits (a value read before it is
written shows). Walls, the lid, solid cells inside, a body force, periodic x and y, plane
ranges cut into runs, slabs with ghost planes, several steps; the production tile shapes and
small ones (4 x 3) so that small grids span several columns."""

from __future__ import annotations

import ctypes
import functools
import subprocess

import numpy as np
import pytest

from simsplit.backends.cuda_c import kernel_names, neq_tiles, source
from tests.conftest import CXX
from tests.test_kernels_compile import _EMULATION_PRELUDE, _data, _nvrtc, _padded_copy, _ptr

#: (TX, TY, EXTRA, FAST) of the emulated sweeps: the candidates', then small columns
SHAPES = [*sorted({(*v[:3], int(v[4])) for v in neq_tiles.D3Q19_NEQ_TILES.values()}),
          *((4, 3, extra, fast) for extra in (0, 1) for fast in (0, 1))]
SMALL = [s for s in SHAPES if s[0] == 4]

#: a block's threads for the emulated sweeps (kernels/*_neq_tile.cuh: phases of a team)
_TEAM = """
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>
// phases queued until the barrier, then run thread by thread: in order, or the later first
template <int THREADS> struct tile_team {
    mutable std::vector<std::function<void(int)>> pending;
    bool later_first = false;
    template <typename F> void each(F f) const { pending.emplace_back(f); }
    void sync() const {
        if (later_first) std::reverse(pending.begin(), pending.end());
        for (auto& phase : pending)
            for (int t = 0; t < THREADS; ++t) {
                threadIdx = {unsigned(t), 0, 0};
                phase(t);
            }
        pending.clear();
    }
};
"""

_LAUNCHER = _TEAM + """
template <int TX, int TY, int EXTRA, bool FAST, bool STORE, bool FORCED>
static void tile_run(const unsigned short* s, unsigned short* d, const unsigned char* fl,
                     float* rr, float* uu, float* vv, float* ww, int nx, int ny,
                     long long pitch, long long layer, long long plane, int k0, int k1,
                     int run, double op, double om, double lid, double fx, double fy,
                     double fz, int px, int py, int later_first) {
    using S = neq_tile::shape<TX, TY, EXTRA>;
    using P = lbm::offset_t;
    const neq_tile::args<P> a{s, d, fl, rr, uu, vv, ww, nx, ny, P(pitch), P(layer), P(plane),
                              float(op), float(om), float(lid), float(fx), float(fy),
                              float(fz), px != 0, py != 0};
    std::vector<float> ring(S::SHARED_BYTES / sizeof(float));
    blockDim = {unsigned(S::THREADS), 1, 1};
    for (int za = k0; za < k1; za += run)
        for (int by = 0; by * TY < ny; ++by)
            for (int bx = 0; bx * TX < nx; ++bx) {
                std::memset(ring.data(), 0xFF, ring.size() * sizeof(float));
                tile_team<S::THREADS> team;
                team.later_first = later_first != 0;
                neq_tile::sweep<TX, TY, EXTRA, FAST, STORE, FORCED, P>(
                    team, a, ring.data(), bx, by, za, za + run < k1 ? za + run : k1);
                team.sync();  // what is left after the last barrier
            }
}
#define SIMSPLIT_TILE_ARGS s, d, fl, rr, uu, vv, ww, nx, ny, pitch, layer, plane, k0, k1, run, \\
    op, om, lid, fx, fy, fz, px, py, later_first
template <int TX, int TY, int EXTRA, bool FAST>
static void tile_pick(const unsigned short* s, unsigned short* d, const unsigned char* fl,
                      float* rr, float* uu, float* vv, float* ww, int nx, int ny,
                      long long pitch, long long layer, long long plane, int k0, int k1,
                      int run, double op, double om, double lid, double fx, double fy,
                      double fz, int px, int py, int later_first, int store) {
    const bool forced = fx != 0 || fy != 0 || fz != 0;
    if (store && forced) tile_run<TX, TY, EXTRA, FAST, true, true>(SIMSPLIT_TILE_ARGS);
    else if (store) tile_run<TX, TY, EXTRA, FAST, true, false>(SIMSPLIT_TILE_ARGS);
    else if (forced) tile_run<TX, TY, EXTRA, FAST, false, true>(SIMSPLIT_TILE_ARGS);
    else tile_run<TX, TY, EXTRA, FAST, false, false>(SIMSPLIT_TILE_ARGS);
}
extern "C" void neq_tile_step(int tx, int ty, int extra, int fast, const void* fs, void* fd,
                              const unsigned char* fl, float* rr, float* uu, float* vv,
                              float* ww, int nx, int ny, long long pitch, long long layer,
                              long long plane, int k0, int k1, int run, double op, double om,
                              double lid, double fx, double fy, double fz, int px, int py,
                              int later_first, int store) {
    auto s = static_cast<const unsigned short*>(fs);
    auto d = static_cast<unsigned short*>(fd);
%s
}
"""


def _dispatch() -> str:
    return "\n".join(
        f"    if (tx == {tx} && ty == {ty} && extra == {extra} && fast == {fast}) "
        f"tile_pick<{tx}, {ty}, {extra}, {'true' if fast else 'false'}>(SIMSPLIT_TILE_ARGS, "
        "store);" for tx, ty, extra, fast in SHAPES)


@pytest.fixture(scope="module")
def tiles(tmp_path_factory):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("neq_tiles")
    (tmp / "tiles.cpp").write_text(_EMULATION_PRELUDE + source.kernel_source("d3q19.cu")
                                   + _LAUNCHER % _dispatch())
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "tiles.so"), str(tmp / "tiles.cpp")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "tiles.so"))


def _step(lib, shape, src, dst, flags, macro, planes, params, run, store=True,
          later_first=False) -> None:
    """One emulated launch of the candidate of ``shape`` on planes ``planes``."""
    from simsplit.backends.layout import field_strides

    nz, ny, nx = (n - 2 for n in flags.shape)
    lib.neq_tile_step(*map(ctypes.c_int, shape), *(_data(a) for a in (src, dst, flags)),
                      *(_ptr(a) for a in macro), ctypes.c_int(nx), ctypes.c_int(ny),
                      *map(ctypes.c_longlong, field_strides(src, flags, dst)),
                      *map(ctypes.c_int, (*planes, run)),
                      *map(ctypes.c_double, (params.omega_plus, params.omega_minus,
                                             params.lid_velocity, params.force_x,
                                             params.force_y, params.force_z)),
                      *map(ctypes.c_int, (int(params.periodic_x), int(params.periodic_y),
                                          int(later_first), int(store))))


def _case(nx: int, ny: int, nz: int, periodic: bool, forced: bool, seed: int = 23):
    """A CPU neq16 block (walls, the lid, solid cells inside) with random records; its kernels,
    params, records and flags."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    force = (3e-5, -2e-5, 1e-5) if forced else (0.0, 0.0, 0.0)
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, *force, periodic, periodic)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, "float32",
                       "neq16")
    rng = np.random.default_rng(seed)
    dev = 0.02 * rng.standard_normal((19, nz, ny, nx)) * 10.0 ** rng.uniform(-5, 0, (1, nz, ny, nx))
    block.set_populations(D3Q19.w[:, None, None, None] * (1 + dev))
    flags = block.flags.copy()
    for cell in ((2, 2, 4), (3, 3, 5), (3, 3, 6), (4, 1, 1), (nz - 1, ny - 1, nx), (nz, ny, 9)):
        flags[cell] = fl.WALL
    inner = (slice(1, -1),) * 3
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    return block.kernels, params, block.f_src.copy(), flags


def _cpu_step(kernels, params, f, flags, store=True):
    """One CPU step of every plane: the new records (ghost planes and cells kept) and rho/u."""
    nz, ny, nx = (n - 2 for n in flags.shape)
    dst = f.copy()
    macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
    kernels.stream_collide(f, dst, flags, *macro, (1, nz + 1), params, store)
    return dst, macro


def _same(got, want, macro=None, want_macro=None) -> None:
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    for a, b in zip(macro or [], want_macro or [], strict=True):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("periodic, forced", [(False, True), (True, False), (True, True)])
def test_tile_matches_cpu(tiles, shape, periodic, forced) -> None:
    """One step as two launches of plane ranges, runs of 2 planes (and of the whole range),
    packed and padded rows, with and without rho/u, phases in order and the later first."""
    nx, ny, nz = 11, 5, 6
    kernels, params, f0, flags = _case(nx, ny, nz, periodic, forced)
    want, want_macro = _cpu_step(kernels, params, f0, flags)
    for padded, run, later_first in ((False, 2, False), (True, 2, True), (True, 64, False)):
        src, dst, flg = ((_padded_copy(a) for a in (f0, f0, flags)) if padded
                         else (f0, f0.copy(), flags))
        macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
        for planes in ((1, 3), (3, nz + 1)):
            _step(tiles, shape, src, dst, flg, macro, planes, params, run,
                  later_first=later_first)
        _same(dst, want, macro, want_macro)
        none = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
        dst[...] = f0
        _step(tiles, shape, src, dst, flg, none, (1, nz + 1), params, run, store=False)
        _same(dst, want)
        assert not any(a.any() for a in none)
    inner = (slice(0, 19), *(slice(1, -1),) * 3)
    assert np.abs(want[inner].view(np.int16)).max() >= 2**13  # real significands


@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("slabs", [1, 2, 3])
@pytest.mark.parametrize("periodic", [False, True])
def test_tile_slabs_and_steps_match_cpu(tiles, shape, slabs, periodic) -> None:
    """Three steps, each on ``slabs`` slabs cut from the whole array with a ghost plane each
    side (the neighbours' records, as the record halos bring them; the walls' ghost planes at
    the ends), against three CPU steps of the whole block."""
    nx, ny, nz = 9, 7, 8
    kernels, params, f, flags = _case(nx, ny, nz, periodic, True, seed=31)
    cuts = np.linspace(1, nz + 1, slabs + 1).round().astype(int)
    for _ in range(3):
        want, want_macro = _cpu_step(kernels, params, f, flags)
        got = f.copy()
        macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
        for k0, k1 in zip(cuts[:-1], cuts[1:], strict=True):
            src = _padded_copy(f[:, k0 - 1:k1 + 1])
            dst = _padded_copy(f[:, k0 - 1:k1 + 1])
            flg = _padded_copy(flags[k0 - 1:k1 + 1])
            part = [np.zeros((k1 - k0, ny, nx), np.float32) for _ in range(4)]
            _step(tiles, shape, src, dst, flg, part, (1, k1 - k0 + 1), params, 3,
                  later_first=True)
            got[:, k0:k1] = dst[:, 1:-1]
            for whole, p in zip(macro, part, strict=True):
                whole[k0 - 1:k1 - 1] = p
        _same(got, want, macro, want_macro)
        f = want


def test_candidates_named_and_launched() -> None:
    """Every candidate has its four instantiations in the D3Q19 file's expressions (so the
    compile tests build them: registers, no spills), a launch shape within the device's
    limits, and the environment picks one or none."""
    names = kernel_names.name_expressions("d3q19.cu")
    for tile, (tx, ty, extra, _, _) in neq_tiles.D3Q19_NEQ_TILES.items():
        assert set(neq_tiles.d3q19_neq_tile_expressions(tile)) <= set(names)
        assert tile not in "".join(kernel_names.d3q19_neq_expressions())
        grid, threads, shared = neq_tiles.d3q19_neq_tile_launch(tile, 512, 512, 512)
        assert grid == (-(-512 // tx), -(-512 // ty), -(-512 // neq_tiles.D3Q19_NEQ_TILE_RUN))
        assert threads == tx * ty <= 1024
        assert shared == (38 + 19 * extra) * (tx + 2) * (ty + 2) * 4 <= 227 * 1024
    env = neq_tiles.NEQ_TILE_ENV
    for tiles, mine, other in ((neq_tiles.D3Q19_NEQ_TILES, "tile32x8", "strip256"),
                               (neq_tiles.D2Q9_NEQ_TILES, "strip256", "tile32x8")):
        assert mine in tiles and other not in tiles
        pick = functools.partial(neq_tiles.neq_tile_from_env, tiles)
        assert pick({}) is None and pick({env: " "}) is None
        assert pick({env: mine}) == mine and pick({env: other}) is None
        assert pick({env: "production"}, default=mine) is None
        assert pick({}, default=mine) == mine == pick({env: other}, default=mine)
        with pytest.raises(ValueError, match=env):
            pick({env: "tile7"})
    assert neq_tiles.D3Q19_NEQ_TILE_DEFAULT in (None, *neq_tiles.D3Q19_NEQ_TILES)
    assert neq_tiles.D2Q9_NEQ_TILE_DEFAULT in (None, *neq_tiles.D2Q9_NEQ_TILES)


_CODEC = """
extern "C" void codec_pull(const unsigned short* r, int n, int fast, float* out) {
    for (int c = 0; c < n; ++c) {
        float f[D3Q19::Q];
        if (fast) neq::fast::rebuild<D3Q19>(r, f, unsigned(n), unsigned(c));
        else for (int q = 0; q < D3Q19::Q; ++q) f[q] = neq::pull<D3Q19>(r, q, unsigned(n),
                                                                          unsigned(c));
        for (int q = 0; q < D3Q19::Q; ++q) out[q * n + c] = f[q];
    }
}
extern "C" void codec_store(const float* post, int n, int fast, unsigned short* r) {
    for (int c = 0; c < n; ++c) {
        float p[D3Q19::Q];
        for (int q = 0; q < D3Q19::Q; ++q) p[q] = post[q * n + c];
        if (fast) neq::fast::store<D3Q19>(r, p, unsigned(n), unsigned(c));
        else neq::store<D3Q19>(r, p, unsigned(n), unsigned(c));
    }
}
"""


@pytest.fixture(scope="module")
def codec(tmp_path_factory):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("neq_fast")
    (tmp / "codec.cpp").write_text(_EMULATION_PRELUDE + source.kernel_source("d3q19.cu")
                                   + _CODEC)
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "codec.so"), str(tmp / "codec.cpp")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "codec.so"))


def _random_floats(rng, n: int, low: float, high: float) -> np.ndarray:
    """Finite float32 of random sign and magnitude 10^low .. 10^high, zeros and subnormals
    among them."""
    v = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(low, high, n)
    v[rng.random(n) < 0.05] = 0.0
    v[rng.random(n) < 0.03] = -0.0
    v = v.astype(np.float32)
    sub = rng.random(n) < 0.03
    v[sub] = (rng.integers(1, 1 << 23, int(sub.sum())).astype(np.uint32).view(np.float32)
              * rng.choice([-1, 1], int(sub.sum())).astype(np.float32))
    return v


def test_fast_codec_same_bits(codec) -> None:
    """kernels/neq_fast.cuh against neq::pull / neq::store on random records and populations
    far beyond a flow's (powers of two 2^-160 .. 2^110 across ldexpf's one-multiply range,
    velocities 1e-40 .. 0.5, zeros of both signs, subnormals): the same bits."""
    rng = np.random.default_rng(5)
    n = 200_000
    rec = np.zeros((27, n), np.uint16)
    rec[:19] = rng.integers(-32768, 32768, (19, n)).astype(np.int16).view(np.uint16)
    rec[19] = rng.integers(-160, 111, n).astype(np.int16).view(np.uint16)
    rec[20] = rng.integers(0, 0x7C00, n).astype(np.uint16) | (
        rng.integers(0, 2, n).astype(np.uint16) << 15)  # finite binary16 rho - 1 bits
    for a in range(3):
        bits = _random_floats(rng, n, -40, np.log10(0.5)).view(np.uint32)
        rec[21 + 2 * a] = (bits & 0xFFFF).astype(np.uint16)
        rec[22 + 2 * a] = (bits >> 16).astype(np.uint16)
    got, want = (np.zeros((19, n), np.float32) for _ in range(2))
    for fast, out in ((0, want), (1, got)):
        codec.codec_pull(_ptr(rec), ctypes.c_int(n), ctypes.c_int(fast), _ptr(out))
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    from simsplit.numerics.lattice import D3Q19

    post = (D3Q19.w[:, None] * (1.0 + _random_floats(rng, 19 * n, -30, -0.5).reshape(19, n)))
    post = post.astype(np.float32)
    tiny = rng.random(n) < 0.2  # all but empty cells: rho 0, f^eq 0, powers of two < 2^-101
    post[:, tiny] = (10.0 ** rng.uniform(-37, -28, (19, int(tiny.sum())))).astype(np.float32)
    got, want = (np.zeros((27, n), np.uint16) for _ in range(2))
    for fast, out in ((0, want), (1, got)):
        codec.codec_store(_ptr(post), ctypes.c_int(n), ctypes.c_int(fast), _ptr(out))
    np.testing.assert_array_equal(got, want)
    k = want[19].view(np.int16)
    assert k.min() < -101 and k.max() > -60  # both of scaled()'s paths


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (cuda-bindings + libnvrtc) not available")
@pytest.mark.parametrize("name", ["d3q19.cu", "d2q9.cu"])
def test_candidates_compile_with_nvrtc(name: str) -> None:
    """The launchers' route for every candidate of both lattices (one instantiation each; the
    compile tests' NVRTC build takes one per template and first two arguments)."""
    nvrtc = _nvrtc()
    exprs = ([neq_tiles.d3q19_neq_tile_name(t, False, False) for t in neq_tiles.D3Q19_NEQ_TILES]
             if name == "d3q19.cu" else
             [neq_tiles.d2q9_neq_tile_name(t, False) for t in neq_tiles.D2Q9_NEQ_TILES])
    _, prog = nvrtc.nvrtcCreateProgram(source.kernel_source(name).encode(), name.encode(), 0,
                                       [], [])
    for expr in exprs:
        nvrtc.nvrtcAddNameExpression(prog, expr.encode())
    opts = [o.encode() for o in (*source.COMPILE_OPTIONS, "-arch=sm_90")]
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert res == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")
    for expr in exprs:
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS and lowered, expr
    nvrtc.nvrtcDestroyProgram(prog)
