"""The CUDA C D3Q19 kernel set compiles one NVRTC module per (arithmetic, storage) pair, when a
block prepares its storage or at a pair's first launch (all 264 instantiations at once took
NVRTC minutes). Checked without a GPU: a stand-in ``cupy`` records what is compiled and
launched (the kernels themselves are tested on the GPU and through the host emulation)."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import numpy as np
import pytest

from simsplit.numerics.storage import population_storage


class _Kernel:
    last_args: Any = None  #: the arguments of the latest launch of any kernel
    last_launch: Any = None  #: its (grid, block, shared bytes)

    def __init__(self, name: str, launches: list[str]) -> None:
        self.name, self.num_regs, self._launches = name, 64, launches
        self.max_dynamic_shared_size_bytes = 0

    def __call__(self, grid: Any, block: Any, args: Any, shared_mem: int = 0) -> None:
        self._launches.append(self.name)
        _Kernel.last_args = args
        _Kernel.last_launch = (grid, block, shared_mem)


class _Module:
    def __init__(self, code: str, options: Any, name_expressions: list[str],
                 compiled: list[list[str]], launches: list[str]) -> None:
        compiled.append(list(name_expressions))
        self._names, self._launches = set(name_expressions), launches

    def get_function(self, name: str) -> _Kernel:
        assert name in self._names, name
        return _Kernel(name, self._launches)


class _Device:
    def __init__(self, device: int = 0) -> None:
        self.compute_capability = "90"

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def synchronize(self) -> None:
        return None


@pytest.fixture
def cuda_c_d3q19(monkeypatch):
    """``simsplit.backends.cuda_c.d3q19`` imported against a stand-in cupy; yields (module,
    compiled name lists, launched kernel names)."""
    compiled: list[list[str]] = []
    launches: list[str] = []
    fake = types.ModuleType("cupy")
    fake.RawModule = lambda **kw: _Module(**kw, compiled=compiled, launches=launches)
    fake.cuda = types.SimpleNamespace(
        Device=_Device, runtime=types.SimpleNamespace(
            getDeviceProperties=lambda d: {"name": b"stand-in"},
            runtimeGetVersion=lambda: 13000, driverGetVersion=lambda: 13000))
    fake.full = lambda n, v, dt: np.full(n, v, dt)
    fake.zeros = np.zeros
    fake.empty = np.empty
    monkeypatch.setitem(sys.modules, "cupy", fake)
    for name in [m for m in sys.modules if m.startswith("simsplit.backends.cuda_c")]:
        monkeypatch.delitem(sys.modules, name)
    mod = importlib.import_module("simsplit.backends.cuda_c.d3q19")
    monkeypatch.setattr(mod, "check_launch_device", lambda device: None)
    yield mod, compiled, launches
    for name in [m for m in sys.modules if m.startswith("simsplit.backends.cuda_c")]:
        sys.modules.pop(name)


def test_one_module_per_storage_pair_compiled_when_prepared(cuda_c_d3q19) -> None:
    mod, compiled, _ = cuda_c_d3q19
    from simsplit.backends.cuda_c import kernel_names, source

    kernels = mod.D3Q19Kernels(0)
    assert compiled == []  # nothing before a block says what it stores
    kernels.prepare(population_storage("float16", "float32"))
    assert len(compiled) == 1
    names = compiled[0]
    assert names == kernel_names.d3q19_pair_expressions(np.float32, np.float16)
    assert all("<float, lbm::half16" in n or n.endswith("lbm::half16>") for n in names), names
    assert len(kernels.registers) == len(names)
    kernels.prepare(population_storage("float16", "float32"))
    assert len(compiled) == 1  # once per pair
    kernels.prepare(population_storage("float64", "float64"))
    assert len(compiled) == 2
    assert set(compiled[1]) == set(kernel_names.d3q19_pair_expressions(np.float64, np.float64))
    # every pair's modules together hold every instantiation a backend may launch, once
    every = [n for dt, st in source.STORAGE_PAIRS
             for n in kernel_names.d3q19_pair_expressions(dt, st, halos=False)]
    assert sorted(every) == sorted(n for n in kernel_names.name_expressions("d3q19.cu")
                                   if not n.startswith("lbm_")
                                   and n not in kernel_names.d3q19_neq_expressions()
                                   and n not in kernel_names.d3q19_neq_expressions(stress=True)
                                   and not n.startswith("d3q19_stream_collide_neq_tile<"))
    assert len(set(every)) == len(every)


def test_a_first_launch_compiles_its_pair(cuda_c_d3q19) -> None:
    """A kernel set used without prepare (tests, scripts) compiles the pair at its first
    launch, and the launch finds its kernel; halo kernels come with any pair of their
    storage type."""
    mod, compiled, launches = cuda_c_d3q19
    from simsplit.backends.layout import padded_empty
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz = 8, 5, 4
    kernels = mod.D3Q19Kernels(0)
    f = padded_empty(np, (19, nz + 2, ny + 2, nx + 2), np.float32)
    g = padded_empty(np, f.shape, np.float32)
    flags = padded_empty(np, f.shape[1:], np.uint8)
    macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.0, 0.0, 0.0, 0.0, False, False)
    kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, True)
    assert len(compiled) == 1 and launches[-1].startswith("d3q19_stream_collide<float, float,")
    buf = np.zeros((len(mod.D3Q19.up), f.shape[2] * f.shape[3]), np.float32)
    kernels.pack(f, 1, 0, buf)
    assert len(compiled) == 1 and launches[-1] == "lbm_pack<D3Q19, float>"
    h = padded_empty(np, f.shape, np.float16)
    hb = np.zeros(buf.shape, np.float16)
    kernels.pack(h, 1, 0, hb)  # a storage type no pair was loaded for yet
    assert len(compiled) == 2 and launches[-1] == "lbm_pack<D3Q19, lbm::half16>"


def _record_slab(slots: int) -> tuple[Any, ...]:
    """(f, f_dst, flags, rho/u, forced TRT parameters) of an 8 x 5 x 4 D3Q19 slab of records
    of ``slots`` slots, padded as blocks allocate them."""
    from simsplit.backends.layout import padded_empty
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz = 8, 5, 4
    f = padded_empty(np, (slots, nz + 2, ny + 2, nx + 2), np.uint16)
    macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.0, 1e-5, 0.0, 0.0, False, False)
    return (f, padded_empty(np, f.shape, np.uint16), padded_empty(np, f.shape[1:], np.uint8),
            macro, params)


def _box_and_bodies(kernels: Any, launches: list[str], slab: tuple[Any, ...], box_store: bool,
                    bodies_store: bool) -> list[str]:
    """The kernels a box step and a step with a geometry (inlet speeds given) launch on
    ``slab`` (:func:`_record_slab`)."""
    f, g, flags, macro, params = slab
    nz, ny = f.shape[1] - 2, f.shape[2] - 2
    kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, box_store)
    kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, bodies_store,
                           inlet=np.zeros((nz + 2, ny + 2), np.float32))
    return launches[-2:]


def test_neq16_records_have_a_module_of_their_own(cuda_c_d3q19) -> None:
    """run.storage neq16: prepare compiles the records' module (pull kernels and record
    halos) once, no population pair; a step and a halo on uint16 records launch its kernels."""
    mod, compiled, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import kernel_names
    from simsplit.backends.layout import padded_empty

    kernels = mod.D3Q19Kernels(0)
    assert kernels.records
    kernels.prepare(population_storage("neq16", "float32"))
    kernels.prepare(population_storage("neq16", "float32"))
    assert compiled == [kernel_names.d3q19_neq_expressions()]
    f, g, flags, macro, params = _record_slab(27)
    nz, ny = f.shape[1] - 2, f.shape[2] - 2
    # bodies, inlets, outlets or free-slip walls (inlet speeds given): one variant, every rule
    assert _box_and_bodies(kernels, launches, _record_slab(27), False, True) == [
        "d3q19_stream_collide_neq<false, true, neq::halves>",
        "d3q19_stream_collide_bodies<float, unsigned short, true, true, BODIES_SLIP_QUADRATIC>"]
    # the kernel's quadratic flag (fifth argument from the end, before far, far_off and the
    # columns) counts 3 x 19 weight planes, not 3 x 27 record slots (the GPU run of
    # 2026-12-05 took quadratic links as linear)
    for planes, quadratic in ((19, 0), (57, 1)):
        links = padded_empty(np, (planes, *f.shape[1:]), np.float32)
        kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, True,
                               inlet=np.zeros((nz + 2, ny + 2), np.float32), links=links)
        assert int(_Kernel.last_args[-5]) == quadratic
    buf = np.zeros((13, f.shape[2] * f.shape[3]), np.uint16)
    kernels.pack(f, 1, 0, buf)
    assert launches[-1] == "lbm_pack<D3Q19Records, unsigned short>"
    kernels.unpack(buf, f, 0, 1)
    assert launches[-1] == "lbm_unpack<D3Q19Records, unsigned short>"
    assert len(compiled) == 1
    with pytest.raises(ValueError, match="halo buffer"):
        kernels.pack(f, 1, 0, np.zeros((5, buf.shape[1]), np.uint16))


@pytest.mark.parametrize("slots", [27, 33, 19])
def test_slab_column_spans_take_the_box_kernel(cuda_c_d3q19, monkeypatch, slots) -> None:
    """A slab with a geometry launched by column spans: a span without open rules takes the
    records' box kernel (neq16 and neq16s, never the whole-plane tile candidate) or, on float
    storage, the bodies kernel without open-face rules; a span with them the bodies kernel;
    each over its columns only. Columns need a geometry and must lie inside the slab."""
    mod, _, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import neq_tiles
    from simsplit.backends.layout import padded_empty

    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "tile32x4")
    kernels = mod.D3Q19Kernels(0)
    storage = {27: "neq16", 33: "neq16s", 19: "float32"}[slots]
    # slabs are launched by spans on records only (float storage: one bodies launch a slab)
    assert kernels.launches_by_spans(population_storage(storage, "float32")) == (slots != 19)
    f, g, flags, macro, params = _record_slab(slots)
    if slots == 19:
        f, g = (padded_empty(np, a.shape, np.float32) for a in (f, g))
    nz, ny = f.shape[1] - 2, f.shape[2] - 2
    inlet = np.zeros((nz + 2, ny + 2), np.float32)
    stress = ", neq::srec" if slots == 33 else ""
    for is_open, cols in ((False, (2, 7)), (True, (7, 9))):
        kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, False, inlet=inlet,
                               open_rules=is_open, columns=cols)
        grid, block, _ = _Kernel.last_launch
        # the records' box kernel takes its upper halves' bases after the columns
        end = -2 if launches[-1].startswith("d3q19_stream_collide_neq<") else None
        assert [int(a) for a in _Kernel.last_args[:end][-2:]] == list(cols)
        # blocks of whole warps, no more than the span needs (5 and 2 columns: one warp)
        assert block == (32,) and grid[0] == 1
        if is_open:
            assert launches[-1].startswith("d3q19_stream_collide_bodies<float, ")
            assert launches[-1].endswith(">") and "BODIES_WALLS" not in launches[-1]
        elif slots == 19:
            assert launches[-1] == ("d3q19_stream_collide_bodies<float, float, false, true, "
                                    "BODIES_WALLS>")
        else:
            assert launches[-1] == f"d3q19_stream_collide_neq<false, true, neq::halves{stress}>"
    for bad in ((0, 3), (3, 10), (5, 4)):
        with pytest.raises(ValueError, match="columns"):
            kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, False,
                                   inlet=inlet, columns=bad)
    with pytest.raises(ValueError, match="without a geometry"):
        kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, False, columns=(2, 7))


@pytest.mark.parametrize("slots", [27, 33])
def test_records_kernel_index_types(cuda_c_d3q19, monkeypatch, slots) -> None:
    """The records' box kernel takes 32-bit offsets from two bases where each part of the array
    fits them (neq::halves: the upper slots from slot NEQ_HALVES_SPLIT of the source and
    destination, its last two arguments), else 64-bit offsets (the limit lowered so that a
    small slab takes them)."""
    mod, _, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import source
    from simsplit.backends.layout import element_strides

    split = source.NEQ_HALVES_SPLIT
    for n in (27, 33):
        assert source.d3q19_records_index(n, 2**32 // (n - split)) == "halves"
        assert source.d3q19_records_index(n, 2**32 // (n - split) + 1) == "wide"
    kernels = mod.D3Q19Kernels(0)
    f, g, flags, macro, params = _record_slab(slots)
    nz = f.shape[1] - 2
    plane = element_strides(f)[0]
    upper = (slots - split) * plane
    stress = ", neq::srec" if slots == 33 else ""
    for limit, index in ((upper, "neq::halves"), (upper - 1, "lbm::index_t")):
        monkeypatch.setattr(source, "FLAT_LIMIT", limit)
        kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, False)
        assert launches[-1] == f"d3q19_stream_collide_neq<false, true, {index}{stress}>"
        hi = _Kernel.last_args[-2:]
        assert [a.__array_interface__["data"][0] for a in hi] == [
            a.__array_interface__["data"][0] + split * plane * a.itemsize for a in (f, g)]


def test_span_blocks_fit_narrow_spans() -> None:
    """Launches on a column span take whole warps, no more than the span needs, within the
    kernel's block; wide spans keep it."""
    from simsplit.backends.cuda_c import source

    assert [source.span_block(w, 64) for w in (1, 20, 32, 33, 64, 352)] == [32, 32, 32, 64, 64,
                                                                           64]
    assert source.span_block(8736, source.BLOCK_X) == source.BLOCK_X
    assert source.span_block(100, source.BLOCK_X) == 128


def test_neq16s_records_have_a_module_of_their_own(cuda_c_d3q19, monkeypatch) -> None:
    """run.storage neq16s: prepare compiles the stress-kept records' module (the same kernels on
    neq::srec) beside neq16's, once; steps, bodies and halos on 33-slot records launch its
    kernels (the halo: 5 crossing significands and the other 14 slots), 27-slot records still
    neq16's; a tile candidate the environment names is for plain records only."""
    mod, compiled, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import kernel_names, neq_tiles

    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "tile32x4")
    kernels = mod.D3Q19Kernels(0)
    assert kernels.records and kernels.stress_records
    kernels.prepare(population_storage("neq16s", "float32"))
    kernels.prepare(population_storage("neq16s", "float32"))
    assert compiled == [kernel_names.d3q19_neq_expressions(stress=True)]
    assert all("neq::srec" in n or "StressRecords" in n for n in compiled[0])
    f = _record_slab(33)[0]
    assert _box_and_bodies(kernels, launches, _record_slab(33), True, False) == [
        "d3q19_stream_collide_neq<true, true, neq::halves, neq::srec>",
        "d3q19_stream_collide_bodies<float, neq::srec, false, true, BODIES_SLIP_QUADRATIC>"]
    buf = np.zeros((19, f.shape[2] * f.shape[3]), np.uint16)
    kernels.pack(f, 1, 0, buf)
    assert launches[-1] == "lbm_pack<D3Q19StressRecords, unsigned short>"
    kernels.unpack(buf, f, 0, 1)
    assert launches[-1] == "lbm_unpack<D3Q19StressRecords, unsigned short>"
    with pytest.raises(ValueError, match="halo buffer"):
        kernels.pack(f, 1, 0, np.zeros((13, buf.shape[1]), np.uint16))
    assert len(compiled) == 1
    # 27-slot records beside them: neq16's module, with the candidate the environment names
    assert _box_and_bodies(kernels, launches, _record_slab(27), False, False)[1] == (
        "d3q19_stream_collide_bodies<float, unsigned short, false, true, BODIES_SLIP_QUADRATIC>")
    assert launches[-2].startswith("d3q19_stream_collide_neq_tile<32, 4,")
    assert compiled[1] == (kernel_names.d3q19_neq_expressions()
                           + neq_tiles.d3q19_neq_tile_expressions("tile32x4"))


def test_neq16_tile_candidate_joins_the_records_module(cuda_c_d3q19, monkeypatch) -> None:
    """A candidate the environment names (neq_tiles.NEQ_TILE_ENV) is compiled into the
    records' module and takes the box steps with 32-bit offsets: its grid, threads, shared
    memory and run length; unset, the module and launches are production's."""
    mod, compiled, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import kernel_names, neq_tiles
    from simsplit.backends.layout import padded_empty
    from simsplit.numerics.lbm_params import D3Q19Params

    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "tile32x4")
    kernels = mod.D3Q19Kernels(0)
    assert kernels.tile == "tile32x4"
    kernels.prepare(population_storage("neq16", "float32"))
    assert compiled == [kernel_names.d3q19_neq_expressions()
                        + neq_tiles.d3q19_neq_tile_expressions("tile32x4")]
    nx, ny, nz = 40, 9, 70
    f = padded_empty(np, (27, nz + 2, ny + 2, nx + 2), np.uint16)
    g = padded_empty(np, f.shape, np.uint16)
    flags = padded_empty(np, f.shape[1:], np.uint8)
    macro = [np.zeros((nz, ny, nx), np.float32) for _ in range(4)]
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.0, 0.0, 0.0, 0.0, False, False)
    kernels.stream_collide(f, g, flags, *macro, (2, nz), params, True)
    assert launches[-1] == "d3q19_stream_collide_neq_tile<32, 4, 0, 6, false, true, false>"
    assert _Kernel.last_launch == ((2, 3, 3), (128,), 38 * 204 * 4)
    assert int(_Kernel.last_args[-1]) == neq_tiles.D3Q19_NEQ_TILE_RUN
    assert [int(_Kernel.last_args[n]) for n in (13, 14)] == [2, nz]
    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "production")
    kernels = mod.D3Q19Kernels(0)
    kernels.stream_collide(f, g, flags, *macro, (1, nz + 1), params, False)
    assert launches[-1] == "d3q19_stream_collide_neq<false, false, neq::halves>"
    assert compiled[-1] == kernel_names.d3q19_neq_expressions()


def test_d2q9_launches_records_kernels(cuda_c_d3q19, monkeypatch) -> None:
    """The D2Q9 set (one module for everything) takes neq16 records: a box step launches the
    default tiled records kernel (the production one where the environment says so), halos
    the records' halo kernels (9 of 15 slots a row), populations still their own."""
    _, _, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import neq_tiles
    from simsplit.backends.layout import padded_empty
    from simsplit.numerics.lbm_params import D2Q9Params

    mod = importlib.import_module("simsplit.backends.cuda_c.d2q9")
    monkeypatch.setattr(mod, "check_launch_device", lambda device: None)
    monkeypatch.delenv(neq_tiles.NEQ_TILE_ENV, raising=False)
    # the kernel set names its device in the process-wide error tracker: not past this test
    monkeypatch.setattr(mod.errors.TRACKER, "device_names",
                        dict(mod.errors.TRACKER.device_names))
    kernels = mod.D2Q9Kernels(0)
    assert kernels.records
    f = padded_empty(np, (15, 10, 12), np.uint16)
    g = padded_empty(np, f.shape, np.uint16)
    flags = padded_empty(np, f.shape[1:], np.uint8)
    macro = [np.zeros((8, 10), np.float32) for _ in range(3)]
    params = D2Q9Params(1 / 0.7, 1 / 1.1, 0.05, 0.0, 0.0, False)
    kernels.stream_collide(f, g, flags, *macro, (1, 9), params, True, open_rules=False)
    default = neq_tiles.D2Q9_NEQ_TILE_DEFAULT
    assert launches[-1] == (neq_tiles.d2q9_neq_tile_name(default, True) if default
                            else "d2q9_stream_collide_neq<true, lbm::offset_t>")
    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "production")
    mod.D2Q9Kernels(0).stream_collide(f, g, flags, *macro, (1, 9), params, True,
                                      open_rules=False)
    assert launches[-1] == "d2q9_stream_collide_neq<true, lbm::offset_t>"
    # a slab with open rules (here an inlet's speeds): the kernel with every rule, on records
    kernels.stream_collide(f, g, flags, *macro, (1, 9), params, False,
                           inlet=np.zeros(10, np.float32), columns=(2, 5))
    assert launches[-1] == "d2q9_stream_collide<float, unsigned short, false, true>"
    for planes, quadratic in ((9, 0), (27, 1)):  # 3 x 9 weight planes, not 3 x 15 slots
        links = padded_empty(np, (planes, *f.shape[1:]), np.float32)
        kernels.stream_collide(f, g, flags, *macro, (1, 9), params, False,
                               inlet=np.zeros(10, np.float32), links=links, columns=(2, 5))
        assert int(_Kernel.last_args[-3]) == quadratic
    # a column span of that slab without open rules: the records' box kernel on its columns
    # (production's, not the whole-row tiled default), the geometry's arrays not passed on
    kernels.stream_collide(f, g, flags, *macro, (1, 9), params, False,
                           inlet=np.zeros(10, np.float32), open_rules=False, columns=(2, 5))
    assert launches[-1] == "d2q9_stream_collide_neq<false, lbm::offset_t>"
    assert [int(a) for a in _Kernel.last_args[-2:]] == [2, 5]
    # records beyond 32-bit offsets (the limit lowered for this small slab): 64-bit offsets
    with monkeypatch.context() as m:
        m.setattr(mod.source, "FLAT_LIMIT", f.size - 1)
        kernels.stream_collide(f, g, flags, *macro, (1, 9), params, False,
                               inlet=np.zeros(10, np.float32), open_rules=False, columns=(2, 5))
    assert launches[-1] == "d2q9_stream_collide_neq<false, lbm::index_t>"
    with pytest.raises(ValueError, match="columns"):
        kernels.stream_collide(f, g, flags, *macro, (1, 9), params, False, open_rules=False,
                               columns=(0, 5))
    buf = np.zeros((9, 12), np.uint16)
    kernels.pack(f, 1, 0, buf)
    assert launches[-1] == "lbm_pack<D2Q9Records, unsigned short>"
    kernels.unpack(buf, f, 0, 1)
    assert launches[-1] == "lbm_unpack<D2Q9Records, unsigned short>"
    h = padded_empty(np, (9, 10, 12), np.float32)
    kernels.pack(h, 1, 0, np.zeros((3, 12), np.float32))
    assert launches[-1] == "lbm_pack<D2Q9, float>"
    with pytest.raises(ValueError, match="halo buffer"):
        kernels.pack(f, 1, 0, np.zeros((3, 12), np.uint16))


def test_d2q9_neq16s_records_module_compiled_when_prepared(cuda_c_d3q19, monkeypatch) -> None:
    """D2Q9 neq16s: the stress-kept records' kernels are a module of their own, compiled by
    prepare (not by every run); 18-slot records take its box kernel (not the tiled candidate:
    it reads plain records), its kernel with every rule and its halos (3 crossing significands
    and the other 9 slots); a set used without prepare compiles it at the first launch on
    stress-kept records."""
    _, compiled, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import kernel_names
    from simsplit.backends.layout import padded_empty
    from simsplit.numerics.lbm_params import D2Q9Params

    mod = importlib.import_module("simsplit.backends.cuda_c.d2q9")
    monkeypatch.setattr(mod, "check_launch_device", lambda device: None)
    monkeypatch.setattr(mod.errors.TRACKER, "device_names",
                        dict(mod.errors.TRACKER.device_names))
    kernels = mod.D2Q9Kernels(0)
    assert kernels.stress_records and len(compiled) == 1
    assert not any("neq::srec" in n or "Stress" in n for n in compiled[0])
    f = padded_empty(np, (18, 10, 12), np.uint16)
    g = padded_empty(np, f.shape, np.uint16)
    flags = padded_empty(np, f.shape[1:], np.uint8)
    macro = [np.zeros((8, 10), np.float32) for _ in range(3)]
    params = D2Q9Params(1 / 0.7, 1 / 1.1, 0.05, 0.0, 0.0, False)
    kernels.prepare(population_storage("neq16", "float32"))
    assert len(compiled) == 1
    unprepared = mod.D2Q9Kernels(0)  # the modules are compiled once per device
    unprepared.pack(f, 1, 0, np.zeros((12, 12), np.uint16))
    assert launches[-1] == "lbm_pack<D2Q9StressRecords, unsigned short>"
    assert compiled[1:] == [kernel_names.d2q9_neq_expressions(stress=True)]
    kernels.prepare(population_storage("neq16s", "float32"))
    kernels.prepare(population_storage("neq16s", "float32"))
    assert len(compiled) == 2
    assert set(kernel_names.d2q9_neq_expressions(stress=True)) <= set(kernels.registers)
    kernels.stream_collide(f, g, flags, *macro, (1, 9), params, True, open_rules=False)
    assert launches[-1] == "d2q9_stream_collide_neq<true, lbm::offset_t, neq::srec>"
    kernels.stream_collide(f, g, flags, *macro, (1, 9), params, False,
                           inlet=np.zeros(10, np.float32), columns=(2, 5))
    assert launches[-1] == "d2q9_stream_collide<float, neq::srec, false, true>"
    buf = np.zeros((12, 12), np.uint16)
    kernels.pack(f, 1, 0, buf)
    assert launches[-1] == "lbm_pack<D2Q9StressRecords, unsigned short>"
    kernels.unpack(buf, f, 0, 1)
    assert launches[-1] == "lbm_unpack<D2Q9StressRecords, unsigned short>"
    with pytest.raises(ValueError, match="halo buffer"):
        kernels.pack(f, 1, 0, np.zeros((9, 12), np.uint16))
    plain = padded_empty(np, (15, 10, 12), np.uint16)
    kernels.pack(plain, 1, 0, np.zeros((9, 12), np.uint16))
    assert launches[-1] == "lbm_pack<D2Q9Records, unsigned short>"


def test_d2q9_neq16_tile_candidate(cuda_c_d3q19, monkeypatch) -> None:
    """The default D2Q9 candidate comes from the module every run compiles; another one the
    environment names is compiled into a module of its own; either takes the box steps (its
    grid, threads, shared memory and run length); "production" takes the production kernel,
    and a D3Q19 candidate's name leaves D2Q9 on its default."""
    _, compiled, launches = cuda_c_d3q19
    from simsplit.backends.cuda_c import kernel_names, neq_tiles
    from simsplit.backends.layout import padded_empty
    from simsplit.numerics.lbm_params import D2Q9Params

    mod = importlib.import_module("simsplit.backends.cuda_c.d2q9")
    monkeypatch.setattr(mod, "check_launch_device", lambda device: None)
    monkeypatch.setattr(mod.errors.TRACKER, "device_names",
                        dict(mod.errors.TRACKER.device_names))
    f = padded_empty(np, (15, 202, 300), np.uint16)
    g = padded_empty(np, f.shape, np.uint16)
    flags = padded_empty(np, f.shape[1:], np.uint8)
    macro = [np.zeros((200, 298), np.float32) for _ in range(3)]
    params = D2Q9Params(1 / 0.7, 1 / 1.1, 0.05, 0.0, 0.0, False)
    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "tile32x8")
    assert mod.D2Q9Kernels(0).tile == neq_tiles.D2Q9_NEQ_TILE_DEFAULT
    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "production")
    kernels = mod.D2Q9Kernels(0)
    assert kernels.tile is None and len(compiled) == 1
    kernels.stream_collide(f, g, flags, *macro, (1, 201), params, True, open_rules=False)
    assert launches[-1] == "d2q9_stream_collide_neq<true, lbm::offset_t>"
    monkeypatch.delenv(neq_tiles.NEQ_TILE_ENV)
    kernels = mod.D2Q9Kernels(0)
    default = neq_tiles.D2Q9_NEQ_TILE_DEFAULT
    assert kernels.tile == default and len(compiled) == 1
    if default:
        assert set(neq_tiles.d2q9_neq_tile_expressions(default)) <= set(compiled[0])
    kernels.stream_collide(f, g, flags, *macro, (3, 190), params, False, open_rules=False)
    assert launches[-1] == (neq_tiles.d2q9_neq_tile_name(default, False) if default
                            else "d2q9_stream_collide_neq<false, lbm::offset_t>")
    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "strip128f")
    kernels = mod.D2Q9Kernels(0)
    assert kernels.tile == "strip128f"
    if default != "strip128f":
        assert compiled[-1] == neq_tiles.d2q9_neq_tile_expressions("strip128f")
    kernels.stream_collide(f, g, flags, *macro, (3, 190), params, False, open_rules=False)
    assert launches[-1] == "d2q9_stream_collide_neq_tile<128, 0, 8, true, false>"
    assert _Kernel.last_launch == ((3, 3), (128,), 18 * 130 * 4)
    assert int(_Kernel.last_args[-1]) == neq_tiles.D2Q9_NEQ_TILE_RUN
    assert [int(_Kernel.last_args[n]) for n in (10, 11)] == [3, 190]
    monkeypatch.setenv(neq_tiles.NEQ_TILE_ENV, "strip256f")
    kernels = mod.D2Q9Kernels(0)
    assert compiled[-1] == neq_tiles.d2q9_neq_tile_expressions("strip256f")
    assert kernel_names.d2q9_module_expressions() == compiled[0]
    kernels.stream_collide(f, g, flags, *macro, (3, 190), params, True, open_rules=False)
    assert launches[-1] == "d2q9_stream_collide_neq_tile<256, 0, 4, true, true>"
    assert _Kernel.last_launch == ((2, 3), (256,), 18 * 258 * 4)
