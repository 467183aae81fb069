"""CUDA C sources for NVRTC: the generated lattice header, kernel lookup and include inlining.

Lattice tables and flag codes are never typed into the ``.cu`` files: :func:`generated_header`
writes them from :mod:`simsplit.numerics.lattice` and :mod:`simsplit.numerics.flags`, and
:func:`kernel_source` inlines it (and every other quoted include) into one string. One string
means CuPy's on-disk cache key covers every header, so editing a ``.cuh`` recompiles.

This module imports neither CuPy nor a GPU library: the compile tests use it with ``nvcc``.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from simsplit.numerics import flags
from simsplit.numerics.exact import EXACT_LIMBS
from simsplit.numerics.lattice import (
    D2Q9_C,
    D2Q9_OPP,
    D2Q9_SPECULAR,
    D2Q9_W,
    D3Q19,
    D3Q19_SPECULAR,
    DOWN,
    UP,
)
from simsplit.numerics.lbm_params import OUTLET_KINDS, OUTLET_PRESSURE
from simsplit.numerics.neq_storage import (
    NEQ16_DTYPE,
    NEQ_BITS,
    RHO_SCALE,
    STRESS_SCALE,
    halo_slots,
    stress_components,
    stress_weight_table,
)
from simsplit.numerics.storage import (
    E4M11_BIAS,
    E4M11_DTYPE,
    E4M11_MANT_BITS,
    E4M11_SCALE,
    FP16_SCALE,
    STORAGE_CHOICES,
    storage_dtype,
)

#: name under which kernels include the generated header
GENERATED_HEADER = "simsplit_generated.cuh"
#: threads per block along i (the contiguous axis); every kernel's ``__launch_bounds__``.
#: 256 measured fastest for D2Q9 on an H200 (benchmarks/logs/tune_d2q9_h200_2026-12-02.log)
BLOCK_X = 256
#: (threads per block, resident blocks per SM) of d3q19_stream_collide_x2, the two-lattice
#: pull kernel with two adjacent x-cells per thread (populations moved as 2-element vectors;
#: needs rows aligned as simsplit.backends.layout pads them), which float32 arithmetic on fp16
#: storage takes (the others: one cell per thread). 64 x 16 ran 42,933 MLUPS with
#: fp16 storage at 512^3 on an H200 against 41,451 for the one-cell kernel
#: (benchmarks/logs/tune_d3q19_fp16_h200_2026-12-05.log); float32 storage ran 14-19 % slower
#: with two cells (tune_d3q19_pairs_h200_2026-12-03.log).
#: None: every storage one cell per thread
D3Q19_X2_16BIT: tuple[int, int] | None = (64, 16)
#: whether d3q19_stream_collide_x2 takes its vector and its scalar path as separate code
#: (kernels/d3q19.cu SIMSPLIT_D3Q19_X2_SPLIT_PATHS; the same bits): 15.7 % fewer instructions
#: executed, 2.2 % slower on an H100 where DRAM bounds fp16 pairs; off until an H200, where they
#: are bound by instructions, times it (scripts/ab_fp16_x2.py)
D3Q19_X2_SPLIT_PATHS = False
#: threads per block of the D3Q19 two-lattice kernel with fp16 storage, launched from the same
#: build as the others (__launch_bounds__ caps blocks, it does not fix them; 48 registers, so
#: the same resident warps): 64 and 128 ran 1.5-4 % faster than 256 on an H200, where float32
#: storage ran 0.5-1 % slower (benchmarks/logs/tune_d3q19_h200_2026-12-03_offsets.log, _l2.log)
D3Q19_FP16_BLOCK_X = 128
#: threads per block of the D3Q19 bodies kernel (d3q19_stream_collide_bodies), launched from
#: the same build (__launch_bounds__ caps blocks at BLOCK_X). A block of 256 spans a whole row
#: of the 3D-1Z grid (250 cells): its inlet and outlet warps, whose open rules take several
#: memory round trips more than a plain warp's, held the other warps' registers until they
#: were done, every row (58 % of the box kernel on an H200, BENCHMARKS.md); blocks of two
#: warps let a plain warp's successor start as it finishes, and with 102 registers (double)
#: leave 18 warps resident per SM, against 16 at 256. Not measured yet:
#: scripts/bench_bodies.py times 32, 64, 128 and 256.
D3Q19_BODIES_BLOCK_X = 64
#: threads per block of a launch on a column span narrower than the slab (records' box kernel,
#: D3Q19): at BLOCK_X a 32-column span keeps one warp of eight busy and the block's slot on the
#: SM held (3D-1Z at D = 20 has spans of 32, 64 and 352 columns)
SPAN_BLOCK_X = 64


def span_block(width: int, block_x: int) -> int:
    """Threads per block of a launch on ``width`` columns: ``block_x``, or whole warps
    enough for a span narrower than it (at least 32)."""
    return min(block_x, max(32, -(-width // 32) * 32))


#: the open-face rules an instantiation of the D3Q19 bodies kernel carries (its OPEN template
#: argument, the generated header's BODIES_* codes, in this order): none (x faces walls or
#: periodic), the inlet and the pressure outlet, every outlet kind, every outlet kind and
#: free-slip walls, every outlet kind and quadratic bounce-back, every outlet kind with both.
#: The launcher takes the smallest that holds a slab's flags and its outlet's kind
#: (d3q19_bodies_open); free-slip walls and quadratic links have variants of their own so that
#: the others keep their registers (in float either rule needs more than the 64 of four
#: resident blocks), and the two together one more (appended: the others' codes stay)
D3Q19_BODIES_OPEN = ("walls", "pressure_outlet", "any_outlet", "slip", "quadratic",
                     "slip_quadratic")
#: the D3Q19 two-step (temporally blocked) kernel, d3q19_stream_collide_two_steps: cells of a
#: block's x-y column (TX, TY), planes of step t + 1 populations its shared-memory ring holds
#: (3, or 4 for one barrier per plane), resident blocks per SM asked of the register allocator
#: and planes per block's run along z. They become the generated header's
#: SIMSPLIT_D3Q19_FUSED_* (a -D option overrides them) and the launcher's grid and shared
#: memory. 32 x 8, a ring of 3, runs of 32: 30,608 MLUPS at 512^3 float32 on an H200, the
#: fastest of 23 shapes (docs/tune_d3q19_two_steps_h200_2026-12-03*.log; a ring of 4, 101 KB
#: of shared memory per block, left less L1 and ran 23 % slower; runs of 512 planes, 16 %)
D3Q19_FUSED_TILE = (32, 8)
D3Q19_FUSED_RING = 3
D3Q19_FUSED_MIN_BLOCKS = 2
D3Q19_FUSED_RUN_PLANES = 32
#: the same for 16-bit population storage (fp16, e4m11): (TX, TY, ring planes, resident blocks per
#: SM). 16 x 16 and three blocks, then with a ring of 3: 38,900 MLUPS at 512^3 with fp16 storage on
#: an H200 against 33,998 for float's 32 x 8 shape (56 against 79 registers), runs of 32, checked
#: bit for bit (scripts/tune_d3q19_fp16.py, benchmarks/logs/tune_d3q19_fp16_h200_2026-12-05.log; the
#: tuner's figure, not yet a solver measurement; e4m11 not timed). Still below one-step sweeps there
#: (two cells per thread: 42,933); on an H100 above them (36,510 against 34,029; docs/d3q19.md), so
#: fp16 is in D3Q19_FUSED_PAIRS_BY_GPU for the H100 only. A ring of 4 planes since 2026-12-07 (one
#: barrier a plane, 49 KB a block, three still fit): 37,138 and 37,202 against 36,418-36,503 for 3,
#: raw launches on H100s in two calls, each checked bit for bit on the GPU against two one-step
#: launches (benchmarks/logs/staged_fp16_two_steps_h100_2026-12-07.log); the solver 36,921 / 36,879
#: against 34,102 / 34,098 for one step, GPU tests passed
#: (benchmarks/logs/two_step_pairs_fp16_h100_2026-12-07.log); not timed on an H200, where fp16 steps
#: singly
D3Q19_FUSED16 = (16, 16, 4, 3)
#: whether the two-step kernel's threads load their next plane before colliding the current
#: one (kernels/d3q19.cu prefetch_planes; the same bits): 0 never, 1 for every storage, 2 for
#: 16-bit storage only. 0 until measured (scripts/tune_d3q19_fp16.py)
D3Q19_FUSED_PREFETCH = 0
#: (arithmetic, storage) pairs the solver takes two steps per sweep for on every GPU: where it
#: measured faster than one-step sweeps. float32: 29,722 against 24,531 MLUPS at 512^3 on an
#: H200; fp16 storage ran slower there (38,900 at its own shape against 42,933: its one-step
#: kernel moves half the bytes and is not bandwidth-bound), double was not measured
#: (docs/d3q19.md)
D3Q19_FUSED_PAIRS = ((np.dtype(np.float32), np.dtype(np.float32)),)
#: more pairs on the GPUs whose name holds the key, where they measured faster there: fp16 on
#: an H100 (62 % of the H200's bandwidth), 36,510 against 34,029 MLUPS at 512^3
#: (benchmarks/logs/md_fp16_h100_2026-12-05_1620.log)
D3Q19_FUSED_PAIRS_BY_GPU = {"H100": ((np.dtype(np.float32), np.dtype(np.float16)),)}


def d3q19_fused_pairs(gpu_name: str) -> tuple[tuple[np.dtype, np.dtype], ...]:
    """The (arithmetic, storage) pairs the solver takes two steps per sweep for on the GPU
    named ``gpu_name``: :data:`D3Q19_FUSED_PAIRS` and those of :data:`D3Q19_FUSED_PAIRS_BY_GPU`
    whose key the name holds."""
    more = tuple(pair for key, pairs in D3Q19_FUSED_PAIRS_BY_GPU.items() if key in gpu_name
                 for pair in pairs)
    return D3Q19_FUSED_PAIRS + more


def d3q19_fused_built(dtype: np.dtype | type, storage: np.dtype | type) -> bool:
    """Whether a pair's module holds the two-step kernel: the solver takes it on some GPU."""
    pair = (np.dtype(dtype), np.dtype(storage))
    return pair in D3Q19_FUSED_PAIRS or any(
        pair in pairs for pairs in D3Q19_FUSED_PAIRS_BY_GPU.values())


#: CUDA's limit on gridDim.y; kernels loop over rows beyond it
MAX_GRID_Y = 65535
#: fmad off: contracted multiply-adds would round differently from the CPU kernels
COMPILE_OPTIONS = ("--std=c++17", "--fmad=false")
CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
#: population storage types of the kernels (16-bit formats as raw bits, see lbm_common.cuh)
STORAGE_CTYPES = {**CTYPES, np.dtype(np.float16): "lbm::half16", E4M11_DTYPE: "lbm::e4m11"}
#: the C type of neq16 record slots
NEQ_CTYPE = "unsigned short"
#: ... and the kernels' storage type for neq16s's stress-kept records (the same slots)
NEQ_STRESS_CTYPE = "neq::srec"
#: (arithmetic, storage) pairs the D2Q9 and D3Q19 kernels are instantiated for: run.storage's
#: choices of populations (neq16's cell records: the *_neq_* names below)
STORAGE_PAIRS = tuple((np.dtype(a), storage_dtype(s))
                      for a, ss in STORAGE_CHOICES.items() for s in ss
                      if storage_dtype(s) != NEQ16_DTYPE)
_AXES = ("cx", "cy", "cz")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*$', re.MULTILINE)


def _select(var: str, values: Sequence[str]) -> str:
    """A chain of conditionals: folds to a constant for constant ``var``, to selects otherwise
    (a table indexed at run time would be placed in local memory)."""
    expr = values[-1]
    for k in range(len(values) - 2, -1, -1):
        expr = f"{var} == {k} ? {values[k]} : ({expr})"
    return f"({expr})"


def _specular_function(name: str, table: np.ndarray) -> str:
    """``name(q, mask)`` of a specular table: q folds at compile time in an unrolled loop,
    leaving a select over the run-time mask."""
    by_q = [_select("mask", [str(int(v)) for v in row]) for row in table]
    return (f"__host__ __device__ constexpr int {name}(int q, int mask) "
            f"{{ return {_select('q', by_q)}; }}")


def lattice_struct(name: str, c: np.ndarray, w: np.ndarray, opp: np.ndarray,
                   up: Sequence[int], down: Sequence[int]) -> str:
    """C++ struct ``name`` with the lattice's constants as ``constexpr`` member functions.

    ``up`` and ``down`` are the directions crossing a face along the split axis (the last
    axis of ``c``); ``halo(set, k)`` returns the k-th of set 0 (up) or 1 (down).
    """
    q, dim = c.shape
    if len(up) != len(down):
        raise ValueError("up and down halo sets must have equal size")
    fn = "__host__ __device__ static constexpr"
    lines = [
        f"struct {name} {{",
        f"    static constexpr int Q = {q};",
        f"    static constexpr int DIM = {dim};",
        f"    static constexpr int N_CROSS = {len(up)};",
    ]
    for d in range(dim):
        lines.append(f"    {fn} int {_AXES[d]}(int q) "
                     f"{{ return {_select('q', [str(int(v)) for v in c[:, d]])}; }}")
    lines.append(f"    {fn} int opp(int q) "
                 f"{{ return {_select('q', [str(int(v)) for v in opp])}; }}")
    # hexadecimal literals carry the weights bit for bit
    lines.append(f"    {fn} double w(int q) "
                 f"{{ return {_select('q', [float(v).hex() for v in w])}; }}")
    sets = [_select("k", [str(int(v)) for v in s]) for s in (up, down)]
    lines.append(f"    {fn} int halo(int set, int k) {{ return {_select('set', sets)}; }}")
    # the stress-kept neq16 records (neq_storage.stress_weights): component j = (sa, sb) and
    # its float32 weight in population q's first-order non-equilibrium
    pairs = stress_components(dim)
    table = stress_weight_table(c, w)
    lines.append(f"    static constexpr int SN = {len(pairs)};")
    for nm, k in (("sa", 0), ("sb", 1)):
        lines.append(f"    {fn} int {nm}(int j) "
                     f"{{ return {_select('j', [str(pr[k]) for pr in pairs])}; }}")
    by_j = [_select("q", [float(v).hex() + "f" for v in table[:, j]])
            for j in range(len(pairs))]
    lines.append(f"    {fn} float sw(int q, int j) {{ return {_select('j', by_j)}; }}")
    lines.append("};")
    return "\n".join(lines)


@functools.cache
def generated_header() -> str:
    """The header every kernel file includes as ``simsplit_generated.cuh``."""
    return "\n".join([
        "// Generated by simsplit.backends.cuda_c.source from simsplit/numerics/lattice.py and",
        "// simsplit/numerics/flags.py (outlet kinds: lbm_params.py): edit those, not this.",
        "#ifndef SIMSPLIT_GENERATED_CUH",
        "#define SIMSPLIT_GENERATED_CUH",
        f"#define SIMSPLIT_BLOCK_X {BLOCK_X}",
        f"#define SIMSPLIT_FP16_SCALE {float(FP16_SCALE).hex()}  // fp16 storage: (f - w) * scale",
        f"#define SIMSPLIT_EXACT_LIMBS {EXACT_LIMBS}  // limbs of one exact sum (exact_sum.cuh)",
        f"#define SIMSPLIT_E4M11_SCALE {float(E4M11_SCALE).hex()}  // e4m11 storage: the same",
        f"#define SIMSPLIT_E4M11_MANT_BITS {E4M11_MANT_BITS}",
        f"#define SIMSPLIT_E4M11_BIAS {E4M11_BIAS}",
        "#define SIMSPLIT_NEIGHBOUR_FLAGS 1  // measured faster than the own-flag test alone",
        "#ifndef SIMSPLIT_D3Q19_X2_BLOCK_X  // d3q19_stream_collide_x2's launch bounds",
        f"#define SIMSPLIT_D3Q19_X2_BLOCK_X {(D3Q19_X2_16BIT or (64, 16))[0]}",
        "#endif",
        "#ifndef SIMSPLIT_D3Q19_X2_MIN_BLOCKS",
        f"#define SIMSPLIT_D3Q19_X2_MIN_BLOCKS {(D3Q19_X2_16BIT or (64, 16))[1]}",
        "#endif",
        "#ifndef SIMSPLIT_D3Q19_X2_SPLIT_PATHS",
        f"#define SIMSPLIT_D3Q19_X2_SPLIT_PATHS {int(D3Q19_X2_SPLIT_PATHS)}",
        "#endif",
        "#ifndef SIMSPLIT_D3Q19_FUSED_TX",
        f"#define SIMSPLIT_D3Q19_FUSED_TX {D3Q19_FUSED_TILE[0]}",
        "#endif",
        "#ifndef SIMSPLIT_D3Q19_FUSED_TY",
        f"#define SIMSPLIT_D3Q19_FUSED_TY {D3Q19_FUSED_TILE[1]}",
        "#endif",
        "#ifndef SIMSPLIT_D3Q19_FUSED_RING",
        f"#define SIMSPLIT_D3Q19_FUSED_RING {D3Q19_FUSED_RING}",
        "#endif",
        "#ifndef SIMSPLIT_D3Q19_FUSED_MIN_BLOCKS",
        f"#define SIMSPLIT_D3Q19_FUSED_MIN_BLOCKS {D3Q19_FUSED_MIN_BLOCKS}",
        "#endif",
        *(line for key, value in zip(("TX", "TY", "RING", "MIN_BLOCKS"), D3Q19_FUSED16,
                                     strict=True)
          for line in (f"#ifndef SIMSPLIT_D3Q19_FUSED16_{key}",
                       f"#define SIMSPLIT_D3Q19_FUSED16_{key} {value}", "#endif")),
        "#ifndef SIMSPLIT_D3Q19_FUSED_PREFETCH",
        f"#define SIMSPLIT_D3Q19_FUSED_PREFETCH {D3Q19_FUSED_PREFETCH}",
        "#endif",
        f"constexpr unsigned char FLAG_FLUID = {flags.FLUID};",
        f"constexpr unsigned char FLAG_WALL = {flags.WALL};",
        f"constexpr unsigned char FLAG_LID = {flags.LID};",
        f"constexpr unsigned char FLAG_SOLID = {flags.SOLID};",
        f"constexpr unsigned char FLAG_NEAR_WALL = {flags.NEAR_WALL};",
        f"constexpr unsigned char FLAG_INLET = {flags.INLET};",
        f"constexpr unsigned char FLAG_OUTLET = {flags.OUTLET};",
        f"constexpr unsigned char FLAG_BOUNDARY = {flags.BOUNDARY};",
        f"constexpr unsigned char FLAG_CURVED = {flags.CURVED};",
        f"constexpr unsigned char FLAG_SLIP = {flags.SLIP};",
        *(f"constexpr int OUTLET_{kind.upper()} = {code};"
          for code, kind in enumerate(OUTLET_KINDS)),
        *(f"constexpr int BODIES_{kind.upper()} = {code};"
          for code, kind in enumerate(D3Q19_BODIES_OPEN)),
        lattice_struct("D2Q9", D2Q9_C, D2Q9_W, D2Q9_OPP, UP, DOWN),
        "// direction q reflected across free-slip walls normal to the axes of bit mask `mask`",
        "// (bit 0: x; lattice.specular_table)",
        _specular_function("d2q9_specular", D2Q9_SPECULAR),
        lattice_struct("D3Q19", D3Q19.c, D3Q19.w, D3Q19.opp, D3Q19.up, D3Q19.down),
        _specular_function("d3q19_specular", D3Q19_SPECULAR),
        "// run.storage neq16 (neq_storage.py): a halo moves the crossing populations'",
        "// significands and the whole record's moments and power of two",
        f"#define SIMSPLIT_NEQ_BITS {NEQ_BITS}",
        f"#define SIMSPLIT_NEQ_RHO_SCALE {float(RHO_SCALE).hex()}",
        f"#define SIMSPLIT_NEQ_STRESS_SCALE {float(STRESS_SCALE).hex()}",
        f"#define SIMSPLIT_NEQ_HALVES_SPLIT {NEQ_HALVES_SPLIT}",
        lattice_struct("D3Q19Records", D3Q19.c, D3Q19.w, D3Q19.opp,
                       *(halo_slots(D3Q19.q, s) for s in (D3Q19.up, D3Q19.down))),
        lattice_struct("D2Q9Records", D2Q9_C, D2Q9_W, D2Q9_OPP,
                       *(halo_slots(len(D2Q9_W), s) for s in (UP, DOWN))),
        "// ... and of the stress-kept records (neq16s): the stress slots with the moments",
        lattice_struct("D3Q19StressRecords", D3Q19.c, D3Q19.w, D3Q19.opp,
                       *(halo_slots(D3Q19.q, s, True) for s in (D3Q19.up, D3Q19.down))),
        lattice_struct("D2Q9StressRecords", D2Q9_C, D2Q9_W, D2Q9_OPP,
                       *(halo_slots(len(D2Q9_W), s, True) for s in (UP, DOWN))),
        "#endif",
        "",
    ])


def kernel_dir() -> Path:
    """Folder of the ``.cu``/``.cuh`` files: the installed package's, else the checkout's."""
    tried = []
    for package, sub in (("simsplit", "kernels"), ("simsplit.kernels", ".")):
        try:
            tried.append(Path(str(importlib.resources.files(package).joinpath(sub))))
        except Exception:  # not installed that way (missing module, namespace oddities)
            continue
        if (tried[-1] / "lbm_common.cuh").is_file():
            return tried[-1]
    checkout = Path(__file__).resolve().parents[3] / "kernels"
    if (checkout / "lbm_common.cuh").is_file():
        return checkout
    raise FileNotFoundError("CUDA kernel sources not found; looked in "
                            + ", ".join(str(p) for p in [*tried, checkout]))


def kernel_files() -> list[str]:
    """Names of the kernel translation units (``*.cu``) shipped with simsplit."""
    return sorted(p.name for p in kernel_dir().glob("*.cu"))


def expand_includes(name: str, headers: dict[str, str] | None = None) -> str:
    """Source of ``name`` with each quoted include inlined once (``#line`` keeps positions).

    Includes resolve to ``headers`` (name -> text), the generated header, then kernel files.
    """
    root = kernel_dir()
    virtual = {GENERATED_HEADER: generated_header(), **(headers or {})}
    seen: set[str] = set()

    def text_of(fname: str) -> str:
        return virtual[fname] if fname in virtual else (root / fname).read_text()

    def expand(fname: str) -> str:
        seen.add(fname)
        src = text_of(fname)
        out, pos = [], 0
        for m in _INCLUDE.finditer(src):
            inc = m.group(1)
            out.append(src[pos:m.start()])
            if inc not in seen:
                out.append(f'#line 1 "{inc}"\n{expand(inc)}\n')
            line = src.count("\n", 0, m.end()) + 2
            out.append(f'#line {line} "{fname}"')
            pos = m.end()
        out.append(src[pos:])
        return "".join(out)

    return expand(name)


@functools.cache
def kernel_source(name: str) -> str:
    """Complete source of kernel file ``name``, ready for NVRTC."""
    return expand_includes(name)


#: the kernels' element offsets (key: wide): 32-bit where an array of populations or records
#: holds at most FLAT_LIMIT elements (an address is then one multiply-add), else 64-bit
OFFSET_TYPES = {False: "lbm::offset_t", True: "lbm::index_t"}
FLAT_LIMIT = 2**32


#: the D3Q19 records box kernel's index types (kernels/neq_records.cuh): 32-bit offsets from
#: two bases, the slots below NEQ_HALVES_SPLIT and the others ("halves"), or 64-bit offsets
#: ("wide"). Two halves even where the whole array fits 32-bit offsets: on neq16's records the
#: kernel then takes 64 registers against 78 and ran 6-11 % faster at 256^3 to 512^3 on an H100
#: (neq16s's: 80 either way, the same speed within 1.4 %; BENCHMARKS.md)
D3Q19_NEQ_INDEX = {"halves": "neq::halves", "wide": "lbm::index_t"}
NEQ_HALVES_SPLIT = 9


def d3q19_records_index(slots: int, plane: int) -> str:
    """The D3Q19 records box kernel's index type (a key of :data:`D3Q19_NEQ_INDEX`) for an
    array of ``slots`` slot planes ``plane`` elements apart: two halves of 32-bit offsets where
    each half fits them, else 64-bit offsets."""
    if max(NEQ_HALVES_SPLIT, slots - NEQ_HALVES_SPLIT) * plane <= FLAT_LIMIT:
        return "halves"
    return "wide"


def needs_wide_offsets(elements: int) -> bool:
    """Whether an array of populations or records of ``elements`` elements (all planes,
    padding included) needs the kernels with 64-bit element offsets."""
    return elements > FLAT_LIMIT


def d3q19_takes_x2(dtype: np.dtype | type, storage: np.dtype | type) -> bool:
    """Whether arithmetic ``dtype`` on populations stored as ``storage`` takes the two-cell
    kernel (``kernel_names.d3q19_x2_name``; on rows aligned for it) instead of one cell per
    thread: float32 arithmetic on fp16 storage (:data:`D3Q19_X2_16BIT`; the pair measured faster;
    e4m11's longer decode not yet measured with it)."""
    return (D3Q19_X2_16BIT is not None and np.dtype(dtype) == np.float32
            and np.dtype(storage) == np.float16)


def d3q19_bodies_open(open_faces: int, outlet_kind: int, quadratic: bool = False) -> str:
    """The bodies kernel variant (:data:`D3Q19_BODIES_OPEN`) for a slab whose flags hold
    the open kinds ``open_faces`` (``flags.INLET | OUTLET | SLIP`` bits; True: inlets or
    outlets) and an outlet of kind ``outlet_kind`` (``lbm_params.OUTLET_*``), with quadratic
    links or not."""
    if quadratic:
        return "slip_quadratic" if open_faces & flags.SLIP else "quadratic"
    if open_faces & flags.SLIP:
        return "slip"
    if not open_faces:
        return "walls"
    return "pressure_outlet" if outlet_kind == OUTLET_PRESSURE else "any_outlet"


def d3q19_two_steps_launch(nx: int, ny: int, planes: int,
                           itemsize: int) -> tuple[tuple[int, int, int], int, int]:
    """(grid, threads per block, dynamic shared bytes) of the two-step kernel for ``planes``
    planes of an ``nx`` x ``ny`` grid with populations of ``itemsize`` bytes."""
    tx, ty, ring = (*D3Q19_FUSED_TILE, D3Q19_FUSED_RING) if itemsize != 2 else D3Q19_FUSED16[:3]
    threads = (tx + 2) * (ty + 2)
    grid = (-(-nx // tx), -(-ny // ty), -(-planes // D3Q19_FUSED_RUN_PLANES))
    return grid, threads, ring * D3Q19.q * threads * itemsize


def variant_source(name: str, block_x: int) -> str:
    """Source of kernel file ``name`` compiled for ``block_x`` threads per block along i."""
    default = f"#define SIMSPLIT_BLOCK_X {BLOCK_X}"
    header = generated_header()
    if default not in header:
        raise RuntimeError("generated header lacks the SIMSPLIT_BLOCK_X definition")
    header = header.replace(default, f"#define SIMSPLIT_BLOCK_X {int(block_x)}")
    return expand_includes(name, {GENERATED_HEADER: header})
