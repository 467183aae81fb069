"""The CUDA C kernels compile, use the lattice tables, and compute what the CPU kernels compute.

Needs no GPU: nvcc builds PTX and cubins for sm_90 from the exact source the CuPy backend hands
to NVRTC, with every template instantiation the backend launches (register use is printed);
NVRTC compiles it where libnvrtc is installed; and the same source, built as host C++ with the
CUDA built-ins emulated, must reproduce the CPU backend's stream-collide and halo kernels.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from simsplit.backends.cuda_c import kernel_names, source
from simsplit.fluid.column_spans import column_spans
from simsplit.numerics.lattice import D2Q9_C, D2Q9_OPP, D2Q9_W, DOWN, UP
from simsplit.numerics.neq_storage import halo_slot_sets, record_slots
from simsplit.numerics.storage import storage_dtype
from tests.conftest import CXX, OUTLETS, find_nvcc, outlet_params

NVCC = find_nvcc()
ARCH = "sm_90"
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
def _expressions(name: str) -> list[str]:
    """Instantiations a compile test builds: all with 32-bit element offsets and, of those
    with 64-bit ones (which differ only in the index type), the one with rho/u stores and the
    body force per kernel, arithmetic and storage type (the heaviest: the other 42 cost CI
    20 s). Of the 3D bodies kernel, whose 172 instantiations were two thirds of the slowest
    test (200 s in CI), those with both or neither of rho/u stores and the body force: the
    mixed pairs hold a subset of the both-on kernel's live values and the same code paths.
    Measured when this was cut (nvcc 13.0, all 172, 2026-12-06): none of the 86 mixed ones
    spilled; one used more registers than its both-on twin (86 against 84). The same for the
    tiled neq16 candidates (:func:`_mixed_flags`)."""
    return [e for e in kernel_names.name_expressions(name)
            if ("lbm::index_t" not in e or ", true, true, lbm::index_t" in e)
            and not _mixed_flags(e)]


def _mixed_flags(expr: str) -> bool:
    """Whether ``expr`` is a 3D bodies kernel, or a tiled neq16 candidate, with exactly one of
    its rho/u-store and body-force flags on. The candidates (not production: taken only where
    the environment names one) measured with all 24 built (nvcc 13.5, 2026-12-06): none
    spilled; one mixed build used one register more than its both-on twin (96 against 95)."""
    args = expr.partition("<")[2].rstrip(">").split(", ")
    if expr.startswith("d3q19_stream_collide_bodies<"):
        flags = args[2:4]
    elif expr.startswith("d3q19_stream_collide_neq_tile<"):
        flags = args[-2:]
    else:
        return False
    return flags[0] != flags[1]


def _representatives(name: str) -> list[str]:
    """One instantiation per kernel template, arithmetic type and storage type: what NVRTC
    could refuse is a construct of the template, whatever its boolean and index arguments
    (nvcc builds every instantiation in test_compiles_to_ptx)."""
    chosen: dict[tuple[str, ...], str] = {}
    for expr in kernel_names.name_expressions(name):
        head, _, args = expr.partition("<")
        chosen.setdefault((head, *args.split(", ")[:2]), expr)
    return list(chosen.values())


def _translation_unit(name: str, exprs: list[str] | None = None) -> str:
    """Source as NVRTC sees it, plus host code naming each instantiation so nvcc emits it."""
    exprs = kernel_names.name_expressions(name) if exprs is None else exprs
    refs = "".join(f"    (void)&{expr};\n" for expr in exprs)
    return source.kernel_source(name) + f"\nvoid simsplit_instantiate()\n{{\n{refs}}}\n"


def _nvcc(tmp_path: Path, name: str, *args: str,
          exprs: list[str] | None = None) -> subprocess.CompletedProcess:
    cu = tmp_path / name
    cu.write_text(_translation_unit(name, exprs))
    cmd = [NVCC, f"-arch={ARCH}", *source.COMPILE_OPTIONS, *args, str(cu)]
    # d3q19.cu's every instantiation takes nvcc 150-165 s alone on two cores and 280 s beside
    # the other test workers: the limit is for a hung compiler, not a slow one
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)


def test_kernel_files_found() -> None:
    assert "d2q9.cu" in source.kernel_files()
    assert kernel_names.name_expressions("d2q9.cu")


def test_generated_header_carries_exact_weights() -> None:
    header = source.generated_header()
    for w in D2Q9_W:
        assert float(w).hex() in header


@needs_nvcc
def test_generated_tables_evaluate_to_lattice(tmp_path: Path) -> None:
    """The C++ compiler itself reads the generated tables back (host code: no GPU needed)."""
    records = [("D2Q9Records", 9), ("D2Q9StressRecords", 9), ("D3Q19Records", 19),
               ("D3Q19StressRecords", 19)]
    prog = source.generated_header() + """
#include <cstdio>
template <typename L> void halo_sets() {
    for (int s = 0; s < 2; ++s)
        for (int k = 0; k < L::N_CROSS; ++k) std::printf("%d ", L::halo(s, k));
    std::printf("\\n");
}
int main() {
    for (int q = 0; q < D2Q9::Q; ++q)
        std::printf("%d %d %d %a\\n", D2Q9::cx(q), D2Q9::cy(q), D2Q9::opp(q), D2Q9::w(q));
    for (int s = 0; s < 2; ++s)
        for (int k = 0; k < D2Q9::N_CROSS; ++k) std::printf("%d\\n", D2Q9::halo(s, k));
""" + "".join(f"    halo_sets<{name}>();\n" for name, _ in records) + "}\n"
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
    # the records' halo slots (neq16's, neq16s's): the CPU's halo rows, every backend's table
    for line, (name, q) in zip(out[15:19], records, strict=True):
        sets = halo_slot_sets(record_slots(q, stress="Stress" in name))
        assert line.split() == [str(v) for slots in sets for v in slots], name


def test_no_hand_copied_tables() -> None:
    """Weights live in lattice.py only: no 4/9, 1/9 or 1/36 literal in the kernel files."""
    for path in source.kernel_dir().iterdir():
        if path.suffix in (".cu", ".cuh"):
            text = path.read_text()
            assert not re.search(r"\b(4\.0?\s*/\s*9|1\.0?\s*/\s*36|1\.0?\s*/\s*9)\b", text), path


_BUILDS: dict[str, tuple[subprocess.CompletedProcess, str]] = {}


def _build(tmp_path_factory, name: str) -> tuple[subprocess.CompletedProcess, str]:
    """One nvcc run per kernel file, shared by the PTX and the register tests: a cubin with
    the ptxas report (``-Xptxas -v``) and the PTX it was made from (``--keep``). The front
    end is most of the time, so building once saves a third of these tests."""
    if name not in _BUILDS:
        out = tmp_path_factory.mktemp("build")
        res = _nvcc(out, name, "-cubin", "-Xptxas", "-v", "--keep", "--keep-dir", str(out),
                    "-o", "out.cubin", exprs=_expressions(name))
        ptx = out / f"{Path(name).stem}.ptx"
        _BUILDS[name] = (res, ptx.read_text() if ptx.exists() else "")
    return _BUILDS[name]


@needs_nvcc
@pytest.mark.parametrize("name", source.kernel_files())
def test_compiles_to_ptx(tmp_path_factory, tmp_path: Path, name: str) -> None:
    exprs = _expressions(name)
    res, ptx = _build(tmp_path_factory, name)
    assert res.returncode == 0, res.stderr
    assert "error" not in res.stderr.lower(), res.stderr
    entries = re.findall(r"\.entry\s+(\w+)", ptx)
    assert len(entries) == len(exprs)
    # the stream kernels' fp16 loads ask the L2 for 256 B (lbm_common); the link-force sums
    # read a few scattered populations through the plain read-only path
    if name != "link_forces.cu" and any("lbm::half16" in e for e in exprs):
        assert "ld.global.nc.L2::256B.u16" in ptx
    # and the fp16 two-cell kernel's 32-bit pair loads too, as in its tuned build (the build
    # without the hint and the speculative loads ran at 0.947x the one-cell kernel's speed)
    x2 = [e for e in re.split(r"^(?=\.visible \.entry)", ptx, flags=re.MULTILINE)
          if e.startswith(".visible .entry _Z23d3q19_stream_collide_x2IfN3lbm6bits16")]
    assert len(x2) == sum("d3q19_stream_collide_x2<float, lbm::half16" in e for e in exprs)
    for entry in x2:
        assert "ld.global.nc.L2::256B.u32" in entry
        assert not re.search(r"ld\.global\.nc\.u32", entry)
    # --fmad=false: no contracted multiply-adds, so results round as on the CPU; the one
    # fused operation is lbm_common.cuh's exact_product_add (fp16 coding, exact products):
    # built with two roundings instead, no fma may remain
    if "exact_product_add" in source.kernel_source(name):
        # the coding is the same code in every variant of a template, arithmetic and storage
        # type: one instantiation each (all of them doubled the slowest test's time in CI)
        res = _nvcc(tmp_path, name, "-DSIMSPLIT_UNFUSED_CODING",
                    "--ptx", "-o", "out.ptx", exprs=_representatives(name))
        assert res.returncode == 0, res.stderr
        ptx = (tmp_path / "out.ptx").read_text()
    assert not re.search(r"\bfma\.rn\.f(32|64)", ptx)


#: spill bytes the fp16 two-step kernel may keep at its production shape
#: (source.D3Q19_FUSED16, 16 x 16 with three blocks: 56 registers). The build the tuner timed
#: (unforced, no rho/u; 36,510 MLUPS on an H100, the GPU that takes it) spilled 8 bytes with
#: NVRTC and nvcc 13.0; at two blocks none spill (80 registers, not timed)
FP16_TWO_STEP_SPILL = 24
#: spill bytes the 3D bodies kernel on neq16s's stress-kept records may keep: one block of 256
#: threads at 255 registers; every rule rebuilds its populations from the records (nvcc 13.0:
#: none spilled, 244-253 registers; nvcc 13.5: 164-168 bytes, 416 before the stress terms of
#: zero weight were left out). Its speed: 2,918 MLUPS on 3D-1Z at D = 20 on an H100, 42 % of the
#: box on neq16s (neq16's bodies kernel: 48 %; docs/storage.md)
NEQ16S_BODIES_SPILL = 176
#: bytes of stack and spill a kernel may keep (mangled name part -> bytes): the forced fp16
#: two-cell kernel at 72 registers (14 blocks) spills 8 bytes on its near-wall path
#: (kernels/d3q19.cu, SIMSPLIT_D3Q19_X2_MIN_BLOCKS_FOR; 80 registers at 12 blocks: none), and
#: the fp16 two-step kernel as above. The unforced two-cell one, the measured 64 x 16 build,
#: must not spill
#: the records box kernel on neq16 with two halves of 32-bit offsets and rho/u stores (output
#: steps): in this test's build of the whole file ptxas holds it at 64 registers and spills 40
#: bytes; in the records module that runs it (kernel_names.d3q19_neq_expressions, nvcc 13.0)
#: it takes 80 registers and spills none
NEQ16_HALVES_STORE_SPILL = 40
SPILL_ALLOWED = {"d3q19_stream_collide_x2IfN3lbm6bits16ILi0EEELb0ELb1EjE": 8,
                 "d3q19_stream_collide_neqILb1ELb0EN3neq6halvesEt": NEQ16_HALVES_STORE_SPILL,
                 "d3q19_stream_collide_neqILb1ELb1EN3neq6halvesEt": NEQ16_HALVES_STORE_SPILL,
                 "d3q19_stream_collide_two_stepsIfN3lbm6bits16ILi0EEE": FP16_TWO_STEP_SPILL,
                 "d3q19_stream_collide_bodiesIfN3neq4srecE": NEQ16S_BODIES_SPILL}


@needs_nvcc
@pytest.mark.parametrize("name", source.kernel_files())
def test_registers_and_no_spills(tmp_path_factory, name: str, capsys) -> None:
    exprs = _expressions(name)
    res, _ = _build(tmp_path_factory, name)
    assert res.returncode == 0, res.stderr
    report, kernel = [], None
    for line in res.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            kernel = m.group(1)
        elif m := re.search(r"Used (\d+) registers", line):
            report.append((kernel, int(m.group(1))))
        elif "stack frame" in line:
            # registers only: a local-memory array or spill would cost a memory round trip
            allowed = next((b for k, b in SPILL_ALLOWED.items() if k in (kernel or "")), 0)
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes "
                          r"spill loads", line)
            assert m and max(int(v) for v in m.groups()) <= allowed, f"{kernel}: {line.strip()}"
    assert len(report) == len(exprs)
    with capsys.disabled():
        print(f"\n{name} ({ARCH}, ptxas -v):")
        for kernel, regs in report:
            print(f"  {regs:4d} registers  {kernel}")


@needs_nvcc
def test_fp16_two_steps_registers(tmp_path: Path, capsys) -> None:
    """ptxas of the fp16 two-step kernel at its production shape: within the register cap of
    its resident blocks and at most FP16_TWO_STEP_SPILL bytes of spill."""
    exprs = [kernel_names.d3q19_two_steps_name(np.float32, np.float16, s, f)
             for s in (False, True) for f in (False, True)]
    res = _nvcc(tmp_path, "d3q19.cu", "-cubin", "-Xptxas", "-v", "-o", "out.cubin", exprs=exprs)
    assert res.returncode == 0, res.stderr
    tx, ty, _, blocks = source.D3Q19_FUSED16
    cap = 65536 // (blocks * -(-(tx + 2) * (ty + 2) // 32) * 32)
    regs = [int(v) for v in re.findall(r"Used (\d+) registers", res.stderr)]
    spills = [max(map(int, m)) for m in re.findall(
        r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
        res.stderr)]
    assert len(regs) == len(spills) == len(exprs)
    assert max(regs) <= cap and max(spills) <= FP16_TWO_STEP_SPILL, res.stderr
    with capsys.disabled():
        print(f"\nfp16 two-step {tx} x {ty}, {blocks} blocks ({ARCH}): registers {regs}, "
              f"stack/spill bytes {spills}")


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
    """The backend's own route: NVRTC with its options and name expressions (no GPU needed),
    one instantiation of each template per arithmetic and storage type. To PTX only: the
    same front end and optimiser; ptxas, a third of NVRTC's time here, runs on every
    instantiation in test_compiles_to_ptx."""
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.kernel_source(name).encode(), name.encode(),
                                         0, [], [])
    exprs = _representatives(name)
    for expr in exprs:
        nvrtc.nvrtcAddNameExpression(prog, expr.encode())
    virtual = ARCH.replace("sm_", "compute_")
    opts = [o.encode() for o in (*source.COMPILE_OPTIONS, f"-arch={virtual}")]
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
    """Every run.storage choice of 2D grids has its kernels and halo kernels (neq16 records
    their own, neq16s's stress-kept records theirs on neq::srec)."""
    from simsplit.numerics.storage import STORAGE_CHOICES

    names = kernel_names.name_expressions("d2q9.cu")
    for stress in (False, True):
        assert set(kernel_names.d2q9_neq_expressions(stress)) <= set(names)
    assert "d2q9_stream_collide<float, neq::srec, true, true>" in names
    assert "lbm_unpack<D2Q9StressRecords, unsigned short>" in names
    ctype = {"float16": "lbm::half16", "e4m11": "lbm::e4m11", "float32": "float",
             "float64": "double"}
    for precision, storages in STORAGE_CHOICES.items():
        for st in (s for s in storages if s not in ("neq16", "neq16s")):
            for store, rules in itertools.product(("true", "false"), repeat=2):
                assert (f"d2q9_stream_collide<{ctype[precision]}, {ctype[st]}, {store}, "
                        f"{rules}>" in names)
            assert f"lbm_pack<D2Q9, {ctype[st]}>" in names
    with pytest.raises(TypeError):
        kernel_names.stream_collide_name(np.int32, np.int32, True)
    with pytest.raises(TypeError):  # wider than the arithmetic
        kernel_names.stream_collide_name(np.float32, np.float64, True)


def test_d3q19_bodies_variants_named_and_picked() -> None:
    """The bodies kernel's variants: the launcher's pick for each slab kind and outlet kind,
    one instantiation per variant in the module, the generated codes in the names' order."""
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lbm_params import OUTLET_KINDS

    pick = {(o, k): source.d3q19_bodies_open(o, code)
            for o in (False, True) for code, k in enumerate(OUTLET_KINDS)}
    assert pick == {(False, "pressure"): "walls", (False, "zero_gradient"): "walls",
                    (False, "convective"): "walls", (True, "pressure"): "pressure_outlet",
                    (True, "zero_gradient"): "any_outlet", (True, "convective"): "any_outlet"}
    assert source.d3q19_bodies_open(False, 0, quadratic=True) == "quadratic"
    assert source.d3q19_bodies_open(True, 1, quadratic=True) == "quadratic"
    for slab in (fl.SLIP, fl.SLIP | fl.INLET | fl.OUTLET):  # both rules: the variant of both
        assert source.d3q19_bodies_open(slab, 2, quadratic=True) == "slip_quadratic"
    assert source.D3Q19_BODIES_OPEN[-1] == "slip_quadratic"  # appended: the others' codes stay
    names = kernel_names.name_expressions("d3q19.cu")
    header = source.generated_header()
    for code, variant in enumerate(source.D3Q19_BODIES_OPEN):
        assert f"constexpr int BODIES_{variant.upper()} = {code};" in header
        name = kernel_names.d3q19_bodies_name(np.float64, np.float64, False, True, variant)
        assert name == ("d3q19_stream_collide_bodies<double, double, false, true, "
                        f"BODIES_{variant.upper()}>") and name in names
    with pytest.raises(ValueError, match="open_faces"):
        kernel_names.d3q19_bodies_name(np.float64, np.float64, False, True, "inlet")


# --- the CUDA C kernels run as host C++ (CUDA built-ins emulated), against the CPU backend -------
#: (arithmetic, storage) pairs of run.storage: every kernel is emulated with each
PAIRS = [("float32", "float16"), ("float32", "float32"), ("float64", "float64"),
         ("float64", "float32"), ("float64", "float16"), ("float32", "e4m11"),
         ("float64", "e4m11")]

_EMULATION_PRELUDE = """
#define SIMSPLIT_HOST_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
struct simsplit_dim3 { unsigned x = 0, y = 0, z = 0; };
static simsplit_dim3 blockIdx, threadIdx, blockDim, gridDim;
// a block's threads run one phase after another (kernels say so through a team, d3q19.cu
// fused::gpu_team): a barrier has nothing left to wait for
static void __syncthreads() {}
template <typename T> static T __ldg(const T* p) { return *p; }
static unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
// 2-element vectors (the D3Q19 pair kernel): CUDA's vector types and byte permute; a vector
// load or store at an address not aligned to its size, which would fault on a GPU, is counted
struct alignas(8) float2 { float x, y; };
struct alignas(16) double2 { double x, y; };
extern "C" { int simsplit_misaligned_loads = 0; }
template <typename V> static V simsplit_vector_load(const V* p) {
    if (reinterpret_cast<unsigned long long>(p) % sizeof(V)) ++simsplit_misaligned_loads;
    V v;
    __builtin_memcpy(&v, p, sizeof(V));
    return v;
}
static float2 __ldg(const float2* p) { return simsplit_vector_load(p); }
static double2 __ldg(const double2* p) { return simsplit_vector_load(p); }
static unsigned int __ldg(const unsigned int* p) { return simsplit_vector_load(p); }
template <typename V> static void __stwb(V* p, V v) {
    if (reinterpret_cast<unsigned long long>(p) % sizeof(V)) ++simsplit_misaligned_loads;
    __builtin_memcpy(p, &v, sizeof(V));
}
static unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long b = (static_cast<unsigned long long>(y) << 32) | x;
    unsigned int r = 0;
    for (int n = 0; n < 4; ++n) r |= static_cast<unsigned int>((b >> (8 * ((s >> (4 * n)) & 7)))
                                                               & 0xFF) << (8 * n);
    return r;
}
"""

#: a grid run serially, every block and thread in order (after the kernel source: it
#: needs SIMSPLIT_BLOCK_X); the launchers of both lattices start with it
_EMULATION_LAUNCH = """
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
"""

_EMULATION_LAUNCHERS = _EMULATION_LAUNCH + """
template <typename T, typename S>
static void collide(const void* fsv, void* fdv, const flag* fl, T* r, T* u, T* v, int nx, int ny,
                    long long pitch, long long plane, int j0, int j1, int i0, int i1,
                    double op, double om,
                    double lid, double fx, double fy, int per, int store, unsigned gy,
                    const T* in, double in_scale, double rho_w, const T* links, int okind,
                    double keep, double take, double press_w, T* slots, int quad,
                    const void* farv, int far_off) {
    const unsigned gx = (i1 - i0 + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X;
    const unsigned gz = (j1 - j0 + gy - 1) / gy;
    auto fs = static_cast<const S*>(fsv);
    auto fd = static_cast<S*>(fdv);
    auto far = static_cast<const S*>(farv);
    launch(gx, gy, gz, [&] {
        // store: bit 0 the macroscopic fields, bit 1 the box kernel (no open-boundary rules)
#define SIMSPLIT_EMU_COLLIDE(ST, O) d2q9_stream_collide<T, S, ST, O>(fs, fd, fl, r, u, v, nx, \
        ny, pitch, plane, j0, j1, i0, i1, T(op), T(om), T(lid), T(fx), T(fy), per, in, \
        T(in_scale), T(rho_w), links, okind, T(keep), T(take), T(press_w), slots, quad, far, \
        far_off)
        switch (store) {
        case 0: SIMSPLIT_EMU_COLLIDE(false, true); break;
        case 1: SIMSPLIT_EMU_COLLIDE(true, true); break;
        case 2: SIMSPLIT_EMU_COLLIDE(false, false); break;
        default: SIMSPLIT_EMU_COLLIDE(true, false); break;
        }
    });
}
template <typename S>
static void halo(const void* src, void* dst, int pack, long long plane, long long pitch, int row,
                 int w, int set) {
    launch((w + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, D2Q9::N_CROSS, 1, [&] {
        if (pack) lbm_pack<D2Q9, S>(static_cast<const S*>(src), static_cast<S*>(dst), plane,
                                    pitch, pitch, w, w, row, set);
        else lbm_unpack<D2Q9, S>(static_cast<const S*>(src), static_cast<S*>(dst), plane, pitch,
                                 pitch, w, w, row, set);
    });
}
#define COLLIDE(T, S, NAME) extern "C" void NAME(const void* fs, void* fd, const flag* fl, \
    T* r, T* u, T* v, int nx, int ny, long long pitch, long long plane, int j0, int j1, int i0, \
    int i1, double op, double om, double lid, double fx, double fy, int per, int store, \
    unsigned gy, const T* in, double in_scale, double rho_w, const T* links, int okind, \
    double keep, double take, double press_w, T* slots, int quad, const void* far, \
    int far_off) { \
    collide<T, S>(fs, fd, fl, r, u, v, nx, ny, pitch, plane, j0, j1, i0, i1, op, om, lid, fx, \
                  fy, per, store, gy, in, in_scale, rho_w, links, okind, keep, take, press_w, \
                  slots, quad, far, far_off); }
#define HALO(S, NAME) extern "C" void NAME(const void* s, void* d, int pack, long long plane, \
    long long pitch, int row, int w, int set) { halo<S>(s, d, pack, plane, pitch, row, w, set); }
COLLIDE(float, float, collide_float32_float32)
COLLIDE(float, lbm::half16, collide_float32_float16)
COLLIDE(float, lbm::e4m11, collide_float32_e4m11)
COLLIDE(double, double, collide_float64_float64)
COLLIDE(double, float, collide_float64_float32)
COLLIDE(double, lbm::half16, collide_float64_float16)
COLLIDE(double, lbm::e4m11, collide_float64_e4m11)
COLLIDE(float, unsigned short, collide_float32_neq16)
COLLIDE(float, neq::srec, collide_float32_neq16s)
HALO(float, halo_float32) HALO(double, halo_float64) HALO(lbm::half16, halo_float16)
HALO(lbm::e4m11, halo_e4m11)
"""


#: the D2Q9 records' pull kernel (kernels/d2q9.cu), float32: neq2 on neq16's records, neq2s
#: on neq16s's stress-kept ones
_EMULATION_LAUNCHER_NEQ_2D = """
template <typename S, typename P>
static void neq2_run(const void* fs, void* fd, const flag* fl, float* rr, float* uu, float* vv,
                     int nx, int ny, long long pitch, long long plane, int j0, int j1, double op,
                     double om, double lid, double fx, double fy, int px, int store, int i0,
                     int i1) {
    auto s = static_cast<const S*>(fs);
    auto d = static_cast<S*>(fd);
    launch((i1 - i0 + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, j1 - j0, 1, [&] {
        if (store) d2q9_stream_collide_neq<true, P, S>(s, d, fl, rr, uu, vv, nx, ny, pitch,
            plane, j0, j1, float(op), float(om), float(lid), float(fx), float(fy), px, i0, i1);
        else d2q9_stream_collide_neq<false, P, S>(s, d, fl, rr, uu, vv, nx, ny, pitch, plane,
            j0, j1, float(op), float(om), float(lid), float(fx), float(fy), px, i0, i1);
    });
}
#define NEQ2(S, NAME) extern "C" void NAME(const void* fs, void* fd, const flag* fl, \\
    float* rr, float* uu, float* vv, int nx, int ny, long long pitch, long long plane, int j0, \\
    int j1, double op, double om, double lid, double fx, double fy, int px, int store, int i0, \\
    int i1, int wide) { \\
    if (wide) neq2_run<S, lbm::index_t>(fs, fd, fl, rr, uu, vv, nx, ny, pitch, plane, j0, j1, \\
                                        op, om, lid, fx, fy, px, store, i0, i1); \\
    else neq2_run<S, lbm::offset_t>(fs, fd, fl, rr, uu, vv, nx, ny, pitch, plane, j0, j1, op, \\
                                    om, lid, fx, fy, px, store, i0, i1); }
NEQ2(unsigned short, neq2)
NEQ2(neq::srec, neq2s)
"""


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    import ctypes

    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("emulation")
    (tmp / "emu.cpp").write_text(_EMULATION_PRELUDE + source.kernel_source("d2q9.cu")
                                 + _EMULATION_LAUNCHERS + _EMULATION_LAUNCHER_NEQ_2D)
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "emu.so"), str(tmp / "emu.cpp")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "emu.so"))


def _ptr(a: np.ndarray):
    import ctypes

    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


def _data(a: np.ndarray):
    """Address of a (possibly padded) array's first element."""
    import ctypes

    return ctypes.c_void_p(a.ctypes.data)


def _padded_copy(a: np.ndarray) -> np.ndarray:
    """``a`` in the GPU backends' padded-row layout (simsplit.backends.layout)."""
    from simsplit.backends.layout import padded_empty

    out = padded_empty(np, a.shape, a.dtype)
    out[...] = a
    return out


def _emulated_collide(lib, dtype, f_src, f_dst, flags, macro, rows, p, store, grid_y,
                      inlet=None, links=None, box=False, columns=None, slots=None, far=None,
                      storage=None):
    """One launch of the emulated D2Q9 kernel for arithmetic ``dtype`` on populations stored
    as ``f_src`` is (``storage``: the run.storage name where the dtype does not tell it: neq16s's
    records); ``box``: the instantiation without the open-boundary rules, which the GPU
    backends launch for walls and a lid only; ``slots``: a convective outlet's previous values
    (updated in place); ``far``: (the array behind ``f_src``, the row of f_src's row 0 in it)
    for quadratic links (27 weight planes)."""
    import ctypes

    from simsplit.backends.layout import field_strides
    from simsplit.numerics.storage import storage_name

    fn = getattr(lib, f"collide_{np.dtype(dtype).name}_{storage or storage_name(f_src.dtype)}")
    ny, nx = flags.shape[0] - 2, flags.shape[1] - 2
    c_int, c_dbl, c_ll = ctypes.c_int, ctypes.c_double, ctypes.c_longlong
    pitch, plane = field_strides(f_src, flags, f_dst)
    inlet = np.zeros(ny + 2, dtype) if inlet is None else np.ascontiguousarray(inlet, dtype)
    if links is None:  # halfway everywhere, in the populations' layout
        links = np.full(f_src.shape, -1.0, dtype)
        links = links if f_src.flags.c_contiguous else _padded_copy(links)
    if field_strides(links, flags) != (pitch, plane):
        raise ValueError("links must share the populations' layout")
    fn(*(_data(a) for a in (f_src, f_dst, flags)), *(_ptr(a) for a in macro), c_int(nx),
       c_int(ny), c_ll(int(pitch)), c_ll(int(plane)), c_int(rows[0]), c_int(rows[1]),
       *(c_int(i) for i in (columns or (1, nx + 1))), c_dbl(p.omega_plus),
       c_dbl(p.omega_minus), c_dbl(p.lid_velocity), c_dbl(p.force_x),
       c_dbl(p.force_y), c_int(int(p.periodic_x)), c_int(int(store) | 2 * bool(box)),
       ctypes.c_uint(grid_y),
       _ptr(inlet), c_dbl(p.inlet_scale), c_dbl(p.outlet_density), _data(links),
       c_int(p.outlet_kind), *(c_dbl(v) for v in p.convective_weights),
       c_dbl(p.outlet_pressure_weight), _ptr(np.zeros((9, 1), dtype) if slots is None else slots),
       c_int(int(links.shape[0] == 27)), _data(f_src if far is None else far[0]),
       c_int(0 if far is None else far[1]))


def _emulated_records_2d(lib, storage, f_src, f_dst, flags, macro, rows, p, store,
                         columns, wide: bool = False) -> None:
    """One launch of the emulated D2Q9 records' box kernel (neq2, neq2s) on ``columns``
    (``wide``: with 64-bit element offsets)."""
    import ctypes

    from simsplit.backends.layout import field_strides

    ny, nx = flags.shape[0] - 2, flags.shape[1] - 2
    pitch, plane = field_strides(f_src, flags, f_dst)
    getattr(lib, "neq2" if storage == "neq16" else "neq2s")(
        *(_data(a) for a in (f_src, f_dst, flags)), *(_ptr(a) for a in macro), ctypes.c_int(nx),
        ctypes.c_int(ny), ctypes.c_longlong(pitch), ctypes.c_longlong(plane),
        *map(ctypes.c_int, rows),
        *map(ctypes.c_double, (p.omega_plus, p.omega_minus, p.lid_velocity, p.force_x,
                               p.force_y)),
        ctypes.c_int(int(p.periodic_x)), ctypes.c_int(int(store)), *map(ctypes.c_int, columns),
        ctypes.c_int(int(wide)))


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("trt", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("box", [False, True])
def test_emulated_cuda_kernel_matches_cpu(emulated, precision, storage, periodic, trt, padded,
                                          box) -> None:
    """Same arithmetic, same indexing: the CUDA C stream-collide reproduces the CPU kernel,
    with and without the open-boundary rules compiled in, populations stored in every
    run.storage type (16-bit deviations over many decades: normals, subnormals, exact rest)."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.numerics.lbm_params import D2Q9Params

    dtype = np.dtype(precision)
    om_p = 1.0 / 0.7
    params = D2Q9Params(om_p, 1.0 / 1.1 if trt else om_p, 0.07, 3e-5, -2e-5, periodic)
    block = D2Q9Block(CPUBackend(), 150, 9, 0, (Face.WALL, Face.LID), params, dtype,
                      storage=storage)
    rng = np.random.default_rng(11)
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
    dev = 0.05 * rng.standard_normal((9, 9, 150)) * 10.0 ** rng.uniform(-9, 0, (1, 9, 150))
    dev[:, 0, :3] = 0.0
    block.set_populations(w * (1 + dev))
    f_src = block.f_src.copy()
    assert f_src.dtype == storage_dtype(storage)
    emu_dst = np.zeros_like(f_src)
    flags = block.flags
    if padded:  # rows padded and aligned as on GPUs: the kernel takes its strides as given
        f_src, emu_dst, flags = (_padded_copy(a) for a in (f_src, emu_dst, flags))
    emu_macro = [np.zeros((9, 150), dtype) for _ in range(3)]
    # rows 1..9 in two launches; the second splits its rows over blockIdx.y and blockIdx.z
    _emulated_collide(emulated, dtype, f_src, emu_dst, flags, emu_macro, (1, 4), params,
                      True, 3, box=box)
    _emulated_collide(emulated, dtype, f_src, emu_dst, flags, emu_macro, (4, 10), params,
                      True, 4, box=box)
    block.stream_collide(store_macro=True)
    interior = (slice(None), slice(1, -1), slice(1, -1))
    # bit for bit: same operations in the same order, no fused multiply-adds on either side
    _same_bits(emu_dst[interior], block.f_dst[interior])
    for got, want in zip(emu_macro, (block.rho, block.ux, block.uy), strict=True):
        np.testing.assert_array_equal(got, want)
    if storage == "float16":  # the data did reach fp16's subnormal range
        bits = block.f_dst[interior].view(np.uint16) & 0x7FFF
        assert ((bits > 0) & (bits < 0x0400)).any()


#: (precision, run.storage, outlet) of the bodies test: every storage with the pressure outlet,
#: every open outlet in float64 and on 16-bit storage
BODY_RUNS = [(*pair, OUTLETS[0]) for pair in PAIRS] + [
    (prec, st, outlet) for prec, st in (("float64", "float64"), ("float32", "e4m11"))
    for outlet in OUTLETS[1:]]


@pytest.mark.parametrize("precision, storage, outlet", BODY_RUNS)
@pytest.mark.parametrize("faces", [("inlet", "outlet"), ("outlet", "inlet")])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("bounce", ["halfway", "linear", "quadratic"])
@pytest.mark.parametrize("spans", [False, True])
def test_emulated_cuda_kernel_matches_cpu_with_bodies(emulated, precision, storage, outlet,
                                                      faces, padded, bounce, spans,
                                                      monkeypatch) -> None:
    """Velocity inlet, outlet and a body's cells (issue #21): the CUDA C kernel's inlet,
    outlet (pressure, zero-gradient, convective, with and without the pressure weight), wall
    and interpolated (Bouzidi) branches reproduce the CPU kernel bit for bit, a convective
    outlet's updated previous values too, a ramped inflow and an outlet density off 1
    included, populations stored in every run.storage type; one slab of three (halo ghost rows
    painted, the neighbours of interpolated links and of the outlet links in them too).
    ``spans``: launched as the GPU backends launch a slab with open rules, the box kernel on
    the column spans that need none (SlabBlock.column_spans, here of 4 columns)."""
    _check_d2q9_bodies(emulated, precision, storage, outlet, faces, padded, bounce, spans,
                       monkeypatch)


@pytest.mark.parametrize("storage, outlet, faces, padded, bounce, spans", [
    ("neq16", OUTLETS[0], ("inlet", "outlet"), True, "linear", True),
    ("neq16", OUTLETS[3], ("outlet", "inlet"), False, "quadratic", False),
    ("neq16", OUTLETS[1], ("inlet", "outlet"), True, "halfway", True),
    ("neq16s", OUTLETS[1], ("outlet", "inlet"), True, "linear", False),
    ("neq16s", OUTLETS[0], ("inlet", "outlet"), False, "quadratic", True)])
def test_emulated_neq16_bodies_match_cpu(emulated, storage, outlet, faces, padded, bounce,
                                         spans, monkeypatch) -> None:
    """neq16 records with an inlet, an outlet (pressure; convective mixed with pressure; zero
    gradient) and a body (linear, quadratic, halfway links): the CUDA C kernel with S =
    neq::rec (neq16s: neq::srec) writes the CPU kernel's records bit for bit, on every column
    or (``spans``) on the column spans with open rules, the records' box kernel on the
    others (as the launcher takes them)."""
    _check_d2q9_bodies(emulated, "float32", storage, outlet, faces, padded, bounce, spans,
                       monkeypatch)


def _check_d2q9_bodies(emulated, precision, storage, outlet, faces, padded, bounce, spans,
                       monkeypatch) -> None:
    import simsplit.fluid.column_spans

    monkeypatch.setattr(simsplit.fluid.column_spans, "SPAN_COLUMNS", 4)
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.numerics.lbm_params import D2Q9Params

    nx, ny = 40, 7
    solid = np.zeros((21, nx), dtype=bool)
    y, x = np.mgrid[0:21, 0:nx] + 0.5
    solid |= (x - 14.0) ** 2 + (y - 8.5) ** 2 <= 9.0  # crosses rows 7 and 13: both ghost rows
    sign = 1.0 if faces[0] == "inlet" else -1.0
    inflow = sign * 0.08 * np.linspace(0.2, 1.0, 21)
    links = None
    if bounce != "halfway":  # weights of both kinds on every body link, as the geometry gives
        from simsplit.fluid.geometry import build_bodies
        from simsplit.fluid.geometry.links import link_weights
        from simsplit.numerics.lattice import D2Q9

        (body,) = build_bodies({"shape": [nx, 21], "bodies": [
            {"name": "c", "shape": "circle", "centre": [14.0, 8.5], "radius": 3.0}]}, faces)
        assert np.array_equal(body.cells, solid)
        links = link_weights([body], solid, D2Q9, (False, False), bounce == "quadratic")
        assert (links[:9] > 0).any() and ((links[:9] < 0) & (links[:9] != -1)).any()
    geometry = GridGeometry(solid, faces, inflow, False, links, bounce == "quadratic")
    om_p = 1.0 / 0.7
    params = D2Q9Params(om_p, 1.0 / 1.1, 0.0, 2e-5, -1e-5, False, inlet_scale=0.37,
                        outlet_density=1.013, **outlet_params(*outlet))
    dtype = np.dtype(precision)
    # quadratic: the body's edge rows next to the first and last rows, so that links there
    # read the second ghost rows (two rows deep halos)
    block = D2Q9Block(CPUBackend(), nx, ny, 5 if bounce == "quadratic" else 7,
                      (Face.HALO, Face.HALO), params, dtype, geometry, storage)
    assert (block.flags[:, 0] == (8 if faces[0] == "inlet" else 16)).all()
    if bounce != "quadratic":
        assert (block.flags[[0, -1]] & 1).any()  # the body reaches into both ghost rows
    rng = np.random.default_rng(5)
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
    deep = block.deep_array(block.f_src) if block.depth == 2 else block.f_src
    full = w * (1 + 0.05 * rng.standard_normal((9, *deep.shape[1:])))
    deep[...] = block.storage.encode(full, D2Q9_W)  # the second ghost rows too (quadratic)
    slots = None
    if outlet[0] == "convective":  # previous values off the populations: they must matter
        block.set_outlet_slots(w[..., 0] * (1 + 0.05 * rng.standard_normal((9, ny))))
        slots = block.outlet_slots.copy()
        before = slots.copy()
    far = _padded_copy(deep) if padded else deep.copy()
    f_src = far[:, 1:-1] if block.depth == 2 else far
    emu_dst = np.zeros(deep.shape, deep.dtype)
    emu_dst = _padded_copy(emu_dst) if padded else emu_dst
    emu_dst = emu_dst[:, 1:-1] if block.depth == 2 else emu_dst
    flags = block.flags
    if padded:
        flags = _padded_copy(flags)
        if block.depth == 2:  # flags, links: the rows of f_src's view, as the block's
            flags = _padded_copy(block._deep["flags"])[1:-1]
    emu_macro = [np.zeros((ny, nx), dtype) for _ in range(3)]
    weights = block.links
    if padded and weights is not None:
        grown = np.zeros((weights.shape[0], ny + 2 * block.depth, nx + 2), dtype)
        grown[:, block.depth - 1:ny + block.depth + 1] = weights
        weights = _padded_copy(grown)[:, block.depth - 1:ny + block.depth + 1]
    if bounce != "halfway":
        assert (block.flags & 32).any()  # CURVED cells
    if bounce == "quadratic":  # some link reads x + 2 c_q in the second ghost row
        cy = D2Q9_C[:, 1]
        k, w2 = block.links[:9], block.links[18:]
        assert any(((k[q, j] >= 0) & (w2[q, j] != 0)).any()
                   for q in range(9) for j in (1, ny) if j + 2 * cy[q] in (-1, ny + 2))
    launches = [(1, nx + 1, True)]
    if spans:  # as the GPU launcher takes a slab's column spans (SlabBlock.column_spans)
        launches = column_spans(block.flags, block.lattice)
        # inlet and outlet columns; the curved body's columns too
        assert [s[2] for s in launches] == ([True, False, True, False, True]
                                            if bounce != "halfway" else [True, False, True])
    for i0, i1, is_open in launches:
        if not is_open and storage in ("neq16", "neq16s"):  # the records' box kernel
            _emulated_records_2d(emulated, storage, f_src, emu_dst, flags, emu_macro,
                                 (1, ny + 1), params, True, (i0, i1))
            continue
        _emulated_collide(emulated, dtype, f_src, emu_dst, flags, emu_macro, (1, ny + 1),
                          params, True, 3, inlet=block.inlet, links=weights, box=not is_open,
                          columns=(i0, i1), slots=slots,
                          far=(far, 1) if block.depth == 2 else None, storage=block.storage.name)
    block.stream_collide(store_macro=True)
    interior = (slice(None), slice(1, -1), slice(1, -1))
    fluid = ~(block.flags[1:-1, 1:-1] & 1).astype(bool)
    got, want = emu_dst[interior], block.f_dst[interior]
    _same_bits(got[:, fluid], want[:, fluid])
    assert np.isfinite(block.storage.decode(want[:, fluid], D2Q9_W)).all()
    if slots is not None:  # the same previous values for the next step, every link's new
        np.testing.assert_array_equal(slots, block.outlet_slots)
        sign = 1 if faces[0] == "outlet" else -1  # the links that pull from the outlet
        links_in = [q for q in range(9) if D2Q9_C[q, 0] == sign]
        assert (slots[links_in, 1:-1] != before[links_in, 1:-1]).all()
    for got_m, want_m in zip(emu_macro, (block.rho, block.ux, block.uy), strict=True):
        np.testing.assert_array_equal(got_m[fluid], want_m[fluid])


@pytest.mark.parametrize("precision, storage", [*PAIRS, ("float32", "neq16"),
                                                ("float32", "neq16s")])
@pytest.mark.parametrize("kinds, faces", [
    (("wall", "wall"), ("SLIP", "SLIP")), (("periodic", "periodic"), ("SLIP", "SLIP")),
    (("slip", "slip"), ("WALL", "HALO")), (("slip", "outlet"), ("HALO", "SLIP")),
    (("inlet", "slip"), ("SLIP", "SLIP"))])
def test_emulated_cuda_kernel_matches_cpu_with_slip_walls(emulated, precision, storage,
                                                          kinds, faces) -> None:
    """Free-slip walls (specular reflection) at both y faces, at x faces (each, or one beside
    an inlet or outlet; y faces walls, halos or slip: corners of every kind), bodies touching
    a slip face: the CUDA C kernel's SLIP branch reproduces the CPU kernel (neq16 and neq16s
    records too)."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.numerics.lbm_params import D2Q9Params

    nx, ny = 37, 6
    solid = np.zeros((ny, nx), dtype=bool)
    solid[0:2, 10:13] = True  # a step on the lower wall
    solid[2:4, 0:2] = True  # and one on the face x = 0
    periodic = kinds[0] == "periodic"
    inflow = np.full(ny, 0.04) if "inlet" in kinds else np.zeros(ny)
    geometry = GridGeometry(solid, kinds, inflow, False)
    params = D2Q9Params(1.0 / 0.7, 1.0 / 1.1, 0.0, 3e-5, -2e-5, periodic)
    dtype = np.dtype(precision)
    block = D2Q9Block(CPUBackend(), nx, ny, 0, tuple(Face[f] for f in faces), params, dtype,
                      geometry, storage)
    assert (block.flags[-1] == 64).all() == (faces[1] == "SLIP")
    rng = np.random.default_rng(17)
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
    block.f_src[...] = block.storage.encode(w * (1 + 0.05 * rng.standard_normal(
        (9, ny + 2, nx + 2))), D2Q9_W)
    f_src = block.f_src.copy()
    emu_dst = np.zeros_like(f_src)
    emu_macro = [np.zeros((ny, nx), dtype) for _ in range(3)]
    _emulated_collide(emulated, dtype, f_src, emu_dst, block.flags, emu_macro, (1, ny + 1),
                      params, True, 2, inlet=block.inlet, storage=block.storage.name)
    block.stream_collide(store_macro=True)
    fluid = ~solid
    _same_bits(emu_dst[:, 1:-1, 1:-1][:, fluid], block.f_dst[:, 1:-1, 1:-1][:, fluid])


@pytest.mark.parametrize("storage", ["float64", "float32", "float16", "e4m11"])
@pytest.mark.parametrize("padded", [False, True])
def test_emulated_halo_kernels_match_cpu(emulated, storage, padded) -> None:
    import ctypes

    from simsplit.backends.cpu.d2q9 import D2Q9Kernels

    cpu = D2Q9Kernels()
    fn = getattr(emulated, f"halo_{storage}")
    dtype = storage_dtype(storage)
    rng = np.random.default_rng(5)
    from simsplit.backends.layout import element_strides

    f = (rng.random((9, 6, 131)) if dtype.kind == "f"
         else rng.integers(-2**15, 2**15, (9, 6, 131))).astype(dtype)
    g = _padded_copy(f) if padded else f
    plane, pitch = (ctypes.c_longlong(v) for v in element_strides(g)[:2])
    for direction in (0, 1):
        want, got = np.zeros((3, 131), dtype), np.zeros((3, 131), dtype)
        cpu.pack(f, 4, direction, want)
        fn(_data(g), _ptr(got), 1, plane, pitch, 4, 131, direction)
        np.testing.assert_array_equal(got, want)
        buf = np.ascontiguousarray(want[::-1])
        f_want, g_got = f.copy(), (_padded_copy(f) if padded else f.copy())
        cpu.unpack(buf, f_want, 0, direction)
        fn(_ptr(buf), _data(g_got), 0, plane, pitch, 0, 131, direction)
        np.testing.assert_array_equal(g_got, f_want)


# --- D3Q19 (every arithmetic/storage pair, fp16 included) as host C++ against the CPU backend -----
_EMULATION_LAUNCHERS_3D = _EMULATION_LAUNCH + """
// the launcher groups a build instantiates (most of its compile time): every one unless the
// build names some (-DSIMSPLIT_EMU_PARTS -DSIMSPLIT_EMU_PART_TWO=1 ...)
#ifndef SIMSPLIT_EMU_PARTS
#define SIMSPLIT_EMU_PART_COLLIDE 1
#define SIMSPLIT_EMU_PART_AA 1
#define SIMSPLIT_EMU_PART_TWO 1
#define SIMSPLIT_EMU_PART_BODIES 1
#define SIMSPLIT_EMU_PART_HALO 1
#define SIMSPLIT_EMU_PART_NEQ 1
#endif
#ifndef SIMSPLIT_EMU_CELLS_X  // x-cells per thread of the pull steps: 1, or 2 (the _x2 kernel)
#define SIMSPLIT_EMU_CELLS_X 1
#endif
template <typename T, typename S, bool STORE, bool FORCED, typename P>
static void collide3_run(const S* s, S* d, const flag* fl, T* rr, T* uu, T* vv, T* ww, int nx,
                         int ny, int nz, long long pitch, long long layer, long long plane,
                         int k0, int k1, double op, double om, double lid, double fx, double fy,
                         double fz, int px, int py) {
    const int cells = SIMSPLIT_BLOCK_X * SIMSPLIT_EMU_CELLS_X;  // x-cells per block
    launch((nx + cells - 1) / cells, ny, k1 - k0, [&] {
        if constexpr (SIMSPLIT_EMU_CELLS_X == 2)
            d3q19_stream_collide_x2<T, S, STORE, FORCED, P>(s, d, fl, rr, uu, vv, ww, nx, ny, nz,
                pitch, layer, plane, k0, k1, T(op), T(om), T(lid), T(fx), T(fy), T(fz), px, py);
        else
            d3q19_stream_collide<T, S, STORE, FORCED, P>(s, d, fl, rr, uu, vv, ww, nx, ny, nz,
                pitch, layer, plane, k0, k1, T(op), T(om), T(lid), T(fx), T(fy), T(fz), px, py);
    });
}
template <typename T, typename S, bool FORCED, typename P>
static void aa3_run(S* f, const flag* fl, T* rr, T* uu, T* vv, T* ww, int nx, int ny, int nz,
                    long long pitch, long long layer, long long plane, int k0, int k1, double op,
                    double om, double lid, double fx, double fy, double fz, int px, int py,
                    int odd) {
    launch((nx + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, ny, k1 - k0, [&] {
        d3q19_stream_collide_aa<T, S, true, FORCED, P>(f, fl, rr, uu, vv, ww, nx, ny, nz, pitch,
            layer, plane, k0, k1, T(op), T(om), T(lid), T(fx), T(fy), T(fz), px, py, odd);
    });
}
// the kernel variant the launcher would pick: FORCED as D3Q19Params.forced, wide (64-bit
// element offsets) as asked (the launcher takes them for arrays beyond 2^32 elements)
#define SIMSPLIT_EMU_PICK(RUN, ...) do { \
    const bool forced = fx != 0 || fy != 0 || fz != 0; \
    if (forced && wide) RUN(true, lbm::index_t)(__VA_ARGS__); \
    else if (forced) RUN(true, lbm::offset_t)(__VA_ARGS__); \
    else if (wide) RUN(false, lbm::index_t)(__VA_ARGS__); \
    else RUN(false, lbm::offset_t)(__VA_ARGS__); } while (0)
#define SIMSPLIT_EMU_STORE(F, P) collide3_run<T, S, true, F, P>
#define SIMSPLIT_EMU_NOSTORE(F, P) collide3_run<T, S, false, F, P>
#define SIMSPLIT_EMU_AA(F, P) aa3_run<T, S, F, P>
template <typename T, typename S>
static void collide3(const void* fs, void* fd, const flag* fl, void* r, void* u, void* v, void* w,
                     int nx, int ny, int nz, long long pitch, long long layer, long long plane,
                     int k0, int k1, double op, double om, double lid,
                     double fx, double fy, double fz, int px, int py, int store, int wide) {
    auto s = static_cast<const S*>(fs);
    auto d = static_cast<S*>(fd);
    auto rr = static_cast<T*>(r), uu = static_cast<T*>(u), vv = static_cast<T*>(v),
         ww = static_cast<T*>(w);
    if (store) SIMSPLIT_EMU_PICK(SIMSPLIT_EMU_STORE, s, d, fl, rr, uu, vv, ww, nx, ny, nz, pitch,
                                 layer, plane, k0, k1, op, om, lid, fx, fy, fz, px, py);
    else SIMSPLIT_EMU_PICK(SIMSPLIT_EMU_NOSTORE, s, d, fl, rr, uu, vv, ww, nx, ny, nz, pitch,
                           layer, plane, k0, k1, op, om, lid, fx, fy, fz, px, py);
}
template <typename T, typename S>
static void collide3_aa(void* fv, const flag* fl, void* r, void* u, void* v, void* w, int nx,
                        int ny, int nz, long long pitch, long long layer, long long plane,
                        int k0, int k1, double op, double om, double lid,
                        double fx, double fy, double fz, int px, int py, int odd, int wide) {
    auto f = static_cast<S*>(fv);
    auto rr = static_cast<T*>(r), uu = static_cast<T*>(u), vv = static_cast<T*>(v),
         ww = static_cast<T*>(w);
    SIMSPLIT_EMU_PICK(SIMSPLIT_EMU_AA, f, fl, rr, uu, vv, ww, nx, ny, nz, pitch, layer, plane, k0,
                      k1, op, om, lid, fx, fy, fz, px, py, odd);
}
template <typename S>
static void halo3(const void* src, void* dst, int pack, long long plane, long long stride,
                  long long pitch, int row, int layer, int size, int set) {
    launch((size + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, D3Q19::N_CROSS, 1, [&] {
        if (pack) lbm_pack<D3Q19, S>(static_cast<const S*>(src), static_cast<S*>(dst), plane,
                                     stride, pitch, row, size, layer, set);
        else lbm_unpack<D3Q19, S>(static_cast<const S*>(src), static_cast<S*>(dst), plane,
                                  stride, pitch, row, size, layer, set);
    });
}
#define COLLIDE3(T, S, NAME) extern "C" void NAME(const void* fs, void* fd, const flag* fl, \\
    void* r, void* u, void* v, void* w, int nx, int ny, int nz, long long pitch, \\
    long long layer, long long plane, int k0, int k1, double op, double om, double lid, \\
    double fx, double fy, double fz, int px, int py, int store, int wide) { \\
    collide3<T, S>(fs, fd, fl, r, u, v, w, nx, ny, nz, pitch, layer, plane, k0, k1, op, om, lid, \\
                   fx, fy, fz, px, py, store, wide); }
#define COLLIDE3_AA(T, S, NAME) extern "C" void NAME(void* f, const flag* fl, void* r, \
    void* u, void* v, void* w, int nx, int ny, int nz, long long pitch, long long layer, \
    long long plane, int k0, int k1, double op, double om, double lid, double fx, double fy, \
    double fz, int px, int py, int odd, int wide) { \
    collide3_aa<T, S>(f, fl, r, u, v, w, nx, ny, nz, pitch, layer, plane, k0, k1, op, om, lid, \
                      fx, fy, fz, px, py, odd, wide); }
#include <cstring>
#include <vector>
// d3q19_stream_collide_two_steps: each block's sweep run by a team whose threads take each
// phase in turn; the ring starts as NaN bits, so a slot read before it is written shows
template <typename S> struct host_team {
    template <typename F> void each(F&& f) const {
        for (int t = 0; t < fused::shape<S>::THREADS; ++t) {
            threadIdx = {unsigned(t), 0, 0};
            f(t);
        }
    }
    void sync() const {}
    template <typename X> struct local {  // a thread's registers kept between phases
        std::vector<X> v = std::vector<X>(fused::shape<S>::THREADS);
        X& operator()(int t) { return v[t]; }
    };
};
template <typename T, typename S, bool STORE, bool FORCED>
static void two_steps_run(const S* s, S* d, const flag* fl, T* rr, T* uu, T* vv, T* ww, int nx,
                          int ny, int nz, long long pitch, long long layer, long long plane,
                          int k0, int k1, int run, double op, double om, double lid, double fx,
                          double fy, double fz, int px, int py) {
    using P = lbm::offset_t;
    const fused::sweep_args<T, S, P> a{s, d, fl, rr, uu, vv, ww, nx, ny, nz, P(pitch),
                                       P(layer), P(plane), T(op), T(om), T(lid), T(fx), T(fy),
                                       T(fz), px != 0, py != 0};
    using shape = fused::shape<S>;
    std::vector<S> ring(shape::RING * D3Q19::Q * shape::THREADS);
    blockDim = {unsigned(shape::THREADS), 1, 1};
    for (int za = k0; za < k1; za += run)
        for (int by = 0; by * shape::TY < ny; ++by)
            for (int bx = 0; bx * shape::TX < nx; ++bx) {
                std::memset(ring.data(), 0xFF, ring.size() * sizeof(S));
                fused::sweep<T, S, STORE, FORCED, P>(host_team<S>{}, a, ring.data(), bx, by, za,
                                                     za + run < k1 ? za + run : k1);
            }
}
template <typename T, typename S>
static void two_steps(const void* fs, void* fd, const flag* fl, void* r, void* u, void* v,
                      void* w, int nx, int ny, int nz, long long pitch, long long layer,
                      long long plane, int k0, int k1, int run, double op, double om,
                      double lid, double fx, double fy, double fz, int px, int py, int store) {
    auto s = static_cast<const S*>(fs);
    auto d = static_cast<S*>(fd);
    auto rr = static_cast<T*>(r), uu = static_cast<T*>(u), vv = static_cast<T*>(v),
         ww = static_cast<T*>(w);
    const bool forced = fx != 0 || fy != 0 || fz != 0;
#define SIMSPLIT_EMU_TWO(ST, F) two_steps_run<T, S, ST, F>(s, d, fl, rr, uu, vv, ww, nx, ny, nz, \
        pitch, layer, plane, k0, k1, run, op, om, lid, fx, fy, fz, px, py)
    if (store && forced) SIMSPLIT_EMU_TWO(true, true);
    else if (store) SIMSPLIT_EMU_TWO(true, false);
    else if (forced) SIMSPLIT_EMU_TWO(false, true);
    else SIMSPLIT_EMU_TWO(false, false);
#undef SIMSPLIT_EMU_TWO
}
#define TWO3(T, S, NAME) extern "C" void NAME(const void* fs, void* fd, const flag* fl, \
    void* r, void* u, void* v, void* w, int nx, int ny, int nz, long long pitch, \
    long long layer, long long plane, int k0, int k1, int run, double op, double om, \
    double lid, double fx, double fy, double fz, int px, int py, int store) { \
    two_steps<T, S>(fs, fd, fl, r, u, v, w, nx, ny, nz, pitch, layer, plane, k0, k1, run, op, \
                    om, lid, fx, fy, fz, px, py, store); }
#if SIMSPLIT_EMU_PART_TWO
TWO3(float, float, two3_float32_float32)
TWO3(float, lbm::half16, two3_float32_float16)
TWO3(double, double, two3_float64_float64)
TWO3(double, float, two3_float64_float32)
TWO3(double, lbm::half16, two3_float64_float16)
TWO3(float, lbm::e4m11, two3_float32_e4m11)
TWO3(double, lbm::e4m11, two3_float64_e4m11)
#endif
#if SIMSPLIT_EMU_PART_AA
COLLIDE3_AA(float, float, aa3_float32_float32)
COLLIDE3_AA(float, lbm::half16, aa3_float32_float16)
COLLIDE3_AA(double, double, aa3_float64_float64)
COLLIDE3_AA(double, lbm::half16, aa3_float64_float16)
COLLIDE3_AA(float, lbm::e4m11, aa3_float32_e4m11)
COLLIDE3_AA(double, lbm::e4m11, aa3_float64_e4m11)
#endif
// d3q19_stream_collide_bodies: inlet speeds per line, outlet density, link weights
template <typename T, typename S, bool STORE, bool FORCED, int OPEN>
static void bodies3_run(const S* s, S* d, const flag* fl, T* rr, T* uu, T* vv, T* ww, int nx,
                        int ny, int nz, long long pitch, long long layer, long long plane,
                        int k0, int k1, double op, double om, double lid, double fx, double fy,
                        double fz, int px, int py, const T* in, double in_scale, double rho_w,
                        const T* links, int okind, double keep, double take, double press_w,
                        T* slots, int quad, const S* far, int far_off, int i0, int i1) {
    launch((i1 - i0 + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, ny, k1 - k0, [&] {
        d3q19_stream_collide_bodies<T, S, STORE, FORCED, OPEN>(s, d, fl, rr, uu, vv, ww, nx, ny, nz,
            pitch, layer, plane, k0, k1, T(op), T(om), T(lid), T(fx), T(fy), T(fz), px, py, in,
            T(in_scale), T(rho_w), links, okind, T(keep), T(take), T(press_w), slots, quad, far,
            far_off, i0, i1);
    });
}
template <typename T, typename S>
static void bodies3(const void* fs, void* fd, const flag* fl, void* r, void* u, void* v, void* w,
                    int nx, int ny, int nz, long long pitch, long long layer, long long plane,
                    int k0, int k1, double op, double om, double lid, double fx, double fy,
                    double fz, int px, int py, int store, const void* in, double in_scale,
                    double rho_w, const void* links, int okind, double keep, double take,
                    double press_w, void* slots, int open, int quad, const void* farv,
                    int far_off, int i0, int i1) {
    auto s = static_cast<const S*>(fs);
    auto far = static_cast<const S*>(farv);
    auto d = static_cast<S*>(fd);
    auto rr = static_cast<T*>(r), uu = static_cast<T*>(u), vv = static_cast<T*>(v),
         ww = static_cast<T*>(w);
    auto ii = static_cast<const T*>(in);
    auto ll = static_cast<const T*>(links);
    auto os = static_cast<T*>(slots);
    const bool forced = fx != 0 || fy != 0 || fz != 0;
#define SIMSPLIT_EMU_BODIES(ST, F, O) bodies3_run<T, S, ST, F, O>(s, d, fl, rr, uu, vv, ww, nx, \\
        ny, nz, pitch, layer, plane, k0, k1, op, om, lid, fx, fy, fz, px, py, ii, in_scale, \\
        rho_w, ll, okind, keep, take, press_w, os, quad, far, far_off, i0, i1)
#define SIMSPLIT_EMU_BODIES_OPEN(O) \\
    if (store && forced) SIMSPLIT_EMU_BODIES(true, true, O); \\
    else if (store) SIMSPLIT_EMU_BODIES(true, false, O); \\
    else if (forced) SIMSPLIT_EMU_BODIES(false, true, O); \\
    else SIMSPLIT_EMU_BODIES(false, false, O);
    if (open == BODIES_WALLS) { SIMSPLIT_EMU_BODIES_OPEN(BODIES_WALLS) }
    else if (open == BODIES_PRESSURE_OUTLET) { SIMSPLIT_EMU_BODIES_OPEN(BODIES_PRESSURE_OUTLET) }
    else if (open == BODIES_ANY_OUTLET) { SIMSPLIT_EMU_BODIES_OPEN(BODIES_ANY_OUTLET) }
    else if (open == BODIES_SLIP) { SIMSPLIT_EMU_BODIES_OPEN(BODIES_SLIP) }
    else if (open == BODIES_QUADRATIC) { SIMSPLIT_EMU_BODIES_OPEN(BODIES_QUADRATIC) }
    else { SIMSPLIT_EMU_BODIES_OPEN(BODIES_SLIP_QUADRATIC) }
#undef SIMSPLIT_EMU_BODIES_OPEN
#undef SIMSPLIT_EMU_BODIES
}
#define BODIES3(T, S, NAME) extern "C" void NAME(const void* fs, void* fd, const flag* fl, \\
    void* r, void* u, void* v, void* w, int nx, int ny, int nz, long long pitch, \\
    long long layer, long long plane, int k0, int k1, double op, double om, double lid, \\
    double fx, double fy, double fz, int px, int py, int store, const void* in, \\
    double in_scale, double rho_w, const void* links, int okind, double keep, double take, \\
    double press_w, void* slots, int open, int quad, const void* far, int far_off, int i0, \\
    int i1) { \\
    bodies3<T, S>(fs, fd, fl, r, u, v, w, nx, ny, nz, pitch, layer, plane, k0, k1, op, om, lid, \\
                  fx, fy, fz, px, py, store, in, in_scale, rho_w, links, okind, keep, take, \\
                  press_w, slots, open, quad, far, far_off, i0, i1); }
#if SIMSPLIT_EMU_PART_BODIES
BODIES3(float, float, bodies3_float32_float32)
BODIES3(float, lbm::half16, bodies3_float32_float16)
BODIES3(double, double, bodies3_float64_float64)
BODIES3(double, float, bodies3_float64_float32)
BODIES3(double, lbm::half16, bodies3_float64_float16)
BODIES3(float, lbm::e4m11, bodies3_float32_e4m11)
BODIES3(double, lbm::e4m11, bodies3_float64_e4m11)
BODIES3(float, unsigned short, bodies3_float32_neq16)
BODIES3(float, neq::srec, bodies3_float32_neq16s)
#endif
#define HALO3(S, NAME) extern "C" void NAME(const void* s, void* d, int pack, long long plane, \\
    long long stride, long long pitch, int row, int layer, int size, int set) { \\
    halo3<S>(s, d, pack, plane, stride, pitch, row, layer, size, set); }
#if SIMSPLIT_EMU_PART_COLLIDE
COLLIDE3(float, float, collide3_float32_float32)
COLLIDE3(float, lbm::half16, collide3_float32_float16)
COLLIDE3(double, double, collide3_float64_float64)
COLLIDE3(double, float, collide3_float64_float32)
COLLIDE3(double, lbm::half16, collide3_float64_float16)
COLLIDE3(float, lbm::e4m11, collide3_float32_e4m11)
COLLIDE3(double, lbm::e4m11, collide3_float64_e4m11)
#endif
#if SIMSPLIT_EMU_PART_HALO
HALO3(float, halo3_float32) HALO3(double, halo3_float64) HALO3(lbm::half16, halo3_float16)
HALO3(lbm::e4m11, halo3_e4m11)
#endif
"""


#: the records' pull kernel (kernels/d3q19_neq.cuh), float32, as the launcher picks it: neq3 on
#: neq16's records, neq3s on neq16s's stress-kept ones; `index` 0: 32-bit offsets, 1: 64-bit, 2:
#: two halves (the upper slots from slot neq::HALVES_SPLIT of each array)
_EMULATION_LAUNCHER_NEQ = """
template <typename S, bool STORE, bool FORCED, typename P>
static void neq3_run(const S* s, S* d, const flag* fl, float* rr, float* uu, float* vv,
                     float* ww, int nx, int ny, int nz, long long pitch, long long layer,
                     long long plane, int k0, int k1, double op, double om, double lid,
                     double fx, double fy, double fz, int px, int py, int i0, int i1) {
    launch((i1 - 1 + SIMSPLIT_BLOCK_X - 1) / SIMSPLIT_BLOCK_X, ny, k1 - k0, [&] {
        d3q19_stream_collide_neq<STORE, FORCED, P, S>(s, d, fl, rr, uu, vv, ww, nx, ny, nz,
            pitch, layer, plane, k0, k1, float(op), float(om), float(lid), float(fx), float(fy),
            float(fz), px, py, i0, i1, s + neq::HALVES_SPLIT * plane,
            d + neq::HALVES_SPLIT * plane);
    });
}
template <typename S, bool STORE, bool FORCED>
static void neq3_index(const S* s, S* d, const flag* fl, float* rr, float* uu, float* vv,
                       float* ww, int nx, int ny, int nz, long long pitch, long long layer,
                       long long plane, int k0, int k1, double op, double om, double lid,
                       double fx, double fy, double fz, int px, int py, int index, int i0,
                       int i1) {
#define SIMSPLIT_EMU_NEQ_RUN(P) neq3_run<S, STORE, FORCED, P>(s, d, fl, rr, uu, vv, ww, nx, ny, \\
    nz, pitch, layer, plane, k0, k1, op, om, lid, fx, fy, fz, px, py, i0, i1)
    if (index == 2) SIMSPLIT_EMU_NEQ_RUN(neq::halves);
    else if (index == 1) SIMSPLIT_EMU_NEQ_RUN(lbm::index_t);
    else SIMSPLIT_EMU_NEQ_RUN(lbm::offset_t);
#undef SIMSPLIT_EMU_NEQ_RUN
}
template <typename S>
static void neq3_pick(const void* fs, void* fd, const flag* fl, void* r, void* u, void* v,
                      void* w, int nx, int ny, int nz, long long pitch, long long layer,
                      long long plane, int k0, int k1, double op, double om, double lid,
                      double fx, double fy, double fz, int px, int py, int store, int index,
                      int i0, int i1) {
    auto s = static_cast<const S*>(fs);
    auto d = static_cast<S*>(fd);
    auto rr = static_cast<float*>(r), uu = static_cast<float*>(u), vv = static_cast<float*>(v),
         ww = static_cast<float*>(w);
    const bool forced = fx != 0 || fy != 0 || fz != 0;
#define SIMSPLIT_EMU_NEQ_PICK(STORE, FORCED) neq3_index<S, STORE, FORCED>(s, d, fl, rr, uu, vv, \\
    ww, nx, ny, nz, pitch, layer, plane, k0, k1, op, om, lid, fx, fy, fz, px, py, index, i0, i1)
    if (store && forced) SIMSPLIT_EMU_NEQ_PICK(true, true);
    else if (store) SIMSPLIT_EMU_NEQ_PICK(true, false);
    else if (forced) SIMSPLIT_EMU_NEQ_PICK(false, true);
    else SIMSPLIT_EMU_NEQ_PICK(false, false);
#undef SIMSPLIT_EMU_NEQ_PICK
}
#define NEQ3(S, NAME) extern "C" void NAME(const void* fs, void* fd, const flag* fl, void* r, \\
    void* u, void* v, void* w, int nx, int ny, int nz, long long pitch, long long layer, \\
    long long plane, int k0, int k1, double op, double om, double lid, double fx, double fy, \\
    double fz, int px, int py, int store, int index, int i0, int i1) { \\
    neq3_pick<S>(fs, fd, fl, r, u, v, w, nx, ny, nz, pitch, layer, plane, k0, k1, op, om, lid, \\
                 fx, fy, fz, px, py, store, index, i0, i1); }
#if SIMSPLIT_EMU_PART_NEQ
NEQ3(unsigned short, neq3)
NEQ3(neq::srec, neq3s)
#endif
"""


def _emulation_3d(tmp_path_factory, cells_x: int, *defines: str, parts: tuple[str, ...] = ()):
    """``d3q19.cu`` as host C++; fp16 conversions through the compiler's _Float16 (RNE); the
    pull steps launch d3q19_stream_collide (``cells_x`` 1) or d3q19_stream_collide_x2 (2),
    with ``defines`` (tuning builds); ``parts``: the launcher groups to build (COLLIDE, AA,
    TWO, BODIES, HALO, NEQ; none named: all)."""
    import ctypes

    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp(f"emulation3d_x{cells_x}")
    (tmp / "emu3.cpp").write_text(_EMULATION_PRELUDE
                                  + source.kernel_source("d3q19.cu") + _EMULATION_LAUNCHERS_3D
                                  + _EMULATION_LAUNCHER_NEQ)
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            *(f"-D{d}" for d in defines),
                            *(["-DSIMSPLIT_EMU_PARTS"] if parts else []),
                            *(f"-DSIMSPLIT_EMU_PART_{part}=1" for part in parts),
                            f"-DSIMSPLIT_EMU_CELLS_X={cells_x}", "-o", str(tmp / "emu3.so"),
                            str(tmp / "emu3.cpp")], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "emu3.so"))


@pytest.fixture(scope="module")
def emulated_3d(tmp_path_factory):
    """One cell per thread."""
    return _emulation_3d(tmp_path_factory, 1)


@pytest.fixture(scope="module")
def emulated_3d_pairs(tmp_path_factory):
    """Two x-cells per thread, 2-element vector accesses (the pull steps only)."""
    return _emulation_3d(tmp_path_factory, 2, parts=("COLLIDE",))


@pytest.fixture(scope="module")
def emulated_3d_split_pairs(tmp_path_factory):
    """The two-cell kernel with its vector and scalar paths as separate code
    (SIMSPLIT_D3Q19_X2_SPLIT_PATHS, a tuning option production leaves off)."""
    return _emulation_3d(tmp_path_factory, 2, "SIMSPLIT_D3Q19_X2_SPLIT_PATHS=1",
                         parts=("COLLIDE",))


def test_d3q19_instantiations_cover_storage() -> None:
    """Every run.storage choice has its kernel (and halo kernels for its storage type);
    neq16 records their own (float32 arithmetic), neq16s's stress-kept records theirs."""
    from simsplit.numerics.storage import STORAGE_CHOICES

    names = kernel_names.name_expressions("d3q19.cu")
    ctype = {"float16": "lbm::half16", "e4m11": "lbm::e4m11", "float32": "float",
             "float64": "double"}
    assert set(kernel_names.d3q19_neq_expressions()) <= set(names)
    assert "lbm_pack<D3Q19Records, unsigned short>" in names
    assert set(kernel_names.d3q19_neq_expressions(stress=True)) <= set(names)
    assert "lbm_pack<D3Q19StressRecords, unsigned short>" in names
    for precision, storages in STORAGE_CHOICES.items():
        for st in (s for s in storages if s not in ("neq16", "neq16s")):
            for store, forced, offset in itertools.product(
                    ("true", "false"), ("true", "false"), ("lbm::offset_t", "lbm::index_t")):
                assert (f"d3q19_stream_collide<{ctype[precision]}, {ctype[st]}, {store}, "
                        f"{forced}, {offset}>" in names)
            assert f"lbm_pack<D3Q19, {ctype[st]}>" in names
    with pytest.raises(TypeError):  # wider than arithmetic
        kernel_names.d3q19_stream_collide_name(np.float32, np.float64, True, False)


def _emulated_collide_3d(lib, block, f_src, f_dst, flags, macro, planes, store=True,
                         wide=False) -> None:
    import ctypes

    from simsplit.backends.cpu.d3q19 import raw_view
    from simsplit.backends.layout import field_strides

    dt = block.dtype
    fn = getattr(lib, f"collide3_{dt.name}_{block.storage.name}")
    p = block.params
    nz, ny, nx = (n - 2 for n in flags.shape)
    c_int, c_dbl = ctypes.c_int, ctypes.c_double
    strides = (ctypes.c_longlong(v) for v in field_strides(f_src, flags, f_dst))
    fn(*(_data(raw_view(a)) for a in (f_src, f_dst, flags)), *(_ptr(a) for a in macro),
       c_int(nx), c_int(ny), c_int(nz), *strides, c_int(planes[0]), c_int(planes[1]),
       c_dbl(p.omega_plus),
       c_dbl(p.omega_minus), c_dbl(p.lid_velocity), c_dbl(p.force_x), c_dbl(p.force_y),
       c_dbl(p.force_z), c_int(int(p.periodic_x)), c_int(int(p.periodic_y)), c_int(int(store)),
       c_int(int(wide)))


def _check_d3q19_against_cpu(lib, precision, storage, periodic, padded, nx=13,
                             obstacles=False, forced=True) -> None:
    """Two partial plane ranges of the emulated pull kernel against the CPU kernel, bit for
    bit (populations and rho/u); the variant without rho/u against the same populations.
    ``obstacles``: solid interior cells, some first and some second of an x-pair; ``forced``:
    a body force (else the kernels without the Guo terms)."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    ny, nz = 5, 6
    force = (3e-5, -2e-5, 1e-5) if forced else (0.0, 0.0, 0.0)
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, *force, periodic, periodic)
    assert params.forced == forced
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, precision,
                       storage)
    rng = np.random.default_rng(17)
    # deviations over many decades: fp16 normals, subnormals (tiny ones) and exact rest values
    dev = 0.05 * rng.standard_normal((19, nz, ny, nx)) * 10.0 ** rng.uniform(-9, 0, (1, nz, ny, nx))
    dev[:, 0, 0, :3] = 0.0
    block.set_populations(D3Q19.w[:, None, None, None] * (1 + dev))
    flags = block.flags.copy()
    if obstacles:  # (k, j, i) 1-based: i odd starts an x-pair, i even ends one
        for cell in ((2, 2, 4), (3, 3, 5), (3, 3, 6), (4, 1, 1), (5, 4, nx)):
            flags[cell] = fl.WALL
        inner = (slice(1, -1),) * 3
        flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
        assert (flags[inner] & fl.NEAR_WALL).any()
    f_src = block.f_src.copy()
    cpu_dst = np.zeros_like(f_src)
    emu_dst, emu_dst_nomacro = np.zeros_like(f_src), np.zeros_like(f_src)
    cpu_macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    block.kernels.stream_collide(f_src, cpu_dst, flags, *cpu_macro, (1, nz + 1), params, True)
    if padded:  # rows padded and aligned as on GPUs: the kernel takes its strides as given
        f_src, emu_dst, emu_dst_nomacro, flags = (
            _padded_copy(a) for a in (f_src, emu_dst, emu_dst_nomacro, flags))
    macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    scratch = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    wide = not padded  # 64-bit element offsets on packed rows, 32-bit (production) on padded
    for planes in ((1, 3), (3, nz + 1)):
        _emulated_collide_3d(lib, block, f_src, emu_dst, flags, macro, planes, wide=wide)
        _emulated_collide_3d(lib, block, f_src, emu_dst_nomacro, flags, scratch, planes, False,
                             wide)
    interior = (slice(None), *(slice(1, -1),) * 3)
    assert cpu_dst.dtype == storage_dtype(storage)
    for dst in (emu_dst, emu_dst_nomacro):
        np.testing.assert_array_equal(dst[interior].view(np.uint8),
                                      cpu_dst[interior].view(np.uint8))
    assert not any(a.any() for a in scratch)  # STORE_MACRO false stores no rho/u
    for got, want in zip(macro, cpu_macro, strict=True):
        np.testing.assert_array_equal(got, want)
    if storage == "float16":  # the data did reach fp16's subnormal range
        bits = cpu_dst[interior].view(np.uint16) & 0x7FFF
        assert ((bits > 0) & (bits < 0x0400)).any()


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("forced", [False, True])
def test_emulated_d3q19_matches_cpu(emulated_3d, precision, storage, periodic, padded,
                                    forced) -> None:
    """The CUDA C D3Q19 kernel, fp16 storage included, reproduces the CPU kernel bit for bit:
    walls, the lid, Guo force or none, TRT, periodic x and y, two partial plane ranges."""
    _check_d3q19_against_cpu(emulated_3d, precision, storage, periodic, padded, forced=forced)


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("periodic", [False, True])
def test_emulated_d3q19_solid_cells_match_cpu(emulated_3d, precision, storage,
                                              periodic) -> None:
    """Solid cells inside the domain, one cell per thread: fp16 storage pulls speculatively
    (a solid cell's loads are issued before its flag is known, d3q19.cu speculative_pull), and
    a solid cell must still be left unwritten, its fluid neighbours bounced back as on the CPU."""
    _check_d3q19_against_cpu(emulated_3d, precision, storage, periodic, True, obstacles=True,
                             forced=False)


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("nx", [13, 14])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("obstacles", [False, True])
def test_emulated_d3q19_pairs_match_cpu(emulated_3d_pairs, precision, storage, nx, periodic,
                                        obstacles) -> None:
    """Two x-cells per thread (d3q19_stream_collide_x2) on padded rows: the same bits as the
    CPU, odd nx (a lone last cell) and even, periodic x (scalar pairs at the row ends), walls
    and lid (near-wall cells beside plain ones in a pair), solid cells inside pairs; every
    vector load aligned; with obstacles, no body force."""
    misaligned = ctypes_int(emulated_3d_pairs, "simsplit_misaligned_loads")
    misaligned.value = 0
    _check_d3q19_against_cpu(emulated_3d_pairs, precision, storage, periodic, True, nx,
                             obstacles, forced=not obstacles)
    assert misaligned.value == 0


@pytest.mark.parametrize("nx", [13, 14])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("obstacles", [False, True])
def test_emulated_d3q19_split_pairs_match_cpu(emulated_3d_split_pairs, nx, periodic,
                                              obstacles) -> None:
    """The split-path build of the two-cell kernel, fp16 storage (the storage that takes
    pairs): the same bits as the CPU, every vector access aligned."""
    misaligned = ctypes_int(emulated_3d_split_pairs, "simsplit_misaligned_loads")
    misaligned.value = 0
    _check_d3q19_against_cpu(emulated_3d_split_pairs, "float32", "float16", periodic, True, nx,
                             obstacles, forced=not obstacles)
    assert misaligned.value == 0


def test_emulated_d3q19_pairs_use_vector_loads(emulated_3d_pairs) -> None:
    """The pair kernel's loads are vectors: on packed rows (odd pitch, element 1 off a pair
    boundary) the emulation counts misaligned vector loads, which a GPU would fault on, and
    which is why the launcher refuses such arrays."""
    misaligned = ctypes_int(emulated_3d_pairs, "simsplit_misaligned_loads")
    misaligned.value = 0
    _check_d3q19_against_cpu(emulated_3d_pairs, "float32", "float16", False, False)
    assert misaligned.value > 0


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("faces", [("inlet", "outlet"), ("outlet", "inlet")])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("periodic_y", [False, True])
@pytest.mark.parametrize("outlet", OUTLETS)
def test_emulated_d3q19_bodies_match_cpu(emulated_3d, precision, storage, faces, padded,
                                         periodic_y, outlet) -> None:
    """D3Q19 bodies, inlets and outlets (issue #21): the CUDA C kernel's inlet, outlet
    (pressure, zero-gradient, convective, with and without the pressure weight), wall and
    interpolated (Bouzidi) branches reproduce the CPU kernel bit for bit, a convective
    outlet's previous values too, on a middle slab (ghost planes of halo faces painted,
    neighbours of interpolated links and outlet links in them too), a ramped inflow, a body
    force, fp16 storage included: the variant the launcher picks for the outlet's kind and the
    one with every outlet kind."""
    _check_d3q19_bodies(emulated_3d, precision, storage, faces, padded, periodic_y, outlet)


@pytest.mark.parametrize("precision, storage", [("float64", "float64"), ("float32", "float16"),
                                                ("float64", "e4m11")])
@pytest.mark.parametrize("faces", [("inlet", "outlet"), ("periodic", "periodic")])
@pytest.mark.parametrize("padded, periodic_y", [(False, False), (True, True)])
def test_emulated_d3q19_quadratic_bodies_match_cpu(emulated_3d, precision, storage, faces,
                                                   padded, periodic_y) -> None:
    """Quadratic interpolated bounce-back: the CUDA C bodies kernel reproduces the CPU kernel
    on a middle slab whose links read the second ghost planes (x + 2 c_q), periodic x and y
    wrapping two cells included. Three storage pairs (the coding of the others is the linear
    bodies tests'; all 56 cases took 8 minutes of CI's two cores, and passed)."""
    _check_d3q19_bodies(emulated_3d, precision, storage, faces, padded, periodic_y,
                        OUTLETS[0], "quadratic")


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("faces", [("wall", "wall"), ("periodic", "periodic")])
@pytest.mark.parametrize("periodic_y", [False, True])
def test_emulated_d3q19_bodies_without_open_faces_match_cpu(emulated_3d, precision, storage,
                                                            faces, periodic_y) -> None:
    """A body between x walls or periodic x faces: the bodies kernel without the inlet and
    outlet rules (open_faces "walls", what the launcher takes there) and the general one give
    the CPU kernel's bits."""
    _check_d3q19_bodies(emulated_3d, precision, storage, faces, True, periodic_y,
                        OUTLETS[0])


@pytest.mark.parametrize("precision, storage, faces, padded, bounce", [
    ("float32", "float32", ("inlet", "outlet"), False, "quadratic"),
    ("float32", "float16", ("periodic", "periodic"), True, "quadratic"),
    ("float64", "e4m11", ("outlet", "inlet"), True, "quadratic"),
    ("float32", "float16", ("inlet", "outlet"), True, "linear")])
def test_emulated_d3q19_slip_bodies_match_cpu(emulated_3d, precision, storage, faces, padded,
                                              bounce) -> None:
    """Free-slip y faces and interpolated links together (issue #21): a cylinder across y
    touching both slip faces, on a middle slab; the variant the launcher picks (quadratic:
    BODIES_SLIP_QUADRATIC, linear: BODIES_SLIP) gives the CPU kernel's bits, fp16 and e4m11
    storage included. Four cases, not the product: the coding of every pair is the other
    bodies tests'."""
    _check_d3q19_bodies(emulated_3d, precision, storage, faces, padded, False, OUTLETS[0],
                        bounce, slip=True)


@pytest.mark.parametrize("storage, faces, padded, outlet, bounce, slip", [
    ("neq16", ("inlet", "outlet"), True, OUTLETS[0], "linear", False),
    ("neq16", ("outlet", "inlet"), False, OUTLETS[3], "quadratic", False),
    ("neq16", ("inlet", "outlet"), True, OUTLETS[1], "quadratic", True),
    ("neq16s", ("outlet", "inlet"), True, OUTLETS[0], "linear", False),
    ("neq16s", ("inlet", "outlet"), False, OUTLETS[1], "quadratic", True)])
def test_emulated_d3q19_neq16_bodies_match_cpu(emulated_3d, storage, faces, padded, outlet,
                                               bounce, slip) -> None:
    """neq16 records with a body (linear, quadratic links), an inlet, an outlet (pressure;
    convective mixed with pressure; zero gradient) and free-slip y faces: the bodies kernel
    with S = neq::rec (neq16s: neq::srec), in the one variant the launcher takes on records
    (every rule: BODIES_SLIP_QUADRATIC), writes the CPU kernel's records bit for bit."""
    _check_d3q19_bodies(emulated_3d, "float32", storage, faces, padded, False, outlet, bounce,
                        slip, variants=("slip_quadratic",))


@pytest.mark.parametrize("precision, storage, faces, padded, outlet, bounce", [
    ("float32", "neq16", ("inlet", "outlet"), True, OUTLETS[0], "linear"),
    ("float32", "neq16s", ("outlet", "inlet"), False, OUTLETS[3], "quadratic"),
    ("float32", "neq16", ("outlet", "inlet"), True, OUTLETS[1], "quadratic"),
    ("float32", "float16", ("inlet", "outlet"), True, OUTLETS[1], "linear"),
    ("float64", "float64", ("outlet", "inlet"), False, OUTLETS[0], "quadratic")])
def test_emulated_d3q19_bodies_by_column_spans_match_cpu(emulated_3d, precision, storage,
                                                         faces, padded, outlet, bounce,
                                                         monkeypatch) -> None:
    """A slab with an inlet, an outlet and a body launched as the GPU launcher takes it, by
    column spans of one column (SlabBlock.column_spans): the spans with open rules or links
    on the bodies kernel, the others on the records' box kernel (neq16, neq16s) or the bodies
    kernel without open-face rules (float storage). Together they write the CPU kernel's bits,
    a convective outlet's previous values too."""
    import simsplit.fluid.column_spans

    monkeypatch.setattr(simsplit.fluid.column_spans, "SPAN_COLUMNS", 1)
    records = storage.startswith("neq")
    _check_d3q19_bodies(emulated_3d, precision, storage, faces, padded, False, outlet, bounce,
                        variants=("slip_quadratic",) if records else None, spans=True)


def _check_d3q19_bodies(lib, precision, storage, faces, padded, periodic_y, outlet,
                        bounce: str = "linear", slip: bool = False,
                        variants: tuple[str, ...] | None = None, spans: bool = False) -> None:
    """One step of a middle slab with a body, by the CPU kernel and the emulated bodies
    kernel's ``variants`` (default: the one the launcher picks and the general one); with
    ``spans`` launched by the block's column spans, the box ones on the records' box kernel
    (neq16, neq16s) or the bodies kernel without open-face rules."""
    import ctypes

    from simsplit.backends.cpu import CPUBackend
    from simsplit.backends.cpu.d3q19 import raw_view
    from simsplit.backends.layout import field_strides
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.fluid.geometry import build_bodies
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.fluid.geometry.links import link_weights
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz_all, k0, nz = 13, 7, 12, 4, 4
    open_faces = "inlet" in faces
    periodic_x = faces[0] == "periodic"
    # slip: free-slip y faces, and a cylinder across y touching both (links beside the slip
    # faces, and links that cross a slip face into the body)
    spec = ({"name": "c", "shape": "cylinder", "centre": [6.2, 0, 5.9], "axis": "y",
             "diameter": 4.8} if slip else
            {"name": "s", "shape": "sphere", "centre": [6.2, 3.3, 5.9], "radius": 2.4})
    (body,) = build_bodies({"shape": [nx, ny, nz_all], "bodies": [spec]}, faces)
    quadratic = bounce == "quadratic"
    links = link_weights([body], body.cells, D3Q19, (periodic_x, periodic_y, False), quadratic)
    assert (links[:19] > 0).any() and ((links[:19] < 0) & (links[:19] != -1)).any()
    sign = 1.0 if faces[0] == "inlet" else -1.0
    rng = np.random.default_rng(5)
    inflow = (sign * 0.07 * rng.uniform(0.3, 1, (nz_all, ny)) if open_faces
              else np.zeros((nz_all, ny)))
    geometry = GridGeometry(body.cells, faces, inflow, False, links, quadratic, y_slip=slip)
    params = D3Q19Params(1 / 0.8, 1 / 1.2, 0.0, 1e-5, 2e-5, -1e-5, periodic_x, periodic_y,
                         inlet_scale=0.41, outlet_density=0.991, **outlet_params(*outlet))
    block = D3Q19Block(CPUBackend(), nx, ny, nz, k0, (Face.HALO, Face.HALO), params, precision,
                       storage, geometry=geometry)
    assert bool(block.open_faces & (fl.INLET | fl.OUTLET)) == open_faces
    assert bool(block.open_faces & fl.SLIP) == slip
    if open_faces:
        assert (block.flags[1:-1, 1:-1, 0] == (8 if faces[0] == "inlet" else 16)).all()
    assert (block.flags[0] & 32).any() and (block.flags[1:-1] & 32).any()  # CURVED
    g = block.depth  # 2 for quadratic links: a second ghost plane at each halo face
    assert g == (2 if quadratic else 1)
    dev = 0.04 * rng.standard_normal((19, nz + 2 * g, ny, nx))
    block.set_populations(D3Q19.w[:, None, None, None] * (1 + dev[:, g:-g]))
    deep = (block.deep_array(block.f_src) if g == 2 else block.f_src).copy()
    deep[:, :, 1:-1, 1:-1] = block.storage.encode(  # ghost planes too: the neighbours' the
        D3Q19.w[:, None, None, None] * (1 + dev), D3Q19.w)  # links mix in
    full = deep[:, g - 1:deep.shape[1] + 1 - g]
    flags, inlet, weights = block.flags, block.inlet, block.links
    if quadratic:  # some link reads x + 2 c_q in a second ghost plane
        cz = D3Q19.c[:, 2]
        assert any(((weights[q, k] >= 0) & (weights[38 + q, k] != 0)).any()
                   for q in range(19) for k in (1, nz) if k + 2 * cz[q] in (-1, nz + 2))
    cpu_dst = np.zeros_like(full)
    cpu_macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    cpu_slots = before = None
    if outlet[0] == "convective":  # previous values off the populations: they must matter
        cpu_slots = np.zeros((19, nz + 2, ny + 2), block.dtype)
        cpu_slots[:, 1:-1, 1:-1] = D3Q19.w[:, None, None] * (1 + 0.05 * rng.standard_normal(
            (19, nz, ny)))
        before = cpu_slots.copy()
    block.kernels.stream_collide(full, cpu_dst, flags, *cpu_macro, (1, nz + 1), params, True,
                                 inlet=inlet, links=weights, outlet_slots=cpu_slots,
                                 far=(deep, g - 1))
    far, f_src = deep, full
    if padded:  # deep copies, so that f_src, flags and weights keep the deep arrays' strides
        far = _padded_copy(deep)
        f_src = far[:, g - 1:deep.shape[1] + 1 - g]
        flags = _padded_copy(block._deep["flags"] if g == 2 else flags)[g - 1:nz + g + 1]
        grown = np.zeros((weights.shape[0], nz + 2 * g, *weights.shape[2:]), weights.dtype)
        grown[:, g - 1:nz + g + 1] = weights
        weights = _padded_copy(grown)[:, g - 1:nz + g + 1]
    fn = getattr(lib, f"bodies3_{block.dtype.name}_{block.storage.name}")
    c_int, c_dbl = ctypes.c_int, ctypes.c_double
    picked = source.d3q19_bodies_open(block.open_faces, params.outlet_kind, quadratic)
    general = ("slip" if slip else "any_outlet") if not quadratic else (
        "slip_quadratic" if slip else "quadratic")
    launches = [(1, nx + 1, True)]
    if spans:  # as the GPU launcher takes a slab's column spans (SlabBlock.column_spans)
        launches = column_spans(block.flags, block.lattice)
        assert len(launches) >= 3 and {s[2] for s in launches} == {True, False}
    box = getattr(lib, "neq3s" if storage == "neq16s" else "neq3", None) if storage in (
        "neq16", "neq16s") else None
    for variant in variants or dict.fromkeys((picked, general)):
        emu_dst = _padded_copy(np.zeros_like(deep)) if padded else np.zeros_like(deep)
        emu_dst = emu_dst[:, g - 1:deep.shape[1] + 1 - g]
        emu_slots = None if before is None else before.copy()
        macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
        strides = [ctypes.c_longlong(v) for v in field_strides(f_src, flags, emu_dst)]
        assert field_strides(weights, flags) == field_strides(f_src, flags)
        for (i0, i1, is_open), planes in itertools.product(launches, ((1, 3), (3, nz + 1))):
            common = (*(_data(raw_view(a)) for a in (f_src, emu_dst, flags)),
                      *(_ptr(a) for a in macro), c_int(nx), c_int(ny), c_int(nz), *strides,
                      c_int(planes[0]), c_int(planes[1]), c_dbl(params.omega_plus),
                      c_dbl(params.omega_minus), c_dbl(0.0), c_dbl(params.force_x),
                      c_dbl(params.force_y), c_dbl(params.force_z), c_int(int(periodic_x)),
                      c_int(int(periodic_y)), c_int(1))
            if not is_open and box is not None:  # the records' box kernel on the span
                box(*common, c_int(0), c_int(i0), c_int(i1))
                continue
            fn(*common, _ptr(inlet),
               c_dbl(params.inlet_scale), c_dbl(params.outlet_density), _data(weights),
               c_int(params.outlet_kind), *(c_dbl(v) for v in params.convective_weights),
               c_dbl(params.outlet_pressure_weight),
               _ptr(np.zeros(1, block.dtype) if emu_slots is None else emu_slots),
               c_int(source.D3Q19_BODIES_OPEN.index(variant if is_open else "walls")),
               c_int(int(quadratic)), _data(raw_view(far)), c_int(g - 1), c_int(i0), c_int(i1))
        interior = (slice(None), *(slice(1, -1),) * 3)
        np.testing.assert_array_equal(emu_dst[interior].view(np.uint8),
                                      cpu_dst[interior].view(np.uint8), err_msg=variant)
        for got, want in zip(macro, cpu_macro, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=variant)
        if cpu_slots is not None:  # the same previous values for the next step, every link's
            np.testing.assert_array_equal(emu_slots, cpu_slots, err_msg=variant)
    if cpu_slots is not None:  # new
        sign = 1 if faces[0] == "outlet" else -1  # the links that pull from the outlet
        links_in = [q for q in range(19) if D3Q19.c[q, 0] == sign]
        changed = cpu_slots[links_in] != before[links_in]
        # every interior line's (y walls: a corner link bounces back instead)
        assert changed[:, 1:-1, 2:-2].all() and changed.any(axis=0)[1:-1, 1:-1].all()


def test_bodies_block_fits_the_launch_bounds() -> None:
    """The D3Q19 bodies kernel's launch size (source.D3Q19_BODIES_BLOCK_X) is whole warps and
    within its __launch_bounds__ (SIMSPLIT_BLOCK_X): a larger block would fail to launch."""
    threads = source.D3Q19_BODIES_BLOCK_X
    assert threads % 32 == 0 and 32 <= threads <= source.BLOCK_X
    kernel = source.kernel_source("d3q19.cu")
    bounds = re.search(r"__launch_bounds__\((\w+),.*\n\s*d3q19_stream_collide_bodies\(", kernel)
    assert bounds and bounds.group(1) == "SIMSPLIT_BLOCK_X"


def test_pair_launcher_grid_and_alignment() -> None:
    """The launcher's side of the pair kernel, without a GPU: the grid covers every cell with
    no block to spare, padded arrays pass the alignment check, packed ones fail it."""
    pytest.importorskip("cupy")
    from simsplit.backends.cuda_c.d3q19_modules import grid_x, pair_alignment_problem
    from simsplit.backends.layout import element_strides

    for nx in (1, 2, 511, 512, 513, 1024):
        for cells in (1, 2):
            g = grid_x(nx, cells, 256)
            assert g * 256 * cells >= nx > (g - 1) * 256 * cells
    for dtype in (np.float16, np.float32, np.float64):
        packed = np.zeros((19, 8, 7, 15), dtype)
        assert pair_alignment_problem(packed.ctypes.data, packed.itemsize,
                                      element_strides(packed))
        padded = _padded_copy(packed)
        assert pair_alignment_problem(padded.ctypes.data, padded.itemsize,
                                      element_strides(padded)) is None
        shifted = _padded_copy(np.zeros((19, 8, 7, 16), dtype))[..., 1:]  # [.., 1] off by one
        assert "aligned" in pair_alignment_problem(shifted.ctypes.data, shifted.itemsize,
                                                   element_strides(shifted))


def ctypes_int(lib, name: str):
    import ctypes

    return ctypes.c_int.in_dll(lib, name)


@pytest.mark.parametrize("storage", ["float16", "e4m11", "float32", "float64"])
@pytest.mark.parametrize("padded", [False, True])
def test_emulated_d3q19_halo_kernels_match_cpu(emulated_3d, storage, padded) -> None:
    import ctypes

    from simsplit.backends.cpu.d3q19 import D3Q19Kernels, raw_view

    cpu = D3Q19Kernels()
    fn = getattr(emulated_3d, f"halo3_{storage}")
    rng = np.random.default_rng(5)
    from simsplit.backends.layout import element_strides

    f = rng.random((19, 6, 4, 7)).astype(storage_dtype(storage))
    if storage == "e4m11":  # any bits
        f = rng.integers(0, 1 << 16, f.shape).astype(np.uint16).view(np.int16)
    size = 4 * 7
    g = _padded_copy(f) if padded else f
    strides = [ctypes.c_longlong(v) for v in element_strides(g)[:3]]  # plane, layer, pitch
    for direction in (0, 1):
        want, got = (np.zeros((5, size), storage_dtype(storage)) for _ in range(2))
        cpu.pack(f, 4, direction, want)
        fn(_data(raw_view(g)), _ptr(raw_view(got)), 1, *strides, 7, 4, size, direction)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        buf = np.ascontiguousarray(want[::-1])
        f_want, g_got = f.copy(), (_padded_copy(f) if padded else f.copy())
        cpu.unpack(buf, f_want, 0, direction)
        fn(_ptr(raw_view(buf)), _data(raw_view(g_got)), 0, *strides, 7, 0, size, direction)
        np.testing.assert_array_equal(np.asarray(g_got).view(np.uint8), f_want.view(np.uint8))


@pytest.mark.parametrize("precision, storage", [("float32", "float32"), ("float32", "float16"),
                                                ("float64", "float64"), ("float64", "float16")])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("obstacles", [False, True])
def test_emulated_d3q19_aa_matches_cpu(emulated_3d, precision, storage, periodic,
                                       padded, obstacles) -> None:
    """The in-place (AA) CUDA C kernel reproduces the CPU one bit for bit, both parities, on
    the whole array (ghost and wall cells included: odd steps write there); with a body force
    and 64-bit element offsets on packed rows, without either on padded ones; with solid cells
    inside (fp16 loads before it knows a cell is solid, d3q19.cu speculative_pull)."""
    import ctypes

    from simsplit.backends.cpu import CPUBackend
    from simsplit.backends.cpu.d3q19 import raw_view
    from simsplit.backends.layout import field_strides
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz = 13, 5, 6
    force = (0.0, 0.0, 0.0) if padded else (3e-5, -2e-5, 1e-5)
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, *force, periodic, periodic)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, precision,
                       storage, "aa")
    rng = np.random.default_rng(23)
    dev = 0.05 * rng.standard_normal((19, nz + 2, ny + 2, nx + 2))
    full = block.storage.encode(block.lattice.w[:, None, None, None] * (1 + dev),
                                block.lattice.w)  # every slot, ghosts too: both parities read them
    fn = getattr(emulated_3d, f"aa3_{precision}_{storage}")
    c_int, c_dbl = ctypes.c_int, ctypes.c_double
    cpu_flags = block.flags.copy()
    if obstacles:  # (k, j, i), 1-based
        for cell in ((2, 2, 4), (3, 3, 5), (3, 3, 6), (4, 1, 1), (5, 4, nx)):
            cpu_flags[cell] = fl.WALL
        inner = (slice(1, -1),) * 3
        cpu_flags[inner] = ((cpu_flags[inner] & ~np.uint8(fl.NEAR_WALL))
                            | block._near_wall(cpu_flags))
    for odd in (0, 1):
        f_cpu = full.copy()
        f_emu = _padded_copy(f_cpu) if padded else f_cpu.copy()
        flags = _padded_copy(cpu_flags) if padded else cpu_flags
        strides = [ctypes.c_longlong(v) for v in field_strides(f_emu, flags)]
        macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
        cpu_macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
        for planes in ((1, 3), (3, nz + 1)):  # two launches, as the overlapped loop makes
            fn(_data(raw_view(f_emu)), _data(flags), *(_ptr(a) for a in macro),
               c_int(nx), c_int(ny), c_int(nz), *strides, c_int(planes[0]), c_int(planes[1]),
               c_dbl(params.omega_plus), c_dbl(params.omega_minus), c_dbl(params.lid_velocity),
               c_dbl(params.force_x), c_dbl(params.force_y), c_dbl(params.force_z),
               c_int(int(periodic)), c_int(int(periodic)), c_int(odd), c_int(int(not padded)))
            block.kernels.stream_collide_aa(f_cpu, cpu_flags, *cpu_macro, planes, params, True,
                                            odd)
        assert not np.array_equal(f_cpu.view(np.uint8), full.view(np.uint8))
        np.testing.assert_array_equal(f_emu.view(np.uint8), f_cpu.view(np.uint8))
        for got, want in zip(macro, cpu_macro, strict=True):
            np.testing.assert_array_equal(got, want)


#: 4 x 3 columns for every storage type (16-bit storage has a shape of its own)
_SMALL_TILES = ("SIMSPLIT_D3Q19_FUSED_TX=4", "SIMSPLIT_D3Q19_FUSED_TY=3",
                "SIMSPLIT_D3Q19_FUSED16_TX=4", "SIMSPLIT_D3Q19_FUSED16_TY=3")


@pytest.fixture(scope="module")
def emulated_3d_small_tiles(tmp_path_factory):
    """The two-step kernel with 4 x 3 columns, so that small grids span several in x and y."""
    return _emulation_3d(tmp_path_factory, 1, *_SMALL_TILES, parts=("TWO",))


def _check_two_steps_against_cpu(lib, precision, storage, periodic, obstacles, forced,
                                 runs, nx=13, ny=5, nz=7) -> None:
    """The emulated two-step (temporally blocked) kernel against two CPU steps, bit for bit:
    populations of every interior cell (solid ones left unwritten by both) and rho/u, in two
    launches of partial plane ranges, each cut into runs of ``runs`` planes."""
    import ctypes

    from simsplit.backends.cpu import CPUBackend
    from simsplit.backends.cpu.d3q19 import raw_view
    from simsplit.backends.layout import field_strides
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    force = (3e-5, -2e-5, 1e-5) if forced else (0.0, 0.0, 0.0)
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, *force, periodic, periodic)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, precision,
                       storage)
    rng = np.random.default_rng(29)
    dev = 0.05 * rng.standard_normal((19, nz, ny, nx)) * 10.0 ** rng.uniform(-9, 0, (1, nz, ny, nx))
    block.set_populations(D3Q19.w[:, None, None, None] * (1 + dev))
    flags = block.flags.copy()
    if obstacles:  # (k, j, i), 1-based: beside column edges of 4 x 3 and 32 x 8 columns
        for cell in ((2, 2, 4), (3, 3, 5), (3, 3, 6), (4, 1, 1), (5, 4, nx), (nz, ny, 9)):
            flags[cell] = fl.WALL
        inner = (slice(1, -1),) * 3
        flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    f0 = block.f_src.copy()
    f1, f2 = np.zeros_like(f0), np.zeros_like(f0)
    cpu_macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    block.kernels.stream_collide(f0, f1, flags, *cpu_macro, (1, nz + 1), params, False)
    block.kernels.stream_collide(f1, f2, flags, *cpu_macro, (1, nz + 1), params, True)
    src, dst, pflags = (_padded_copy(a) for a in (f0, np.zeros_like(f0), flags))
    macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    fn = getattr(lib, f"two3_{precision}_{storage}")
    c_int, c_dbl = ctypes.c_int, ctypes.c_double
    strides = [ctypes.c_longlong(v) for v in field_strides(src, pflags, dst)]
    for planes in ((1, 3), (3, nz + 1)):
        fn(_data(raw_view(src)), _data(raw_view(dst)), _data(pflags), *(_ptr(a) for a in macro),
           c_int(nx), c_int(ny), c_int(nz), *strides, c_int(planes[0]), c_int(planes[1]),
           c_int(runs), c_dbl(params.omega_plus), c_dbl(params.omega_minus),
           c_dbl(params.lid_velocity), c_dbl(params.force_x), c_dbl(params.force_y),
           c_dbl(params.force_z), c_int(int(periodic)), c_int(int(periodic)), c_int(1))
    interior = (slice(None), *(slice(1, -1),) * 3)
    assert not np.array_equal(f2[interior].view(np.uint8), f1[interior].view(np.uint8))
    np.testing.assert_array_equal(dst[interior].view(np.uint8), f2[interior].view(np.uint8))
    for got, want in zip(macro, cpu_macro, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("obstacles", [False, True])
def test_emulated_d3q19_two_steps_match_cpu(emulated_3d_small_tiles, precision, storage,
                                            periodic, obstacles) -> None:
    """Two steps in one sweep (kernels/d3q19.cu d3q19_stream_collide_two_steps) give the bits
    of two CPU steps: columns of 4 x 3 cells (13 x 5 cells: partial columns at both ends),
    runs of 2 planes, walls, the lid, obstacles at column edges, periodic x and y wrapping
    through the ring cells, fp16 storage rounding the step t + 1 values as DRAM would."""
    _check_two_steps_against_cpu(emulated_3d_small_tiles, precision, storage, periodic,
                                 obstacles, forced=not obstacles, runs=2)


@pytest.fixture(scope="module")
def emulated_3d_prefetch(tmp_path_factory):
    """The two-step kernel whose threads load their next plane before colliding the current
    one (SIMSPLIT_D3Q19_FUSED_PREFETCH, a tuning variant), with 4 x 3 columns."""
    return _emulation_3d(tmp_path_factory, 1, *_SMALL_TILES, "SIMSPLIT_D3Q19_FUSED_PREFETCH=1",
                         parts=("TWO",))


@pytest.mark.parametrize("precision, storage", [("float32", "float16"), ("float32", "float32"),
                                                ("float64", "float16"), ("float32", "e4m11")])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("obstacles, runs", [(False, 2), (True, 2), (True, 64)])
def test_emulated_d3q19_two_steps_prefetch_match_cpu(emulated_3d_prefetch, precision, storage,
                                                     periodic, obstacles, runs) -> None:
    """The prefetching two-step sweep gives the same bits as two CPU steps: loads issued
    before the flag is known (solid obstacles, wall ghost cells, periodic ring cells), runs
    of 2 planes and one run over the whole range (the last plane prefetches nothing)."""
    _check_two_steps_against_cpu(emulated_3d_prefetch, precision, storage, periodic,
                                 obstacles, forced=not obstacles, runs=runs)


@pytest.mark.parametrize("periodic", [False, True])
def test_emulated_d3q19_two_steps_production_tiles(emulated_3d, periodic) -> None:
    """The production column size (one column covers the small grid) and whole-range runs."""
    _check_two_steps_against_cpu(emulated_3d, "float32", "float32", periodic, True, True,
                                 runs=64)


@pytest.mark.parametrize("storage", ["float16", "e4m11"])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("runs", [5, 64])
def test_emulated_d3q19_two_steps_production_tiles_16bit(emulated_3d, storage, periodic,
                                                         runs) -> None:
    """16-bit storage's own production column (source.D3Q19_FUSED16) on a grid of three
    columns in x and two in y, the last ones partial, with obstacles: the same bits as two CPU
    steps (a column shape changes only which thread computes which cell)."""
    tx, ty = source.D3Q19_FUSED16[:2]
    _check_two_steps_against_cpu(emulated_3d, "float32", storage, periodic, True, True,
                                 runs=runs, nx=2 * tx + 5, ny=ty + 3)


def test_two_steps_launch_follows_the_shapes() -> None:
    """The launcher's threads and shared memory are those of the header's shape for the
    storage's width: SIMSPLIT_D3Q19_FUSED16_* for 16-bit storage, SIMSPLIT_D3Q19_FUSED_*
    for the others."""
    header = source.generated_header()

    def define(name: str) -> int:
        return int(re.search(rf"#define {name} (\d+)", header).group(1))

    for itemsize, kind in ((2, "FUSED16"), (4, "FUSED"), (8, "FUSED")):
        tx, ty, ring = (define(f"SIMSPLIT_D3Q19_{kind}_{k}") for k in ("TX", "TY", "RING"))
        grid, threads, shared = source.d3q19_two_steps_launch(100, 50, 64, itemsize)
        assert threads == (tx + 2) * (ty + 2)
        assert grid == (-(-100 // tx), -(-50 // ty), -(-64 // source.D3Q19_FUSED_RUN_PLANES))
        assert shared == ring * 19 * threads * itemsize


@pytest.mark.parametrize("periodic, forced", [(False, True), (True, False)])
@pytest.mark.parametrize("storage", ["neq16", "neq16s"])
def test_emulated_d3q19_neq16_records_match_cpu(emulated_3d, periodic, forced, storage) -> None:
    """run.storage neq16 (and neq16s: the kernel on neq::srec): the CUDA C records kernel
    (kernels/d3q19_neq.cuh) writes the CPU kernel's records bit for bit (significands, power of
    two, rho - 1, u, the kept stress) and its rho/u, on packed and padded rows, 64- and 32-bit
    offsets and 32-bit ones from two bases (neq::halves), with solid cells inside (bounce-back
    from rebuilt populations) and the lid."""
    import ctypes

    from simsplit.backends.cpu import CPUBackend
    from simsplit.backends.layout import field_strides
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lattice import D3Q19
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz = 11, 5, 6
    force = (3e-5, -2e-5, 1e-5) if forced else (0.0, 0.0, 0.0)
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, *force, periodic, periodic)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, "float32",
                       storage)
    rng = np.random.default_rng(23)
    dev = 0.02 * rng.standard_normal((19, nz, ny, nx)) * 10.0 ** rng.uniform(-5, 0, (1, nz, ny, nx))
    block.set_populations(D3Q19.w[:, None, None, None] * (1 + dev))
    flags = block.flags.copy()
    for cell in ((2, 2, 4), (3, 3, 5), (4, 1, 1), (5, 4, nx)):
        flags[cell] = fl.WALL
    inner = (slice(1, -1),) * 3
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    f_src = block.f_src.copy()
    assert f_src.dtype == np.uint16 and f_src.shape[0] == (27 if storage == "neq16" else 33)
    launch = emulated_3d.neq3 if storage == "neq16" else emulated_3d.neq3s
    cpu_dst = np.zeros_like(f_src)
    cpu_macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
    block.kernels.stream_collide(f_src, cpu_dst, flags, *cpu_macro, (1, nz + 1), params, True)
    interior = (slice(None), *inner)
    for padded, index in ((False, 1), (True, 0), (False, 2), (True, 2)):
        src, dst, flg = ((_padded_copy(a) for a in (f_src, np.zeros_like(f_src), flags))
                         if padded else (f_src, np.zeros_like(f_src), flags))
        macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
        for planes, store in (((1, 3), True), ((3, nz + 1), True), ((1, nz + 1), False)):
            out = macro if store else [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
            launch(
                *(_data(a) for a in (src, dst, flg)), *(_ptr(a) for a in out),
                *map(ctypes.c_int, (nx, ny, nz)),
                *map(ctypes.c_longlong, field_strides(src, flg, dst)),
                *map(ctypes.c_int, planes),
                *map(ctypes.c_double, (params.omega_plus, params.omega_minus,
                                       params.lid_velocity, *force)),
                *map(ctypes.c_int, (int(periodic), int(periodic), int(store), index, 1,
                                    nx + 1)))
            assert store or not any(a.any() for a in out)
        np.testing.assert_array_equal(dst[interior], cpu_dst[interior])
        for got, want in zip(macro, cpu_macro, strict=True):
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.abs(cpu_dst[:19][interior].view(np.int16)).max() >= 2**13  # real significands
    assert storage == "neq16" or (cpu_dst[27:][interior] != 0).mean() > 0.5  # and stresses


@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("storage", ["neq16", "neq16s"])
def test_emulated_d2q9_neq16_records_match_cpu(emulated, periodic, storage) -> None:
    """run.storage neq16 (and neq16s: the kernel on neq::srec) in 2D: the CUDA C records
    kernel (d2q9.cu d2q9_stream_collide_neq) writes the CPU kernel's records and rho/u bit for
    bit, packed rows with 64-bit element offsets and padded rows with 32-bit ones, solid cells
    inside, the lid, a body force, periodic x or walls."""
    from simsplit.backends.cpu import CPUBackend
    from simsplit.fluid.block import D2Q9Block, Face
    from simsplit.numerics import flags as fl
    from simsplit.numerics.lbm_params import D2Q9Params

    nx, ny = 13, 9
    params = D2Q9Params(1 / 0.7, 1 / 1.1, 0.06, 2e-5, -1e-5, periodic)
    block = D2Q9Block(CPUBackend(), nx, ny, 0, (Face.WALL, Face.LID), params, "float32",
                      storage=storage)
    rng = np.random.default_rng(29)
    dev = 0.02 * rng.standard_normal((9, ny, nx)) * 10.0 ** rng.uniform(-5, 0, (1, ny, nx))
    block.set_populations(D2Q9_W[:, None, None] * (1 + dev))
    flags = block.flags.copy()
    for cell in ((3, 4), (5, 5), (7, nx)):
        flags[cell] = fl.WALL
    inner = (slice(1, -1),) * 2
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    f_src = block.f_src.copy()
    assert f_src.dtype == np.uint16 and f_src.shape[0] == (15 if storage == "neq16" else 18)
    cpu_dst = np.zeros_like(f_src)
    cpu_macro = [np.zeros((ny, nx), np.float32) for _ in range(3)]
    block.kernels.stream_collide(f_src, cpu_dst, flags, *cpu_macro, (1, ny + 1), params, True)
    interior = (slice(None), *inner)
    for padded in (False, True):
        src, dst, flg = ((_padded_copy(a) for a in (f_src, np.zeros_like(f_src), flags))
                         if padded else (f_src, np.zeros_like(f_src), flags))
        macro = [np.zeros((ny, nx), np.float32) for _ in range(3)]
        for rows, store in (((1, 4), True), ((4, ny + 1), True), ((1, ny + 1), False)):
            out = macro if store else [np.zeros((ny, nx), np.float32) for _ in range(3)]
            _emulated_records_2d(emulated, storage, src, dst, flg, out, rows, params, store,
                                 (1, nx + 1), wide=not padded)
            assert store or not any(a.any() for a in out)
        np.testing.assert_array_equal(dst[interior], cpu_dst[interior])
        for got, want in zip(macro, cpu_macro, strict=True):
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.abs(cpu_dst[:9][interior].view(np.int16)).max() >= 2**13
    assert storage == "neq16" or (cpu_dst[15:][interior] != 0).mean() > 0.5
