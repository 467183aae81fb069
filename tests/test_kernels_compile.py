"""The CUDA C kernels compile, use the lattice tables, and compute what the CPU kernels compute.

Needs no GPU: nvcc builds PTX and cubins for sm_90 from the exact source the CuPy backend hands
to NVRTC, with every template instantiation the backend launches (register use is printed);
NVRTC compiles it where libnvrtc is installed; and the same source, built as host C++ with the
CUDA built-ins emulated, must reproduce the CPU backend's stream-collide and halo kernels.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from simsplit.backends.cuda_c import source
from simsplit.fluid.lattice import D2Q9_C, D2Q9_OPP, D2Q9_W, DOWN, UP

NVCC = shutil.which("nvcc")
ARCH = "sm_90"
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def _translation_unit(name: str) -> str:
    """Source as NVRTC sees it, plus host code naming each instantiation so nvcc emits it."""
    refs = "".join(f"    (void)&{expr};\n" for expr in source.name_expressions(name))
    return source.kernel_source(name) + f"\nvoid simsplit_instantiate()\n{{\n{refs}}}\n"


def _nvcc(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    cu = tmp_path / name
    cu.write_text(_translation_unit(name))
    cmd = [NVCC, f"-arch={ARCH}", *source.COMPILE_OPTIONS, *args, str(cu)]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_kernel_files_found() -> None:
    assert "d2q9.cu" in source.kernel_files()
    assert source.name_expressions("d2q9.cu")


def test_generated_header_carries_exact_weights() -> None:
    header = source.generated_header()
    for w in D2Q9_W:
        assert float(w).hex() in header


@needs_nvcc
def test_generated_tables_evaluate_to_lattice(tmp_path: Path) -> None:
    """The C++ compiler itself reads the generated tables back (host code: no GPU needed)."""
    prog = source.generated_header() + """
#include <cstdio>
int main() {
    for (int q = 0; q < D2Q9::Q; ++q)
        std::printf("%d %d %d %a\\n", D2Q9::cx(q), D2Q9::cy(q), D2Q9::opp(q), D2Q9::w(q));
    for (int s = 0; s < 2; ++s)
        for (int k = 0; k < D2Q9::N_CROSS; ++k) std::printf("%d\\n", D2Q9::halo(s, k));
}
"""
    (tmp_path / "tables.cu").write_text(prog)
    build = subprocess.run([NVCC, "--std=c++17", "-o", "tables", "tables.cu"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(tmp_path / "tables")], capture_output=True, text=True,
                         timeout=60).stdout.split("\n")
    rows = [line.split() for line in out[:9]]
    assert [int(r[0]) for r in rows] == list(D2Q9_C[:, 0])
    assert [int(r[1]) for r in rows] == list(D2Q9_C[:, 1])
    assert [int(r[2]) for r in rows] == list(D2Q9_OPP)
    assert [float.fromhex(r[3]) for r in rows] == list(D2Q9_W)  # bit for bit
    assert [int(v) for v in out[9:15]] == [*UP, *DOWN]


def test_no_hand_copied_tables() -> None:
    """Weights live in lattice.py only: no 4/9, 1/9 or 1/36 literal in the kernel files."""
    for path in source.kernel_dir().iterdir():
        if path.suffix in (".cu", ".cuh"):
            text = path.read_text()
            assert not re.search(r"\b(4\.0?\s*/\s*9|1\.0?\s*/\s*36|1\.0?\s*/\s*9)\b", text), path


@needs_nvcc
@pytest.mark.parametrize("name", source.kernel_files())
def test_compiles_to_ptx(tmp_path: Path, name: str) -> None:
    res = _nvcc(tmp_path, name, "--ptx", "-o", "out.ptx")
    assert res.returncode == 0, res.stderr
    assert "error" not in res.stderr.lower(), res.stderr
    ptx = (tmp_path / "out.ptx").read_text()
    entries = re.findall(r"\.entry\s+(\w+)", ptx)
    assert len(entries) == len(source.name_expressions(name))
    # --fmad=false: no contracted multiply-adds, so results round as on the CPU
    assert not re.search(r"\bfma\.rn\.f(32|64)", ptx)


@needs_nvcc
@pytest.mark.parametrize("name", source.kernel_files())
def test_registers_and_no_spills(tmp_path: Path, name: str, capsys) -> None:
    res = _nvcc(tmp_path, name, "-cubin", "-Xptxas", "-v", "-o", "out.cubin")
    assert res.returncode == 0, res.stderr
    report, kernel = [], None
    for line in res.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            kernel = m.group(1)
        elif m := re.search(r"Used (\d+) registers", line):
            report.append((kernel, int(m.group(1))))
        elif "stack frame" in line:
            # registers only: a local-memory array or spill would cost a memory round trip
            assert re.search(r"\b0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                             line), f"{kernel}: {line.strip()}"
    assert len(report) == len(source.name_expressions(name))
    with capsys.disabled():
        print(f"\n{name} ({ARCH}, ptxas -v):")
        for kernel, regs in report:
            print(f"  {regs:4d} registers  {kernel}")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception:  # module or libnvrtc missing
        return None
    return nvrtc


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (cuda-bindings + libnvrtc) not available")
@pytest.mark.parametrize("name", source.kernel_files())
def test_compiles_with_nvrtc(name: str) -> None:
    """The backend's own route: NVRTC with its options and name expressions (no GPU needed)."""
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.kernel_source(name).encode(), name.encode(),
                                         0, [], [])
    exprs = source.name_expressions(name)
    for expr in exprs:
        nvrtc.nvrtcAddNameExpression(prog, expr.encode())
    opts = [o.encode() for o in (*source.COMPILE_OPTIONS, f"-arch={ARCH}")]
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert res == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")
    for expr in exprs:
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS and lowered, expr
    nvrtc.nvrtcDestroyProgram(prog)


def test_name_expressions_cover_dtypes() -> None:
    names = source.name_expressions("d2q9.cu")
    for ctype in ("float", "double"):
        assert f"d2q9_stream_collide<{ctype}, true>" in names
        assert f"d2q9_stream_collide<{ctype}, false>" in names
    with pytest.raises(TypeError):
        source.stream_collide_name(np.int32, True)


# --- the CUDA C kernels run as host C++ (CUDA built-ins emulated), against the CPU backend -------
_EMULATION_PRELUDE = """
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
struct simsplit_dim3 { unsigned x = 0, y = 0, z = 0; };
static simsplit_dim3 blockIdx, threadIdx, blockDim, gridDim;
template <typename T> static T __ldg(const T* p) { return *p; }
"""

_EMULATION_LAUNCHERS = """
using flag = unsigned char;
template <typename F>
static void launch(unsigned gx, unsigned gy, unsigned gz, F body) {
    blockDim = {SIMSPLIT_BLOCK_X, 1, 1};
    gridDim = {gx, gy, gz};
    for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) for (unsigned t = 0; t < SIMSPLIT_BLOCK_X; ++t) {
            blockIdx = {x, y, z};
            threadIdx = {t, 0, 0};
            body();
        }
}
template <typename T>
static void collide(const T* fs, T* fd, const flag* fl, T* r, T* u, T* v, int nx, int ny,
                    int j0, int j1, double op, double om, double lid, double fx, double fy,
                    int per, int store, unsigned gy) {
    const unsigned gx = (nx + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X;
    const unsigned gz = (j1 - j0 + gy - 1) / gy;
    launch(gx, gy, gz, [&] {
        if (store) d2q9_stream_collide<T, true>(fs, fd, fl, r, u, v, nx, ny, j0, j1, T(op), T(om),
                                                T(lid), T(fx), T(fy), per);
        else d2q9_stream_collide<T, false>(fs, fd, fl, r, u, v, nx, ny, j0, j1, T(op), T(om),
                                           T(lid), T(fx), T(fy), per);
    });
}
template <typename T>
static void halo(const T* src, T* dst, int pack, long long plane, int row, int w, int set) {
    launch((w + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, D2Q9::N_CROSS, 1, [&] {
        if (pack) lbm_pack<D2Q9, T>(src, dst, plane, row, w, set);
        else lbm_unpack<D2Q9, T>(src, dst, plane, row, w, set);
    });
}
#define COLLIDE(T, NAME) extern "C" void NAME(const T* fs, T* fd, const flag* fl, T* r, T* u, \\
    T* v, int nx, int ny, int j0, int j1, double op, double om, double lid, double fx, \\
    double fy, int per, int store, unsigned gy) { \\
    collide<T>(fs, fd, fl, r, u, v, nx, ny, j0, j1, op, om, lid, fx, fy, per, store, gy); }
#define HALO(T, NAME) extern "C" void NAME(const T* s, T* d, int pack, long long plane, int row, \\
    int w, int set) { halo<T>(s, d, pack, plane, row, w, set); }
COLLIDE(float, collide_float) COLLIDE(double, collide_double)
HALO(float, halo_float) HALO(double, halo_double)
"""

CXX = shutil.which("g++") or shutil.which("c++")


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    import ctypes

    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("emulation")
    (tmp / "emu.cpp").write_text(_EMULATION_PRELUDE + source.kernel_source("d2q9.cu")
                                 + _EMULATION_LAUNCHERS)
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "emu.so"), str(tmp / "emu.cpp")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "emu.so"))


def _ptr(a: np.ndarray):
    import ctypes

    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


def _emulated_collide(lib, dtype, f_src, f_dst, flags, macro, rows, p, store, grid_y):
    import ctypes

    fn = lib.collide_float if dtype == np.float32 else lib.collide_double
    ny, nx = flags.shape[0] - 2, flags.shape[1] - 2
    c_int, c_dbl = ctypes.c_int, ctypes.c_double
    fn(*(_ptr(a) for a in (f_src, f_dst, flags, *macro)), c_int(nx), c_int(ny), c_int(rows[0]),
       c_int(rows[1]), c_dbl(p.omega_plus), c_dbl(p.omega_minus), c_dbl(p.lid_velocity),
       c_dbl(p.force_x), c_dbl(p.force_y), c_int(int(p.periodic_x)), c_int(int(store)),
       ctypes.c_uint(grid_y))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("trt", [False, True])
def test_emulated_cuda_kernel_matches_cpu(emulated, dtype, periodic, trt) -> None:
    """Same arithmetic, same indexing: the CUDA C stream-collide reproduces the CPU kernel."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.fluid.params import D2Q9Params

    om_p = 1.0 / 0.7
    params = D2Q9Params(om_p, 1.0 / 1.1 if trt else om_p, 0.07, 3e-5, -2e-5, periodic)
    block = D2Q9Block(CPUBackend(), 150, 9, 0, (Face.WALL, Face.LID), params, dtype)
    rng = np.random.default_rng(11)
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
    block.set_populations(w * (1 + 0.05 * rng.standard_normal((9, 9, 150))))
    f_src = block.f_src.copy()
    emu_dst = np.zeros_like(f_src)
    emu_macro = [np.zeros((9, 150), dtype) for _ in range(3)]
    # rows 1..9 in two launches; the second splits its rows over blockIdx.y and blockIdx.z
    _emulated_collide(emulated, dtype, f_src, emu_dst, block.flags, emu_macro, (1, 4), params,
                      True, 3)
    _emulated_collide(emulated, dtype, f_src, emu_dst, block.flags, emu_macro, (4, 10), params,
                      True, 4)
    block.stream_collide(store_macro=True)
    interior = (slice(None), slice(1, -1), slice(1, -1))
    # bit for bit: same operations in the same order, no fused multiply-adds on either side
    np.testing.assert_array_equal(emu_dst[interior], block.f_dst[interior])
    for got, want in zip(emu_macro, (block.rho, block.ux, block.uy), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_emulated_halo_kernels_match_cpu(emulated, dtype) -> None:
    import ctypes

    from simsplit.backends.cpu.d2q9 import D2Q9Kernels

    cpu = D2Q9Kernels()
    fn = emulated.halo_float if dtype == np.float32 else emulated.halo_double
    rng = np.random.default_rng(5)
    f = rng.random((9, 6, 131)).astype(dtype)
    for direction in (0, 1):
        want, got = np.zeros((3, 131), dtype), np.zeros((3, 131), dtype)
        cpu.pack(f, 4, direction, want)
        fn(_ptr(f), _ptr(got), 1, ctypes.c_longlong(6 * 131), 4, 131, direction)
        np.testing.assert_array_equal(got, want)
        buf = np.ascontiguousarray(want[::-1])
        f_want, f_got = f.copy(), f.copy()
        cpu.unpack(buf, f_want, 0, direction)
        fn(_ptr(buf), _ptr(f_got), 0, ctypes.c_longlong(6 * 131), 0, 131, direction)
        np.testing.assert_array_equal(f_got, f_want)
