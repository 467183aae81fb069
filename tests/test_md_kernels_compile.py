"""The MD CUDA C kernels compile, and as host C++ they run the MD exactly as the CPU kernels do.

Needs no GPU: nvcc builds PTX and a cubin for sm_90 from the source the CuPy backend hands to
NVRTC, with every instantiation it launches (registers are printed); NVRTC compiles it where
libnvrtc is installed; and the same source, built as host C++ with CUDA's built-ins emulated
(threads run one after another, atomics are plain updates), is driven by the CuPy backend's own
launch sequence (:class:`DeviceMDKernels`) inside :class:`MDSolver`: positions, velocities and
thermo must equal the CPU backend's bit for bit, for 1, 2 and 3 slabs.
"""

from __future__ import annotations

import atexit
import ctypes
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simsplit.backends.cpu import md as cpu_md
from simsplit.backends.cuda_c import md as cmd
from simsplit.backends.cuda_c import source
from simsplit.md import MDSolver
from simsplit.md import solver_setup as md_solver_setup
from simsplit.md.reference import lj_case
from tests.conftest import CXX, find_nvcc
from tests.numba_launches import numba_signatures

NVCC = find_nvcc()
ARCH = "sm_90"
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def _translation_unit() -> str:
    refs = "".join(f"    (void)&{expr};\n" for expr in cmd.name_expressions())
    return (source.kernel_source(cmd.KERNEL_FILE)
            + f"\nvoid simsplit_instantiate()\n{{\n{refs}}}\n")


def _nvcc(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cu = tmp_path / "md_lj_all.cu"
    cu.write_text(_translation_unit())
    cmd_line = [NVCC, f"-arch={ARCH}", *source.COMPILE_OPTIONS, *args, str(cu)]
    return subprocess.run(cmd_line, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_constants_come_from_the_header() -> None:
    consts = cmd.md_constants()
    assert {k: consts[k] for k in ("block", "max_neighbors", "scan_chunk", "scan_serial")} == {
        "block": cmd.BLOCK, "max_neighbors": cmd.MAX_NEIGHBORS, "scan_chunk": cmd.SCAN_CHUNK,
        "scan_serial": cmd.SCAN_SERIAL}
    # 64k atoms (18,963 cells): one level; 8M atoms on four slabs (23.4M buckets): three
    assert cmd.scan_levels(18_963) == [593] and cmd.scan_levels(100) == [4]
    assert cmd.scan_levels(23_393_888) == [731_059, 22_846, 714]
    assert cmd.scan_scratch(18_963) == 594
    header = (source.kernel_dir() / cmd.COMMON_HEADER).read_text()
    for value in (cpu_md._GOLDEN, cpu_md._MIX1, cpu_md._MIX2):  # the CPU hash, same constants
        assert f"0x{int(value):X}ULL" in header
    assert float.fromhex("0x1.921fb54442d18p+2") == cpu_md._TWO_PI
    assert float.fromhex("0x1p-53") == cpu_md._INV_2_53


@needs_nvcc
def test_compiles_to_ptx_without_fma(tmp_path: Path) -> None:
    res = _nvcc(tmp_path, "--ptx", "-o", "out.ptx")
    assert res.returncode == 0, res.stderr
    ptx = (tmp_path / "out.ptx").read_text()
    assert len(re.findall(r"\.entry\s+(\w+)", ptx)) == len(cmd.name_expressions())
    # --fmad=false: no contracted multiply-add rounds differently from the CPU. Only the math
    # library's log/sin/cos (Langevin noise; their own fma by design) may contain one.
    blocks = re.split(r"^(?=\.(?:visible \.entry|func|weak \.func)\b)", ptx, flags=re.MULTILINE)
    for block in blocks:
        if re.search(r"\bfma\.rn\.f(32|64)", block):
            head = block.split("(")[0]
            assert "langevin" in head or "entry" not in head, head


@needs_nvcc
def test_registers(tmp_path: Path, capsys) -> None:
    res = _nvcc(tmp_path, "-cubin", "-Xptxas", "-v", "-o", "out.cubin")
    assert res.returncode == 0, res.stderr
    report: list[list[Any]] = []
    for line in res.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            report.append([m.group(1), 0, ""])
        elif m := re.search(r"Used (\d+) registers", line):
            report[-1][1] = int(m.group(1))
        elif "stack frame" in line and report:
            report[-1][2] = line.strip()
    assert len(report) == len(cmd.name_expressions())
    for kernel, regs, frame in report:
        assert regs <= 64, kernel  # room for >= 8 warps per SM scheduler
        # no kernel keeps a local array (the list build writes rows straight to global memory);
        # only Langevin's math-library calls may use the stack
        if "langevin" not in kernel:
            assert frame.startswith("0 bytes stack frame, 0 bytes spill"), (kernel, frame)
    with capsys.disabled():
        print(f"\n{cmd.KERNEL_FILE} ({ARCH}, ptxas -v):")
        for kernel, regs, frame in report:
            print(f"  {regs:4d} registers  {kernel}  ({frame})")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception:  # module or libnvrtc missing
        return None
    return nvrtc


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (cuda-bindings + libnvrtc) not available")
def test_compiles_with_nvrtc() -> None:
    nvrtc = _nvrtc()
    _, prog = nvrtc.nvrtcCreateProgram(source.kernel_source(cmd.KERNEL_FILE).encode(),
                                       cmd.KERNEL_FILE.encode(), 0, [], [])
    for expr in cmd.name_expressions():
        nvrtc.nvrtcAddNameExpression(prog, expr.encode())
    opts = [o.encode() for o in (*source.COMPILE_OPTIONS, f"-arch={ARCH}")]
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert res == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")
    for expr in cmd.name_expressions():
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS and lowered, expr
    nvrtc.nvrtcDestroyProgram(prog)


# --- host-C++ emulation ------------------------------------------------------------------------
_PRELUDE = """
#include <algorithm>
#include <cmath>
using std::min;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
struct simsplit_dim3 { unsigned x = 0, y = 0, z = 0; };
static simsplit_dim3 blockIdx, threadIdx, blockDim, gridDim;
template <typename T> static T __ldg(const T* p) { return *p; }
template <typename T> static T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
template <typename T> static T atomicMax(T* p, T v) {
    T old = *p; *p = std::max(old, v); return old; }
"""

_LAUNCH = """
template <typename F> static void launch(long long threads, F body) {
    const unsigned g = unsigned((threads + SIMSPLIT_MD_BLOCK - 1) / SIMSPLIT_MD_BLOCK);
    blockDim = {SIMSPLIT_MD_BLOCK, 1, 1};
    gridDim = {g, 1, 1};
    for (unsigned b = 0; b < g; ++b) for (unsigned t = 0; t < SIMSPLIT_MD_BLOCK; ++t) {
        blockIdx = {b, 0, 0};
        threadIdx = {t, 0, 0};
        body();
    }
}
"""

_KERNEL = re.compile(r"^(md_\w+)\(([^)]*)\)\s*\{", re.MULTILINE)


def _wrappers(src: str) -> str:
    """``extern "C" emu_<kernel>_<ctype>(threads, params...)`` for every instantiation."""
    params = {m.group(1): " ".join(m.group(2).split()) for m in _KERNEL.finditer(src)}
    out = []
    for expr in cmd.name_expressions():
        name, ctype = re.fullmatch(r"(\w+)<(\w+)>", expr).groups()
        plist = re.sub(r"\b[TI]\b", ctype, params[name])
        args = ", ".join(p.split()[-1].lstrip("*&") for p in plist.split(","))
        out.append(f'extern "C" void emu_{name}_{ctype.replace(" ", "_")}(long long threads, '
                   f"{plist}) {{ launch(threads, [&] {{ {expr}({args}); }}); }}")
    return "\n".join(out)


class EmulatedMDKernels(cmd.DeviceMDKernels):
    """The CuPy backend's launch sequence on NumPy arrays, each launch a host-C++ loop."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self.launches: dict[str, int] = {}
        super().__init__()

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def to_device(self, host):
        return np.array(host, copy=True, order="C")

    def to_host(self, arr):
        return np.array(arr, copy=True)

    def _zero(self, arr):
        arr.fill(0)

    def synchronize(self):
        pass

    def host_buffer(self, shape, dtype):
        return np.zeros(shape, dtype)

    def download_rows(self, src, m, out):
        out[:m] = src[:m]
        return out[:m]

    def upload_rows(self, host, dst, row0, staging=None):
        dst[row0:row0 + host.shape[0]] = host

    # memory the ranks' processes share stands in for CUDA IPC (launches run at once, in
    # order, so events have nothing to order)
    shares_memory = True

    def shared_buffer(self, shape, dtype):
        from multiprocessing import shared_memory

        nbytes = max(int(np.prod(shape)) * np.dtype(dtype).itemsize, 1)
        shm = shared_memory.SharedMemory(create=True, size=nbytes)
        if not _SHARED:
            atexit.register(_unlink_shared)
        _SHARED.append(shm)
        return np.ndarray(shape, dtype, buffer=shm.buf), shm.name.encode()

    def open_shared(self, handle, shape, dtype):
        from multiprocessing import resource_tracker, shared_memory

        shm = shared_memory.SharedMemory(name=handle.decode())
        resource_tracker.unregister(shm._name, "shared_memory")  # its maker unlinks it
        _OPENED.append(shm)
        return np.ndarray(shape, dtype, buffer=shm.buf)

    def close_shared(self, arr):
        pass  # mapped until the process ends

    def shared_event(self):
        return None, b""

    def open_event(self, handle):
        return None

    def record_event(self, event):
        pass

    def wait_event(self, event):
        pass

    def _launch(self, name, dtype, threads, *args):
        expr = cmd.kernel_name(name, dtype)
        fn = getattr(self._lib, "emu_" + re.sub(r"\W+", "_", expr).rstrip("_"))
        self.launches[expr] = self.launches.get(expr, 0) + 1
        fn(ctypes.c_longlong(threads), *(_c_arg(a) for a in args))


#: shared memory this process made (unlinked at exit) and opened (EmulatedMDKernels)
_SHARED: list[Any] = []
_OPENED: list[Any] = []


def _unlink_shared() -> None:
    for shm in _SHARED:
        shm.unlink()


def _c_arg(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        assert a.flags.c_contiguous
        return ctypes.c_void_p(a.ctypes.data)
    kinds = {np.int32: ctypes.c_int, np.float64: ctypes.c_double, np.uint64: ctypes.c_uint64}
    return kinds[type(a)](a)


@pytest.fixture(scope="module")
def emulated_lib(tmp_path_factory) -> ctypes.CDLL:
    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("md_emulation")
    src = source.kernel_source(cmd.KERNEL_FILE)
    (tmp / "emu.cpp").write_text(_PRELUDE + src + _LAUNCH + _wrappers(src))
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "emu.so"), str(tmp / "emu.cpp")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return ctypes.CDLL(str(tmp / "emu.so"))


@pytest.fixture
def emulated(emulated_lib, monkeypatch) -> list[EmulatedMDKernels]:
    """MDSolver(case, "emulated") runs on a fresh EmulatedMDKernels (listed here)."""
    made: list[EmulatedMDKernels] = []
    real = md_solver_setup.md_kernels

    def pick(name: str, context: Any = None, slab: int = 0) -> Any:
        if name != "emulated":
            return real(name, context, slab)
        if context is not None:  # a (fake) context places slabs on (fake) devices
            return context.backend_for(slab).md
        made.append(EmulatedMDKernels(emulated_lib))
        return made[-1]

    monkeypatch.setattr(md_solver_setup, "md_kernels", pick)
    return made


CELLS = (6, 6, 9)  # 1296 atoms, three slabs fit


def _run(backend: str, steps: int, subdomains: int = 1, **kw: Any) -> MDSolver:
    s = MDSolver(lj_case(cells=CELLS, subdomains=subdomains, **kw), backend)
    s.step(steps)
    return s


def _same(a: MDSolver, b: MDSolver) -> None:
    assert np.array_equal(a.positions(), b.positions())
    assert np.array_equal(a.velocities(), b.velocities())
    assert np.array_equal(a.images(), b.images())
    assert np.array_equal(a.forces(), b.forces())
    assert a.thermo() == b.thermo()


def test_emulated_forces_and_lists_match_cpu(emulated) -> None:
    """Step 0 of a jittered, dense configuration with the pruned 5-cell stencil."""
    kw = dict(potential={"style": "lj/cut", "epsilon": 1.0, "sigma": 1.0, "cutoff": 2.0})
    cpu, emu = (MDSolver(lj_case(cells=CELLS, subdomains=3, **kw), b) for b in ("cpu", "emulated"))
    assert np.all(emu.ncell >= 5)
    for name in ("forces", "per_atom_energy", "per_atom_virial"):
        assert np.array_equal(getattr(emu, name)(), getattr(cpu, name)()), name
    # three slabs on one device share one arena: every list, read as global ids, is the CPU's
    # (same atoms in the same canonical order), whatever rows the atoms sit in
    assert emu.arena is not None and len(emu.slabs) == 1
    se = emu.slabs[0]
    lists = {}
    for sc in cpu.slabs:
        for i in range(sc.n_own):
            lists[int(sc.ids[i])] = sc.ids[sc.nl[i, : sc.cnt[i]]]
    assert len(lists) == se.n_own == emu.n_atoms
    for i in range(se.n_own):
        assert np.array_equal(se.gid[se.nl[: se.cnt[i], i]], lists[int(se.gid[i])])
    assert emu.stats()["atoms_per_slab"] == [s.n_own for s in cpu.slabs]
    assert emu.stats()["ghosts_per_slab"] == [s.n_ghost for s in cpu.slabs]
    for sc in cpu.slabs:  # the device cell list of one slab's rows is the CPU's
        cells = emu.kernels.bin_atoms(emu.kernels.to_device(sc.x), sc.gid, sc.n_local, emu.box,
                                      emu.ncell)
        want = cpu.kernels.bin_atoms(sc.x, sc.gid, sc.n_local, cpu.box, cpu.ncell)
        assert np.array_equal(cells.cell_of[: sc.n_local], want[0])
        assert np.array_equal(cells.cell_start, want[1])
        # by global id within cells
        assert np.array_equal(cells.cell_atoms[: sc.n_local], want[2])


@pytest.mark.parametrize("subdomains", [1, 2, 3])
def test_emulated_nve_matches_cpu(emulated, subdomains) -> None:
    ref = _run("cpu", 300, subdomains=1)
    emu = _run("emulated", 300, subdomains=subdomains)
    _same(emu, ref)
    st = emu.stats()
    assert st["rebuilds"] > 5
    if subdomains > 1:  # one arena: ghost copies written by the drift, no gather launch
        assert st["migrations"] > 0 and st["ghosts"] > 0 and emu.arena is not None
        assert "md_gather_rows<double>" not in emulated[-1].launches
    else:  # one slab: rebuilds never leave the device, and put the rows in cell order
        assert st["migrations"] == 0
        assert emulated[-1].launches["md_permute<double>"] == st["rebuilds"]


def test_emulated_langevin_and_growth_match_cpu(emulated) -> None:
    """Langevin noise (host libm on both sides) and list-capacity growth on the device path."""
    kw = dict(ensemble="langevin", langevin={"temperature": 2.0, "damping": 0.2},
              neighbor={"skin": 0.3, "capacity": 20})
    ref = _run("cpu", 120, subdomains=1, **kw)
    emu = _run("emulated", 120, subdomains=2, **kw)
    assert emu.stats()["capacity_growths"] > 0
    _same(emu, ref)


def test_emulated_float32_matches_cpu(emulated) -> None:
    cases = []
    for backend in ("cpu", "emulated"):
        case = lj_case(cells=(4, 4, 4))
        case["run"]["precision"] = "float32"
        s = MDSolver(case, backend)
        s.step(100)
        cases.append(s)
    _same(*cases)


def test_emulated_restart_is_bitwise(emulated) -> None:
    full = _run("cpu", 200, subdomains=2)
    half = _run("emulated", 110, subdomains=3)
    fresh = MDSolver(lj_case(cells=CELLS), "emulated")
    fresh.load_state(half.state())
    fresh.step(90)
    assert np.array_equal(fresh.positions(), full.positions())
    assert np.array_equal(fresh.velocities(), full.velocities())


def test_emulated_row_order_and_kick_fusion_do_not_change_bits(emulated) -> None:
    """One slab reorders rows by cell at every rebuild and fuses each step's second half kick
    into the next launch; without the reorder and in short step() calls (more separate
    kicks) the bits are the same."""
    fused = MDSolver(lj_case(cells=(6, 6, 6)), "emulated")
    fused.step(200)
    plain = MDSolver(lj_case(cells=(6, 6, 6)), "emulated")
    plain.reorder = False
    for _ in range(40):
        plain.step(5)
    assert emulated[0].launches["md_permute<double>"] == fused.stats()["rebuilds"] > 5
    assert emulated[1].launches["md_final_integrate<double>"] == 40
    _same(fused, plain)


@pytest.mark.parametrize("ensemble", ["nve", "langevin"])
def test_emulated_batches_match_step_by_step(emulated, ensemble) -> None:
    """One slab on a device queues steps in batches and reads the rebuild flag once per
    batch; launches after the step that asked for a rebuild are skipped. Same bits as
    checking after every step (the same kernels with batches off) and as the CPU."""
    kw = dict(ensemble=ensemble, langevin={"temperature": 1.5, "damping": 0.5})
    batched = _run("emulated", 240, **kw)
    stepwise = MDSolver(lj_case(cells=CELLS, **kw), "emulated")
    stepwise.kernels.batches = False
    stepwise.step(240)
    st = batched.stats()
    assert st["rebuilds"] > 10 and st["rebuilds"] == stepwise.stats()["rebuilds"]
    assert st["batches"] < 240 / 2 and stepwise.stats()["batches"] == 0
    # some batches were cut short: their later launches returned at once
    advances = emulated[0].launches["md_advance<double>"]
    assert advances > 240
    assert emulated[1].launches["md_advance<double>"] == 240
    _same(batched, stepwise)
    _same(batched, _run("cpu", 240, **kw))


def test_capacity_limit_is_refused(emulated) -> None:
    with pytest.raises(ValueError, match="at most"):
        MDSolver(lj_case(cells=(4, 4, 4), neighbor={"skin": 0.3,
                                                     "capacity": cmd.MAX_NEIGHBORS + 1}),
                 "emulated")


# --- the Numba CUDA kernels compile for sm_90 too (NVVM, no GPU) ---------------------------------
def test_numba_kernels_compile_to_ptx_without_fma(monkeypatch) -> None:
    """Each Numba kernel, typed as :class:`DeviceMDKernels` launches it, lowers to PTX for
    sm_90 without fused multiply-adds outside the math library (Langevin's log/sin/cos)."""
    try:
        import numba.cuda.dispatcher as dispatcher
        from numba import cuda
        from numba import types as nt

        from simsplit.backends.numba_cuda import md as nmd
    except ImportError as exc:
        pytest.skip(f"numba-cuda: {exc}")

    class _Sm90:  # device functions ask the current device for its architecture
        compute_capability = (9, 0)

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: _Sm90())
    for t in (nt.float64, nt.float32):
        sigs = numba_signatures(t)
        assert set(sigs) == set(cmd.FLOAT_KERNELS + cmd.INDEX_KERNELS + cmd.ARENA_FLOAT_KERNELS
                                + cmd.ARENA_INDEX_KERNELS + cmd.RANK_FLOAT_KERNELS
                                + cmd.RANK_INDEX_KERNELS)
        for name, sig in sigs.items():
            ptx, _ = cuda.compile_ptx(nmd._KERNELS[name].py_func, sig, cc=(9, 0))
            assert ".entry" in ptx, name
            if name not in ("md_langevin", "md_langevin_typed"):
                assert not re.search(r"\bfma\.rn\.f(32|64)", ptx), (t, name)


@pytest.mark.parametrize("n", [1, 100, 32_769, 1_100_000])
def test_emulated_scan_levels(emulated_lib, n) -> None:
    """The level-by-level exclusive scan (1, 2 and 3 levels) against NumPy's cumsum."""
    k = EmulatedMDKernels(emulated_lib)
    rng = np.random.default_rng(n)
    counts = rng.integers(0, 9, size=n).astype(np.int32)
    want = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    start, fill = np.zeros(n + 1, np.int32), np.zeros(n, np.int32)
    sums = np.zeros(cmd.scan_scratch(n), np.int32)
    k._exclusive_scan(counts, n, sums, start, fill)
    assert np.array_equal(start, want) and np.array_equal(fill, want[:-1])
    assert k.launches.get("md_scan_inplace<int>", 0) == len(cmd.scan_levels(n)) - 1


def _adversarial(rng: np.random.Generator, n: int) -> np.ndarray:
    """Doubles fsum finds hard: the whole exponent range, subnormals, signed zeros, large
    cancellations and exact halfway cases."""
    mant = rng.random(n) + 0.5
    out = np.ldexp(mant, rng.integers(-1074, 1000, size=n)) * rng.choice([-1.0, 1.0], size=n)
    out[: n // 8] = np.ldexp(rng.integers(1, 2 ** 20, size=n // 8).astype(float), -1074)
    out[n // 8: n // 4] = rng.choice([0.0, -0.0], size=n // 4 - n // 8)
    m, a = n // 8, n // 4
    big = np.ldexp(1.0, 1000) * rng.choice([-1.0, 1.0], size=m)
    out[a: a + m] = big
    out[a + m: a + 2 * m] = -big  # cancels the block above exactly
    out[n // 2] = 1.0
    out[n // 2 + 1] = np.ldexp(1.0, -53)  # 1 + 2^-53: a halfway case, rounds to even
    return rng.permutation(out)


@pytest.mark.parametrize("seed", range(6))
def test_emulated_exact_sums_equal_fsum(emulated_lib, seed) -> None:
    """The device's exact thermo sums, rounded once, are math.fsum's results to the bit, and
    so is their total over any split of the values."""
    import math

    from simsplit.numerics import exact

    rng = np.random.default_rng(seed)
    n = 2000 + seed * 37
    k = EmulatedMDKernels(emulated_lib)
    pe, vir = _adversarial(rng, n), _adversarial(rng, n) * 1e-300
    v = rng.normal(size=(n, 3)) * 10.0 ** rng.integers(-150, 150, size=(n, 1))
    got = k.thermo_sums(v, pe, vir, n, 1.7)
    mv2 = cpu_md.kinetic_per_atom(v, n, 1.7)
    for total, values in zip(got, (mv2, pe, vir), strict=True):
        assert exact.to_float(total) == math.fsum(values)
    cut = n // 3  # two kernel sets holding parts of the atoms: the totals add
    parts = [k.thermo_sums(v[a:b], pe[a:b], vir[a:b], b - a, 1.7)
             for a, b in ((0, cut), (cut, n))]
    assert [p + q for p, q in zip(*parts, strict=True)] == got
    pe[5] = np.inf
    assert k.thermo_sums(v, pe, vir, n, 1.7) is None  # fsum's path reports it
    assert exact.to_float(1 << 2200) is None


@pytest.mark.parametrize("moved", [False, True])
def test_emulated_interior_forces_skip_on_the_steps_own_rebuild(emulated_lib, moved) -> None:
    """A rank slab's interior forces (``unless_moved``) run unless this step's advance asked
    for a rebuild: the last ghost pack (trailer 2) sends the flag, clears it and keeps it for
    them. The forces of a run that skips them wrongly differ (the MPI bitwise tests)."""
    k = EmulatedMDKernels(emulated_lib)
    n, box = 4, np.array([10.0, 10.0, 10.0])
    x = np.array([[1.0, 1.0, 1.0], [2.1, 1.0, 1.0], [5.0, 5.0, 5.0], [8.0, 8.0, 8.0]])
    v = np.full((n, 3), 0.5 if moved else 0.0)
    x0 = x.copy()
    img = np.zeros((n, 3), np.int64)
    k.advance(x, v, np.zeros((n, 3)), img, n, False, 0.0, 0.1, box, x0, 1e-6, 1e6)
    rows = np.array([0, 1], np.int64)
    buf = np.zeros((3, 3))
    k.rank_pack(x, rows, 2, buf)
    assert buf[2].view(np.int32)[0] == int(moved)  # the neighbour hears of it
    assert k._flags.tolist() == [0, 0, int(moved)]
    nl, cnt = np.zeros((1, n), np.int32), np.zeros(n, np.int32)  # no pairs: forces are 0
    f, pe, vir = np.full((n, 3), 7.0), np.full(n, 7.0), np.full(n, 7.0)
    k.lj_forces(x, n, nl, cnt, box, 6.25, 4.0, 24.0, 1.0, 0.0, f, pe, vir, row0=1,
                unless_moved=True)
    assert (f[1:] == 7.0).all() == moved and (f[0] == 7.0).all()
    k.lj_forces(x, n, nl, cnt, box, 6.25, 4.0, 24.0, 1.0, 0.0, f, pe, vir, row0=1)
    assert (f[1:] == 0.0).all() and (pe[1:] == 0.0).all()  # without it they always run
